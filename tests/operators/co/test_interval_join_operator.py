"""IntervalJoinOperator through the keyed two-input harness: joins against a brute-force
computation (boundary timestamps, exclusive bounds, negative and positive intervals), output
timestamps, cleanup of the buffers by watermark, late elements, errors."""

import random

import pytest

from _two_input_util import run_all_paths
from rill.datastream.co_functions import ProcessJoinFunction
from rill.operators.interval_join import IntervalJoinOperator
from rill.operators.output_tag import OutputTag
from rill.operators.testing_two_input import (
    KeyedTwoInputStreamOperatorTestHarness,
    TwoInputStreamOperatorTestHarness,
)
from rill.common.streamrecord import StreamRecord, Watermark

LEFT_LATE = OutputTag("left-late")
RIGHT_LATE = OutputTag("right-late")
ODD_SUM = OutputTag("odd-sum")


class Pair(ProcessJoinFunction):
    def process_element(self, left, right, ctx):
        assert ctx.get_timestamp() == max(ctx.get_left_timestamp(), ctx.get_right_timestamp())
        yield (left, right, ctx.get_left_timestamp(), ctx.get_right_timestamp())


def key(v):
    return v[0]


def harness(lower, upper, lower_inclusive=True, upper_inclusive=True, fn=None, left_late=None, right_late=None,
            **kwargs):
    def make():
        op = IntervalJoinOperator(lower, upper, lower_inclusive, upper_inclusive, fn or Pair(), left_late, right_late)
        return KeyedTwoInputStreamOperatorTestHarness(op, key, key, **kwargs)
    return make


def brute_force(lefts, rights, lower, upper, lower_inclusive=True, upper_inclusive=True):
    """Every joined pair as (left, right, t_left, t_right), sorted."""
    out = []
    for lv, lt in lefts:
        for rv, rt in rights:
            if lv[0] != rv[0]:
                continue
            lo_ok = rt >= lt + lower if lower_inclusive else rt > lt + lower
            hi_ok = rt <= lt + upper if upper_inclusive else rt < lt + upper
            if lo_ok and hi_ok:
                out.append((lv, rv, lt, rt))
    return sorted(out)


def joined(out):
    values = [e for e in out if isinstance(e, StreamRecord)]
    for r in values:
        assert r.timestamp == max(r.value[2], r.value[3])
    return sorted(r.value for r in values)


BOUNDARY_LEFTS = [(("k", "l10"), 10), (("k", "l20"), 20), (("j", "j10"), 10)]
BOUNDARY_RIGHTS = [(("k", f"r{t}"), t) for t in (7, 8, 9, 10, 11, 12, 13, 17, 18, 22, 23)] + [(("j", "j8"), 8)]


@pytest.mark.parametrize("lower_inclusive", [True, False])
@pytest.mark.parametrize("upper_inclusive", [True, False])
@pytest.mark.parametrize("lower, upper", [(-2, 2), (0, 0), (-3, -1), (1, 3), (-8, 0), (-2, 2)])
def test_join_matches_brute_force_at_the_boundaries(lower, upper, lower_inclusive, upper_inclusive):
    # lefts first, then rights, then the other way round: every pair is emitted by whichever comes second
    for script in ([(1, v, t) for v, t in BOUNDARY_LEFTS] + [(2, v, t) for v, t in BOUNDARY_RIGHTS],
                   [(2, v, t) for v, t in BOUNDARY_RIGHTS] + [(1, v, t) for v, t in BOUNDARY_LEFTS]):
        out, side = run_all_paths(harness(lower, upper, lower_inclusive, upper_inclusive), script)
        assert joined(out) == brute_force(BOUNDARY_LEFTS, BOUNDARY_RIGHTS, lower, upper,
                                          lower_inclusive, upper_inclusive)
        assert side == {}


def test_inclusive_and_exclusive_bounds_exactly():
    lefts = [(("k", "l"), 10)]
    rights = [(("k", t), t) for t in (7, 8, 9, 10, 11, 12, 13)]
    script = [(1, v, t) for v, t in lefts] + [(2, v, t) for v, t in rights]
    cases = {(True, True): [8, 9, 10, 11, 12], (False, True): [9, 10, 11, 12],
             (True, False): [8, 9, 10, 11], (False, False): [9, 10, 11]}
    for (lo, hi), expected in cases.items():
        out, _ = run_all_paths(harness(-2, 2, lo, hi), script)
        assert [r.value[1][1] for r in out] == expected
        assert [r.timestamp for r in out] == [max(10, t) for t in expected]


