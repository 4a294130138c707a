"""Windows: :class:`TimeWindow`, :class:`CountWindow`, :class:`GlobalWindow` (Flink's
``org.apache.flink.streaming.api.windowing.windows``; PyFlink's
``pyflink.datastream.window``), and the millisecond helpers the assigners, triggers and
evictors share.

A window is the namespace of its keyed state, so windows are immutable, hashable and cheap to
hash: :class:`TimeWindow` is a ``tuple`` subclass ``(start, end)`` whose hash and equality are
the tuple's (computed in C). Rill difference: ``TimeWindow(0, 10) == (0, 10)`` is true (Flink's
``TimeWindow.equals`` only accepts TimeWindows); window state never mixes windows with tuples.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Iterable, List, Tuple

from rill.common.time import to_milliseconds  # noqa: F401 - re-exported for the window modules
from rill.common.streamrecord import MAX_TIMESTAMP, MIN_TIMESTAMP
from rill.state.checkpoint.namespaces import register_namespace_type

__all__ = [
    "Window",
    "TimeWindow",
    "CountWindow",
    "GlobalWindow",
    "to_milliseconds",
    "java_remainder",
    "MAX_TIMESTAMP",
    "MIN_TIMESTAMP",
]


def java_remainder(a: int, b: int) -> int:
    """Java's ``a % b`` (truncated division: the result has the sign of ``a``), for formulas
    Flink writes with ``%`` on possibly negative timestamps (e.g. ``ContinuousEventTimeTrigger``)."""
    r = abs(a) % abs(b)
    return -r if a < 0 else r


class Window:
    """A grouping of elements into a finite bucket (Flink's ``Window``). Every window has a
    :meth:`max_timestamp`: the largest timestamp (ms) that still belongs to it."""

    __slots__ = ()

    def max_timestamp(self) -> int:
        """The largest timestamp (epoch ms) in the window."""
        raise NotImplementedError


class TimeWindow(Window, tuple):
    """The half-open interval ``[start, end)`` of epoch ms (Flink's ``TimeWindow``).

    :param start: first ms of the window (inclusive).
    :param end: end of the window (exclusive); :meth:`max_timestamp` is ``end - 1``.
    :raises TypeError: if ``start`` or ``end`` is not an ``int``.

    Ordered by ``(start, end)`` like Flink's ``compareTo``; hash and equality are the tuple's.
    """

    __slots__ = ()

    def __new__(cls, start: int, end: int) -> "TimeWindow":
        if type(start) is not int or type(end) is not int:
            raise TypeError(f"TimeWindow start and end must be int ms, got {start!r} and {end!r}")
        return tuple.__new__(cls, (start, end))

    start = property(itemgetter(0), doc="First ms of the window (inclusive).")
    end = property(itemgetter(1), doc="End of the window (exclusive), ms.")

    def __getnewargs__(self) -> Tuple[int, int]:
        return (self[0], self[1])

    def get_start(self) -> int:
        """First ms of the window (inclusive)."""
        return self[0]

    def get_end(self) -> int:
        """End of the window (exclusive), ms."""
        return self[1]

    def max_timestamp(self) -> int:
        """``end - 1``: the last ms inside the window."""
        return self[1] - 1

    def intersects(self, other: "TimeWindow") -> bool:
        """Whether the windows overlap or touch (``start <= other.end and end >= other.start``,
        as Flink: adjacent windows count, so sessions that touch merge)."""
        return self[0] <= other[1] and self[1] >= other[0]

    def cover(self, other: "TimeWindow") -> "TimeWindow":
        """The smallest window containing both."""
        return TimeWindow(min(self[0], other[0]), max(self[1], other[1]))

    @staticmethod
    def get_window_start_with_offset(timestamp: int, offset: int, window_size: int) -> int:
        """Start of the window of ``window_size`` ms, shifted by ``offset`` ms, that contains
        ``timestamp`` (Flink's ``TimeWindow.getWindowStartWithOffset``; correct for negative
        timestamps: Python's ``%`` is Flink's remainder-plus-size correction)."""
        return timestamp - (timestamp - offset) % window_size

    @staticmethod
    def merge_windows(windows: Iterable["TimeWindow"], callback: Any) -> None:
        """Merge overlapping (or touching) windows (Flink's ``TimeWindow.mergeWindows``): sort
        by start, sweep, and call ``callback.merge(to_be_merged, merge_result)`` (or
        ``callback(to_be_merged, merge_result)`` for a plain callable) once per group of two
        or more windows. ``to_be_merged`` is a list in start order."""
        merge = getattr(callback, "merge", callback)
        merged: List[Tuple[TimeWindow, List[TimeWindow]]] = []
        current: Any = None
        for candidate in sorted(windows):
            if current is None:
                current = [candidate, [candidate]]
            elif current[0].intersects(candidate):
                current[0] = current[0].cover(candidate)
                if candidate not in current[1]:
                    current[1].append(candidate)
            else:
                merged.append((current[0], current[1]))
                current = [candidate, [candidate]]
        if current is not None:
            merged.append((current[0], current[1]))
        for result, group in merged:
            if len(group) > 1:
                merge(group, result)

    def __repr__(self) -> str:
        return f"TimeWindow{{start={self[0]}, end={self[1]}}}"


class CountWindow(Window):
    """A window identified by a number (Flink's / PyFlink's ``CountWindow``); its
    :meth:`max_timestamp` is ``MAX_TIMESTAMP`` (it never ends in time).

    :param id: the window's id (``int``).
    """

    __slots__ = ("id",)

    def __init__(self, id: int) -> None:
        object.__setattr__(self, "id", id)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("CountWindow is immutable")

    def __reduce__(self):
        return (CountWindow, (self.id,))

    def max_timestamp(self) -> int:
        return MAX_TIMESTAMP

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CountWindow) and other.id == self.id

    def __hash__(self) -> int:
        return hash(("CountWindow", self.id))

    def __lt__(self, other: "CountWindow") -> bool:
        return self.id < other.id

    def __repr__(self) -> str:
        return f"CountWindow{{id={self.id}}}"


class GlobalWindow(Window):
    """The single window holding all elements (Flink's ``GlobalWindow``): use
    :meth:`get`. :meth:`max_timestamp` is ``MAX_TIMESTAMP``; it survives pickling as itself."""

    __slots__ = ()
    _instance: "GlobalWindow" = None  # type: ignore[assignment]

    def __new__(cls) -> "GlobalWindow":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    @staticmethod
    def get() -> "GlobalWindow":
        """The one ``GlobalWindow``."""
        return GlobalWindow()

    def __reduce__(self):
        return (GlobalWindow, ())

    def max_timestamp(self) -> int:
        return MAX_TIMESTAMP

    def __repr__(self) -> str:
        return "GlobalWindow"


# Windows are the namespaces of window state and timers: snapshot files write them as the
# struct fields Spark users query (namespace.start / namespace.end, namespace.id).
register_namespace_type(TimeWindow, "TimeWindow", lambda w: {"start": w[0], "end": w[1]},
                        lambda f: TimeWindow(f["start"], f["end"]))
register_namespace_type(GlobalWindow, "GlobalWindow", lambda w: {}, lambda f: GlobalWindow())
register_namespace_type(CountWindow, "CountWindow", lambda w: {"id": w.id}, lambda f: CountWindow(f["id"]))
