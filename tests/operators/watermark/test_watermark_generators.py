"""The built-in watermark generators, the idleness timer and WatermarkToDataOutput, driven
directly (no operator)."""

from __future__ import annotations

import random

import pytest

from rill.operators.watermark import (
    AscendingTimestampsWatermarks,
    BoundedOutOfOrdernessWatermarks,
    IdlenessTimer,
    NoWatermarksGenerator,
    WatermarkGenerator,
    WatermarkOutput,
    WatermarksWithIdleness,
    WatermarkToDataOutput,
)
from rill.operators.testing import CollectingOutput
from rill.common.streamrecord import MAX_WATERMARK, MIN_TIMESTAMP, StreamRecord, Watermark, WatermarkStatus

IDLE, ACTIVE = WatermarkStatus.IDLE, WatermarkStatus.ACTIVE


class ListOutput(WatermarkOutput):
    def __init__(self):
        self.events = []

    def emit_watermark(self, watermark):
        self.events.append(watermark)

    def mark_idle(self):
        self.events.append(IDLE)

    def mark_active(self):
        self.events.append(ACTIVE)


# -- BoundedOutOfOrdernessWatermarks ----------------------------------------------------------

def test_bounded_initial_max_is_long_min_plus_out_of_orderness_plus_one():
    g = BoundedOutOfOrdernessWatermarks(1000)
    assert g.max_timestamp == MIN_TIMESTAMP + 1000 + 1
    out = ListOutput()
    g.on_periodic_emit(out)
    assert out.events == [Watermark(MIN_TIMESTAMP)]


def test_bounded_emits_max_minus_out_of_orderness_minus_one_at_every_periodic_emit():
    g, out = BoundedOutOfOrdernessWatermarks(10), ListOutput()
    for ts in (100, 50, 130, 120):
        g.on_event(None, ts, out)
    assert out.events == []          # periodic: nothing from on_event
    g.on_periodic_emit(out)
    g.on_periodic_emit(out)          # the generator repeats itself; the output filters
    assert out.events == [Watermark(119), Watermark(119)]


def test_ascending_is_bounded_with_zero():
    g, out = AscendingTimestampsWatermarks(), ListOutput()
    assert g.out_of_orderness_ms == 0
    g.on_event(None, 5, out)
    g.on_periodic_emit(out)
    assert out.events == [Watermark(4)]


@pytest.mark.parametrize("bad", [-1, 1.5, True, "5"])
def test_bounded_refuses_bad_out_of_orderness(bad):
    with pytest.raises(ValueError, match="max out-of-orderness must be an int >= 0 ms"):
        BoundedOutOfOrdernessWatermarks(bad)


def test_batch_handler_equals_on_event_per_record():
    rnd = random.Random(7)
    for _ in range(200):
        batches = [[rnd.randint(-50, 1000) for _ in range(rnd.randint(1, 8))] for _ in range(rnd.randint(1, 6))]
        g1, g2, o1, o2 = BoundedOutOfOrdernessWatermarks(7), BoundedOutOfOrdernessWatermarks(7), ListOutput(), ListOutput()
        handler = g2.get_batch_handler()
        for batch in batches:
            for ts in batch:
                g1.on_event(None, ts, o1)
            handler([None] * len(batch), batch, max(batch), o2)
            g1.on_periodic_emit(o1)
            g2.on_periodic_emit(o2)
        assert o1.events == o2.events


def test_no_watermarks_generator_emits_nothing():
    g, out = NoWatermarksGenerator(), ListOutput()
    g.on_event(None, 5, out)
    g.on_periodic_emit(out)
    g.get_batch_handler()([1], [5], 5, out)
    assert out.events == []


def test_custom_generators_get_no_batch_handler_by_default():
    assert WatermarkGenerator().get_batch_handler() is None


# -- idleness ----------------------------------------------------------------------------------

class Clock:
    def __init__(self):
        self.now = 0

    def __call__(self):
        return self.now


def test_idleness_timer_follows_flink():
    clock = Clock()
    t = IdlenessTimer(clock, 100)
    t.activity()
    assert t.check_if_idle() is False        # activity since the last check
    clock.now = 10
    assert t.check_if_idle() is False        # no activity: inactivity starts at 10
    clock.now = 110
    assert t.check_if_idle() is False        # 100 ms: not more than the timeout
    clock.now = 111
    assert t.check_if_idle() is True
    t.activity()
    assert t.check_if_idle() is False        # activity resets
    clock.now = 500
    assert t.check_if_idle() is False        # inactivity starts again at 500
    clock.now = 601
    assert t.check_if_idle() is True


