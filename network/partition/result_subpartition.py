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
    """

    item: Any
    more_available: bool
    buffers_in_backlog: int


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
