"""``TimestampsAndWatermarksOperator``: what ``DataStream.assign_timestamps_and_watermarks``
runs (Flink's ``TimestampsAndWatermarksOperator``)."""

from __future__ import annotations

from typing import Any, List, Optional

from rill.operators.base import AbstractStreamOperator, ChainingStrategy
from rill.common.streamrecord import MAX_TIMESTAMP, Watermark, WatermarkStatus
from rill.operators.watermark.timestamps_and_watermarks import GeneratesWatermarks, TimestampsAndWatermarks

__all__ = ["TimestampsAndWatermarksOperator"]


class TimestampsAndWatermarksOperator(AbstractStreamOperator, GeneratesWatermarks):
    """Assigns each record its timestamp with the strategy's timestamp assigner (which gets
    the record's previous timestamp, or ``None``, as ``record_timestamp``), shows it to the
    strategy's watermark generator and emits it with the new timestamp; calls the generator's
    ``on_periodic_emit`` every ``auto_watermark_interval_ms`` as a processing-time timer (a
    mail on the task thread; 0 disables it).

    As Flink: watermarks from upstream are swallowed, except ``MAX_WATERMARK`` (end of input),
    which is forwarded; watermark statuses from upstream are ignored (this operator's
    generator decides idleness); ``finish`` calls ``on_periodic_emit`` once more. Chained to
    its input wherever possible (``ChainingStrategy.ALWAYS``).

    :param watermark_strategy: a ``WatermarkStrategy`` (pickled into the plan; each subtask
        creates its own assigner and generator in ``open``).
    """

    chaining_strategy = ChainingStrategy.ALWAYS
    default_name = "Timestamps/Watermarks"

    def __init__(self, watermark_strategy: Any):
        self.watermark_strategy = watermark_strategy
        self._timestamps_and_watermarks: Optional[TimestampsAndWatermarks] = None

    def open(self) -> None:
        ctx = self.context
        self._timestamps_and_watermarks = TimestampsAndWatermarks(self.watermark_strategy, ctx.operator_name)
        self._timestamps_and_watermarks.open(self.output, ctx.processing_time_service, ctx.auto_watermark_interval_ms)

    def process_element(self, value: Any, timestamp: Optional[int] = None) -> None:
        self._timestamps_and_watermarks.emit_batch([value], None if timestamp is None else [timestamp])

    def process_batch(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        self._timestamps_and_watermarks.emit_batch(values, timestamps)

    def process_watermark(self, watermark: Watermark) -> None:
        if watermark.timestamp == MAX_TIMESTAMP:
            self._timestamps_and_watermarks.emit_end_of_input()

    def process_watermark_status(self, status: WatermarkStatus) -> None:
        pass

    def finish(self) -> None:
        self._timestamps_and_watermarks.emit_periodic_watermark()

    def close(self) -> None:
        if self._timestamps_and_watermarks is not None:
            self._timestamps_and_watermarks.close()
