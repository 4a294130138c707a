"""What a completed checkpoint or savepoint is, over all operators and subtasks (Flink's
``CheckpointMetadata`` and ``OperatorState`` of ``org.apache.flink.runtime.checkpoint``, with
the handles of ``org.apache.flink.runtime.state``).

A checkpoint's metadata names every operator that has state (by its 32-hex operator id, with
the user's uid when one was set) and, per subtask, a *handle*: a small picklable record that
can load the subtask's :class:`~rill.state.checkpoint.operator_subtask_state.OperatorSubtaskState`
(Flink's ``OperatorSubtaskState`` of ``StreamStateHandle`` s). Where the bytes live is the
storage's business (:mod:`rill.state.checkpoint.storage`): the in-memory storage's handle holds
the record itself, a file system storage's handle names Parquet files relative to the
checkpoint's directory, so a checkpoint directory can be moved.

The coordinator (``rill.runtime.checkpoint``) builds one :class:`CheckpointMetadata` when every
task acknowledged; a restore reads it back and assigns each new subtask its share
(``rill.runtime.checkpoint.state_assignment``).
"""

from __future__ import annotations

import abc
import enum
from dataclasses import dataclass, field
from typing import Mapping, Optional

from rill.state.checkpoint.operator_subtask_state import ChannelStateSnapshot, OperatorSubtaskState
from rill.state.key_groups import KeyGroupRange

__all__ = [
    "METADATA_FORMAT_VERSION",
    "SnapshotType",
    "OperatorSubtaskStateHandle",
    "InMemoryOperatorSubtaskStateHandle",
    "OperatorState",
    "CheckpointMetadata",
]

#: Version of the metadata and file layout a writer produces; a reader refuses a newer one.
METADATA_FORMAT_VERSION = 1


class SnapshotType(enum.Enum):
    """Whether a snapshot is a checkpoint (owned and discarded by the job) or a savepoint
    (owned by the user; Flink's ``SnapshotType``/``CheckpointType``)."""

    CHECKPOINT = "CHECKPOINT"
    SAVEPOINT = "SAVEPOINT"


class OperatorSubtaskStateHandle(abc.ABC):
    """Loads one operator subtask's state from wherever a checkpoint storage put it.

    Picklable and small: it travels from the task that wrote it to the JobMaster in the
    acknowledgement, and from the JobMaster to the restoring tasks.
    """

    @property
    @abc.abstractmethod
    def state_size(self) -> int:
        """Size of the stored state, bytes (an estimate for in-memory handles)."""

    @abc.abstractmethod
    def read(self, key_group_range: Optional[KeyGroupRange] = None) -> OperatorSubtaskState:
        """The stored state; with ``key_group_range``, keyed state and timers only of the key
        groups in that range (what a rescaled subtask restores), operator state whole.

        :raises OSError: if the stored files cannot be read.
        :raises ValueError: if they are not a snapshot this version of Rill can read.
        """

    def has_channel_state(self) -> bool:
        """Whether the handle stores in-flight data of an unaligned checkpoint (without reading
        it). The default: no."""
        return False

    def read_channel_state(self) -> ChannelStateSnapshot:
        """The in-flight data of an unaligned checkpoint stored with this state (FLIP-76), read
        now; empty when there is none (the default).

        :raises OSError: if the stored files cannot be read.
        """
        return ChannelStateSnapshot()


class InMemoryOperatorSubtaskStateHandle(OperatorSubtaskStateHandle):
    """A handle that holds the record itself (Flink's ``ByteStreamStateHandle`` of the
    ``JobManagerCheckpointStorage``): used when no checkpoint directory is configured."""

    __slots__ = ("state", "_size")

    def __init__(self, state: OperatorSubtaskState, size: int = 0) -> None:
        self.state = state
        self._size = size

    @property
    def state_size(self) -> int:
        return self._size

    def read(self, key_group_range: Optional[KeyGroupRange] = None) -> OperatorSubtaskState:
        if key_group_range is None:
            return self.state
        return self.state.restricted_to(key_group_range)

    def has_channel_state(self) -> bool:
        return not self.state.channel_state.is_empty()

    def read_channel_state(self) -> ChannelStateSnapshot:
        return self.state.channel_state

    def __eq__(self, other: object) -> bool:
        return isinstance(other, InMemoryOperatorSubtaskStateHandle) and other.state == self.state

    def __hash__(self) -> int:
        return id(self.state)

    def __repr__(self) -> str:
        return f"InMemoryOperatorSubtaskStateHandle(checkpoint_id={self.state.checkpoint_id})"


