"""WindowOperator on tumbling and sliding windows (event and processing time): reduce,
aggregate, process, apply; offsets and negative timestamps; allowed lateness (late firings),
late side output and the dropped-records counter; state cleanup. Every test gives the exact
output: records with their timestamps and watermarks, in order, and checks that every input
path (per element, batches, fast path on / off) gives it."""

import pytest

from rill.operators.output_tag import OutputTag
from rill.operators.windowing import (
    AggregateApplyWindowFunction,
    MissingTimestampError,
    PassThroughWindowFunction,
    ProcessWindowFunction,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TimeWindow,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    WindowFunction,
)
from rill.state.descriptors import ValueStateDescriptor

from window_harness_util import CountAndSum, Describe, R, W, add_pairs, builder, e, harness, p, run_script, w


class ApplyDescribe(WindowFunction):
    def apply(self, key, window, inputs):
        return [(key, window.start, window.end, [v[1] for v in inputs])]


TWO_KEYS = [
    e(("a", 1), 1), e(("b", 2), 3), e(("a", 3), 9), e(("a", 4), 10), e(("b", 5), 15),
    w(9), e(("a", 6), 12), w(19), w(30),
]


def tumbling10():
    return builder(TumblingEventTimeWindows.of(10))


def test_tumbling_reduce_emits_each_window_at_its_max_timestamp():
    out, side = run_script(lambda: tumbling10().reduce(add_pairs)[0], TWO_KEYS)
    assert out == [R(("a", 4), 9), R(("b", 2), 9), W(9), R(("a", 10), 19), R(("b", 5), 19), W(19), W(30)]
    assert side == {}


def test_tumbling_aggregate_keeps_only_the_accumulator():
    def inspect(h):
        assert h.num_keyed_state_entries() == 0
    out, _ = run_script(lambda: tumbling10().aggregate(CountAndSum())[0], TWO_KEYS, inspect=inspect)
    assert out == [R((2, 4), 9), R((1, 2), 9), W(9), R((2, 10), 19), R((1, 5), 19), W(19), W(30)]


def test_tumbling_aggregate_accumulator_is_the_state():
    h = harness(tumbling10().aggregate(CountAndSum())[0])
    with h:
        h.process_element(("a", 1), 1)
        h.process_element(("a", 5), 2)
        table = h.keyed_state_backend.get_state_table("window-contents")
        assert list(table) == [("a", TimeWindow(0, 10), (2, 6))]


def test_tumbling_process_and_apply_see_all_elements():
    expected = [
        R(("a", 0, 10, [1, 3]), 9), R(("b", 0, 10, [2]), 9), W(9),
        R(("a", 10, 20, [4, 6]), 19), R(("b", 10, 20, [5]), 19), W(19), W(30),
    ]
    assert run_script(lambda: tumbling10().process(Describe())[0], TWO_KEYS)[0] == expected
    assert run_script(lambda: tumbling10().apply(ApplyDescribe())[0], TWO_KEYS)[0] == expected
    assert run_script(lambda: tumbling10().apply(
        lambda key, window, inputs: [(key, window.start, window.end, [v[1] for v in inputs])])[0], TWO_KEYS)[0] == expected


def test_reduce_and_aggregate_with_window_functions():
    class Wrap(ProcessWindowFunction):
        def process(self, key, context, elements):
            (only,) = list(elements)
            return [(key, context.window().end, only, context.current_watermark())]

    out, _ = run_script(lambda: tumbling10().reduce(add_pairs, window_function=Wrap())[0], TWO_KEYS)
    assert out[:3] == [R(("a", 10, ("a", 4), 9), 9), R(("b", 10, ("b", 2), 9), 9), W(9)]
    out, _ = run_script(lambda: tumbling10().aggregate(
        CountAndSum(), window_function=lambda key, window, inputs: [(key, window.end, list(inputs))])[0],
        [e(("a", 1), 1), e(("a", 2), 2), w(100)])
    # the window function gets the aggregate's result as its single input
    assert out == [R(("a", 10, [(2, 3)]), 9), W(100)]


def test_tumbling_with_offset():
    script = [e(("a", 1), 2), e(("a", 2), 3), e(("a", 4), 12), e(("a", 8), 13), w(100)]
    out, _ = run_script(lambda: builder(TumblingEventTimeWindows.of(10, 3)).process(Describe())[0], script)
    assert out == [R(("a", -7, 3, [1]), 2), R(("a", 3, 13, [2, 4]), 12), R(("a", 13, 23, [8]), 22), W(100)]
    out, _ = run_script(lambda: builder(TumblingEventTimeWindows.of(10, -3)).process(Describe())[0], script)
    assert out == [R(("a", -3, 7, [1, 2]), 6), R(("a", 7, 17, [4, 8]), 16), W(100)]


