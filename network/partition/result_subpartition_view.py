"""The reading end of a subpartition (Flink's ``ResultSubpartitionView``).

A local input channel polls a view directly from the consuming task's thread; a later remote
sender (Flink's ``CreditBasedSequenceNumberingViewReader``) will poll the same interface from a
network thread.
"""

from __future__ import annotations

import abc
from typing import Any, Optional

from .result_subpartition import BufferAndBacklog

__all__ = ["ResultSubpartitionView"]


class ResultSubpartitionView(abc.ABC):
    """Reads one subpartition in order. Exactly one thread polls a view."""

    @abc.abstractmethod
    def get_next_buffer(self) -> Optional[BufferAndBacklog]:
        """The next entry with availability and backlog, or ``None`` if nothing is queued now
        (or the view is released). Never blocks."""

    def poll_next(self) -> Optional[Any]:
        """The next buffer or event, or ``None`` if nothing is queued now. Never blocks."""
        result = self.get_next_buffer()
        return None if result is None else result.item

    @abc.abstractmethod
    def notify_data_available(self) -> None:
        """Called by the subpartition when it goes from empty to non-empty (or is released by
        the producer); forwards to the availability listener."""

    def next_is_buffer(self) -> bool:
        """Whether the next entry is a buffer (a peek: a network sender without credit leaves it
        queued, so that a priority event added meanwhile overtakes it). The default: ``False``
        (the sender takes the entry and holds it)."""
        return False

    def has_priority_event(self) -> bool:
        """Whether a priority event is at the head (a peek). The default: ``False``."""
        return False

    def notify_priority_event(self) -> None:
        """Called by the subpartition when a priority event was put ahead of its queue
        (:meth:`~rill.network.partition.result_subpartition.ResultSubpartition.add_priority_event`).
        The default forwards to :meth:`notify_data_available` (a network sender then polls and
        finds the event first)."""
        self.notify_data_available()

    @abc.abstractmethod
    def is_released(self) -> bool:
        """Whether the view, or its subpartition (by the producer), was released."""

    @abc.abstractmethod
    def get_failure_cause(self) -> Optional[BaseException]:
        """The cause the producer gave when releasing the subpartition, if any."""

    def add_bytes_sent(self, num_bytes: int) -> None:
        """Count ``num_bytes`` a network sender serialized from this view's entries (the
        payload bytes of buffers and events it sent), for the producer's ``numBytesOut``.
        Called by the one thread that reads the view. The default does nothing."""

    def set_remote_serializer(self, serializer) -> None:
        """The view is read by a network sender that serializes with ``serializer`` (a
        :class:`~rill.network.api.serialization.record_serializer.SpanningRecordSerializer`):
        a subpartition may then serialize its buffers on the producer's thread as they are
        added (see :class:`Buffer.serialized <rill.network.buffer.buffer.Buffer>`). Called once,
        right after the view was created. The default does nothing (the sender serializes)."""

    @abc.abstractmethod
    def release(self) -> None:
        """Consumer-side release: the consumer is done (after EndOfPartition) or cancelled.
        Recycles whatever is still queued and tells the partition this subpartition is consumed.
        Idempotent."""
