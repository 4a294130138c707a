"""State backends: how a job's keyed and operator state is held while it runs (PyFlink's
``pyflink.datastream.state_backend``; Flink's ``StateBackend``, ``HashMapStateBackend``, FLIP-142).

A backend is the ``state.backend.type`` key it stands for; ``env.set_state_backend(backend)``
writes it into the job's Configuration (PyFlink 2.x sets the key directly; both work).
Where checkpoints go is the checkpoint storage's business
(:mod:`rill.datastream.checkpoint_storage`).

``EmbeddedRocksDBStateBackend`` and ``PredefinedOptions`` are not here: Rill has no RocksDB
backend (``state.backend.type: rocksdb`` is refused at submission).
"""

from __future__ import annotations

import abc
from typing import Any, Dict

from rill.common.configuration import Configuration
from rill.common.state_backend_options import StateBackendOptions, validate_state_backend

__all__ = ["StateBackend", "HashMapStateBackend", "CustomStateBackend"]

_KEY = StateBackendOptions.STATE_BACKEND.key


class StateBackend(abc.ABC):
    """How state is held in the tasks (Flink's ``StateBackend``)."""

    @abc.abstractmethod
    def _keys(self) -> Dict[str, str]:
        """The configuration keys this backend stands for."""

    def to_configuration(self) -> Configuration:
        """This backend's keys as a ``Configuration`` (what ``set_state_backend`` writes)."""
        conf = Configuration()
        for key, value in self._keys().items():
            conf.set_string(key, value)
        return conf

    @staticmethod
    def from_configuration(configuration: Configuration) -> "StateBackend":
        """The backend ``configuration`` chooses (``HashMapStateBackend`` by default).

        :raises NotImplementedError/ValueError: as
            :func:`~rill.common.state_backend_options.validate_state_backend`.
        """
        validate_state_backend(configuration)
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
