"""State backends: how a job's keyed and operator state is held while it runs (PyFlink's
``pyflink.datastream.state_backend``; Flink's ``StateBackend``, ``HashMapStateBackend``, FLIP-142).

A backend is the ``state.backend.type`` key it stands for; ``env.set_state_backend(backend)``
writes it into the job's Configuration (PyFlink 2.x sets the key directly; both work).
Where checkpoints go is the checkpoint storage's business
(:mod:`rill.datastream.checkpoint_storage`).

``EmbeddedRocksDBStateBackend`` (``state.backend.type: rocksdb``) keeps keyed state in an
embedded RocksDB per keyed operator and subtask (:mod:`rill.state.rocksdb`); it needs the
optional ``rocksdict`` package (``pip install rill[rocksdb]``), imported when a task builds it.
"""

from __future__ import annotations

import abc
from typing import Any, Dict, List

from rill.common.configuration import Configuration
from rill.common.state_backend_options import StateBackendOptions, validate_state_backend
from rill.state.rocksdb_options import (
    INCREMENTAL_CHECKPOINTS,
    LOCAL_DIRECTORIES,
    PREDEFINED_OPTIONS,
    PredefinedOptions,
    RocksDBSettings,
)

__all__ = ["StateBackend", "HashMapStateBackend", "EmbeddedRocksDBStateBackend", "PredefinedOptions",
           "CustomStateBackend"]

_KEY = StateBackendOptions.STATE_BACKEND.key


class StateBackend(abc.ABC):
    """How state is held in the tasks (Flink's ``StateBackend``)."""

    @abc.abstractmethod
    def _keys(self) -> Dict[str, str]:
        """The configuration keys this backend stands for."""

    def to_configuration(self) -> Configuration:
        """This backend's keys as a ``Configuration`` (what ``set_state_backend`` writes)."""
        return Configuration.from_dict(self._keys())

    @staticmethod
    def from_configuration(configuration: Configuration) -> "StateBackend":
        """The backend ``configuration`` chooses (``HashMapStateBackend`` by default).

        :raises NotImplementedError/ValueError: as
            :func:`~rill.common.state_backend_options.validate_state_backend`.
        """
        if validate_state_backend(configuration) == "rocksdb":
            backend = EmbeddedRocksDBStateBackend()
            backend._settings = {k: v for k, v in configuration.to_dict().items()
                                 if k.startswith("state.backend.rocksdb.") or k == INCREMENTAL_CHECKPOINTS}
            RocksDBSettings.from_dict(backend._settings)
            return backend
        return HashMapStateBackend()

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._keys() == other._keys()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), tuple(sorted(self._keys().items()))))

    def __str__(self) -> str:
        return f"{type(self).__name__}({self._keys()})"


class HashMapStateBackend(StateBackend):
    """Working state as Python objects in the task's memory (Rill's heap keyed state backend;
    Flink's ``HashMapStateBackend``); checkpointed to the configured checkpoint storage.

    :raises ValueError: for a ``j_hashmap_state_backend`` (PyFlink's Java object).
    """

    def __init__(self, j_hashmap_state_backend: Any = None) -> None:
        if j_hashmap_state_backend is not None:
            raise ValueError("HashMapStateBackend: j_hashmap_state_backend is PyFlink's Java object and has no "
                             "meaning in Rill; keep it None")

    def _keys(self) -> Dict[str, str]:
        return {_KEY: "hashmap"}


