"""Triggers (purging, count, continuous event / processing time, delta, custom) and evictors
(count, time, delta; before and after the function) through the window operators, GlobalWindows
count windows and Flink's count_window(size, slide)."""

import pytest

from rill.operators.output_tag import OutputTag
from rill.operators.windowing import (
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
    CountEvictor,
    CountTrigger,
    DeltaEvictor,
    DeltaTrigger,
    EvictingWindowOperator,
    GlobalWindows,
    ProcessWindowFunction,
    PurgingTrigger,
    TimeEvictor,
    TimestampedValue,
    TimeWindow,
    Trigger,
    TriggerResult,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from rill.common.streamrecord import MAX_TIMESTAMP
from rill.state.descriptors import ValueStateDescriptor

from window_harness_util import CountAndSum, R, W, add_pairs, builder, e, harness, p, run_script, w

END = MAX_TIMESTAMP  # the GlobalWindow's max timestamp: what count windows stamp their outputs with


class Values(ProcessWindowFunction):
    def process(self, key, context, elements):
        yield (key, [v[1] for v in elements])


def elements(key, values, ts=None):
    return [e((key, v), ts) for v in values]


# -- count windows ------------------------------------------------------------------------------

def tumbling_count(n):
    """Flink's countWindow(n): GlobalWindows + PurgingTrigger(CountTrigger(n))."""
    return builder(GlobalWindows.create(), trigger=PurgingTrigger.of(CountTrigger.of(n)))


def sliding_count(size, slide):
    """Flink's countWindow(size, slide): GlobalWindows + CountEvictor(size) + CountTrigger(slide)."""
    return builder(GlobalWindows.create(), trigger=CountTrigger.of(slide), evictor=CountEvictor.of(size))


def test_tumbling_count_window_fires_and_purges_every_n_elements():
    script = elements("a", [1, 2, 3, 4]) + elements("b", [10, 20]) + elements("a", [5, 6, 7]) + elements("b", [30])
    out, _ = run_script(lambda: tumbling_count(3).reduce(add_pairs)[0], script)
    assert out == [R(("a", 6), END), R(("a", 15), END), R(("b", 60), END)]

    def inspect(h):  # a's 7 waits: one element in state, count 1
        h.set_current_key("a")
        assert h.keyed_state_backend.get_state_table("window-contents").size() == 1

    out, _ = run_script(lambda: tumbling_count(3).process(Values())[0], script, inspect=inspect)
    assert out == [R(("a", [1, 2, 3]), END), R(("a", [4, 5, 6]), END), R(("b", [10, 20, 30]), END)]


def test_sliding_count_window_keeps_the_last_size_elements_and_fires_every_slide():
    script = elements("a", [1, 2, 3, 4, 5, 6, 7])
    out, _ = run_script(lambda: sliding_count(3, 2).process(Values())[0], script)
    assert out == [R(("a", [1, 2]), END), R(("a", [2, 3, 4]), END), R(("a", [4, 5, 6]), END)]
    out, _ = run_script(lambda: sliding_count(3, 2).reduce(add_pairs)[0], script)
    assert out == [R(("a", 3), END), R(("a", 9), END), R(("a", 15), END)]
    out, _ = run_script(lambda: sliding_count(3, 2).aggregate(CountAndSum())[0], script)
    assert out == [R((2, 3), END), R((3, 9), END), R((3, 15), END)]


def test_sliding_count_window_state_holds_what_the_evictor_left():
    h = harness(sliding_count(3, 2).process(Values())[0])
    with h:
        for v in [1, 2, 3, 4, 5]:
            h.process_element(("a", v))
        h.set_current_key("a")
        state = h.keyed_state_backend.get_partitioned_state(
            GlobalWindows.create().assign_windows(None, None, None)[0], h.operator.window_state_descriptor)
        assert state.get() == [TimestampedValue(("a", 2)), TimestampedValue(("a", 3)),
                               TimestampedValue(("a", 4)), TimestampedValue(("a", 5))]


# -- triggers -------------------------------------------------------------------------------------

def test_continuous_event_time_trigger_fires_early_every_interval():
    script = [e(("a", 1), 1), e(("a", 2), 3), w(4), w(5), e(("a", 4), 7), w(12), w(19), w(40)]
    out, _ = run_script(lambda: builder(TumblingEventTimeWindows.of(20),
                                        trigger=ContinuousEventTimeTrigger.of(5)).reduce(add_pairs)[0], script)
    # fire times: 0 + 5 = 5, then 10, 15, min(20, 19) = 19 (the window's end, which also fires)
    assert out == [W(4), R(("a", 3), 19), W(5), R(("a", 7), 19), W(12), R(("a", 7), 19), R(("a", 7), 19), W(19), W(40)]


def test_continuous_event_time_trigger_cleans_its_timers():
    h = harness(builder(TumblingEventTimeWindows.of(20), trigger=ContinuousEventTimeTrigger.of(5)).reduce(add_pairs)[0])
    with h:
        h.process_element(("a", 1), 1)
        assert h.num_event_time_timers() == 2  # fire time 5 and the window end 19
        h.process_watermark(19)
        assert h.num_event_time_timers() == 0 and h.num_keyed_state_entries() == 0


def test_continuous_processing_time_trigger():
    script = [p(1), e(("a", 1)), p(4), e(("a", 2)), p(5), p(10), p(25)]
    out, _ = run_script(lambda: builder(TumblingProcessingTimeWindows.of(20),
                                        trigger=ContinuousProcessingTimeTrigger.of(5)).reduce(add_pairs)[0], script)
    # fire times 5, 10, 15, 19; output stamped with the window's max timestamp 19; the window
    # is cleaned up at 19
    assert out == [R(("a", 3), 19), R(("a", 3), 19), R(("a", 3), 19), R(("a", 3), 19)]


def test_delta_trigger_fires_when_the_delta_to_the_last_firing_element_exceeds_the_threshold():
    script = elements("a", [1, 3, 7, 9, 13, 14])
    trigger = DeltaTrigger.of(5, lambda old, new: new[1] - old[1])
    out, _ = run_script(lambda: builder(GlobalWindows.create(), trigger=trigger).process(Values())[0], script)
    # reference 1: 7 - 1 = 6 > 5 fires; reference 7: 13 - 7 = 6 fires
    assert out == [R(("a", [1, 3, 7]), END), R(("a", [1, 3, 7, 9, 13]), END)]
    assert repr(trigger).endswith(", 5)")


def test_purging_trigger_of_delta_trigger():
    script = elements("a", [1, 3, 7, 9, 13, 14])
    trigger = PurgingTrigger.of(DeltaTrigger.of(5, lambda old, new: new[1] - old[1]))
    out, _ = run_script(lambda: builder(GlobalWindows.create(), trigger=trigger).reduce(add_pairs)[0], script)
    assert out == [R(("a", 11), END), R(("a", 22), END)]


class FlushTrigger(Trigger):
    """Fires and purges on an element whose value is "!", or 100 ms of processing time after
    the window's first element."""

    deadline = ValueStateDescriptor("deadline")

    def on_element(self, element, timestamp, window, ctx):
        state = ctx.get_partitioned_state(self.deadline)
        if state.value() is None:
            state.update(ctx.get_current_processing_time() + 100)
            ctx.register_processing_time_timer(state.value())
        if element[1] == "!":
            self.clear(window, ctx)
            return TriggerResult.FIRE_AND_PURGE
        return TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx):
        ctx.get_partitioned_state(self.deadline).clear()
        return TriggerResult.FIRE_AND_PURGE

    def on_event_time(self, time, window, ctx):
        return TriggerResult.CONTINUE

    def clear(self, window, ctx):
        state = ctx.get_partitioned_state(self.deadline)
        if state.value() is not None:
            ctx.delete_processing_time_timer(state.value())
            state.clear()


