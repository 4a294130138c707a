"""The consuming end of one subpartition inside an input gate (Flink's ``InputChannel``).

Implementations: :class:`~rill.network.partition.consumer.local_input_channel.LocalInputChannel`
(producer in the same process, reads the subpartition's view directly); a credit-based
``RemoteInputChannel`` (producer in another process) will implement the same interface.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, NamedTuple, Optional

from ..result_partition_id import ResultPartitionID

if TYPE_CHECKING:
    from .single_input_gate import SingleInputGate

__all__ = ["InputChannel", "BufferAndAvailability"]


class BufferAndAvailability(NamedTuple):
    """A channel's answer to a poll (Flink's ``InputChannel.BufferAndAvailability``).

    :ivar item: a :class:`~rill.network.buffer.buffer.Buffer` or an event.
    :ivar more_available: whether the channel had more entries right after this one.
    """

    item: Any
    more_available: bool


class InputChannel(abc.ABC):
    """One input of a gate, reading one subpartition of one producer's partition.

    Life cycle: created, attached to exactly one gate (which assigns :attr:`channel_index`),
    :meth:`request_subpartition` at the gate's ``setup()``, polled with :meth:`get_next_buffer`
    by the gate on the consuming task's thread, :meth:`release` d after EndOfPartition or when
    the gate closes.

    Threading: ``get_next_buffer``/``release`` run on the consumer's thread. When data arrives
    the channel calls :meth:`notify_channel_non_empty` (possibly from a producer or network
    thread), which forwards to the gate.
    """

    def __init__(self, partition_id: ResultPartitionID) -> None:
        self.partition_id = partition_id
        self._channel_index = -1
        self._input_gate: Optional["SingleInputGate"] = None

    @property
    def channel_index(self) -> int:
        """Index of this channel in its gate; ``-1`` before it is attached to a gate."""
        return self._channel_index

    def attach_to_gate(self, input_gate: "SingleInputGate", channel_index: int) -> None:
        """Called by the gate's constructor.

        :raises RuntimeError: if the channel already belongs to a gate.
        """
        if self._input_gate is not None:
            raise RuntimeError(f"{self!r} already belongs to a gate")
        self._input_gate = input_gate
        self._channel_index = channel_index

    def notify_channel_non_empty(self) -> None:
        """Tell the gate this channel has data (Flink's ``notifyChannelNonEmpty``). Cheap and
        thread-safe; a no-op before the channel is attached."""
        gate = self._input_gate
        if gate is not None:
            gate.notify_channel_non_empty(self)

    def notify_priority_event(self) -> None:
        """Tell the gate this channel has a priority event at its head (Flink's
        ``notifyPriorityEvent``): the gate polls it next. Thread-safe."""
        gate = self._input_gate
        if gate is not None:
            gate.notify_priority_event(self)

    def has_priority_event(self) -> bool:
        """Whether the next entry is a priority event (consuming-task thread). The default:
        ``False``."""
        return False

    def take_inflight_buffers(self) -> list:
        """The data that reached this channel before the priority event it returned last and
        is still queued behind it, as ``(payload, compressed)`` pairs (records serialized by
        :func:`~rill.network.api.serialization.value_codec.pack_records`, lz4 when
        ``compressed``), oldest first; each pair is returned once (Flink's
        ``RemoteInputChannel.getInflightBuffers`` for an unaligned checkpoint's channel state).
        Call on the consuming task's thread right after polling the event. The default, for a
        channel that queues nothing of its own (a local channel reads its producer's
        subpartition, whose overtaken buffers the producer stores): ``[]``."""
        return []

    @abc.abstractmethod
    def request_subpartition(self) -> None:
        """Start consuming the subpartition. Idempotent.

        :raises PartitionNotFoundError: if the producer's partition is not registered.
        """

    @abc.abstractmethod
    def get_next_buffer(self) -> Optional[BufferAndAvailability]:
        """The next buffer or event, or ``None`` if nothing is available now. Never blocks.

        :raises PartitionReleasedError: if the producer released the partition (failed or was
            cancelled) before this channel read EndOfPartition.
        :raises RuntimeError: before :meth:`request_subpartition`.
        """

    @abc.abstractmethod
    def release(self) -> None:
        """Stop consuming; queued buffers are recycled on the producer side. Idempotent."""

    @abc.abstractmethod
    def is_released(self) -> bool:
        """Whether :meth:`release` was called on this channel."""