def test_tumbling_negative_timestamps():
    script = [e(("a", 1), -11), e(("a", 2), -10), e(("a", 4), -1), e(("a", 8), 0), w(-11), w(-1), w(0)]
    out, _ = run_script(lambda: tumbling10().reduce(add_pairs)[0], script)
    # -11 -> [-20, -10); -10 and -1 -> [-10, 0); 0 -> [0, 10), not fired
    assert out == [R(("a", 1), -11), W(-11), R(("a", 6), -1), W(-1), W(0)]


def test_sliding_windows_with_negative_timestamps():
    script = [e(("a", 1), -3), e(("a", 2), 2), e(("a", 4), 7), w(20)]
    out, _ = run_script(lambda: builder(SlidingEventTimeWindows.of(10, 5)).process(Describe())[0], script)
    assert out == [
        R(("a", -10, 0, [1]), -1), R(("a", -5, 5, [1, 2]), 4), R(("a", 0, 10, [2, 4]), 9),
        R(("a", 5, 15, [4]), 14), W(20),
    ]
    out, _ = run_script(lambda: builder(SlidingEventTimeWindows.of(10, 5)).reduce(add_pairs)[0], script)
    assert out == [R(("a", 1), -1), R(("a", 3), 4), R(("a", 6), 9), R(("a", 4), 14), W(20)]


def test_sliding_windows_with_offset_fire_in_order():
    script = [e(("a", 1), 7), e(("b", 2), 8), w(11), w(16)]
    out, _ = run_script(lambda: builder(SlidingEventTimeWindows.of(10, 5, 2)).aggregate(CountAndSum())[0], script)
    # 7 -> [7,17), [2,12); 8 -> [7,17), [2,12)
    assert out == [R((1, 1), 11), R((1, 2), 11), W(11), R((1, 1), 16), R((1, 2), 16), W(16)]


def test_allowed_lateness_refires_with_updated_result_then_late_side_output():
    late = OutputTag("late")
    script = [
        e(("a", 1), 1), e(("a", 2), 5), w(9),   # on time: fires (a, 3)
        e(("a", 10), 3),                         # late but within lateness: fires at once (a, 13)
        e(("a", 7), 12),                         # next window
        w(14),                                   # cleanup of [0, 10) at 9 + 5
        e(("a", 100), 4),                        # beyond lateness: side output
        e(("a", 1000), 9),                       # 9 + 5 <= 14: late too
        w(20),
    ]

    def inspect(h):
        assert h.operator.num_late_records_dropped.get_count() == 0

    out, side = run_script(lambda: builder(TumblingEventTimeWindows.of(10), lateness=5, late_tag=late)
                           .reduce(add_pairs)[0], script, inspect=inspect)
    assert out == [R(("a", 3), 9), W(9), R(("a", 13), 9), W(14), R(("a", 7), 19), W(20)]
    assert side == {late: [R(("a", 100), 4), R(("a", 1000), 9)]}


def test_late_elements_without_side_output_are_dropped_and_counted():
    script = [e(("a", 1), 1), w(9), e(("a", 2), 5), e(("a", 3), 12), e(("b", 4), 0), w(19)]

    def inspect(h):
        assert h.operator.num_late_records_dropped.get_count() == 2

    out, side = run_script(lambda: tumbling10().reduce(add_pairs)[0], script, inspect=inspect)
    assert out == [R(("a", 1), 9), W(9), R(("a", 3), 19), W(19)]
    assert side == {}


def test_an_element_late_for_some_sliding_windows_only_is_not_late():
    late = OutputTag("late")
    script = [w(9), e(("a", 1), 7), w(14)]
    out, side = run_script(lambda: builder(SlidingEventTimeWindows.of(10, 5), late_tag=late)
                           .process(Describe())[0], script)
    assert out == [W(9), R(("a", 5, 15, [1]), 14), W(14)]  # [0, 10) skipped, element kept
    assert side == {}


