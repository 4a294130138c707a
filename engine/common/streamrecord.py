"""Stream elements: what flows through operators besides record values.

Flink's ``StreamRecord`` / ``Watermark`` (``org.apache.flink.streaming.runtime.streamrecord``,
``org.apache.flink.streaming.api.watermark``). On Rill's fast path records travel as plain
values in batches (``list`` of values plus an optional parallel ``list`` of int timestamps in
epoch ms); :class:`StreamRecord` is used where one element must carry its timestamp
explicitly, e.g. in the operator test harness output.

Why ``rill.common``: Flink keeps these types in ``flink-streaming-java``, above its network
stack, which carries them as opaque serialized bytes. Rill's network layer reads watermarks and
watermark statuses as in-band events (``network/events.py``), so the element types must sit
below ``rill.network``; the lowest layer, next to Flink's ``api.common.eventtime`` (where
flink-core keeps its own ``Watermark``), is where every layer can reach them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

__all__ = ["StreamRecord", "Watermark", "WatermarkStatus", "MAX_WATERMARK", "MIN_TIMESTAMP", "MAX_TIMESTAMP"]

#: Java's ``Long.MIN_VALUE``/``Long.MAX_VALUE``: Flink's bounds for timestamps and watermarks (ms).
MIN_TIMESTAMP = -(1 << 63)
MAX_TIMESTAMP = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class StreamRecord:
    """A record value with its optional event timestamp (epoch ms)."""

    value: Any
    timestamp: Optional[int] = None


@dataclass(frozen=True, slots=True, order=True)
class Watermark:
    """A promise that no element with timestamp <= ``timestamp`` (epoch ms) follows.

    Follows ``org.apache.flink.streaming.api.watermark.Watermark``; ``MAX_WATERMARK`` marks the
    end of event time and is emitted when a bounded input ends.
    """

    timestamp: int

    def get_timestamp(self) -> int:
        return self.timestamp

    def __str__(self) -> str:
        return f"Watermark @ {self.timestamp}"


MAX_WATERMARK = Watermark(MAX_TIMESTAMP)


@dataclass(frozen=True, slots=True)
class WatermarkStatus:
    """Whether a stream (a channel, an operator's output) currently produces watermarks
    (Flink's ``WatermarkStatus``). An IDLE input is left out of the minimum that forms a task's
    watermark, so an idle source partition does not hold event time back; it becomes ACTIVE
    again with its next record or watermark."""

    status: str

    @property
    def is_idle(self) -> bool:
        return self.status == "IDLE"

    @property
    def is_active(self) -> bool:
        return self.status == "ACTIVE"

    def __str__(self) -> str:
        return f"WatermarkStatus({self.status})"


WatermarkStatus.IDLE = WatermarkStatus("IDLE")  # type: ignore[attr-defined]
WatermarkStatus.ACTIVE = WatermarkStatus("ACTIVE")  # type: ignore[attr-defined]
