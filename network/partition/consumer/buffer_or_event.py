"""What an input gate returns per poll (Flink's ``BufferOrEvent``)."""

from __future__ import annotations

from typing import Any, Optional

from ...buffer.buffer import Buffer

__all__ = ["BufferOrEvent"]


class BufferOrEvent:
    """Either a buffer or an event, with the index of the channel it arrived on.

    :ivar channel_index: the gate's channel index, in ``[0, num_channels)``.
    :ivar buffer: a :class:`~rill.network.buffer.buffer.Buffer` (the consumer recycles it after
        processing its records), or ``None``.
    :ivar event: an event (EndOfPartitionEvent, EndOfDataEvent, CheckpointBarrier, Watermark,
        ...), or ``None``.
    :ivar more_available: whether the gate had more to read right after this poll (a hint: the
        task can keep polling without going through its mailbox).
    """

    __slots__ = ("channel_index", "buffer", "event", "more_available")

    def __init__(
        self,
        channel_index: int,
        buffer: Optional[Buffer] = None,
        event: Any = None,
        more_available: bool = False,
    ) -> None:
        if (buffer is None) == (event is None):
            raise ValueError("A BufferOrEvent holds exactly one of a buffer and an event")
        self.channel_index = channel_index
        self.buffer = buffer
        self.event = event
        self.more_available = more_available

    def is_buffer(self) -> bool:
        """Whether this holds a buffer (to process, then recycle)."""
        return self.buffer is not None

    def is_event(self) -> bool:
        """Whether this holds an event."""
        return self.event is not None

    def __repr__(self) -> str:
        what = repr(self.buffer) if self.buffer is not None else repr(self.event)
        return f"BufferOrEvent(channel={self.channel_index}, {what}, more={self.more_available})"
