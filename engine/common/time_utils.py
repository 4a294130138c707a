"""Parsing durations written in configuration (Flink's ``TimeUtils.parseDuration``).

A duration is a whole number followed by an optional unit: ``"500"`` and ``"500 ms"`` are 500
ms, ``"10 min"`` is 600 000 ms, ``"1 h"`` is 3 600 000 ms. Units, case-insensitive, with or
without a space: ``ms``/``milli``/``millis``/``millisecond``/``milliseconds``,
``s``/``sec``/``secs``/``second``/``seconds``, ``m``/``min``/``minute``/``minutes``,
``h``/``hour``/``hours``, ``d``/``day``/``days``; ``ns`` and ``µs`` (``us``) forms as in Flink
when the amount is a whole number of milliseconds. Rill measures time in int milliseconds, so a
duration that is not a whole number of milliseconds (``"1500 us"``) is refused, where Java's
``Duration.toMillis`` would truncate it.
"""

from __future__ import annotations

import re
from typing import Any

from rill.common.time import to_milliseconds

__all__ = ["parse_duration", "duration_to_milliseconds"]

# Flink's TimeUtils.TimeUnit labels, and the nanoseconds of each unit
_UNITS = (
    (("ns", "nano", "nanos", "nanosecond", "nanoseconds"), 1),
    (("µs", "us", "micro", "micros", "microsecond", "microseconds"), 1_000),
    (("ms", "milli", "millis", "millisecond", "milliseconds"), 1_000_000),
    (("s", "sec", "secs", "second", "seconds"), 1_000_000_000),
    (("m", "min", "minute", "minutes"), 60 * 1_000_000_000),
    (("h", "hour", "hours"), 3600 * 1_000_000_000),
    (("d", "day", "days"), 86400 * 1_000_000_000),
)
_NANOS = {label: nanos for labels, nanos in _UNITS for label in labels}

_DURATION = re.compile(r"^(\d+)(.*)$")


def parse_duration(text: str) -> int:
    """``text`` (``"<number> [unit]"``, no unit = ms) as an int number of milliseconds.

    :raises ValueError: for an empty text, a text that does not start with a whole number
        (negative amounts included), an unknown unit, or an amount that is not a whole number of
        milliseconds; the message quotes ``text`` and, for units, lists the accepted ones.
    """
    trimmed = text.strip().lower()
    if not trimmed:
        raise ValueError("a duration must not be empty")
    m = _DURATION.match(trimmed)
    if m is None:
        raise ValueError(f"duration {text!r} does not start with a whole number")
    amount, unit = int(m.group(1)), m.group(2).strip()
    if not unit:
        return amount
    nanos = _NANOS.get(unit)
    if nanos is None:
        raise ValueError(f"duration {text!r} has unknown unit {unit!r}; accepted: ns, µs, ms, s, min, h, d "
                         f"(and their long forms)")
    total = amount * nanos
    if total % 1_000_000:
        raise ValueError(f"duration {text!r} is not a whole number of milliseconds")
    return total // 1_000_000


def duration_to_milliseconds(value: Any, key: str) -> int:
    """A configured duration as int ms: a string is parsed with :func:`parse_duration`; an int
    (ms), a ``datetime.timedelta`` or a ``Duration`` is converted by ``to_milliseconds``.

    :param key: the configuration key, named in errors.
    :raises ValueError: naming ``key`` and the value, for a value that is not a duration.
    """
    if isinstance(value, str):
        try:
            return parse_duration(value)
        except ValueError as e:
            raise ValueError(f"Invalid value {value!r} for '{key}': {e}") from None
    try:
        return to_milliseconds(value, f"'{key}'")
    except TypeError as e:
        raise ValueError(f"Invalid value {value!r} for '{key}': {e}") from None
