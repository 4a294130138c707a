"""State backend setting: Flink's ``StateBackendOptions.STATE_BACKEND`` (``state.backend.type``).

Rill has two keyed state backends: the heap one ('hashmap', Flink's ``HashMapStateBackend``)
and the RocksDB one ('rocksdb', Flink's ``EmbeddedRocksDBStateBackend``, on the optional
``rocksdict`` package: the ``rocksdb`` extra); Flink's 'forst' is refused with the reason.
"""

from __future__ import annotations

from rill.common.configuration import ConfigOption, Configuration
from rill.common.option_parsing import get_str

__all__ = ["StateBackendOptions", "validate_state_backend"]

#: Flink's other backends, and why Rill has none of them yet
_NOT_BUILT = {"forst": "the ForSt disaggregated state backend is not built in Rill"}


class StateBackendOptions:
    """The state backend ``ConfigOption``, under Flink's constant name."""

    STATE_BACKEND = ConfigOption(
        "state.backend.type", "hashmap",
        "The keyed state backend: 'hashmap' (state in the task's memory) or 'rocksdb' (state in an "
        "embedded RocksDB on local disk).",
        ("state.backend",))


def validate_state_backend(conf: Configuration) -> str:
    """The configured backend's name ('hashmap' or 'rocksdb').

    :raises NotImplementedError: for 'forst', naming what is missing.
    :raises ValueError: naming the key and value, for an unknown name.
    """
    key = StateBackendOptions.STATE_BACKEND.key
    name = (get_str(conf, StateBackendOptions.STATE_BACKEND) or "hashmap").strip().lower()
    if name in ("hashmap", "rocksdb"):
        return name
    if name in _NOT_BUILT:
        raise NotImplementedError(f"'{key}: {name}': {_NOT_BUILT[name]}; use 'hashmap' or 'rocksdb'")
    raise ValueError(f"Invalid value {name!r} for '{key}': unknown state backend; accepted: 'hashmap', "
                     f"'rocksdb' (Flink's 'forst' is not built in Rill)")
