"""StatusWatermarkValve: minimum over aligned channels, idleness, finished channels."""

from rill.runtime.io.status_watermark_valve import StatusWatermarkValve
from rill.common.streamrecord import MAX_TIMESTAMP, WatermarkStatus

IDLE, ACTIVE = WatermarkStatus.IDLE, WatermarkStatus.ACTIVE


def test_watermark_is_the_minimum_over_channels_and_only_advances():
    v = StatusWatermarkValve(3)
    assert v.input_watermark(10, 0) == (None, None)
    assert v.input_watermark(5, 1) == (None, None)
    assert v.input_watermark(7, 2) == (5, None)
    assert v.input_watermark(4, 1) == (None, None)  # backwards on a channel: ignored
    assert v.input_watermark(12, 1) == (7, None)
    assert v.input_watermark(20, 2) == (10, None)


def test_idle_channel_is_left_out_and_all_idle_emits_idle_with_the_max_watermark():
    v = StatusWatermarkValve(2)
    assert v.input_watermark(3, 0) == (None, None)
    assert v.input_watermark(8, 1) == (3, None)
    # channel 0 goes idle: only channel 1 (8) counts
    assert v.input_watermark_status(IDLE, 0) == (8, None)
    # the last active channel goes idle: IDLE, after releasing the max watermark seen (8: already out)
    assert v.input_watermark_status(IDLE, 1) == (None, IDLE)
    # a watermark re-activates its channel: ACTIVE; 9 > 8 advances
    assert v.input_watermark(9, 1) == (9, ACTIVE)


def test_reactivated_channel_behind_the_output_does_not_pull_the_watermark_back():
    v = StatusWatermarkValve(2)
    v.input_watermark(5, 0)
    v.input_watermark(5, 1)
    assert v.input_watermark_status(IDLE, 0) == (None, None)
    assert v.input_watermark(20, 1) == (20, None)
    # channel 0 comes back active at 6 < 20: not aligned, the output stays at 20
    assert v.input_watermark_status(ACTIVE, 0) == (None, None)
    assert v.input_watermark(6, 0) == (None, None)
    # channel 0 (6 < 20) is not aligned, so it does not count: channel 1 alone moves on
    assert v.input_watermark(30, 1) == (30, None)
    assert v.input_watermark(25, 0) == (None, None)  # still behind the output (30)
    # channel 0 reaches 35 >= 30: aligned again, and from now on it counts
    assert v.input_watermark(35, 0) == (None, None)
    assert v.input_watermark(40, 1) == (35, None)


def test_finished_channels_count_as_max():
    v = StatusWatermarkValve(2)
    v.input_watermark(4, 0)
    assert v.channel_finished(1) == (4, None)
    assert v.channel_finished(0) == (MAX_TIMESTAMP, None)
