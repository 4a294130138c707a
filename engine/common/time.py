"""Durations and window sizes, with PyFlink's names (``pyflink.common.time``).

``Duration`` (Java's ``java.time.Duration`` as PyFlink wraps it) is what
:class:`~rill.common.watermark_strategy.WatermarkStrategy` takes for out-of-orderness and
idleness; ``Time`` (Flink's ``org.apache.flink.streaming.api.windowing.time.Time``) is what
window assigners take. Both are immutable values measured in whole milliseconds, the unit of
Rill's event time and processing time.

As in Java, a ``Duration`` or ``Time`` may be negative or zero; the APIs that consume them
decide which values they accept (``WatermarkStrategy.for_bounded_out_of_orderness`` rejects a
negative duration with a ``ValueError``).
"""

from __future__ import annotations

import datetime

import functools
from typing import Any

__all__ = [
    "to_milliseconds","Duration", "Time", "Instant"]

_MS_PER_SECOND = 1000
_MS_PER_MINUTE = 60 * _MS_PER_SECOND
_MS_PER_HOUR = 60 * _MS_PER_MINUTE
_MS_PER_DAY = 24 * _MS_PER_HOUR


def _whole_ms(amount: Any, factor: int, what: str, unit: str) -> int:
    """``amount * factor`` as an int; rejects bools, non-numbers and fractions of a millisecond."""
    if isinstance(amount, bool) or not isinstance(amount, (int, float)):
        raise TypeError(
            f"{what} of {unit} needs an int, got {amount!r} ({type(amount).__name__})"
        )
    ms = amount * factor
    if isinstance(ms, float):
        if ms != ms or ms in (float("inf"), float("-inf")) or ms != int(ms):
            raise ValueError(
                f"{what}({amount!r}) is not a whole number of milliseconds; "
                f"Rill measures time in int milliseconds"
            )
        ms = int(ms)
    return ms


@functools.total_ordering
class _Millis:
    """Shared behaviour: an immutable, hashable, ordered amount of milliseconds."""

    __slots__ = ("_ms",)

    def __init__(self, milliseconds: int):
        if isinstance(milliseconds, bool) or not isinstance(milliseconds, int):
            raise TypeError(
                f"{type(self).__name__} needs an int of milliseconds, got {milliseconds!r}"
            )
        object.__setattr__(self, "_ms", milliseconds)

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is immutable")

    def to_milliseconds(self) -> int:
        """The amount in milliseconds (an int)."""
        return self._ms

    def is_negative(self) -> bool:
        return self._ms < 0

    def is_zero(self) -> bool:
        return self._ms == 0

    def __eq__(self, other):
        if type(other) is type(self):
            return self._ms == other._ms
        return NotImplemented

    def __lt__(self, other):
        if type(other) is type(self):
            return self._ms < other._ms
        return NotImplemented

    def __hash__(self):
        return hash((type(self).__name__, self._ms))

    def __reduce__(self):
        return (type(self), (self._ms,))


class Duration(_Millis):
    """An amount of time (PyFlink's ``Duration``), in whole milliseconds.

    Build one with the factory methods: ``Duration.of_seconds(5)``, ``Duration.of_millis(250)``.
    """

    __slots__ = ()

    @staticmethod
    def of_millis(millis: int) -> "Duration":
        return Duration(_whole_ms(millis, 1, "Duration.of_millis", "milliseconds"))

    @staticmethod
    def of_seconds(seconds: int) -> "Duration":
        return Duration(_whole_ms(seconds, _MS_PER_SECOND, "Duration.of_seconds", "seconds"))

    @staticmethod
    def of_minutes(minutes: int) -> "Duration":
        return Duration(_whole_ms(minutes, _MS_PER_MINUTE, "Duration.of_minutes", "minutes"))

    @staticmethod
    def of_hours(hours: int) -> "Duration":
        return Duration(_whole_ms(hours, _MS_PER_HOUR, "Duration.of_hours", "hours"))

    @staticmethod
    def of_days(days: int) -> "Duration":
        return Duration(_whole_ms(days, _MS_PER_DAY, "Duration.of_days", "days"))

    @staticmethod
    def zero() -> "Duration":
        return Duration(0)

    def __repr__(self):
        return f"Duration.of_millis({self._ms})"

    def to_seconds(self) -> int:
        """Whole seconds, floored like Java's ``Duration.getSeconds`` (``-1 ms`` is ``-1``)."""
        return self._ms // _MS_PER_SECOND