def test_random_joins_with_watermarks_match_brute_force():
    rng = random.Random(7)
    for _ in range(40):
        lower = rng.randint(-6, 4)
        upper = lower + rng.randint(0, 6)
        lo_inc, hi_inc = rng.random() < 0.5, rng.random() < 0.5
        lefts, rights, script = [], [], []
        next_ts = {1: 0, 2: 0}
        for i in range(rng.randint(5, 40)):
            side = rng.choice((1, 2))
            t = next_ts[side] + rng.randint(0, 3)
            next_ts[side] = t
            v = (rng.choice("abc"), i)
            (lefts if side == 1 else rights).append((v, t))
            script.append((side, v, t))
            if rng.random() < 0.3:  # a watermark below every future timestamp of its input: nothing is late
                script.append((f"w{side}", t - 1))
        out, side = run_all_paths(harness(lower, upper, lo_inc, hi_inc), script)
        assert joined(out) == brute_force(lefts, rights, lower, upper, lo_inc, hi_inc)
        assert side == {}


def test_cleanup_removes_buffered_elements_when_the_watermark_passes_their_relevance():
    with harness(-2, 3)() as h:
        h.process_element1(("k", "l"), 10)     # relevant for rights up to 13: cleanup timer at 13
        h.process_element2(("k", "r"), 20)     # relevant for lefts from 17 (= 20 - 3) to 22: timer at 22
        assert h.num_event_time_timers() == 2
        assert h.num_keyed_state_entries() == 2
        h.process_both_watermarks(12)
        assert h.num_keyed_state_entries() == 2
        h.process_both_watermarks(13)
        assert h.num_event_time_timers() == 1
        h.set_current_key("k")
        assert h.operator._left_buffer.is_empty()
        assert h.operator._right_buffer.items() == [(20, [("k", "r")])]
        h.process_element1(("k", "l2"), 19)   # joins r (19 - 2 <= 20 <= 19 + 3)
        h.process_both_watermarks(22)
        h.set_current_key("k")
        assert h.operator._right_buffer.is_empty()
        h.process_both_watermarks(100)
        assert h.num_event_time_timers() == 0
        assert h.num_keyed_state_entries() == 0
    assert h.extract_output_values() == [(("k", "l2"), ("k", "r"), 19, 20)]
    assert [e for e in h.get_output() if isinstance(e, Watermark)] == [Watermark(12), Watermark(13), Watermark(22),
                                                                      Watermark(100)]


def test_cleanup_with_negative_and_positive_only_intervals():
    # upper <= 0: a left element is cleaned at its own timestamp; lower > 0: a right one likewise
    for lower, upper, side, t, cleanup_at in ((-5, -1, 1, 10, 10), (1, 5, 2, 10, 10), (-5, -1, 2, 10, 15),
                                              (1, 5, 1, 10, 15)):
        with harness(lower, upper)() as h:
            getattr(h, f"process_element{side}")(("k", "x"), t)
            h.process_both_watermarks(cleanup_at - 1)
            assert h.num_keyed_state_entries() == 1
            h.process_both_watermarks(cleanup_at)
            assert h.num_keyed_state_entries() == 0


def test_late_elements_are_dropped_or_sent_to_the_late_side_outputs():
    script = [(1, ("k", "l5"), 5), ("w1", 10), ("w2", 10),
              (1, ("k", "late-left"), 9), (2, ("k", "late-right"), 6), (2, ("k", "r10"), 10), (1, ("k", "l10"), 10)]
    expected = [(("k", "l10"), ("k", "r10"), 10, 10), (("k", "l5"), ("k", "r10"), 5, 10)]
    out, side = run_all_paths(harness(-10, 10), script)
    assert joined(out) == expected
    assert side == {}
    out, side = run_all_paths(harness(-10, 10, left_late=LEFT_LATE, right_late=RIGHT_LATE), script)
    assert joined(out) == expected
    assert side == {LEFT_LATE: [StreamRecord(("k", "late-left"), 9)],
                    RIGHT_LATE: [StreamRecord(("k", "late-right"), 6)]}


def test_process_join_function_side_outputs_carry_the_result_timestamp():
    class Split(ProcessJoinFunction):
        def process_element(self, left, right, ctx):
            s = left[1] + right[1]
            if s % 2:
                yield ODD_SUM, s
            else:
                yield s

    out, side = run_all_paths(harness(0, 5, fn=Split()),
                              [(1, ("k", 1), 1), (1, ("k", 2), 2), (2, ("k", 3), 4), (2, ("k", 5), 7)])
    assert out == [StreamRecord(4, 4)]
    assert side == {ODD_SUM: [StreamRecord(5, 4), StreamRecord(7, 7)]}