def test_cleanup_removes_window_state_and_timers_after_end_plus_lateness():
    store = ValueStateDescriptor("fired")
    seen = ValueStateDescriptor("windows-seen")

    class Counting(ProcessWindowFunction):
        def process(self, key, context, elements):
            fired = context.window_state().get_state(store)
            fired.update((fired.value() or 0) + 1)
            total = context.global_state().get_state(seen)
            total.update((total.value() or 0) + 1)
            yield (key, fired.value(), total.value(), sum(v[1] for v in elements))

        def clear(self, context):
            context.window_state().get_state(store).clear()

    h = harness(builder(TumblingEventTimeWindows.of(10), lateness=5).process(Counting())[0])
    with h:
        h.process_element(("a", 1), 1)
        h.process_element(("a", 2), 12)
        assert h.num_event_time_timers() == 4  # [0,10): 9 and 14; [10,20): 19 and 24
        h.process_watermark(9)
        h.process_element(("a", 4), 2)          # late firing within lateness
        backend = h.keyed_state_backend
        assert backend.num_key_value_state_entries(TimeWindow(0, 10)) == 2  # contents + "fired"
        h.process_watermark(14)
        assert backend.num_key_value_state_entries(TimeWindow(0, 10)) == 0
        assert h.num_event_time_timers() == 2
        h.process_watermark(24)
        assert h.num_event_time_timers() == 0
        # only the global state is left
        assert backend.num_key_value_state_entries() == 1
        assert h.get_output() == [
            R(("a", 1, 1, 1), 9), W(9), R(("a", 2, 2, 5), 9), W(14), R(("a", 1, 3, 2), 19), W(24)]


def test_cleanup_of_incremental_state():
    h = harness(tumbling10().reduce(add_pairs)[0])
    with h:
        for i in range(5):
            h.process_element((f"k{i}", i), i)
        assert h.num_keyed_state_entries() == 5
        h.process_watermark(9)
        assert h.num_keyed_state_entries() == 0
        assert h.keyed_state_backend.get_state_table("window-contents").is_empty()


def test_event_time_window_without_timestamp_fails_with_flinks_message_naming_the_operator():
    h = harness(tumbling10().reduce(add_pairs)[0])
    with pytest.raises(MissingTimestampError, match=r"Record has Long.MIN_VALUE timestamp .*operator 'Window'"):
        with h:
            h.process_element(("a", 1))
    h2 = harness(builder(SlidingEventTimeWindows.of(10, 5)).reduce(add_pairs)[0])
    with pytest.raises(MissingTimestampError, match="assignTimestampsAndWatermarks"):
        with h2:
            h2.process_batch([("a", 1), ("a", 2)], None)


def test_processing_time_tumbling_windows():
    script = [
        p(3), e(("a", 1)), e(("b", 2)), p(5), e(("a", 4), 1000), p(9),
        p(12), e(("a", 8)), p(19), p(25),
    ]
    out, side = run_script(lambda: builder(TumblingProcessingTimeWindows.of(10)).reduce(add_pairs)[0], script)
    assert out == [R(("a", 5), 9), R(("b", 2), 9), R(("a", 8), 19)]


def test_processing_time_sliding_windows_aggregate():
    script = [p(1), e(("a", 1)), p(6), e(("a", 2)), p(30)]
    out, _ = run_script(lambda: builder(SlidingProcessingTimeWindows.of(10, 5)).aggregate(CountAndSum())[0], script)
    # 1 -> [0,10), [-5,5); 6 -> [5,15), [0,10)
    assert out == [R((1, 1), 4), R((2, 3), 9), R((1, 2), 14)]


def test_processing_time_window_cleanup():
    h = harness(builder(TumblingProcessingTimeWindows.of(10)).process(Describe())[0])
    with h:
        h.set_processing_time(2)
        h.process_element(("a", 1))
        assert h.num_processing_time_timers() == 1
        h.set_processing_time(9)
        assert h.num_keyed_state_entries() == 0 and h.num_processing_time_timers() == 0
        assert h.get_output() == [R(("a", 0, 10, [1]), 9)]


def test_rich_reduce_function_is_opened_and_sees_the_key():
    from rill.datastream.functions import ReduceFunction

    class Rich(ReduceFunction):
        def open(self, runtime_context):
            self.opened = True
            self.state = runtime_context.get_state(ValueStateDescriptor("calls"))

        def reduce(self, a, b):
            self.state.update((self.state.value() or 0) + 1)
            return (a[0], a[1] + b[1], self.state.value())

    script = [e(("a", 1, 0), 1), e(("b", 1, 0), 1), e(("a", 1, 0), 2), e(("a", 1, 0), 3), e(("b", 1, 0), 4), w(9)]
    out, _ = run_script(lambda: tumbling10().reduce(Rich())[0], script)
    assert out == [R(("a", 3, 2), 9), R(("b", 2, 1), 9), W(9)]