class EmbeddedRocksDBStateBackend(StateBackend):
    """Working state in an embedded RocksDB on the task's local disk, one instance per keyed
    operator and subtask, for state larger than memory (Flink's ``EmbeddedRocksDBStateBackend``;
    ``state.backend.type: rocksdb``). Checkpoints are full snapshots in the same files as the
    hashmap backend's, so a job can switch backends across a restore.

    :param enable_incremental_checkpointing: ``None``/``False``; ``True`` raises.
    :param j_embedded_rocks_db_state_backend: PyFlink's Java object; must be ``None``.
    :raises NotImplementedError: for incremental checkpointing (not built in Rill).
    :raises ValueError: for a ``j_embedded_rocks_db_state_backend``.
    """

    def __init__(self, enable_incremental_checkpointing: Any = None,
                 j_embedded_rocks_db_state_backend: Any = None) -> None:
        if j_embedded_rocks_db_state_backend is not None:
            raise ValueError("EmbeddedRocksDBStateBackend: j_embedded_rocks_db_state_backend is PyFlink's Java "
                             "object and has no meaning in Rill; keep it None")
        if enable_incremental_checkpointing:
            raise NotImplementedError("EmbeddedRocksDBStateBackend: incremental checkpoints are not built in "
                                      "Rill; snapshots are full (leave enable_incremental_checkpointing unset)")
        self._settings: Dict[str, str] = {}

    def _keys(self) -> Dict[str, str]:
        return {_KEY: "rocksdb", **self._settings}

    def set_db_storage_paths(self, *paths: str) -> None:
        """The local directories the RocksDB instances go under (``state.backend.rocksdb.localdir``);
        none: the system's temp directory.

        :raises ValueError: for a path that is not an absolute local path (as Flink).
        """
        for path in paths:
            if not isinstance(path, str) or not path.startswith("/"):
                raise ValueError(f"EmbeddedRocksDBStateBackend.set_db_storage_paths: {path!r} is not an absolute "
                                 f"local path")
        if paths:
            self._settings[LOCAL_DIRECTORIES] = ",".join(paths)
        else:
            self._settings.pop(LOCAL_DIRECTORIES, None)

    def get_db_storage_paths(self) -> List[str]:
        """The configured local directories (empty: the system's temp directory)."""
        return list(RocksDBSettings.from_dict(self._settings).local_dirs) if LOCAL_DIRECTORIES in self._settings \
            else []

    def is_incremental_checkpoints_enabled(self) -> bool:
        """Always ``False``: Rill takes full snapshots."""
        return False

    def set_predefined_options(self, options: PredefinedOptions) -> None:
        """The tuning preset (``state.backend.rocksdb.predefined-options``).

        :raises TypeError: if ``options`` is not a ``PredefinedOptions``.
        """
        if not isinstance(options, PredefinedOptions):
            raise TypeError(f"EmbeddedRocksDBStateBackend.set_predefined_options needs a PredefinedOptions, "
                            f"got {options!r}")
        self._settings[PREDEFINED_OPTIONS] = options.name

    def get_predefined_options(self) -> PredefinedOptions:
        """The tuning preset (``PredefinedOptions.DEFAULT`` unless set)."""
        return RocksDBSettings.from_dict(self._settings).predefined_options

    def set_options(self, options_factory_class_name: str) -> None:
        """Flink's ``RocksDBOptionsFactory`` is a Java class.

        :raises NotImplementedError: always: custom options factories are not built in Rill
            (use :meth:`set_predefined_options`).
        """
        raise NotImplementedError("EmbeddedRocksDBStateBackend.set_options: RocksDB options factories are not "
                                  "built in Rill; use set_predefined_options")


class CustomStateBackend(StateBackend):
    """A backend given as its ``state.backend.type`` name (PyFlink wraps a Java backend object
    here; Rill's backends are chosen by that key): a ``str``, or a ``Configuration``/``dict``
    holding the key.

    :raises TypeError: for any other value.
    :raises NotImplementedError/ValueError: at once, for a backend Rill does not have.
    """

    def __init__(self, j_custom_state_backend: Any) -> None:
        if isinstance(j_custom_state_backend, str):
            name = j_custom_state_backend
        elif isinstance(j_custom_state_backend, Configuration):
            name = j_custom_state_backend.get_string(_KEY, None)
        elif isinstance(j_custom_state_backend, dict):
            name = j_custom_state_backend.get(_KEY)
        else:
            raise TypeError(f"CustomStateBackend expects a state backend name or a Configuration/dict with "
                            f"'{_KEY}', got {j_custom_state_backend!r}")
        conf = Configuration()
        conf.set_string(_KEY, str(name))
        self._name = validate_state_backend(conf)

    def _keys(self) -> Dict[str, str]:
        return {_KEY: self._name}
