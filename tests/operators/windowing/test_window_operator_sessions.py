"""Session windows: merging through MergingWindowSet, against sessions computed by hand.

NOTES.md: PyFlink's Python session windows with an AggregateFunction dropped elements when
three or more windows merged. Every scenario here derives the expected sessions from first
principles (an element at t opens [t, t + gap); windows that overlap or touch merge) and checks
reduce, aggregate and process: counts must include every element."""

import pytest

from rill.operators.output_tag import OutputTag
from rill.operators.windowing import (
    CountTrigger,
    DeltaTrigger,
    EventTimeSessionWindows,
    MergingWindowSet,
    ProcessingTimeSessionWindows,
    TimeWindow,
)
from rill.datastream.functions import AggregateFunction

from window_harness_util import CountAndSum, Describe, R, W, add_pairs, builder, e, harness, p, run_script, w


def sessions(gap=10):
    return builder(EventTimeSessionWindows.with_gap(gap))


def expected_sessions(elements, gap_of):
    """Sessions by hand: sort each key's elements by time, grow a session while the next
    window [t, t + gap) touches it. Returns {key: [(start, end, [values])]}."""
    by_key = {}
    for (key, value, *rest), t in elements:
        by_key.setdefault(key, []).append((t, t + gap_of((key, value, *rest)), value))
    result = {}
    for key, items in by_key.items():
        items.sort()
        merged = []
        for start, end, value in items:
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
                merged[-1][2].append(value)
            else:
                merged.append([start, end, [value]])
        result[key] = [(s, e_, vs) for s, e_, vs in merged]
    return result


# Three sessions of "a" become one: [0,10) and [5,15) merge into [0,15); then [14,24) bridges
# [0,15) and [20,30): three windows (two in flight and the new one) merge into [0,30).
BRIDGE = [(("a", 1), 0), (("a", 2), 20), (("a", 4), 5), (("a", 8), 14), (("b", 16), 3)]


def test_expected_sessions_by_hand():
    assert expected_sessions(BRIDGE, lambda v: 10) == {"a": [(0, 30, [1, 4, 8, 2])], "b": [(3, 13, [16])]}


def bridge_script(*tail):
    return [e(v, t) for v, t in BRIDGE] + list(tail)


def test_bridging_merge_with_reduce():
    out, _ = run_script(lambda: sessions().reduce(add_pairs)[0], bridge_script(w(28), w(29)))
    assert out == [R(("b", 16), 12), W(28), R(("a", 15), 29), W(29)]


def test_bridging_merge_with_aggregate_counts_every_element():
    out, _ = run_script(lambda: sessions().aggregate(CountAndSum())[0], bridge_script(w(100)))
    assert out == [R((1, 16), 12), R((4, 15), 29), W(100)]


def test_bridging_merge_with_process_sees_every_element_in_state_order():
    out, _ = run_script(lambda: sessions().process(Describe())[0], bridge_script(w(100)))
    # state order: [0,10) holds 1, 4 ([5,15) merged into its state window), then [20,30)'s 2
    # is merged in, then 8 is added
    assert out == [R(("b", 3, 13, [16]), 12), R(("a", 0, 30, [1, 4, 2, 8]), 29), W(100)]


def test_four_sessions_merge_into_one_with_dynamic_gaps():
    elements = [(("a", 1, 2), 0), (("a", 2, 2), 10), (("a", 4, 2), 20), (("a", 8, 2), 30), (("a", 16, 25), 1)]
    gap = lambda v: v[2]  # noqa: E731
    assert expected_sessions(elements, gap) == {"a": [(0, 26, [1, 16, 2, 4]), (30, 32, [8])]}
    script = [e(v, t) for v, t in elements] + [w(100)]
    make = lambda: builder(EventTimeSessionWindows.with_dynamic_gap(gap))  # noqa: E731
    assert run_script(lambda: make().aggregate(CountAndSum())[0], script)[0] == [R((4, 23), 25), R((1, 8), 31), W(100)]
    assert run_script(lambda: make().reduce(lambda a, b: (a[0], a[1] + b[1], 0))[0], script)[0] == [
        R(("a", 23, 0), 25), R(("a", 8, 2), 31), W(100)]
    assert run_script(lambda: make().process(Describe())[0], script)[0] == [
        R(("a", 0, 26, [1, 2, 4, 16]), 25), R(("a", 30, 32, [8]), 31), W(100)]


