"""Combines the watermarks and watermark statuses of a task's input channels (Flink's
``StatusWatermarkValve``)."""

from __future__ import annotations

from typing import List, Optional, Tuple

from rill.common.streamrecord import MAX_TIMESTAMP, MIN_TIMESTAMP, WatermarkStatus

__all__ = ["StatusWatermarkValve"]


class StatusWatermarkValve:
    """The input's watermark is the minimum over its *aligned* channels' watermarks and only
    moves forward. A channel is aligned while it is ACTIVE and its watermark has caught up
    with the last output watermark; an IDLE channel is left out, so an idle source partition
    does not hold event time back. When the last active channel goes idle the valve emits
    IDLE (after releasing the maximum watermark it has seen, as Flink does); the first channel
    to become active again emits ACTIVE. A finished channel counts as ``MAX_TIMESTAMP``.

    Each ``input_*`` call returns ``(watermark or None, status or None)`` to emit, in that
    order.

    :param num_channels: total input channels of this input (over all its gates).
    """

    def __init__(self, num_channels: int):
        self._wm: List[int] = [MIN_TIMESTAMP] * num_channels
        self._active: List[bool] = [True] * num_channels
        self._aligned: List[bool] = [True] * num_channels
        self.last_output = MIN_TIMESTAMP
        self.output_status = WatermarkStatus.ACTIVE

    def input_watermark(self, timestamp: int, channel: int) -> Tuple[Optional[int], Optional[WatermarkStatus]]:
        """Record a channel's watermark (ms)."""
        status = None
        if not self._active[channel]:  # a watermark makes an idle channel active again
            status = self._set_active(channel)
        if timestamp > self._wm[channel]:
            self._wm[channel] = timestamp
            if not self._aligned[channel] and timestamp >= self.last_output:
                self._aligned[channel] = True
            return self._advance(), status
        return None, status

    def channel_finished(self, channel: int) -> Tuple[Optional[int], Optional[WatermarkStatus]]:
        return self.input_watermark(MAX_TIMESTAMP, channel)

    def input_watermark_status(self, status: WatermarkStatus, channel: int) -> Tuple[Optional[int], Optional[WatermarkStatus]]:
        if status.is_idle and self._active[channel]:
            self._active[channel] = False
            self._aligned[channel] = False
            if not any(self._active):
                wm = max(self._wm)
                out = wm if wm > self.last_output else None
                if out is not None:
                    self.last_output = out
                self.output_status = WatermarkStatus.IDLE
                return out, WatermarkStatus.IDLE
            return self._advance(), None
        if status.is_active and not self._active[channel]:
            return None, self._set_active(channel)
        return None, None

    def _set_active(self, channel: int) -> Optional[WatermarkStatus]:
        self._active[channel] = True
        self._aligned[channel] = self._wm[channel] >= self.last_output
        if self.output_status.is_idle:
            self.output_status = WatermarkStatus.ACTIVE
            return WatermarkStatus.ACTIVE
        return None

    def _advance(self) -> Optional[int]:
        aligned = [w for w, a in zip(self._wm, self._aligned) if a]
        if not aligned:
            return None
        new = min(aligned)
        if new > self.last_output:
            self.last_output = new
            return new
        return None
