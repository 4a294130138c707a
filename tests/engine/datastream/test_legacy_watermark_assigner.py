"""``AssignerWithPeriodicWatermarksWrapper``: a legacy periodic assigner used as a
WatermarkStrategy (Flink's ``AssignerWithPeriodicWatermarksAdapter.Strategy``)."""

from __future__ import annotations

import cloudpickle
import pytest

from _ds_helpers import collect
from rill.common import AssignerWithPeriodicWatermarksWrapper, Types, WatermarkStrategy
from rill.common.streamrecord import Watermark
from rill.datastream.window import TumblingEventTimeWindows


class MaxMinusTen:
    """Flink's AssignerWithPeriodicWatermarks shape: the watermark trails the max timestamp."""

    def __init__(self):
        self.max_ts = None

    def extract_timestamp(self, element, record_timestamp):
        self.max_ts = element[1] if self.max_ts is None else max(self.max_ts, element[1])
        return element[1]

    def get_current_watermark(self):
        return None if self.max_ts is None else self.max_ts - 10


class Emitted:
    def __init__(self):
        self.watermarks = []

    def emit_watermark(self, watermark):
        self.watermarks.append(watermark)


def test_each_instance_extracts_and_emits_from_its_own_copy_of_the_assigner():
    strategy = AssignerWithPeriodicWatermarksWrapper(MaxMinusTen())
    assert isinstance(strategy, WatermarkStrategy)
    instance = cloudpickle.loads(cloudpickle.dumps(strategy))  # as a deployed subtask gets it
    extract = instance.create_timestamp_assigner()
    generator = instance.create_watermark_generator(None)
    out = Emitted()
    generator.on_periodic_emit(out)
    assert out.watermarks == []  # no watermark before the first record
    assert [extract(("a", ts), None) for ts in (100, 130, 120)] == [100, 130, 120]
    generator.on_periodic_emit(out)
    assert out.watermarks == [Watermark(120)]
    assert strategy.get_timestamp_assigner().max_ts is None  # the original was not touched


def test_event_time_windows_over_a_legacy_assigner(env):
    data = [("a", 1000), ("b", 1500), ("a", 4000), ("a", 6000), ("b", 7000)]
    ds = (env.from_collection(data, Types.TUPLE([Types.STRING(), Types.LONG()]))
          .assign_timestamps_and_watermarks(AssignerWithPeriodicWatermarksWrapper(MaxMinusTen()))
          .key_by(lambda r: r[0], key_type=Types.STRING())
          .window(TumblingEventTimeWindows.of(5000))
          .reduce(lambda x, y: (x[0], x[1] + y[1])))
    assert sorted(collect(ds)) == [("a", 5000), ("a", 6000), ("b", 1500), ("b", 7000)]


def test_an_assigner_without_the_two_methods_is_refused():
    with pytest.raises(TypeError, match="has no get_current_watermark\\(\\)"):
        AssignerWithPeriodicWatermarksWrapper(type("OnlyExtract", (), {"extract_timestamp": lambda s, e, t: 0})())
