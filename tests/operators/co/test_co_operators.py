"""CoStreamMap, CoStreamFlatMap, CoProcessOperator and KeyedCoProcessOperator through the
two-input harnesses: outputs and their timestamps, the combined watermark, keyed state across
both inputs, timers, side outputs, errors."""

import pytest

from _two_input_util import records, run_all_paths
from rill.datastream.co_functions import CoFlatMapFunction, CoMapFunction, CoProcessFunction, KeyedCoProcessFunction
from rill.operators.co_operators import CoProcessOperator, CoStreamFlatMap, CoStreamMap, KeyedCoProcessOperator
from rill.operators.output_tag import OutputTag
from rill.operators.testing_two_input import (
    KeyedTwoInputStreamOperatorTestHarness,
    TwoInputStreamOperatorTestHarness,
)
from rill.operators.timer_service import TimeDomain
from rill.common.streamrecord import MIN_TIMESTAMP, StreamRecord, Watermark
from rill.state import ValueStateDescriptor

LATE = OutputTag("late")


class Tag(CoMapFunction):
    def map1(self, value):
        return ("1", value)

    def map2(self, value):
        return ("2", value)


class Explode(CoFlatMapFunction):
    def flat_map1(self, value):
        return [value] * value

    def flat_map2(self, value):
        if value:
            yield -value


def key(v):
    return v[0]


# -- CoStreamMap, CoStreamFlatMap ---------------------------------------------------------------

def test_co_map_maps_each_input_with_its_method_and_keeps_timestamps():
    script = [(1, "a", 1), (1, "b", 2), (2, "c", 3), (1, "d", 4), (2, "e", 5)]
    out, side = run_all_paths(lambda: TwoInputStreamOperatorTestHarness(CoStreamMap(Tag())), script)
    assert out == records([("1", "a"), ("1", "b"), ("2", "c"), ("1", "d"), ("2", "e")], [1, 2, 3, 4, 5])
    assert side == {}


def test_co_map_without_timestamps():
    out, _ = run_all_paths(lambda: TwoInputStreamOperatorTestHarness(CoStreamMap(Tag())),
                           [(2, 1, None), (1, 2, None)])
    assert out == records([("2", 1), ("1", 2)])


def test_combined_watermark_is_the_minimum_of_both_inputs():
    script = [("w1", 10), (1, "a", 11), ("w2", 5), ("w1", 20), ("w2", 30), ("w2", 40), ("w1", 25)]
    out, _ = run_all_paths(lambda: TwoInputStreamOperatorTestHarness(CoStreamMap(Tag())), script)
    assert out == [StreamRecord(("1", "a"), 11), Watermark(5), Watermark(20), Watermark(25)]


def test_co_flat_map_emits_every_output_with_its_input_timestamp():
    script = [(1, 2, 10), (2, 0, 11), (2, 3, 12), (1, 1, 13)]
    out, _ = run_all_paths(lambda: TwoInputStreamOperatorTestHarness(CoStreamFlatMap(Explode())), script)
    assert out == records([2, 2, -3, 1], [10, 10, 12, 13])


def test_co_map_error_emits_the_outputs_before_the_failing_record():
    class Boom(Tag):
        def map2(self, value):
            if value == "x":
                raise RuntimeError("boom")
            return value

    h = TwoInputStreamOperatorTestHarness(CoStreamMap(Boom()))
    with pytest.raises(RuntimeError, match="boom"):
        with h:
            h.process_batch2(["a", "b", "x", "c"], [1, 2, 3, 4])
    assert h.extract_output_stream_records() == records(["a", "b"], [1, 2])


def test_rich_co_map_on_keyed_inputs_shares_keyed_state_across_inputs():
    class Count(CoMapFunction):
        def open(self, ctx):
            self.count = ctx.get_state(ValueStateDescriptor("count"))

        def _bump(self, value):
            n = (self.count.value() or 0) + 1
            self.count.update(n)
            return value, n

        def map1(self, value):
            return self._bump(value)

        def map2(self, value):
            return self._bump(value)

    script = [(1, ("a", 1), None), (2, ("a", 2), None), (2, ("b", 3), None), (1, ("a", 4), None)]
    out, _ = run_all_paths(lambda: KeyedTwoInputStreamOperatorTestHarness(CoStreamMap(Count()), key, key), script)
    assert [r.value for r in out] == [(("a", 1), 1), (("a", 2), 2), (("b", 3), 1), (("a", 4), 3)]


# -- CoProcessOperator -------------------------------------------------------------------------

class Describe(CoProcessFunction):
    def process_element1(self, value, ctx):
        if value < 0:
            yield LATE, value
        else:
            yield ("1", value, ctx.timestamp(), ctx.timer_service().current_watermark())

    def process_element2(self, value, ctx):
        return [("2", value, ctx.timestamp(), ctx.timer_service().current_processing_time())]


def test_co_process_sees_timestamps_watermark_and_processing_time():
    script = [(1, 1, 5), ("w1", 7), ("w2", 6), (1, 2, 8), ("pt", 100), (2, 3, 9), (1, -1, 10), (2, 4, None)]
    out, side = run_all_paths(lambda: TwoInputStreamOperatorTestHarness(CoProcessOperator(Describe())), script)
    assert out == [StreamRecord(("1", 1, 5, MIN_TIMESTAMP), 5), Watermark(6), StreamRecord(("1", 2, 8, 6), 8),
                   StreamRecord(("2", 3, 9, 100), 9), StreamRecord(("2", 4, None, 100), None)]
    assert side == {LATE: [StreamRecord(-1, 10)]}