def test_custom_trigger():
    script = [p(0), *elements("a", ["x", "y", "!"]), *elements("b", ["z"]), p(50), *elements("a", ["w"]),
              p(100), p(149), p(150), *elements("a", ["!"])]
    out, _ = run_script(lambda: builder(GlobalWindows.create(), trigger=FlushTrigger()).process(Values())[0], script)
    assert out == [R(("a", ["x", "y", "!"]), END), R(("b", ["z"]), END), R(("a", ["w"]), END), R(("a", ["!"]), END)]

    def inspect(h):
        assert h.num_processing_time_timers() == 0 and h.num_keyed_state_entries() == 0

    run_script(lambda: builder(GlobalWindows.create(), trigger=FlushTrigger()).process(Values())[0], script,
               inspect=inspect)


def test_purge_only_trigger_drops_contents_without_firing():
    class PurgeOnX(Trigger):
        def on_element(self, element, timestamp, window, ctx):
            return TriggerResult.PURGE if element[1] == "x" else TriggerResult.CONTINUE

        def on_event_time(self, time, window, ctx):
            return TriggerResult.FIRE if time == window.max_timestamp() else TriggerResult.CONTINUE

        def on_processing_time(self, time, window, ctx):
            return TriggerResult.CONTINUE

        def clear(self, window, ctx):
            pass

    script = [e(("a", "1"), 1), e(("a", "x"), 2), e(("a", "3"), 3), e(("b", "4"), 4), w(100)]
    out, _ = run_script(lambda: builder(TumblingEventTimeWindows.of(10), trigger=PurgeOnX()).process(Values())[0],
                        script)
    # the custom trigger registers no timer: only the cleanup timer at 9 runs, and cleanup
    # timers do not fire the window (the trigger's on_event_time decides: it fires at max_ts)
    assert out == [R(("a", ["3"]), 9), R(("b", ["4"]), 9), W(100)]