def test_many_sessions_in_one_batch_against_first_principles():
    # 40 elements over 3 keys; gaps of 5 make chains that merge in arrival order
    import random
    rng = random.Random(7)
    elements = [((f"k{rng.randrange(3)}", i), rng.randrange(0, 200)) for i in range(40)]
    expected = expected_sessions(elements, lambda v: 5)
    script = [e(v, t) for v, t in elements] + [w(1000)]
    out, _ = run_script(lambda: sessions(5).process(Describe())[0], script)
    got = {}
    for rec in out[:-1]:
        key, start, end, values = rec.value
        assert rec.timestamp == end - 1
        got.setdefault(key, []).append((start, end, sorted(values)))
    want = {k: sorted((s, e_, sorted(vs)) for s, e_, vs in v) for k, v in expected.items()}
    assert {k: sorted(v) for k, v in got.items()} == want
    counts, _ = run_script(lambda: sessions(5).aggregate(CountAndSum())[0], script)
    assert sum(r.value[0] for r in counts[:-1]) == 40


def test_merged_session_keeps_a_single_timer_and_cleans_up():
    h = harness(sessions().aggregate(CountAndSum())[0])
    with h:
        for v, t in BRIDGE:
            h.process_element(v, t)
        # a: [0, 30) fires at 29; b: [3, 13) at 12; the timers of the merged windows are gone
        assert h.num_event_time_timers() == 2
        backend = h.keyed_state_backend
        # a's contents stay in the state window of its first session; [20, 30)'s moved there
        assert backend.num_key_value_state_entries(TimeWindow(0, 10)) == 1
        assert backend.num_key_value_state_entries(TimeWindow(20, 30)) == 0
        assert backend.num_key_value_state_entries(TimeWindow(3, 13)) == 1  # b
        h.process_watermark(100)
        assert h.num_event_time_timers() == 0
        assert backend.num_key_value_state_entries() == 0  # contents and merging-window-sets


def test_count_trigger_state_merges_with_the_sessions():
    # sessions [0,10) and [20,30) each count 1; [10,20) touches both: counts merge to 2, + 1 = 3
    script = [e(("a", 1), 0), e(("a", 2), 20), e(("a", 4), 10), w(100)]
    out, _ = run_script(lambda: builder(EventTimeSessionWindows.with_gap(10), trigger=CountTrigger.of(3))
                        .reduce(add_pairs)[0], script)
    assert out == [R(("a", 7), 29), W(100)]


def test_merging_assigner_refuses_triggers_that_cannot_merge():
    with pytest.raises(ValueError, match="A merging window assigner cannot be used with a trigger that does not "
                                         "support merging: EventTimeSessionWindows\\(10\\) with DeltaTrigger"):
        builder(EventTimeSessionWindows.with_gap(10), trigger=DeltaTrigger.of(1, lambda a, b: 0))


def test_aggregate_without_merge_is_refused_for_sessions():
    class NoMerge(AggregateFunction):
        def create_accumulator(self):
            return 0

        def add(self, value, acc):
            return acc + 1

        def get_result(self, acc):
            return acc

    with pytest.raises(ValueError, match="EventTimeSessionWindows\\(10\\) merges windows, so the AggregateFunction "
                                         "NoMerge must implement merge"):
        sessions().aggregate(NoMerge())