def test_co_process_refuses_timers_on_non_keyed_streams():
    class Timer(Describe):
        def process_element2(self, value, ctx):
            ctx.timer_service().register_event_time_timer(10)

    with TwoInputStreamOperatorTestHarness(CoProcessOperator(Timer())) as h:
        with pytest.raises(NotImplementedError, match="only supported on a keyed streams"):
            h.process_element2(1, 1)


# -- KeyedCoProcessOperator --------------------------------------------------------------------

class Joiner(KeyedCoProcessFunction):
    """Keeps the last value of each input per key; on an event-time timer at ts + 10 emits both."""

    def open(self, ctx):
        self.left = ctx.get_state(ValueStateDescriptor("left"))
        self.right = ctx.get_state(ValueStateDescriptor("right"))

    def process_element1(self, value, ctx):
        self.left.update(value[1])
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 10)
        yield ("seen1", ctx.get_current_key(), ctx.timestamp())

    def process_element2(self, value, ctx):
        self.right.update(value[1])
        if value[1] == "slow":
            ctx.timer_service().register_processing_time_timer(50)
        return None

    def on_timer(self, timestamp, ctx):
        yield (ctx.get_current_key(), self.left.value(), self.right.value(), ctx.time_domain(), ctx.timestamp())
        if ctx.time_domain() is TimeDomain.PROCESSING_TIME:
            yield LATE, ctx.get_current_key()


def keyed_harness(fn, **kwargs):
    return lambda: KeyedTwoInputStreamOperatorTestHarness(KeyedCoProcessOperator(fn), key, key, **kwargs)


def test_keyed_co_process_keeps_state_per_key_across_both_inputs():
    script = [(1, ("a", "L1"), 1), (2, ("a", "R1"), 2), (1, ("b", "L2"), 3), (2, ("b", "R2"), 4),
              (2, ("a", "R3"), 5)]

    def after(h):
        h.set_current_key("a")
        assert (h.operator.user_function.left.value(), h.operator.user_function.right.value()) == ("L1", "R3")
        h.set_current_key("b")
        assert (h.operator.user_function.left.value(), h.operator.user_function.right.value()) == ("L2", "R2")
        assert h.num_event_time_timers() == 2

    out, _ = run_all_paths(keyed_harness(Joiner()), script, after)
    assert out == records([("seen1", "a", 1), ("seen1", "b", 3)], [1, 3])


def test_keyed_co_process_event_timers_fire_only_when_both_watermarks_pass():
    script = [(1, ("a", "L"), 1), (2, ("a", "R"), 2), (1, ("b", "M"), 5),
              ("w1", 100),            # input 2 still at MIN: nothing fires
              ("w2", 11),             # combined 11: timer of a (1 + 10) fires
              ("w2", 14),             # combined 14: b's timer (15) waits
              ("w2", 15)]             # combined 15: b fires
    out, _ = run_all_paths(keyed_harness(Joiner()), script)
    assert out == [
        StreamRecord(("seen1", "a", 1), 1), StreamRecord(("seen1", "b", 5), 5),
        StreamRecord(("a", "L", "R", TimeDomain.EVENT_TIME, 11), 11), Watermark(11),
        Watermark(14),
        StreamRecord(("b", "M", None, TimeDomain.EVENT_TIME, 15), 15), Watermark(15),
    ]


def test_keyed_co_process_processing_time_timer_and_its_side_output():
    script = [(2, ("x", "slow"), 3), ("pt", 49), ("pt", 50)]
    out, side = run_all_paths(keyed_harness(Joiner()), script)
    assert out == [StreamRecord(("x", None, "slow", TimeDomain.PROCESSING_TIME, 50), None)]
    assert side == {LATE: [StreamRecord("x", 50)]}


def test_co_process_function_on_keyed_streams_gets_timers_and_a_silent_on_timer():
    class Plain(CoProcessFunction):
        def process_element1(self, value, ctx):
            ctx.timer_service().register_event_time_timer(3)
            yield value

        def process_element2(self, value, ctx):
            yield value

    out, _ = run_all_paths(keyed_harness(Plain()), [(1, ("k", 1), 1), (2, ("k", 2), 2), ("w1", 5), ("w2", 5)])
    assert out == [StreamRecord(("k", 1), 1), StreamRecord(("k", 2), 2), Watermark(5)]


def test_keyed_co_process_on_a_non_keyed_harness_fails_naming_the_operator():
    h = TwoInputStreamOperatorTestHarness(KeyedCoProcessOperator(Joiner()), task_name="my co-process")
    with pytest.raises(RuntimeError, match="'my co-process'.*needs keyed connected streams"):
        h.open()
    h.close()


def test_keyed_co_process_records_of_another_subtask_fail():
    h = KeyedTwoInputStreamOperatorTestHarness(KeyedCoProcessOperator(Joiner()), key, key,
                                               max_parallelism=4, parallelism=4, subtask_index=0)
    with h:
        owned = [k for k in "abcdefghij" if _owns(h, k)]
        foreign = [k for k in "abcdefghij" if not _owns(h, k)]
        h.process_element1((owned[0], "x"), 1)
        with pytest.raises(ValueError, match="not in"):
            h.process_element2((foreign[0], "y"), 1)


def _owns(h, k):
    from rill.state.key_groups import assign_to_key_group  # noqa: PLC0415
    return h.keyed_state_backend.key_group_range.contains(assign_to_key_group(k, 4))
