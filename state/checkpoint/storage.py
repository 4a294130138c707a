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
- a path or URL: :class:`~rill.state.checkpoint.filesystem.FileSystemCheckpointStorage`, which
  writes Parquet files under ``<dir>/<job-id>/chk-<n>/`` (and savepoints under
  ``savepoint-<job-id[:6]>-<random>/``) and a ``_metadata`` file there.

The interfaces live in :mod:`rill.state.checkpoint.storage_api` and are re-exported here.
"""

from __future__ import annotations

from typing import Optional

from rill.state.checkpoint.filesystem import (
    FileSystemCheckpointStorage,
    resolve_checkpoint_pointer,
    savepoint_location,
)
from rill.state.checkpoint.metadata import (
    CheckpointMetadata,
    InMemoryOperatorSubtaskStateHandle,
    OperatorSubtaskStateHandle,
)
from rill.state.checkpoint.operator_subtask_state import OperatorSubtaskState
from rill.state.checkpoint.storage_api import CheckpointStorage, CheckpointStorageLocation

__all__ = [
    "CheckpointStorage",
    "CheckpointStorageLocation",
    "MemoryCheckpointStorage",
    "MemoryCheckpointStorageLocation",
    "create_checkpoint_storage",
]


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
    completed checkpoint store) and end with the job; savepoints need a directory and go to
    the file system (:func:`~rill.state.checkpoint.filesystem.savepoint_location`).

    :param job_id: the job's id (names savepoint directories).
    :param savepoint_dir: the default target of savepoints, or ``None``.
    """

    def __init__(self, job_id: str = "", savepoint_dir: Optional[str] = None) -> None:
        self.job_id = job_id
        self.savepoint_dir = savepoint_dir

    def initialize_location_for_checkpoint(self, checkpoint_id: int) -> CheckpointStorageLocation:
        return MemoryCheckpointStorageLocation()

    def initialize_location_for_savepoint(self, checkpoint_id: int,
                                          target_directory: Optional[str]) -> CheckpointStorageLocation:
        return savepoint_location(self.job_id, target_directory or self.savepoint_dir, checkpoint_id)

    def resolve_checkpoint(self, pointer: str) -> CheckpointMetadata:
        return resolve_checkpoint_pointer(pointer)


def create_checkpoint_storage(checkpoint_dir: Optional[str], job_id: str,
                              savepoint_dir: Optional[str] = None) -> CheckpointStorage:
    """The storage of job ``job_id``'s snapshots: in memory when ``checkpoint_dir`` is
    ``None``, else :class:`~rill.state.checkpoint.filesystem.FileSystemCheckpointStorage` under
    ``checkpoint_dir`` (a path, ``file://`` URL or any fsspec URL).

    :param savepoint_dir: the default target of savepoints (``execution.checkpointing.savepoint-dir``).
    :raises ValueError: for a directory and an empty ``job_id``.
    """
    if checkpoint_dir is None:
        return MemoryCheckpointStorage(job_id, savepoint_dir)
    return FileSystemCheckpointStorage(checkpoint_dir, job_id, savepoint_dir)