def test_late_session_goes_to_the_side_output():
    late = OutputTag("late")
    script = [e(("a", 1), 0), w(20), e(("a", 2), 5), e(("a", 3), 11), e(("a", 4), 12), w(30)]
    out, side = run_script(lambda: builder(EventTimeSessionWindows.with_gap(10), late_tag=late)
                           .reduce(add_pairs)[0], script)
    # 0 -> [0,10) fires at 9; 5 -> [5,15) and 11 -> [11,21) end at or before the watermark 20:
    # late; 12 -> [12,22) is in time
    assert out == [R(("a", 1), 9), W(20), R(("a", 4), 21), W(30)]
    assert side == {late: [R(("a", 2), 5), R(("a", 3), 11)]}


def test_late_element_within_lateness_extends_a_fired_session_and_refires():
    script = [e(("a", 1), 0), w(9), e(("a", 2), 8), w(17), w(30)]
    out, _ = run_script(lambda: builder(EventTimeSessionWindows.with_gap(10), lateness=5).reduce(add_pairs)[0], script)
    # [0,10) fires at 9; 8 -> [8,18) merges into [0,18) (max 17 > watermark 9): fires at 17
    assert out == [R(("a", 1), 9), W(9), R(("a", 3), 17), W(17), W(30)]


def test_processing_time_sessions_merge():
    script = [p(0), e(("a", 1)), p(3), e(("a", 2)), p(4), p(6), e(("b", 8)), p(7), p(20)]
    out, _ = run_script(lambda: builder(ProcessingTimeSessionWindows.with_gap(5)).reduce(add_pairs)[0], script)
    # a: [0,5) + [3,8) = [0,8) fires at 7; b: [6,11) fires at 10
    assert out == [R(("a", 3), 7), R(("b", 8), 10)]


# -- MergingWindowSet ---------------------------------------------------------------------------

class _ListState:
    def __init__(self):
        self.stored = []

    def get(self):
        return self.stored

    def update(self, values):
        self.stored = list(values)

    def clear(self):
        self.stored = []


def test_merging_window_set_keeps_the_state_window_of_the_first_merged_window():
    state = _ListState()
    merges = []
    mws = MergingWindowSet(EventTimeSessionWindows.with_gap(10), state)
    record = lambda *args: merges.append(args)  # noqa: E731
    assert mws.add_window(TimeWindow(1, 4), record) == TimeWindow(1, 4)
    assert mws.add_window(TimeWindow(5, 8), record) == TimeWindow(5, 8)
    assert merges == []
    assert mws.add_window(TimeWindow(3, 6), record) == TimeWindow(1, 8)
    assert merges == [(TimeWindow(1, 8), [TimeWindow(1, 4), TimeWindow(5, 8)], TimeWindow(1, 4), [TimeWindow(5, 8)])]
    assert mws.get_state_window(TimeWindow(1, 8)) == TimeWindow(1, 4)
    mws.persist()
    assert state.stored == [(TimeWindow(1, 8), TimeWindow(1, 4))]
    # a window inside an in-flight one merges nothing
    assert mws.add_window(TimeWindow(2, 3), record) == TimeWindow(1, 8)
    assert len(merges) == 1
    # an in-flight window added again stays as it is (Rill: Flink would lose its state window)
    assert mws.add_window(TimeWindow(1, 8), record) == TimeWindow(1, 8)
    assert mws.get_state_window(TimeWindow(1, 8)) == TimeWindow(1, 4)
    mws.retire_window(TimeWindow(1, 8))
    with pytest.raises(RuntimeError, match="is not in in-flight window set"):
        mws.retire_window(TimeWindow(1, 8))
    mws.persist()
    assert state.stored == []


def test_sessions_with_an_evictor_merge_the_kept_elements():
    from rill.operators.windowing import CountEvictor

    script = [e(("a", 1), 0), e(("a", 2), 20), e(("a", 4), 10), w(100)]
    out, _ = run_script(lambda: builder(EventTimeSessionWindows.with_gap(10), evictor=CountEvictor.of(2))
                        .process(Describe())[0], script)
    # [0,10) + [20,30) + bridge [10,20) = [0,30) holding 1, 2, 4 in state order; keep the last 2
    assert out == [R(("a", 0, 30, [2, 4]), 29), W(100)]
