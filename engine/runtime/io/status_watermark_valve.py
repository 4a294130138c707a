"""Combines the watermarks of a task's input channels (Flink's ``StatusWatermarkValve``)."""

from __future__ import annotations

from typing import List, Optional

from rill.runtime.streamrecord import MAX_TIMESTAMP, MIN_TIMESTAMP

__all__ = ["StatusWatermarkValve"]


class StatusWatermarkValve:
    """The task's watermark is the minimum over its channels' watermarks, and it only moves
    forward. A finished channel counts as ``MAX_TIMESTAMP``; an idle channel (later, with
    watermark idleness) is excluded.

    :param num_channels: total input channels over all gates.
    """

    def __init__(self, num_channels: int):
        self._channel_wm: List[int] = [MIN_TIMESTAMP] * num_channels
        self._idle: List[bool] = [False] * num_channels
        self.last_output = MIN_TIMESTAMP

    def input_watermark(self, timestamp: int, channel: int) -> Optional[int]:
        """Record a channel's watermark; return the new task watermark if it advanced."""
        if timestamp > self._channel_wm[channel]:
            self._channel_wm[channel] = timestamp
            self._idle[channel] = False
            return self._advance()
        return None

    def channel_finished(self, channel: int) -> Optional[int]:
        return self.input_watermark(MAX_TIMESTAMP, channel)

    def _advance(self) -> Optional[int]:
        active = [w for w, idle in zip(self._channel_wm, self._idle) if not idle]
        if not active:
            return None
        new = min(active)
        if new > self.last_output:
            self.last_output = new
            return new
        return None
