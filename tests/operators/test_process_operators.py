"""ProcessOperator and KeyedProcessOperator through the harnesses: outputs, side outputs,
keyed state, event-time and processing-time timers, output timestamps, errors."""

import pytest

from operator_harness_util import records, run_all_paths
from rill.datastream.functions import KeyedProcessFunction, ProcessFunction, wrap
from rill.operators.output_tag import OutputTag
from rill.operators.process import KeyedProcessOperator, ProcessOperator
from rill.operators.testing import KeyedOneInputStreamOperatorTestHarness, OneInputStreamOperatorTestHarness
from rill.operators.timer_service import TimeDomain
from rill.common.streamrecord import MIN_TIMESTAMP, StreamRecord, Watermark
from rill.state import ValueStateDescriptor

ODD = OutputTag("odd")


# -- ProcessOperator ---------------------------------------------------------------------

class SplitOdd(ProcessFunction):
    def process_element(self, value, ctx):
        if value % 2:
            yield ODD, (value, ctx.timestamp())
        else:
            yield value * 10
            yield value * 100


def process_harness(fn):
    return lambda: OneInputStreamOperatorTestHarness(ProcessOperator(fn))


def test_process_main_and_side_outputs_without_timestamps():
    out, side = run_all_paths(process_harness(SplitOdd()), [1, 2, 3, 4])
    assert out == records([20, 200, 40, 400])
    assert side == {ODD: records([(1, None), (3, None)])}


def test_process_main_and_side_outputs_with_timestamps():
    out, side = run_all_paths(process_harness(SplitOdd()), [1, 2, 3, 4], [5, 6, 7, 8])
    assert out == records([20, 200, 40, 400], [6, 6, 8, 8])
    assert side == {ODD: records([(1, 5), (3, 7)], [5, 7])}
    h = process_harness(SplitOdd())()
    with h:
        h.process_batch([1, 2, 3], [5, 6, 7])
    assert h.get_side_output(OutputTag("odd")) == records([(1, 5), (3, 7)], [5, 7])  # equal by id
    assert h.get_side_output(OutputTag("even")) == []


def test_process_returning_none_or_a_list():
    def fn(value, ctx):
        if value > 1:
            return [value, (OutputTag("big"), value)]
        return None

    out, side = run_all_paths(process_harness(wrap(fn, ProcessFunction, "process")), [1, 2, 3], [1, 2, 3])
    assert out == records([2, 3], [2, 3])
    assert side == {OutputTag("big"): records([2, 3], [2, 3])}


def test_process_plain_two_tuples_are_main_output():
    out, side = run_all_paths(process_harness(wrap(lambda v, ctx: [("tag", v)], ProcessFunction, "p")), [1])
    assert out == records([("tag", 1)])
    assert side == {}


def test_process_timer_service_reads_time_and_refuses_timers():
    seen = []

    class Fn(ProcessFunction):
        def process_element(self, value, ctx):
            ts = ctx.timer_service()
            seen.append((ts.current_processing_time(), ts.current_watermark()))
            with pytest.raises(NotImplementedError) as e:
                ts.register_event_time_timer(5)
            assert str(e.value) == "Setting timers is only supported on a keyed streams."
            with pytest.raises(NotImplementedError, match="Setting timers is only supported on a keyed streams."):
                ts.register_processing_time_timer(5)
            with pytest.raises(NotImplementedError, match="Deleting timers is only supported on a keyed streams."):
                ts.delete_event_time_timer(5)
            return ()

    with OneInputStreamOperatorTestHarness(ProcessOperator(Fn())) as h:
        h.process_element(1)
        h.set_processing_time(1000)
        h.process_watermark(42)
        h.process_batch([2, 3])
    assert seen == [(0, MIN_TIMESTAMP), (1000, 42), (1000, 42)]
    assert h.get_output() == [Watermark(42)]


def test_process_error_keeps_type_and_emits_prefix():
    class Bad(ProcessFunction):
        def process_element(self, value, ctx):
            if value == 3:
                raise ZeroDivisionError("three")
            yield value

    h = OneInputStreamOperatorTestHarness(ProcessOperator(Bad()))
    h.open()
    with pytest.raises(ZeroDivisionError, match="three"):
        h.process_batch([1, 2, 3, 4], [1, 2, 3, 4])
    assert h.get_output() == records([1, 2], [1, 2])


