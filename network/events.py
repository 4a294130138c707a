"""Events that travel in-band, in order with the buffers of a channel.

Follows Flink's ``org.apache.flink.runtime.io.network.api`` events (``EndOfPartitionEvent``,
``EndOfData``, ``CheckpointBarrier``) and ``runtime.event.RuntimeEvent``. Each event is its own
entry in a subpartition's queue, between the buffers sent before and after it; a consumer sees
it exactly at that position. A :class:`~rill.common.streamrecord.Watermark` travels the same way
(the writer flushes the records pending for a channel before adding it), so it needs no wrapper.

In-process, events are passed as Python objects (Flink serializes them with ``EventSerializer``
into unpooled buffers). Events do not take a slot of the producer's buffer pool, as in Flink.
All events are immutable and hashable, so one instance can be broadcast to every subpartition.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from rill.common.streamrecord import Watermark

__all__ = [
    "RuntimeEvent",
    "EndOfPartitionEvent",
    "END_OF_PARTITION_EVENT",
    "StopMode",
    "EndOfDataEvent",
    "CheckpointBarrier",
    "CancelCheckpointMarker",
    "Watermark",
]


class RuntimeEvent:
    """Base of the runtime's in-band events (Flink's ``RuntimeEvent``)."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class EndOfPartitionEvent(RuntimeEvent):
    """The last entry of every subpartition: the producer finished (Flink's
    ``EndOfPartitionEvent``). A channel that received it is finished; a gate whose channels all
    received it is finished."""

    def __str__(self) -> str:
        return "EndOfPartitionEvent"


#: The shared instance (Flink's ``EndOfPartitionEvent.INSTANCE``); all instances compare equal.
END_OF_PARTITION_EVENT = EndOfPartitionEvent()


class StopMode(enum.Enum):
    """Why a source stopped (Flink's ``StopMode``): ``DRAIN`` flushes event time to the end
    (bounded input, stop-with-savepoint --drain), ``NO_DRAIN`` keeps timers for a later resume."""

    DRAIN = "DRAIN"
    NO_DRAIN = "NO_DRAIN"


@dataclass(frozen=True, slots=True)
class EndOfDataEvent(RuntimeEvent):
    """No more records follow on this channel, though a final checkpoint may still
    (Flink's ``EndOfData``). Sent before :class:`EndOfPartitionEvent` by a task whose input ended."""

    stop_mode: StopMode = StopMode.DRAIN


@dataclass(frozen=True, slots=True)
class CheckpointBarrier(RuntimeEvent):
    """Separates the records of checkpoint ``checkpoint_id`` from those of the next one
    (Flink's ``CheckpointBarrier``). A task's barrier handler
    (``rill.runtime.checkpoint.barrier_handler``) aligns its input channels on it.

    :ivar checkpoint_id: the checkpoint's id (int, increasing per job).
    :ivar timestamp: when the coordinator triggered it (epoch ms).
    :ivar options: Flink's ``CheckpointOptions`` (checkpoint type, storage location, alignment);
        opaque to the network stack.
    """

    checkpoint_id: int
    timestamp: int
    options: Any = None

    def get_id(self) -> int:
        """The checkpoint id."""
        return self.checkpoint_id

    def get_timestamp(self) -> int:
        """The trigger time (epoch ms)."""
        return self.timestamp


@dataclass(frozen=True, slots=True)
class CancelCheckpointMarker(RuntimeEvent):
    """Tells downstream tasks that checkpoint ``checkpoint_id`` was abandoned upstream, so they
    stop aligning on it at once instead of waiting for barriers that will not come (Flink's
    ``CancelCheckpointMarker``).

    :ivar checkpoint_id: the abandoned checkpoint's id.
    """

    checkpoint_id: int

    def get_checkpoint_id(self) -> int:
        """The abandoned checkpoint's id."""
        return self.checkpoint_id
