"""The ``WatermarkOutput`` that generators emit to, over an operator's ``Output`` (Flink's
``WatermarkToDataOutput``)."""

from __future__ import annotations

from typing import Any, List, Optional

from rill.operators.base import Output
from rill.common.eventtime import WatermarkOutput
from rill.common.streamrecord import MAX_TIMESTAMP, MIN_TIMESTAMP, Watermark, WatermarkStatus

__all__ = ["WatermarkToDataOutput"]


class WatermarkToDataOutput(WatermarkOutput):
    """Forwards a generator's watermarks and idleness to an operator's ``Output``.

    - A watermark is forwarded only if it is greater than every watermark forwarded before
      (so a generator may emit the same watermark at every periodic emission).
    - ``mark_idle``/``mark_active`` forward ``WatermarkStatus.IDLE``/``ACTIVE`` only when the
      status changes; forwarding a watermark while idle forwards ``ACTIVE`` first (Flink).
    - Rill addition: the operator marks the output active before it emits records on an idle
      output (Flink waits for the next watermark), so downstream never receives records on an
      input it considers idle.
    - After ``MAX_WATERMARK`` (end of event time) statuses are no longer forwarded.

    Interleaving with records: while the operator hands a batch to ``on_event`` record by
    record (:meth:`begin_batch` … :meth:`end_batch`), anything the generator emits first
    flushes the records up to and including the current one, so records and watermarks leave
    in exactly the order Flink's per-record processing gives.

    :param output: the operator's output.
    """

    __slots__ = ("_output", "max_watermark_so_far", "is_idle", "_values", "_timestamps", "_flushed",
                 "current")

    def __init__(self, output: Output):
        self._output = output
        #: the greatest watermark forwarded so far (ms)
        self.max_watermark_so_far = MIN_TIMESTAMP
        #: whether the last forwarded status is IDLE
        self.is_idle = False
        self._values: Optional[List[Any]] = None
        self._timestamps: Optional[List[int]] = None
        self._flushed = 0
        #: records ``[0, current)`` of the batch in progress precede anything emitted now
        self.current = 0

    # -- WatermarkOutput -----------------------------------------------------------------
    def emit_watermark(self, watermark: Watermark) -> None:
        if not isinstance(watermark, Watermark):
            raise TypeError(
                f"WatermarkOutput.emit_watermark expects a Watermark, got {watermark!r} "
                f"({type(watermark).__name__})"
            )
        ts = watermark.timestamp
        if ts <= self.max_watermark_so_far:
            return
        self.max_watermark_so_far = ts
        self._flush()
        if self.is_idle:
            self.is_idle = False
            self._output.emit_watermark_status(WatermarkStatus.ACTIVE)
        self._output.emit_watermark(watermark)

    def mark_idle(self) -> None:
        if self.is_idle or self.max_watermark_so_far == MAX_TIMESTAMP:
            return
        self._flush()
        self.is_idle = True
        self._output.emit_watermark_status(WatermarkStatus.IDLE)

    def mark_active(self) -> None:
        if not self.is_idle or self.max_watermark_so_far == MAX_TIMESTAMP:
            return
        self._flush()
        self.is_idle = False
        self._output.emit_watermark_status(WatermarkStatus.ACTIVE)

    # -- interleaving with a batch in progress ---------------------------------------------
    def begin_batch(self, values: List[Any], timestamps: List[int]) -> None:
        self._values = values
        self._timestamps = timestamps
        self._flushed = 0
        self.current = 0

    def end_batch(self) -> None:
        """Emit the records up to ``current`` not emitted yet and forget the batch."""
        try:
            self._flush()
        finally:
            self._values = self._timestamps = None

    def _flush(self) -> None:
        values = self._values
        if values is None:
            return
        start, end = self._flushed, self.current
        if end <= start:
            return
        self._flushed = end
        if start == 0 and end == len(values):
            self._output.collect_batch(values, self._timestamps)
        else:
            self._output.collect_batch(values[start:end], self._timestamps[start:end])