# -- KeyedProcessOperator -----------------------------------------------------------------

class CountWithTimers(KeyedProcessFunction):
    """Counts per key in ValueState, registers an event-time timer at ts + 10 and a
    processing-time timer at 100 per record; timers report the count."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def process_element(self, value, ctx):
        c = (self.count.value() or 0) + 1
        self.count.update(c)
        if ctx.timestamp() is not None:
            ctx.timer_service().register_event_time_timer(ctx.timestamp() + 10)
        ctx.timer_service().register_processing_time_timer(100)
        yield ctx.get_current_key(), c

    def on_timer(self, timestamp, ctx):
        yield ("fired", ctx.get_current_key(), timestamp, ctx.time_domain(), ctx.timestamp(), self.count.value())


def keyed_harness(fn, **kw):
    return lambda: KeyedOneInputStreamOperatorTestHarness(KeyedProcessOperator(fn), lambda v: v[0], **kw)


DATA = [("a", 1), ("b", 2), ("a", 3), ("c", 4), ("a", 5)]
STAMPS = [5, 1, 7, 20, 5]


def test_keyed_process_counts_per_key_without_timestamps():
    out, _ = run_all_paths(keyed_harness(CountWithTimers()), DATA)
    assert out == records([("a", 1), ("b", 1), ("a", 2), ("c", 1), ("a", 3)])


def test_keyed_event_time_timers_fire_in_order_with_dedup_and_timestamps():
    def after(h):
        assert h.num_event_time_timers() == 4  # a@15 (twice: once), b@11, a@17, c@30
        h.process_watermark(16)
        h.process_watermark(16)  # nothing more
        h.process_watermark(100)

    out, _ = run_all_paths(keyed_harness(CountWithTimers()), DATA, STAMPS, after=after)
    E = TimeDomain.EVENT_TIME
    assert out == [
        StreamRecord(("a", 1), 5), StreamRecord(("b", 1), 1), StreamRecord(("a", 2), 7),
        StreamRecord(("c", 1), 20), StreamRecord(("a", 3), 5),
        StreamRecord(("fired", "b", 11, E, 11, 1), 11),
        StreamRecord(("fired", "a", 15, E, 15, 3), 15),
        Watermark(16), Watermark(16),
        StreamRecord(("fired", "a", 17, E, 17, 3), 17),
        StreamRecord(("fired", "c", 30, E, 30, 1), 30),
        Watermark(100),
    ]


def test_keyed_processing_time_timers_fire_once_per_key_without_timestamp():
    with keyed_harness(CountWithTimers())() as h:
        h.process_batch([v for v in DATA], None)
        assert h.num_processing_time_timers() == 3  # one per key at 100
        assert h.processing_time_service.get_number_of_registered_timers() == 1  # one physical
        h.set_processing_time(99)
        assert h.extract_output_values()[-1] == ("a", 3)
        h.set_processing_time(100)
        assert h.num_processing_time_timers() == 0
    P = TimeDomain.PROCESSING_TIME
    assert h.extract_output_stream_records()[5:] == [
        StreamRecord(("fired", "a", 100, P, 100, 3), None),
        StreamRecord(("fired", "b", 100, P, 100, 1), None),
        StreamRecord(("fired", "c", 100, P, 100, 1), None),
    ]


def test_keyed_timer_deletion_and_timers_registered_from_on_timer():
    class Chain(KeyedProcessFunction):
        def process_element(self, value, ctx):
            ts = ctx.timer_service()
            ts.register_event_time_timer(value[1])
            ts.register_event_time_timer(value[1] + 1)
            ts.delete_event_time_timer(value[1] + 1)
            ts.delete_event_time_timer(12345)  # absent: no-op
            return None

        def on_timer(self, timestamp, ctx):
            if timestamp < 30:
                ctx.timer_service().register_event_time_timer(timestamp + 10)
            yield ctx.get_current_key(), timestamp

    with keyed_harness(Chain())() as h:
        h.process_elements([("x", 5), ("y", 8)])
        h.process_watermark(27)
        assert h.extract_output_values() == [("x", 5), ("y", 8), ("x", 15), ("y", 18), ("x", 25)]
        h.process_watermark(50)
    assert h.extract_output_values()[5:] == [("y", 28), ("x", 35), ("y", 38)]


def test_keyed_side_outputs_from_process_element_and_on_timer():
    LATE = OutputTag("late")

    class Fn(KeyedProcessFunction):
        def process_element(self, value, ctx):
            if ctx.timestamp() <= ctx.timer_service().current_watermark():
                yield LATE, value
            else:
                ctx.timer_service().register_event_time_timer(ctx.timestamp())
                yield value

        def on_timer(self, timestamp, ctx):
            yield LATE, ("timer", ctx.get_current_key())

    def after(h):
        h.process_watermark(10)
        h.process_element(("k", 0), 3)

    out, side = run_all_paths(keyed_harness(Fn()), [("k", 1), ("j", 2)], [4, 12], after=after)
    assert out == [StreamRecord(("k", 1), 4), StreamRecord(("j", 2), 12), Watermark(10)]
    assert side == {LATE: [StreamRecord(("timer", "k"), 4), StreamRecord(("k", 0), 3)]}


def test_keyed_process_error_propagates_with_original_type():
    class Bad(KeyedProcessFunction):
        def process_element(self, value, ctx):
            yield value
            if value[1] == 2:
                raise LookupError("user failure")

        def on_timer(self, timestamp, ctx):
            raise RuntimeError("timer failure")

    h = keyed_harness(Bad())()
    h.open()
    with pytest.raises(LookupError, match="user failure"):
        h.process_batch([("a", 1), ("b", 2), ("c", 3)])
    assert h.extract_output_values() == [("a", 1), ("b", 2)]

    class Registers(Bad):
        def process_element(self, value, ctx):
            ctx.timer_service().register_event_time_timer(1)
            return ()

    h2 = keyed_harness(Registers())()
    h2.open()
    h2.process_element(("a", 0), 0)
    with pytest.raises(RuntimeError, match="timer failure"):
        h2.process_watermark(5)
    assert h2.num_event_time_timers() == 0


def test_keyed_process_context_and_unsupported_keys():
    class Keys(KeyedProcessFunction):
        def process_element(self, value, ctx):
            yield ctx.get_current_key(), ctx.timestamp()

    with KeyedOneInputStreamOperatorTestHarness(KeyedProcessOperator(Keys()), lambda v: v) as h:
        h.process_element(("t", 1), 3)
        assert h.get_current_key() == ("t", 1)
        with pytest.raises(TypeError, match="unhashable|stable hash"):
            h.process_element(["a", "list"])
    assert h.extract_output_values() == [(("t", 1), 3)]


def test_keyed_process_operator_needs_a_keyed_stream():
    with pytest.raises(RuntimeError, match="needs a keyed stream"):
        OneInputStreamOperatorTestHarness(KeyedProcessOperator(CountWithTimers())).open()


def test_keyed_harness_on_a_subtask_rejects_keys_of_other_subtasks():
    from rill.state import assign_key_to_parallel_operator

    mine = [k for k in map(str, range(100)) if assign_key_to_parallel_operator(k, 128, 2) == 1]
    other = next(k for k in map(str, range(100)) if assign_key_to_parallel_operator(k, 128, 2) == 0)
    with KeyedOneInputStreamOperatorTestHarness(
            KeyedProcessOperator(CountWithTimers()), lambda v: v[0], parallelism=2, subtask_index=1) as h:
        h.process_element((mine[0], 1))
        with pytest.raises(ValueError, match="Key group"):
            h.process_element((other, 1))
    assert h.extract_output_values() == [(mine[0], 1)]


def test_on_timer_side_outputs_carry_the_timer_timestamp_in_both_domains():
    TAG = OutputTag("t")

    class Fn(KeyedProcessFunction):
        def process_element(self, value, ctx):
            ctx.timer_service().register_processing_time_timer(50)
            ctx.timer_service().register_event_time_timer(7)
            return None

        def on_timer(self, timestamp, ctx):
            yield TAG, ctx.time_domain()
            yield ctx.time_domain()

    with keyed_harness(Fn())() as h:
        h.process_element(("k", 0))
        h.set_processing_time(60)
        h.process_watermark(8)
    P, E = TimeDomain.PROCESSING_TIME, TimeDomain.EVENT_TIME
    assert h.get_side_output(TAG) == [StreamRecord(P, 50), StreamRecord(E, 7)]
    assert h.get_output() == [StreamRecord(P, None), StreamRecord(E, 7), Watermark(8)]
