"""Checkpoint storages: where a job's checkpoints go (PyFlink's
``pyflink.datastream.checkpoint_storage``; Flink's ``CheckpointStorage``,
``JobManagerCheckpointStorage``, ``FileSystemCheckpointStorage``, FLIP-142).

A storage is the checkpoint-storage keys it stands for (:meth:`CheckpointStorage.to_configuration`):
``execution.checkpointing.storage`` ('jobmanager' or 'filesystem') and
``execution.checkpointing.dir``. PyFlink 2.x sets them in the job's Configuration; Rill also
keeps Flink 1.x's ``env.get_checkpoint_config().set_checkpoint_storage(storage)``, which writes
them. The JobMaster builds the storage from the keys
(:func:`rill.state.checkpoint.storage.create_checkpoint_storage`): in memory, or Parquet
files under ``<dir>/<job id>/chk-<n>``.

Example::

    env.get_checkpoint_config().set_checkpoint_storage(FileSystemCheckpointStorage("file:///ckpts"))
"""

from __future__ import annotations

import abc
from typing import Any, Dict, Optional

from rill.common.checkpointing_options import CheckpointingOptions
from rill.common.configuration import Configuration

__all__ = ["CheckpointStorage", "JobManagerCheckpointStorage", "FileSystemCheckpointStorage",
           "CustomCheckpointStorage"]

_STORAGE_KEY = CheckpointingOptions.CHECKPOINT_STORAGE.key
_DIR_KEY = CheckpointingOptions.CHECKPOINTS_DIRECTORY.key
_SAVEPOINT_KEY = CheckpointingOptions.SAVEPOINT_DIRECTORY.key


class CheckpointStorage(abc.ABC):
    """Where checkpoints are stored (Flink's ``CheckpointStorage``)."""

    @abc.abstractmethod
    def _keys(self) -> Dict[str, str]:
        """The configuration keys this storage stands for."""

    def to_configuration(self) -> Configuration:
        """This storage's keys as a ``Configuration`` (what setting it writes into a job's)."""
        conf = Configuration()
        for key, value in self._keys().items():
            conf.set_string(key, value)
        return conf

    @staticmethod
    def from_configuration(configuration: Configuration) -> "CheckpointStorage":
        """The storage ``configuration``'s keys choose (Flink's ``CheckpointStorageLoader``).

        :raises ValueError: naming the key, as :class:`CheckpointingOptions` does.
        """
        options = CheckpointingOptions.from_configuration(configuration)
        directory, savepoints = options.checkpoint_dir, options.savepoint_dir
        if directory is None:
            return JobManagerCheckpointStorage()
        return FileSystemCheckpointStorage(directory, savepoint_path=savepoints)

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._keys() == other._keys()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), tuple(sorted(self._keys().items()))))

    def __str__(self) -> str:
        return f"{type(self).__name__}({self._keys()})"


class JobManagerCheckpointStorage(CheckpointStorage):
    """Checkpoints in the JobManager's memory (Rill's ``MemoryCheckpointStorage``): they end with
    the job; savepoints still go to a directory.

    :param checkpoint_path: Flink writes checkpoint *metadata* there while the state stays in
        memory; Rill has no such split, so it must be ``None``.
    :param max_state_size: bytes; Flink's limit of one state's serialized size (default
        :data:`DEFAULT_MAX_STATE_SIZE`, 5 MiB). Kept and returned; Rill does not enforce it.
    :raises NotImplementedError: for a ``checkpoint_path`` (metadata-only files are not built).
    :raises ValueError: for a ``max_state_size`` that is not a positive int.
    """

    DEFAULT_MAX_STATE_SIZE = 5 * 1024 * 1024

    def __init__(self, checkpoint_path: Optional[str] = None, max_state_size: Optional[int] = None,
                 j_jobmanager_checkpoint_storage: Any = None) -> None:
        if checkpoint_path is not None:
            raise NotImplementedError(
                f"JobManagerCheckpointStorage(checkpoint_path={checkpoint_path!r}): checkpoint metadata in a "
                "directory with the state in memory is not built in Rill; use FileSystemCheckpointStorage")
        if j_jobmanager_checkpoint_storage is not None:
            raise ValueError("JobManagerCheckpointStorage: j_jobmanager_checkpoint_storage is PyFlink's Java "
                             "object and has no meaning in Rill; keep it None")
        size = self.DEFAULT_MAX_STATE_SIZE if max_state_size is None else max_state_size
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ValueError(f"JobManagerCheckpointStorage: max_state_size must be a positive int of bytes, "
                             f"got {max_state_size!r}")
        self._max_state_size = size

    def _keys(self) -> Dict[str, str]:
        return {_STORAGE_KEY: "jobmanager"}

    def get_checkpoint_path(self) -> Optional[str]:
        """Always ``None``: no checkpoint directory."""
        return None

    def get_max_state_size(self) -> int:
        """Bytes (see the class docstring)."""
        return self._max_state_size

    def get_savepoint_path(self) -> Optional[str]:
        """Always ``None``: the savepoint directory comes from the Configuration."""
        return None