def test_window_function_side_outputs():
    tag = OutputTag("sizes")

    class Sides(ProcessWindowFunction):
        def process(self, key, context, elements):
            elements = list(elements)
            context.output(tag, (key, "ctx", len(elements)))
            yield tag, (key, "yield", len(elements))
            yield key

    out, side = run_script(lambda: tumbling10().process(Sides())[0], [e(("a", 1), 1), e(("a", 2), 2), w(10)])
    assert out == [R("a", 9), W(10)]
    assert side == {tag: [R(("a", "ctx", 2), 9), R(("a", "yield", 2), 9)]}


def test_window_function_returning_a_non_iterable_is_a_clear_error():
    h = harness(tumbling10().apply(lambda key, window, inputs: 42)[0])
    with pytest.raises(TypeError, match="must return an iterable of outputs"):
        with h:
            h.process_element(("a", 1), 1)
            h.process_watermark(9)


def test_aggregate_apply_window_function_directly():
    fn = AggregateApplyWindowFunction(CountAndSum(), PassThroughWindowFunction())
    assert list(fn.apply("k", TimeWindow(0, 5), [("k", 1), ("k", 2)])) == [(2, 3)]
    assert list(fn.apply("k", TimeWindow(0, 5), [])) == [(0, 0)]  # as Flink: the empty accumulator


# -- the fast path --------------------------------------------------------------------------------

def test_fast_path_uses_one_timer_pair_per_window_and_key_group():
    from rill.state.key_groups import assign_to_key_group
    assert assign_to_key_group("k0", 128) == assign_to_key_group("k3", 128) != assign_to_key_group("k1", 128)
    h = harness(builder(TumblingEventTimeWindows.of(10), lateness=5).reduce(add_pairs)[0])
    with h:
        assert h.operator._fast_kind is not None
        for key in ("k0", "k1", "k3"):
            h.process_element((key, 1), 1)
        assert h.num_event_time_timers() == 4  # (trigger, cleanup) x (k0's key group, k1's)
        h.process_watermark(9)
        # windows that fire together leave key group by key group (k0, k3 share one)
        assert h.get_output() == [R(("k0", 1), 9), R(("k3", 1), 9), R(("k1", 1), 9), W(9)]
        h.process_watermark(14)
        assert h.num_event_time_timers() == 0 and h.num_keyed_state_entries() == 0


def test_general_path_fires_in_registration_order():
    script = [e(("k0", 1), 1), e(("k1", 2), 2), e(("k3", 4), 3), w(9)]
    out, _ = run_script(lambda: tumbling10().reduce(add_pairs)[0], script)
    assert out == [R(("k0", 1), 9), R(("k3", 4), 9), R(("k1", 2), 9), W(9)]
    h = harness(tumbling10().reduce(add_pairs)[0])
    with h:
        h.operator._fast_kind = None
        for v, t in [(("k0", 1), 1), (("k1", 2), 2), (("k3", 4), 3)]:
            h.process_element(v, t)
        h.process_watermark(9)
        assert h.get_output() == [R(("k0", 1), 9), R(("k1", 2), 9), R(("k3", 4), 9), W(9)]


def test_fast_path_reduce_returning_none_clears_the_entry_and_fires_once():
    def keep_unless_zero(a, b):
        total = a[1] + b[1]
        return None if total == 0 else (a[0], total)

    # k0's entry is cleared (1 + -1), then k0 and k3 (same key group) come back: the window
    # has two timer pairs for that key group now; it still fires once per key
    script = [e(("k0", 1), 1), e(("k0", -1), 2), e(("k3", 5), 3), e(("k0", 7), 4), w(9), w(30)]
    out, _ = run_script(lambda: builder(TumblingEventTimeWindows.of(10), lateness=5).reduce(keep_unless_zero)[0],
                        script)
    assert out == [R(("k3", 5), 9), R(("k0", 7), 9), W(9), W(30)]


def test_fast_path_applies_only_to_the_common_case():
    from rill.operators.windowing import CountTrigger, EvictingWindowOperator, CountEvictor, EventTimeSessionWindows

    def fast(op):
        h = harness(op)
        with h:
            return h.operator._fast_kind is not None

    assert fast(tumbling10().reduce(add_pairs)[0])
    assert fast(builder(SlidingEventTimeWindows.of(10, 5)).aggregate(CountAndSum())[0])
    assert fast(builder(TumblingProcessingTimeWindows.of(10)).process(Describe())[0])
    assert not fast(builder(TumblingEventTimeWindows.of(10), trigger=CountTrigger.of(2)).reduce(add_pairs)[0])
    assert not fast(builder(EventTimeSessionWindows.with_gap(10)).reduce(add_pairs)[0])
    assert not fast(builder(TumblingEventTimeWindows.of(10), evictor=CountEvictor.of(2)).reduce(add_pairs)[0])