# -- evictors -------------------------------------------------------------------------------------

def test_time_evictor_before_and_after_the_function():
    # lateness 50 lets a late element re-fire the window and show what the state kept
    script = [e(("a", 10), 10), e(("a", 50), 50), e(("a", 95), 95), w(99), e(("a", 20), 20), w(200)]
    before, _ = run_script(lambda: builder(TumblingEventTimeWindows.of(100), evictor=TimeEvictor.of(40), lateness=50)
                           .process(Values())[0], script)
    # max timestamp 95, cutoff 55: 10 and 50 go before the function; the late 20 too
    assert before == [R(("a", [95]), 99), W(99), R(("a", [95]), 99), W(200)]
    after, _ = run_script(lambda: builder(TumblingEventTimeWindows.of(100), evictor=TimeEvictor.of(40, True),
                                          lateness=50).process(Values())[0], script)
    # the function sees everything; the state keeps [95]; the late firing sees [95, 20]
    assert after == [R(("a", [10, 50, 95]), 99), W(99), R(("a", [95, 20]), 99), W(200)]


def test_count_evictor_before_and_after():
    script = elements("a", [1, 2, 3], 1) + [w(9)] + elements("a", [4], 2) + [w(20)]
    make = lambda after: builder(TumblingEventTimeWindows.of(10), evictor=CountEvictor.of(2, after), lateness=5)  # noqa: E731
    assert run_script(lambda: make(False).process(Values())[0], script)[0] == [
        R(("a", [2, 3]), 9), W(9), R(("a", [3, 4]), 9), W(20)]
    assert run_script(lambda: make(True).process(Values())[0], script)[0] == [
        R(("a", [1, 2, 3]), 9), W(9), R(("a", [2, 3, 4]), 9), W(20)]


def test_delta_evictor():
    script = elements("a", [1, 50, 45, 48], 1) + [w(9)]
    out, _ = run_script(lambda: builder(TumblingEventTimeWindows.of(10),
                                        evictor=DeltaEvictor.of(10, lambda x, last: abs(x[1] - last[1])))
                        .process(Values())[0], script)
    assert out == [R(("a", [50, 45, 48]), 9), W(9)]


def test_evicting_reduce_and_aggregate_run_over_the_remaining_elements():
    script = elements("a", [1, 2, 3], 1) + elements("b", [7], 2) + [w(9)]
    make = lambda: builder(TumblingEventTimeWindows.of(10), evictor=CountEvictor.of(2))  # noqa: E731
    op, name = make().reduce(add_pairs)
    assert isinstance(op, EvictingWindowOperator)
    assert name == "Window(TumblingEventTimeWindows(10), EventTimeTrigger, CountEvictor, add_pairs, PassThroughWindowFunction)"
    assert run_script(lambda: make().reduce(add_pairs)[0], script)[0] == [R(("a", 5), 9), R(("b", 7), 9), W(9)]
    assert run_script(lambda: make().aggregate(CountAndSum())[0], script)[0] == [R((2, 5), 9), R((1, 7), 9), W(9)]

    class WithKey(ProcessWindowFunction):
        def process(self, key, context, elements):
            yield (key, list(elements))

    assert run_script(lambda: make().reduce(add_pairs, window_function=WithKey())[0], script)[0] == [
        R(("a", [("a", 5)]), 9), R(("b", [("b", 7)]), 9), W(9)]
    assert run_script(lambda: make().aggregate(CountAndSum(), window_function=WithKey())[0], script)[0] == [
        R(("a", [(2, 5)]), 9), R(("b", [(1, 7)]), 9), W(9)]


def test_evicting_operator_late_side_output_and_cleanup():
    late = OutputTag("late")

    def inspect(h):
        assert h.num_keyed_state_entries() == 0

    script = elements("a", [1, 2], 1) + [w(9)] + elements("a", [3], 5) + [w(20)]
    out, side = run_script(lambda: builder(TumblingEventTimeWindows.of(10), evictor=CountEvictor.of(5),
                                           late_tag=late).process(Values())[0], script, inspect=inspect)
    assert out == [R(("a", [1, 2]), 9), W(9), W(20)]
    assert side == {late: [R(("a", 3), 5)]}


def test_evictors_reject_bad_parameters():
    with pytest.raises(ValueError, match="CountEvictor max_count must be an int >= 1, got 0"):
        CountEvictor.of(0)
    with pytest.raises(ValueError, match="TimeEvictor window_size must be > 0 ms, got -1"):
        TimeEvictor.of(-1)
    with pytest.raises(TypeError, match="DeltaEvictor needs a DeltaFunction or a callable"):
        DeltaEvictor.of(1, None)
    with pytest.raises(ValueError, match="CountTrigger count must be an int >= 1, got 0"):
        CountTrigger.of(0)
    with pytest.raises(TypeError, match="PurgingTrigger wraps a Trigger"):
        PurgingTrigger.of(3)
