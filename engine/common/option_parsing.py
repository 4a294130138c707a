"""Typed reads of a ``ConfigOption`` from a ``Configuration``, for typed option groups
(``CheckpointingOptions``, restart strategies) that parse every value once.

A ``Configuration`` holds what was put in it: Python values set by the program, strings from
the config file, ``RILL_*`` variables or ``-D`` flags. These readers accept both forms, read
through the option's deprecated keys, and raise one kind of error, a ``ValueError`` that names
the key, the value and the rule broken (Flink's ``ConfigurationUtils`` conversions).
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Optional, Type, TypeVar

from rill.common.configuration import ConfigOption, Configuration
from rill.common.time_utils import duration_to_milliseconds

__all__ = ["get_bool", "get_duration_ms", "get_enum", "get_float", "get_int", "get_str"]

E = TypeVar("E", bound=Enum)


def _invalid(option: ConfigOption, value: Any, rule: str) -> ValueError:
    return ValueError(f"Invalid value {value!r} for '{option.key}': {rule}")


def get_duration_ms(conf: Configuration, option: ConfigOption) -> Optional[int]:
    """The option as int ms (``"10 min"``, ``600000``, a ``Duration``), or its default (int ms
    or ``None``). :raises ValueError: naming the key and value, for a non-duration."""
    raw = conf.get_raw(option)
    return option.default if raw is None else duration_to_milliseconds(raw, option.key)


def get_int(conf: Configuration, option: ConfigOption) -> Optional[int]:
    """The option as an int (an int or a decimal string), or its default.
    :raises ValueError: naming the key and value, for anything else (bools included)."""
    raw = conf.get_raw(option)
    if raw is None:
        return option.default
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    if isinstance(raw, str):
        try:
            return int(raw.strip())
        except ValueError:
            pass
    raise _invalid(option, raw, "expected an integer")


def get_float(conf: Configuration, option: ConfigOption) -> Optional[float]:
    """The option as a float (a number or a numeric string), or its default.
    :raises ValueError: naming the key and value, for anything else (bools included)."""
    raw = conf.get_raw(option)
    if raw is None:
        return option.default
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return float(raw)
    if isinstance(raw, str):
        try:
            return float(raw.strip())
        except ValueError:
            pass
    raise _invalid(option, raw, "expected a number")


def get_bool(conf: Configuration, option: ConfigOption) -> Optional[bool]:
    """The option as a bool (a bool, or ``"true"``/``"false"`` in any case, as Flink parses
    booleans), or its default. :raises ValueError: naming the key and value, for anything else."""
    raw = conf.get_raw(option)
    if raw is None:
        return option.default
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise _invalid(option, raw, "expected true or false")


def get_enum(conf: Configuration, option: ConfigOption, enum_type: Type[E]) -> Optional[E]:
    """The option as a member of ``enum_type`` (a member, or its name in any case, as Flink
    parses enums), or its default. :raises ValueError: naming the key, the value and the names
    accepted."""
    raw = conf.get_raw(option)
    if raw is None:
        return option.default
    if isinstance(raw, enum_type):
        return raw
    if isinstance(raw, str):
        member = enum_type.__members__.get(raw.strip().upper())
        if member is not None:
            return member
    raise _invalid(option, raw, f"expected one of {', '.join(enum_type.__members__)}")


def get_str(conf: Configuration, option: ConfigOption) -> Optional[str]:
    """The option as a string, or its default; an empty or blank string counts as unset."""
    raw = conf.get_raw(option)
    if raw is None or not str(raw).strip():
        return option.default
    return str(raw).strip()