def test_watermarks_with_idleness_marks_idle_and_keeps_emitting_after_activity():
    clock, out = Clock(), ListOutput()
    g = WatermarksWithIdleness(BoundedOutOfOrdernessWatermarks(0), 100, clock)
    g.on_event(None, 50, out)
    g.on_periodic_emit(out)                  # activity: emit
    clock.now = 10
    g.on_periodic_emit(out)                  # inactivity starts: still emits
    clock.now = 200
    g.on_periodic_emit(out)                  # idle
    g.on_periodic_emit(out)                  # still idle (the output de-duplicates)
    g.on_event(None, 80, out)
    g.on_periodic_emit(out)
    assert out.events == [Watermark(49), Watermark(49), IDLE, IDLE, Watermark(79)]


def test_watermarks_with_idleness_batch_handler_counts_activity():
    clock, out = Clock(), ListOutput()
    g = WatermarksWithIdleness(AscendingTimestampsWatermarks(), 100, clock)
    handler = g.get_batch_handler()
    handler([1, 2], [10, 20], 20, out)
    g.on_periodic_emit(out)
    clock.now = 1
    g.on_periodic_emit(out)
    clock.now = 102
    g.on_periodic_emit(out)
    handler([3], [30], 30, out)
    g.on_periodic_emit(out)
    assert out.events == [Watermark(19), Watermark(19), IDLE, Watermark(29)]


def test_watermarks_with_idleness_around_a_custom_generator_has_no_batch_handler():
    class Custom(WatermarkGenerator):
        pass

    assert WatermarksWithIdleness(Custom(), 10, Clock()).get_batch_handler() is None


@pytest.mark.parametrize("bad", [0, -5, 1.0])
def test_watermarks_with_idleness_refuses_bad_timeouts(bad):
    with pytest.raises(ValueError, match="idle timeout must be an int > 0 ms"):
        WatermarksWithIdleness(AscendingTimestampsWatermarks(), bad, Clock())


# -- WatermarkToDataOutput -------------------------------------------------------------------

def test_output_forwards_only_increasing_watermarks():
    sink = CollectingOutput()
    out = WatermarkToDataOutput(sink)
    for ts in (MIN_TIMESTAMP, 5, 5, 3, 9, 8, 10):
        out.emit_watermark(Watermark(ts))
    assert sink.elements == [Watermark(5), Watermark(9), Watermark(10)]
    assert out.max_watermark_so_far == 10


def test_output_forwards_status_changes_only_and_activates_before_a_watermark():
    sink = CollectingOutput()
    out = WatermarkToDataOutput(sink)
    out.mark_active()                 # already active: nothing
    out.mark_idle()
    out.mark_idle()
    out.emit_watermark(Watermark(4))  # ACTIVE first
    out.mark_idle()
    out.mark_active()
    out.mark_active()
    assert sink.elements == [IDLE, ACTIVE, Watermark(4), IDLE, ACTIVE]


def test_output_forwards_no_status_after_max_watermark():
    sink = CollectingOutput()
    out = WatermarkToDataOutput(sink)
    out.mark_idle()
    out.emit_watermark(MAX_WATERMARK)
    out.mark_idle()
    out.mark_active()
    assert sink.elements == [IDLE, ACTIVE, MAX_WATERMARK]


def test_output_refuses_a_non_watermark():
    out = WatermarkToDataOutput(CollectingOutput())
    with pytest.raises(TypeError, match=r"expects a Watermark, got 5 \(int\)"):
        out.emit_watermark(5)


def test_output_flushes_the_batch_in_progress_before_emitting():
    sink = CollectingOutput()
    out = WatermarkToDataOutput(sink)
    out.begin_batch(["a", "b", "c", "d"], [1, 2, 3, 4])
    out.current = 2
    out.emit_watermark(Watermark(2))
    out.current = 3
    out.mark_idle()
    out.current = 4
    out.end_batch()
    assert sink.elements == [StreamRecord("a", 1), StreamRecord("b", 2), Watermark(2), StreamRecord("c", 3),
                             IDLE, StreamRecord("d", 4)]
