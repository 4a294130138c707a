"""State backend setting: Flink's ``StateBackendOptions.STATE_BACKEND`` (``state.backend.type``).

Rill has one keyed state backend, the heap one (Flink's ``HashMapStateBackend``): 'hashmap'
is accepted, Flink's other names are refused with the reason.
"""

from __future__ import annotations

from rill.common.configuration import ConfigOption, Configuration
from rill.common.option_parsing import get_str

__all__ = ["StateBackendOptions", "validate_state_backend"]

#: Flink's other backends, and why Rill has none of them yet
_NOT_BUILT = {"rocksdb": "the RocksDB state backend (EmbeddedRocksDBStateBackend) is not built in Rill",
              "forst": "the ForSt disaggregated state backend is not built in Rill"}


class StateBackendOptions:
    """The state backend ``ConfigOption``, under Flink's constant name."""

    STATE_BACKEND = ConfigOption(
        "state.backend.type", "hashmap",
        "The keyed state backend: 'hashmap' (state in the task's memory), the only one Rill has.",
        ("state.backend",))


def validate_state_backend(conf: Configuration) -> str:
    """The configured backend's name ('hashmap').

    :raises NotImplementedError: for 'rocksdb' or 'forst', naming what is missing.
    :raises ValueError: naming the key and value, for an unknown name.
    """
    key = StateBackendOptions.STATE_BACKEND.key
    name = (get_str(conf, StateBackendOptions.STATE_BACKEND) or "hashmap").strip().lower()
    if name == "hashmap":
        return name
    if name in _NOT_BUILT:
        raise NotImplementedError(f"'{key}: {name}': {_NOT_BUILT[name]}; use 'hashmap'")
    raise ValueError(f"Invalid value {name!r} for '{key}': unknown state backend; accepted: 'hashmap' "
                     f"(Flink's 'rocksdb' and 'forst' are not built in Rill)")
