"""Event time: the operator that assigns timestamps and watermarks (Flink's
``TimestampsAndWatermarksOperator``) and, re-exported, the watermark generators and the output
they emit to, defined in :mod:`rill.common.eventtime` (Flink's
``org.apache.flink.api.common.eventtime``) so that the user-facing
:class:`rill.common.watermark_strategy.WatermarkStrategy` creates them without a later layer."""

from rill.common.eventtime import (
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
