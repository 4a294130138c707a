"""What a trigger and a barrier tell a task about one checkpoint (Flink's ``CheckpointOptions``,
``CheckpointMetaData`` and ``CheckpointMetrics``)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Optional

from rill.runtime.checkpoint.stop_mode import StopMode
from rill.state.checkpoint.metadata import SnapshotType
from rill.state.checkpoint.storage import CheckpointStorageLocation

__all__ = ["AlignmentType", "CheckpointOptions", "CheckpointMetaData", "CheckpointMetrics"]


class AlignmentType(enum.Enum):
    """How a task lines its inputs up on a barrier (Flink's ``CheckpointOptions.AlignmentType``).

    ``ALIGNED``: exactly-once, channels that delivered the barrier wait for the others (with
    a positive ``aligned_checkpoint_timeout_ms`` the checkpoint may switch to unaligned);
    ``UNALIGNED``: exactly-once, the barrier overtakes in-flight data, which is stored with
    the snapshot (FLIP-76); ``AT_LEAST_ONCE``: no waiting, the task snapshots when the last
    barrier arrives.
    """

    ALIGNED = "ALIGNED"
    UNALIGNED = "UNALIGNED"
    AT_LEAST_ONCE = "AT_LEAST_ONCE"


@dataclass(frozen=True)
class CheckpointOptions:
    """Travels with the trigger to the source tasks and inside every
    :class:`~rill.network.events.CheckpointBarrier` to the others.

    :param snapshot_type: checkpoint or savepoint.
    :param target_location: where the tasks write their state (picklable; a memory location
        carries nothing).
    :param alignment: :class:`AlignmentType`.
    :param stop_mode: set on the synchronous savepoint of stop-with-savepoint: every task
        that takes it stops after it completed (see
        :class:`~rill.runtime.checkpoint.stop_mode.StopMode`); ``None`` otherwise.
    :param aligned_checkpoint_timeout_ms: with ``ALIGNED``, a positive value lets the
        checkpoint switch to unaligned at a task once that long passed since the trigger
        (``execution.checkpointing.aligned-checkpoint-timeout``, Flink's
        ``CheckpointOptions.alignedCheckpointTimeout``); 0: never.
    """

    snapshot_type: SnapshotType
    target_location: CheckpointStorageLocation
    alignment: AlignmentType = AlignmentType.ALIGNED
    stop_mode: Optional[StopMode] = None
    aligned_checkpoint_timeout_ms: int = 0

    def is_unaligned(self) -> bool:
        """Whether barriers overtake in-flight data (Flink's ``isUnalignedCheckpoint``)."""
        return self.alignment is AlignmentType.UNALIGNED

    def is_timeoutable(self) -> bool:
        """Whether an aligned checkpoint may switch to unaligned (Flink's ``isTimeoutable``)."""
        return self.alignment is AlignmentType.ALIGNED and self.aligned_checkpoint_timeout_ms > 0

    def to_unaligned(self) -> "CheckpointOptions":
        """These options for a checkpoint that switched to unaligned (Flink's
        ``toUnaligned``)."""
        return replace(self, alignment=AlignmentType.UNALIGNED, aligned_checkpoint_timeout_ms=0)

    def is_synchronous(self) -> bool:
        """Whether the tasks stop after this snapshot (Flink's ``SnapshotType.isSynchronous``)."""
        return self.stop_mode is not None

    def is_exactly_once_mode(self) -> bool:
        """Whether the checkpoint is exactly-once, aligned or unaligned (Flink's
        ``isExactlyOnceMode``)."""
        return self.alignment is not AlignmentType.AT_LEAST_ONCE


@dataclass(frozen=True)
class CheckpointMetaData:
    """Flink's ``CheckpointMetaData``: the checkpoint id (1, 2, ...) and when the coordinator
    triggered it (``timestamp``, epoch ms)."""

    checkpoint_id: int
    timestamp: int


@dataclass(frozen=True)
class CheckpointMetrics:
    """What one subtask reports about its part of one checkpoint (Flink's
    ``CheckpointMetrics``).

    :param sync_duration_ms: the synchronous part on the task thread (barrier out, snapshot).
    :param async_duration_ms: the asynchronous part (writing the states, off the task thread).
    :param alignment_duration_ms: from the first barrier to the last one of the checkpoint on
        the task's inputs (0 for a source task).
    :param checkpoint_start_delay_ms: from the trigger to the start of the synchronous part.
    :param state_size_bytes: bytes of the handles the task acknowledged.
    :param persisted_data_bytes: in-flight data the task stored with an unaligned checkpoint,
        bytes of serialized buffers (Flink's ``bytesPersistedDuringAlignment`` /
        ``persistedData``); 0 for an aligned one.
    :param unaligned: whether the task took the checkpoint unaligned (from the start or after
        the aligned-checkpoint timeout; Flink's ``unalignedCheckpoint``).
    """

    sync_duration_ms: float = 0.0
    async_duration_ms: float = 0.0
    alignment_duration_ms: float = 0.0
    checkpoint_start_delay_ms: float = 0.0
    state_size_bytes: int = 0
    persisted_data_bytes: int = 0
    unaligned: bool = False
