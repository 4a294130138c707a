"""The interfaces of checkpoint storage (Flink's ``CheckpointStorageAccess`` and
``CheckpointStorageLocation``), apart from their implementations so that each implementation
module imports only them; :mod:`rill.state.checkpoint.storage` re-exports them with the
in-memory storage and the factory."""

from __future__ import annotations

import abc
from typing import Optional

from rill.state.checkpoint.metadata import CheckpointMetadata, OperatorSubtaskStateHandle
from rill.state.checkpoint.operator_subtask_state import OperatorSubtaskState

__all__ = ["CheckpointStorageLocation", "CheckpointStorage", "CheckpointLocationDisposedError"]


class CheckpointLocationDisposedError(Exception):
    """A subtask wrote into a checkpoint location that was disposed of meanwhile (its checkpoint
    was aborted or subsumed while the asynchronous part ran); what it wrote was removed again.
    Not a failure of the job: the checkpoint no longer exists, so there is nothing to
    acknowledge."""


class CheckpointStorageLocation(abc.ABC):
    """Where one checkpoint or savepoint is written (Flink's ``CheckpointStorageLocation``).

    Picklable: it travels to the tasks with the trigger. ``write_operator_subtask_state`` runs
    in the task's process, off its task thread; ``finalize`` and ``dispose`` run in the
    JobMaster.
    """

    @property
    @abc.abstractmethod
    def location_reference(self) -> Optional[str]:
        """The location's path or URL, ``None`` for memory (Flink's
        ``CheckpointStorageLocationReference``)."""

    @abc.abstractmethod
    def write_operator_subtask_state(self, operator_id: str, subtask_index: int,
                                     state: OperatorSubtaskState,
                                     operator_uid: Optional[str] = None) -> OperatorSubtaskStateHandle:
        """Store one operator subtask's state and return the handle that reads it back.

        :param operator_id: the operator's id, 32 hex digits.
        :param subtask_index: the writing subtask.
        :param operator_uid: the operator's uid when the user set one (written with the state,
            so that a reader can find state by uid).
        :raises OSError: if the storage cannot be written.
        """

    @abc.abstractmethod
    def finalize(self, metadata: CheckpointMetadata) -> Optional[str]:
        """Write the metadata that makes the checkpoint complete and restorable; returns its
        external pointer (the checkpoint directory), ``None`` for memory.

        :raises OSError: if the metadata cannot be written (the checkpoint then fails).
        """

    @abc.abstractmethod
    def dispose(self) -> None:
        """Delete what was written here (an aborted or subsumed checkpoint); idempotent. Safe
        while subtasks still write into it: what they write after it is removed by the writers
        themselves (:class:`CheckpointLocationDisposedError`), so nothing is left behind."""


class CheckpointStorage(abc.ABC):
    """Creates the locations of one job's checkpoints and savepoints and resolves pointers to
    completed ones (Flink's ``CheckpointStorageAccess``)."""

    @abc.abstractmethod
    def initialize_location_for_checkpoint(self, checkpoint_id: int) -> CheckpointStorageLocation:
        """The location of checkpoint ``checkpoint_id`` of this job.

        :raises OSError: if it cannot be created.
        """

    @abc.abstractmethod
    def initialize_location_for_savepoint(self, checkpoint_id: int,
                                          target_directory: Optional[str]) -> CheckpointStorageLocation:
        """The location of a savepoint taken as checkpoint ``checkpoint_id``, under
        ``target_directory`` (or the configured savepoint directory when ``None``).

        :raises ValueError: if neither names a directory.
        :raises OSError: if it cannot be created.
        """

    @abc.abstractmethod
    def resolve_checkpoint(self, pointer: str) -> CheckpointMetadata:
        """The metadata of the completed checkpoint or savepoint at ``pointer`` (its directory
        or its metadata file).

        :raises FileNotFoundError: if there is no completed snapshot there.
        :raises ValueError: if its format is newer than this Rill reads.
        """
