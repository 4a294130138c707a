"""Event time: watermark generators, the output they emit to, and the operator that assigns
timestamps and watermarks (Flink's ``org.apache.flink.api.common.eventtime`` and
``TimestampsAndWatermarksOperator``). The user-facing strategy is
:class:`rill.common.watermark_strategy.WatermarkStrategy`."""

from rill.operators.watermark.generators import (
    AscendingTimestampsWatermarks,
    BoundedOutOfOrdernessWatermarks,
    IdlenessTimer,
    NoWatermarksGenerator,
    WatermarkGenerator,
    WatermarkOutput,
    WatermarksWithIdleness,
)
from rill.operators.watermark.output import WatermarkToDataOutput
from rill.operators.watermark.timestamps_and_watermarks import GeneratorContext, TimestampsAndWatermarks
from rill.operators.watermark.timestamps_and_watermarks_operator import TimestampsAndWatermarksOperator

__all__ = [
    "AscendingTimestampsWatermarks",
    "BoundedOutOfOrdernessWatermarks",
    "GeneratorContext",
    "IdlenessTimer",
    "NoWatermarksGenerator",
    "TimestampsAndWatermarks",
    "TimestampsAndWatermarksOperator",
    "WatermarkGenerator",
    "WatermarkOutput",
    "WatermarkToDataOutput",
    "WatermarksWithIdleness",
]