class Time(_Millis):
    """A window size or gap (Flink's windowing ``Time``), in whole milliseconds.

    Build one with the factory methods: ``Time.seconds(10)``, ``Time.milliseconds(500)``.
    """

    __slots__ = ()

    @staticmethod
    def milliseconds(milliseconds: int) -> "Time":
        return Time(_whole_ms(milliseconds, 1, "Time.milliseconds", "milliseconds"))

    @staticmethod
    def seconds(seconds: int) -> "Time":
        return Time(_whole_ms(seconds, _MS_PER_SECOND, "Time.seconds", "seconds"))

    @staticmethod
    def minutes(minutes: int) -> "Time":
        return Time(_whole_ms(minutes, _MS_PER_MINUTE, "Time.minutes", "minutes"))

    @staticmethod
    def hours(hours: int) -> "Time":
        return Time(_whole_ms(hours, _MS_PER_HOUR, "Time.hours", "hours"))

    @staticmethod
    def days(days: int) -> "Time":
        return Time(_whole_ms(days, _MS_PER_DAY, "Time.days", "days"))

    def __repr__(self):
        return f"Time.milliseconds({self._ms})"


def to_milliseconds(value: Any, what: str) -> int:
    """``value`` as an ``int`` number of milliseconds.

    Accepts an ``int`` (ms), a ``datetime.timedelta`` (whole ms), or an object with
    ``to_milliseconds()`` (PyFlink's ``Time`` and ``Duration``).

    :param what: names the parameter in errors, e.g. ``"TumblingEventTimeWindows size"``.
    :raises TypeError: for anything else (``bool`` and ``float`` included); the message names
        ``what`` and the value.
    """
    if type(value) is int:
        return value
    if isinstance(value, datetime.timedelta):
        return (value.days * 86_400_000) + (value.seconds * 1000) + value.microseconds // 1000
    to_ms = getattr(value, "to_milliseconds", None)
    if callable(to_ms):
        ms = to_ms()
        if type(ms) is int:
            return ms
        raise TypeError(f"{what}: {value!r}.to_milliseconds() returned {ms!r}, not an int")
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    raise TypeError(
        f"{what} must be an int number of milliseconds, a datetime.timedelta or an object with "
        f"to_milliseconds(), got {value!r} of type {type(value).__name__}"
    )


class Instant:
    """A point on the time line: ``seconds`` since the epoch and ``nanos`` (0..999,999,999)
    within the second (Java's ``java.time.Instant``; PyFlink's ``Instant``, which PyFlink
    uses as the value of ``Types.INSTANT()``; Rill's checkpoint columns take an aware
    ``datetime`` for INSTANT, see ``rill.state.checkpoint.arrow_types``). Equal when both parts
    are; ordered; hashable.

    :raises ValueError: if ``nanos`` is outside 0..999,999,999 or a part is not an int.
    """

    __slots__ = ("seconds", "nanos")

    def __init__(self, seconds: int, nanos: int):
        if isinstance(seconds, bool) or not isinstance(seconds, int) or isinstance(nanos, bool) \
                or not isinstance(nanos, int) or not 0 <= nanos < 1_000_000_000:
            raise ValueError(f"Instant: seconds must be an int and nanos an int in 0..999999999, "
                             f"got {seconds!r}, {nanos!r}")
        self.seconds = seconds
        self.nanos = nanos

    def to_epoch_milli(self) -> int:
        """Epoch ms, rounded down (toward the past, as Java's ``toEpochMilli``)."""
        return self.seconds * 1000 + self.nanos // 1_000_000

    @staticmethod
    def of_epoch_milli(epoch_milli: int) -> "Instant":
        """The instant ``epoch_milli`` ms after the epoch (negative: before)."""
        return Instant(epoch_milli // 1000, epoch_milli % 1000 * 1_000_000)

    def __eq__(self, other) -> bool:
        return isinstance(other, Instant) and (self.seconds, self.nanos) == (other.seconds, other.nanos)

    def __lt__(self, other: "Instant") -> bool:
        if not isinstance(other, Instant):
            return NotImplemented
        return (self.seconds, self.nanos) < (other.seconds, other.nanos)

    def __hash__(self) -> int:
        return hash((self.seconds, self.nanos))

    def __reduce__(self):
        return Instant, (self.seconds, self.nanos)

    def __repr__(self) -> str:
        return f"Instant<{self.seconds}, {self.nanos}>"
