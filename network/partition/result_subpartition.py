"""One consumer's share of a partition (Flink's ``ResultSubpartition``).

A ResultPartition has one subpartition per consuming channel. The producer appends buffers and
events to it; exactly one :class:`~rill.network.partition.result_subpartition_view.ResultSubpartitionView`
reads them, in order.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional

if TYPE_CHECKING:
    from .result_subpartition_view import ResultSubpartitionView

__all__ = ["ResultSubpartition", "BufferAndBacklog", "BufferAvailabilityListener"]

#: Called (with no argument) when a subpartition goes from nothing-to-read to something-to-read,
#: or is released by its producer (Flink's ``BufferAvailabilityListener.notifyDataAvailable``).
#: Runs on the producer's thread, outside the subpartition's lock: it must be cheap, thread-safe
#: and must not raise.
BufferAvailabilityListener = Callable[[], None]


class BufferAndBacklog(NamedTuple):
    """What a view returns per poll (Flink's ``ResultSubpartition.BufferAndBacklog``).

    :ivar item: a :class:`~rill.network.buffer.buffer.Buffer` or an event.
    :ivar more_available: whether the subpartition held more entries right after this poll.
    :ivar buffers_in_backlog: buffers (not events) still queued after this poll; a credit-based
        sender announces it with each buffer.
    :ivar is_priority: ``item`` is a priority event (:meth:`ResultSubpartition.add_priority_event`,
        Flink's ``PRIORITIZED_EVENT_BUFFER``): it overtook what was queued before it, and a
        network sender sends it flagged so that the receiver puts it ahead of its queue too.
    """

    item: Any
    more_available: bool
    buffers_in_backlog: int
    is_priority: bool = False


class ResultSubpartition(abc.ABC):
    """A queue of buffers and events for one consumer.

    Thread-safety: ``add``/``finish``/``release`` come from the producer's thread, polls from
    the consumer's; implementations take their lock once per entry, never per record.
    """

    @property
    @abc.abstractmethod
    def subpartition_index(self) -> int:
        """This subpartition's index in its partition, in ``[0, num_subpartitions)``."""

    @abc.abstractmethod
    def add(self, item: Any) -> bool:
        """Append a buffer or an event; notify the view if the queue was empty.

        :returns: ``False`` if the subpartition was released (the consumer is gone): a buffer is
            recycled and dropped.
        :raises RuntimeError: if the subpartition is finished (nothing may follow
            EndOfPartition); a buffer is recycled first.
        """

    @abc.abstractmethod
    def add_timeoutable_event(self, event: Any, on_polled: Callable[[], None]) -> bool:
        """Append ``event`` and report when the consumer takes it (see
        :meth:`PipelinedSubpartition.add_timeoutable_event`)."""

    @abc.abstractmethod
    def convert_to_priority_event(self, event: Any, replacement: Any) -> Optional[list]:
        """Move a still queued ``event`` ahead of the queue as ``replacement`` (see
        :meth:`PipelinedSubpartition.convert_to_priority_event`)."""

    @abc.abstractmethod
    def add_priority_event(self, event: Any) -> Optional[list]:
        """Put ``event`` ahead of everything queued (Flink's ``PipelinedSubpartition.add`` of a
        priority event: the barrier of an unaligned checkpoint, FLIP-76) and tell the view at
        once, even if entries were queued already.

        :returns: the buffers the event overtook, oldest first, as ``(values, timestamps,
            serialized)`` (see :class:`~rill.network.buffer.buffer.Buffer`: ``serialized`` is
            ``(payload, compressed, records)`` once a remote sender's serializer made it, and
            ``values`` is then empty); they stay queued and are sent after the event.
            ``None`` if the subpartition was released.
        :raises RuntimeError: if the subpartition is finished.
        """

    @abc.abstractmethod
    def finish(self) -> None:
        """Append :class:`~rill.network.events.EndOfPartitionEvent` and refuse later adds."""

    @abc.abstractmethod
    def release(self, cause: Optional[BaseException] = None) -> None:
        """Producer-side release: drop and recycle every queued buffer, and wake the reader so
        it sees the release (with ``cause``). Idempotent."""

    @abc.abstractmethod
    def create_read_view(self, availability_listener: BufferAvailabilityListener) -> "ResultSubpartitionView":
        """Create the one reader of this subpartition.

        :raises RuntimeError: if a view was created before (pipelined subpartitions are
            consumed once).
        :raises PartitionReleasedError: if the subpartition was released.
        """

    @abc.abstractmethod
    def is_released(self) -> bool:
        """Whether the producer or the reader released this subpartition."""

    @abc.abstractmethod
    def is_finished(self) -> bool:
        """Whether EndOfPartition was added."""

    @abc.abstractmethod
    def get_buffers_in_backlog(self) -> int:
        """Buffers (not events) queued and not yet read."""

    @abc.abstractmethod
    def get_total_number_of_buffers(self) -> int:
        """Buffers added since creation."""

    @abc.abstractmethod
    def get_total_number_of_records(self) -> int:
        """Records in the buffers added since creation."""
