"""The window fast path's inline branch for ``SlidingEventTimeWindows``
(``WindowFastPath._process_sliding``) against the fast path's general branch
(``assign_windows`` per record; forced with ``operator._sliding = False``) and against the
operator without fast path (``operator._fast_kind = None``).

Random scripts from seeded generators: elements with negative and positive timestamps, sizes
that the slide divides or not (and sizes below the slide: records in no window), offsets,
allowed lateness, late elements with and without a late side output, watermarks that jump,
batches of random sizes, reduce (also returning ``None``), aggregate and process functions.
The inline branch must give exactly the general branch's output, side output, dropped count
and state; the operator without fast path the same up to the order of records that fire
together (``canonical``)."""

import random

import pytest

from rill.operators.output_tag import OutputTag
from rill.operators.windowing import SlidingEventTimeWindows, TimeWindow
from rill.operators.windowing import fast_path

from window_harness_util import CountAndSum, Describe, R, W, add_pairs, builder, canonical, harness

INLINE, BRANCH, GENERAL = "inline", "branch", "general"
KEYS = ["k0", "k1", "k2", "k3", "k4", "k5"]


def keep_unless_zero(a, b):
    total = a[1] + b[1]
    return None if total == 0 else (a[0], total)


FUNCTIONS = {
    "reduce": lambda b: b.reduce(add_pairs)[0],
    "reduce_none": lambda b: b.reduce(keep_unless_zero)[0],
    "aggregate": lambda b: b.aggregate(CountAndSum())[0],
    "process": lambda b: b.process(Describe())[0],
}


def run(make_operator, script, mode):
    """Run ``script`` (("b", values, timestamps) | ("w", watermark)) and return the output,
    side outputs, dropped count, state entries and timers at the end."""
    h = harness(make_operator())
    h.open()
    op = h.operator
    assert op._fast_kind is not None and op._sliding
    if mode == BRANCH:
        op._sliding = False
    elif mode == GENERAL:
        op._fast_kind = None
    for step in script:
        if step[0] == "b":
            h.process_batch(list(step[1]), list(step[2]))
        else:
            h.process_watermark(step[1])
    state = sorted(h.keyed_state_backend.get_state_table("window-contents"), key=repr)
    result = (list(h.get_output()), {t: list(r) for t, r in h.output.side_outputs.items()},
              op.num_late_records_dropped.get_count(), state, h.num_event_time_timers())
    h.close()
    return result


def random_case(rng):
    slide = rng.randint(1, 7)
    size = rng.choice([slide * rng.randint(1, 4), rng.randint(1, 25)])  # divides or not, < slide
    offset = rng.randint(-(slide - 1), slide - 1)
    lateness = rng.choice([0, 0, rng.randint(1, 15)])
    late_tag = OutputTag("late") if rng.random() < 0.5 else None
    fn = rng.choice(sorted(FUNCTIONS))

    def make_operator():
        return FUNCTIONS[fn](builder(SlidingEventTimeWindows.of(size, slide, offset), lateness=lateness,
                                     late_tag=late_tag))

    script = []
    watermark = rng.randint(-80, -30)
    low, high = -60, -20
    for _ in range(rng.randint(1, 12)):
        n = rng.randint(1, 15)
        values = [(rng.choice(KEYS), rng.choice([-1, 1, 2, 5])) for _ in range(n)]
        # mostly around the watermark: late, firing at once within the lateness, or on time
        timestamps = [rng.randint(min(low, watermark - 20), high) for _ in range(n)]
        script.append(("b", values, timestamps))
        if rng.random() < 0.7:
            watermark += rng.choice([0, 1, rng.randint(1, 10), rng.randint(5, 30)])
            script.append(("w", watermark))
        low, high = low + rng.randint(0, 10), high + rng.randint(0, 12)
    script.append(("w", watermark + 200))
    return (size, slide, offset, lateness, late_tag is not None, fn), make_operator, script


@pytest.mark.parametrize("seed", range(40))
def test_inline_sliding_branch_equals_the_general_branch_and_the_general_path(seed):
    rng = random.Random(seed)
    for _ in range(25):
        params, make_operator, script = random_case(rng)
        inline = run(make_operator, script, INLINE)
        branch = run(make_operator, script, BRANCH)
        assert inline == branch, f"{params}\n{script}"
        general = run(make_operator, script, GENERAL)
        assert (canonical(inline[0]),) + inline[1:] == (canonical(general[0]),) + general[1:], f"{params}\n{script}"


def test_inline_branch_does_not_call_the_assigner_for_records_it_handles():
    calls = []

    def counting(assign):
        def wrapper(value, ts, context):
            calls.append(ts)
            return assign(value, ts, context)
        return wrapper

    for mode, expected in ((INLINE, [-30]), (BRANCH, [3, -7, 12, -30, -30])):  # -30: general path
        calls.clear()
        h = harness(builder(SlidingEventTimeWindows.of(10, 5, 1), lateness=2).reduce(add_pairs)[0])
        with h:
            h.operator._sliding = mode == INLINE
            h.operator._assign = counting(h.operator._assign)
            h.process_watermark(-25)
            # -30: [-34, -24) fires at once (within the lateness), [-39, -29) is late
            h.process_batch([("a", 1), ("a", 2), ("b", 4), ("a", 8)], [3, -7, 12, -30])
            h.process_watermark(100)
            out = h.get_output()
        assert calls == expected
        assert out == [W(-25), R(("a", 8), -25), R(("a", 2), -5), R(("a", 2), 0), R(("a", 1), 5),
                       R(("a", 1), 10), R(("b", 4), 15), R(("b", 4), 20), W(100)]


def test_windows_of_one_record_in_assigner_order_with_negative_timestamps_and_offset():
    # size 7, slide 3, offset -1: starts on 2 mod 3; ts = -4 -> [-4, 3), [-7, 0), [-10, -3);
    # ts = -3 -> [-4, 3), [-7, 0) (one window fewer: 3 does not divide 7)
    assigner = SlidingEventTimeWindows.of(7, 3, -1)
    assert assigner.assign_windows(None, -4, None) == [TimeWindow(-4, 3), TimeWindow(-7, 0), TimeWindow(-10, -3)]
    assert assigner.assign_windows(None, -3, None) == [TimeWindow(-4, 3), TimeWindow(-7, 0)]
    h = harness(builder(assigner).process(Describe())[0])
    with h:
        h.process_batch([("a", 1), ("a", 2)], [-4, -3])
        assert list(h.operator._long_windows) == [-4] and list(h.operator._short_windows) == [-4]
        assert h.operator._long_windows[-4] == (TimeWindow(-4, 3), TimeWindow(-7, 0), TimeWindow(-10, -3))
        h.process_watermark(10)
        assert h.get_output() == [R(("a", -10, -3, [1]), -4), R(("a", -7, 0, [1, 2]), -1),
                                  R(("a", -4, 3, [1, 2]), 2), W(10)]


def test_window_caches_are_bounded_and_forget_cleaned_up_windows(monkeypatch):
    monkeypatch.setattr(fast_path, "_WINDOW_CACHE_SIZE", 8)
    h = harness(builder(SlidingEventTimeWindows.of(10, 5), lateness=3).aggregate(CountAndSum())[0])
    with h:
        op = h.operator
        h.process_batch([("a", 1)] * 40, list(range(0, 400, 10)))
        assert 0 < len(op._window_cache) <= 8 and 0 < len(op._long_windows) <= 8
        h.process_watermark(1000)
        assert op._window_cache == {} and op._long_windows == {}
        assert len(h.get_output()) == 81