def test_elements_without_timestamp_fail_naming_the_operator_and_keep_earlier_outputs():
    h = harness(0, 5, task_name="orders x clicks")()
    with pytest.raises(ValueError, match="'orders x clicks'.*right \\(second\\) input's element \\('k', 0\\) has no "
                                         "timestamp"):
        with h:
            h.process_element1(("k", 1), 1)
            h.process_batch2([("k", 0), ("k", 2)], None)
    h2 = harness(0, 5)()
    with pytest.raises(ValueError, match="has no timestamp"):
        with h2:
            h2.process_element1(("k", 1), 1)
            h2.process_element2(("k", 3), 3)
            h2.process_element1(("k", 2))
    assert h2.extract_output_values() == [(("k", 1), ("k", 3), 1, 3)]


def test_bounds_are_validated():
    with pytest.raises(ValueError, match="lowerBound <= upperBound must be fulfilled"):
        IntervalJoinOperator(3, 2, True, True, Pair())
    with pytest.raises(TypeError, match="lower_bound must be an int"):
        IntervalJoinOperator(1.5, 2, True, True, Pair())
    with pytest.raises(TypeError, match="ProcessJoinFunction"):
        IntervalJoinOperator(0, 1, True, True, lambda l, r, c: None)
    # exclusive bounds that leave no room join nothing, as in Flink
    out, _ = run_all_paths(harness(0, 0, False, True), [(1, ("k", 1), 1), (2, ("k", 1), 1)])
    assert out == []


def test_interval_join_needs_keyed_inputs():
    h = TwoInputStreamOperatorTestHarness(IntervalJoinOperator(0, 1, True, True, Pair()), task_name="ij")
    with pytest.raises(RuntimeError, match="'ij'.*interval join.*keyed connected streams"):
        h.open()
    h.close()


def test_random_out_of_order_joins_with_late_elements_match_brute_force():
    """The indexed probes and cleanup against first principles on out-of-order inputs, many
    keys, watermarks that make some elements late, and every bound flavour: the pairs are those
    of the elements that were not late on arrival (an element is late when its timestamp is
    behind the minimum of both inputs' watermarks), the late ones are in the side outputs.
    Passes on the scanning operator too (the index changes no output)."""
    rng = random.Random(20261125)
    for run in range(60):
        lower = rng.randint(-8, 5)
        upper = lower + rng.randint(0, 8)
        lo_inc, hi_inc = rng.random() < 0.5, rng.random() < 0.5
        lefts, rights, late, script = [], [], {LEFT_LATE: [], RIGHT_LATE: []}, []
        watermark = {1: -(2**63), 2: -(2**63)}
        front = 0
        for i in range(rng.randint(10, 80)):
            side = rng.choice((1, 2))
            front += rng.randint(0, 2)
            t = front - rng.randint(0, 6)  # out of order by up to 6 ms
            if t == min(watermark.values()):
                # at the watermark: accepted (Flink's lateness is t < watermark) yet its partner
                # may already be cleaned, since Watermark(t) promised no more elements <= t
                t -= 1
            v = (rng.choice("abcd"), i)
            if t < min(watermark.values()):
                late[LEFT_LATE if side == 1 else RIGHT_LATE].append(StreamRecord(v, t))
            else:
                (lefts if side == 1 else rights).append((v, t))
            script.append((side, v, t))
            if rng.random() < 0.25:
                w = front - rng.randint(0, 4)
                if w > watermark[side]:  # watermarks never go back
                    watermark[side] = w
                    script.append((f"w{side}", w))
        out, side_out = run_all_paths(harness(lower, upper, lo_inc, hi_inc, left_late=LEFT_LATE,
                                              right_late=RIGHT_LATE), script)
        assert joined(out) == brute_force(lefts, rights, lower, upper, lo_inc, hi_inc), f"run {run}"
        assert {k: v for k, v in side_out.items() if v} == {k: v for k, v in late.items() if v}, f"run {run}"


def test_the_index_follows_the_buffers_through_cleanup():
    """After every watermark, each side's index holds exactly the buffered timestamps of each key
    (no stale entry keeps a cleaned bucket probe-able, no key with nothing buffered stays)."""
    rng = random.Random(3)
    with harness(-3, 2)() as h:
        op = h.operator
        for step in range(300):
            t = step // 3 + rng.randint(0, 4)
            k = rng.choice("xyz")
            getattr(h, f"process_element{rng.choice((1, 2))}")((k, step), t)
            if step % 17 == 0:
                h.process_both_watermarks(step // 3 - 2)
                for side, index, buffer in ((0, op._left_index, op._left_buffer), (1, op._right_index, op._right_buffer)):
                    for key in "xyz":
                        h.set_current_key(key)
                        assert index.get(key, []) == sorted(buffer.keys()), (step, key)
                    assert op.buffered_buckets[side] == sum(map(len, index.values()))
                    assert op.peak_buffered_buckets[side] >= op.buffered_buckets[side]
