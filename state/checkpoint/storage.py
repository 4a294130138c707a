"""Where snapshots go (Flink's ``CheckpointStorage`` / ``CheckpointStorageAccess`` and
``CheckpointStorageLocation``, ``org.apache.flink.runtime.state``).

The JobMaster's checkpoint coordinator asks its :class:`CheckpointStorage` for one
:class:`CheckpointStorageLocation` per checkpoint or savepoint and sends it (it is picklable)
with the trigger to the tasks; each task writes its operators' states into it *off the task
thread* (the asynchronous part of a snapshot) and acknowledges with the handles it got back;
when every task acknowledged, the coordinator finalizes the location with the checkpoint's
metadata, or disposes of it when the checkpoint is aborted.

Two storages, picked by :func:`create_checkpoint_storage` from ``execution.checkpointing.dir``:

- no directory: :class:`MemoryCheckpointStorage` (Flink's ``JobManagerCheckpointStorage``):
  handles carry the records to the JobMaster; nothing outlives the job;
- a path or URL: the file system storage, which writes Parquet files under
  ``<dir>/<job-id>/chk-<n>/`` (and ``savepoint-<short-id>-<n>/``) and a metadata file there.
"""

from __future__ import annotations

import abc
from typing import Optional

from rill.state.checkpoint.metadata import (
    CheckpointMetadata,
    InMemoryOperatorSubtaskStateHandle,
    OperatorSubtaskStateHandle,
)
from rill.state.checkpoint.operator_subtask_state import OperatorSubtaskState

__all__ = [
    "CheckpointStorage",
    "CheckpointStorageLocation",
    "MemoryCheckpointStorage",
    "MemoryCheckpointStorageLocation",
    "create_checkpoint_storage",
]


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
        """Delete what was written here (an aborted or subsumed checkpoint); idempotent."""


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


class MemoryCheckpointStorageLocation(CheckpointStorageLocation):
    """Keeps states in their handles (no bytes written anywhere)."""

    __slots__ = ()

    @property
    def location_reference(self) -> Optional[str]:
        return None

    def write_operator_subtask_state(self, operator_id: str, subtask_index: int,
                                     state: OperatorSubtaskState,
                                     operator_uid: Optional[str] = None) -> OperatorSubtaskStateHandle:
        return InMemoryOperatorSubtaskStateHandle(state)

    def finalize(self, metadata: CheckpointMetadata) -> Optional[str]:
        return None

    def dispose(self) -> None:
        pass

    def __reduce__(self):
        return (MemoryCheckpointStorageLocation, ())


class MemoryCheckpointStorage(CheckpointStorage):
    """Flink's ``JobManagerCheckpointStorage``: checkpoints live in the JobMaster's memory (the
    completed checkpoint store) and end with the job; savepoints need a directory and the file
    system storage."""

    def initialize_location_for_checkpoint(self, checkpoint_id: int) -> CheckpointStorageLocation:
        return MemoryCheckpointStorageLocation()

    def initialize_location_for_savepoint(self, checkpoint_id: int,
                                          target_directory: Optional[str]) -> CheckpointStorageLocation:
        return _file_system_storage(target_directory, "").initialize_location_for_savepoint(
            checkpoint_id, target_directory)

    def resolve_checkpoint(self, pointer: str) -> CheckpointMetadata:
        return _file_system_storage(pointer, "").resolve_checkpoint(pointer)


def _file_system_storage(checkpoint_dir: Optional[str], job_id: str,
                         savepoint_dir: Optional[str] = None) -> CheckpointStorage:
    # Filled by the Parquet layout (rill.state.checkpoint.filesystem) when it lands.
    raise NotImplementedError(
        "Writing snapshots to a directory (execution.checkpointing.dir, savepoints) is not "
        "built yet: only in-memory checkpoints are available")


def create_checkpoint_storage(checkpoint_dir: Optional[str], job_id: str,
                              savepoint_dir: Optional[str] = None) -> CheckpointStorage:
    """The storage of job ``job_id``'s snapshots: in memory when ``checkpoint_dir`` is
    ``None``, else files under ``checkpoint_dir`` (a path, ``file://`` URL or any fsspec URL).

    :param savepoint_dir: the default target of savepoints (``execution.checkpointing.savepoint-dir``).
    :raises NotImplementedError: for a directory, until the file system storage exists.
    """
    if checkpoint_dir is None:
        return MemoryCheckpointStorage()
    return _file_system_storage(checkpoint_dir, job_id, savepoint_dir)