class FileSystemCheckpointStorage(CheckpointStorage):
    """Checkpoints as files under ``checkpoint_path`` (a path, ``file://`` or fsspec URL): each
    in ``<checkpoint_path>/<job id>/chk-<n>/`` (Flink's layout; Rill writes Parquet files and a
    ``_metadata`` file there).

    :param checkpoint_path: the base directory; required.
    :param file_state_size_threshold: bytes below which Flink inlines state in the metadata
        (-1/None: the default, 20 KiB). Kept and returned; Rill writes every state to files.
    :param write_buffer_size: bytes of the write buffer (-1: the default, 4 KiB). Kept and
        returned; Rill's Parquet writer sizes its own buffers.
    :param savepoint_path: Rill's addition: the default savepoint directory it also sets.
    :raises ValueError: for a missing or empty ``checkpoint_path``, or a negative size other
        than -1.
    """

    MAX_FILE_STATE_THRESHOLD = 1024 * 1024
    DEFAULT_FILE_STATE_THRESHOLD = 20 * 1024
    DEFAULT_WRITE_BUFFER_SIZE = 4 * 1024

    def __init__(self, checkpoint_path: Optional[str] = None, file_state_size_threshold: Optional[int] = None,
                 write_buffer_size: int = -1, j_filesystem_checkpoint_storage: Any = None,
                 savepoint_path: Optional[str] = None) -> None:
        if j_filesystem_checkpoint_storage is not None:
            raise ValueError("FileSystemCheckpointStorage: j_filesystem_checkpoint_storage is PyFlink's Java "
                             "object and has no meaning in Rill; keep it None")
        if checkpoint_path is None or not str(checkpoint_path).strip():
            raise ValueError(f"FileSystemCheckpointStorage: checkpoint_path must not be None or empty, "
                             f"got {checkpoint_path!r}")
        threshold = -1 if file_state_size_threshold is None else file_state_size_threshold
        for name, value, limit in (("file_state_size_threshold", threshold, self.MAX_FILE_STATE_THRESHOLD),
                                   ("write_buffer_size", write_buffer_size, None)):
            if isinstance(value, bool) or not isinstance(value, int) or value < -1 or \
                    (limit is not None and value > limit):
                bound = f" and at most {limit}" if limit is not None else ""
                raise ValueError(f"FileSystemCheckpointStorage: {name} must be -1 (the default) or an int of "
                                 f"bytes >= 0{bound}, got {value!r}")
        self._path = str(checkpoint_path)
        self._savepoint_path = savepoint_path
        self._threshold = self.DEFAULT_FILE_STATE_THRESHOLD if threshold == -1 else threshold
        self._write_buffer_size = self.DEFAULT_WRITE_BUFFER_SIZE if write_buffer_size == -1 else write_buffer_size

    def _keys(self) -> Dict[str, str]:
        keys = {_STORAGE_KEY: "filesystem", _DIR_KEY: self._path}
        if self._savepoint_path is not None:
            keys[_SAVEPOINT_KEY] = self._savepoint_path
        return keys

    def get_checkpoint_path(self) -> str:
        """The base directory; each job's checkpoints are in ``<it>/<job id>/``."""
        return self._path

    def get_savepoint_path(self) -> Optional[str]:
        return self._savepoint_path

    def get_min_file_size_threshold(self) -> int:
        """Bytes (see the class docstring)."""
        return self._threshold

    def get_write_buffer_size(self) -> int:
        """Bytes (see the class docstring)."""
        return self._write_buffer_size


class CustomCheckpointStorage(CheckpointStorage):
    """A storage given as its configuration keys (PyFlink wraps a Java storage object here; Rill's
    storages are chosen by keys, so a custom one is a ``Configuration`` or ``dict`` of the
    ``execution.checkpointing.*`` storage keys, e.g. read from a cluster's config file).

    :raises TypeError: for anything but a ``Configuration`` or ``dict``.
    :raises ValueError: naming the key, for keys that choose no valid storage (checked at once).
    """

    def __init__(self, j_custom_checkpoint_storage: Any) -> None:
        if isinstance(j_custom_checkpoint_storage, Configuration):
            keys = j_custom_checkpoint_storage.to_dict()
        elif isinstance(j_custom_checkpoint_storage, dict):
            keys = {str(k): str(v) for k, v in j_custom_checkpoint_storage.items()}
        else:
            raise TypeError("CustomCheckpointStorage expects a Configuration or dict of checkpoint storage keys "
                            f"('{_STORAGE_KEY}', '{_DIR_KEY}'), got {j_custom_checkpoint_storage!r}")
        options = (CheckpointingOptions.CHECKPOINT_STORAGE, CheckpointingOptions.CHECKPOINTS_DIRECTORY,
                   CheckpointingOptions.SAVEPOINT_DIRECTORY)
        allowed = {k for o in options for k in (o.key, *o.deprecated_keys)}
        unknown = sorted(set(keys) - allowed)
        if unknown:
            raise ValueError(f"CustomCheckpointStorage: {unknown} are not checkpoint storage keys; "
                             f"allowed: {sorted(allowed)}")
        self._custom_keys = keys
        CheckpointStorage.from_configuration(self.to_configuration())  # validates now, not at submission

    def _keys(self) -> Dict[str, str]:
        return dict(self._custom_keys)