@dataclass(frozen=True)
class OperatorState:
    """One operator's state over all its subtasks in one snapshot (Flink's ``OperatorState``).

    :param operator_id: the operator's id, 32 lowercase hex digits (its generated id, or the
        hash of its uid).
    :param parallelism: the number of subtasks that wrote the snapshot.
    :param max_parallelism: the operator's number of key groups.
    :param subtask_states: subtask index -> handle; subtasks without state are absent.
    :param uid: the user's uid of the operator, when one was set.
    :param name: the operator's name (for messages and metadata readers).
    :param coordinator_state: the state of the operator's coordinator (a source's split
        enumerator: ``SourceCoordinator.snapshot_state``), or ``None`` (Flink's
        ``OperatorState.getCoordinatorState``).
    :param fully_finished: every subtask of the operator had finished when the snapshot was
        taken (FLIP-147, Flink's ``FullyFinishedOperatorState``): it has no state, and a job
        restored from the snapshot does not run it again (its tasks start finished).
    :raises ValueError: if the operator id is not 32 hex digits, a subtask index is outside
        ``[0, parallelism)``, or ``parallelism`` exceeds ``max_parallelism``.
    """

    operator_id: str
    parallelism: int
    max_parallelism: int
    subtask_states: Mapping[int, OperatorSubtaskStateHandle] = field(default_factory=dict)
    uid: Optional[str] = None
    name: str = ""
    coordinator_state: Optional[bytes] = None
    fully_finished: bool = False

    def __post_init__(self) -> None:
        oid = self.operator_id
        if self.fully_finished and self.subtask_states:
            raise ValueError(f"Operator {self.uid or oid} is fully finished: it has no subtask states")
        if len(oid) != 32 or any(c not in "0123456789abcdef" for c in oid):
            raise ValueError(f"Operator id {oid!r} is not 32 lowercase hex digits")
        if not 1 <= self.parallelism <= self.max_parallelism:
            raise ValueError(
                f"Operator {self.uid or oid}: parallelism {self.parallelism} is not within "
                f"[1, max parallelism {self.max_parallelism}]")
        bad = [i for i in self.subtask_states if not 0 <= i < self.parallelism]
        if bad:
            raise ValueError(
                f"Operator {self.uid or oid}: subtask indexes {sorted(bad)} are outside "
                f"[0, {self.parallelism})")
        object.__setattr__(self, "subtask_states", dict(self.subtask_states))

    @property
    def state_size(self) -> int:
        """Bytes over all subtasks."""
        return sum(h.state_size for h in self.subtask_states.values())


@dataclass(frozen=True)
class CheckpointMetadata:
    """Everything a restore needs from one completed checkpoint or savepoint (Flink's
    ``CheckpointMetadata``).

    :param checkpoint_id: the checkpoint's id (1, 2, ... per job).
    :param timestamp: when it was triggered, epoch ms.
    :param operator_states: operator id -> :class:`OperatorState`.
    :param snapshot_type: checkpoint or savepoint.
    :param job_id: the job that took it (32 hex digits).
    :param external_pointer: where its metadata file is, when it has one (``None`` in memory).
    :param format_version: :data:`METADATA_FORMAT_VERSION` of the writer.
    """

    checkpoint_id: int
    timestamp: int
    operator_states: Mapping[str, OperatorState]
    snapshot_type: SnapshotType = SnapshotType.CHECKPOINT
    job_id: str = ""
    external_pointer: Optional[str] = None
    format_version: int = METADATA_FORMAT_VERSION

    def __post_init__(self) -> None:
        object.__setattr__(self, "operator_states", dict(self.operator_states))
        for oid, op in self.operator_states.items():
            if oid != op.operator_id:
                raise ValueError(f"Operator state {op.operator_id} is filed under {oid}")

    @property
    def state_size(self) -> int:
        """Bytes over all operators."""
        return sum(op.state_size for op in self.operator_states.values())
