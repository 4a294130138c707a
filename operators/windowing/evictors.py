"""Evictors: remove elements from a window before and/or after its function runs (Flink's
``org.apache.flink.streaming.api.windowing.evictors``; PyFlink has no evictors, the names
follow Flink's Java API Python-cased).

An evictor gets the window's elements as a ``list`` of :class:`TimestampedValue` in arrival
order and removes elements by mutating that list in place (Flink removes through the
iterator); the ``EvictingWindowOperator`` then keeps only what is left. ``size`` is the
number of elements when the evictor is called. Times are epoch ms.
"""

from __future__ import annotations

import abc
from typing import Any, Callable, List, Optional, Union

from rill.operators.windowing.triggers import DeltaFunction, delta_callable
from rill.operators.windowing.windows import Window, to_milliseconds

__all__ = [
    "TimestampedValue",
    "Evictor",
    "EvictorContext",
    "CountEvictor",
    "TimeEvictor",
    "DeltaEvictor",
]


class TimestampedValue:
    """A value with its timestamp (ms, or ``None`` if the record had none) (Flink's
    ``TimestampedValue``)."""

    __slots__ = ("value", "timestamp")

    def __init__(self, value: Any, timestamp: Optional[int] = None) -> None:
        self.value = value
        self.timestamp = timestamp

    def get_value(self) -> Any:
        """The value."""
        return self.value

    def get_timestamp(self) -> Optional[int]:
        """The timestamp, epoch ms, or ``None``."""
        return self.timestamp

    def has_timestamp(self) -> bool:
        """Whether the value has a timestamp."""
        return self.timestamp is not None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TimestampedValue) and (other.value, other.timestamp) == (self.value, self.timestamp)

    def __hash__(self) -> int:
        return hash((self.value, self.timestamp))

    def __reduce__(self):
        return (TimestampedValue, (self.value, self.timestamp))

    def __repr__(self) -> str:
        return f"TimestampedValue({self.value!r}, {self.timestamp!r})"


class EvictorContext(abc.ABC):
    """What an evictor may ask (Flink's ``Evictor.EvictorContext``)."""

    @abc.abstractmethod
    def get_current_processing_time(self) -> int:
        """The task's processing time, epoch ms."""

    @abc.abstractmethod
    def get_current_watermark(self) -> int:
        """The operator's current watermark, epoch ms."""

    @abc.abstractmethod
    def get_metric_group(self) -> Any:
        """The operator's metrics, or ``None``."""


class Evictor(abc.ABC):
    """Base of evictors (Flink's ``Evictor``); subclass it for a custom evictor."""

    EvictorContext = EvictorContext

    @abc.abstractmethod
    def evict_before(self, elements: List[TimestampedValue], size: int, window: Window, evictor_context: EvictorContext) -> None:
        """Remove elements (in place) before the window function runs."""

    @abc.abstractmethod
    def evict_after(self, elements: List[TimestampedValue], size: int, window: Window, evictor_context: EvictorContext) -> None:
        """Remove elements (in place) after the window function ran."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class _BeforeOrAfter(Evictor):
    do_evict_after: bool

    def evict_before(self, elements, size, window, evictor_context) -> None:
        if not self.do_evict_after:
            self._evict(elements, size, evictor_context)

    def evict_after(self, elements, size, window, evictor_context) -> None:
        if self.do_evict_after:
            self._evict(elements, size, evictor_context)

    def _evict(self, elements: List[TimestampedValue], size: int, ctx: EvictorContext) -> None:
        raise NotImplementedError


class CountEvictor(_BeforeOrAfter):
    """Keeps the last ``max_count`` elements (Flink's ``CountEvictor``): removes the first
    ``size - max_count`` (arrival order).

    :param max_count: elements to keep, an ``int`` >= 1.
    :param do_evict_after: evict after the function instead of before (default ``False``).
    :raises ValueError: if ``max_count < 1`` (Rill difference: Flink does not check).
    """

    def __init__(self, max_count: int, do_evict_after: bool = False) -> None:
        if type(max_count) is not int or max_count < 1:
            raise ValueError(f"CountEvictor max_count must be an int >= 1, got {max_count!r}")
        self.max_count = max_count
        self.do_evict_after = bool(do_evict_after)

    @staticmethod
    def of(max_count: int, do_evict_after: bool = False) -> "CountEvictor":
        """Keep the last ``max_count`` elements (before the function, or after it with ``do_evict_after``)."""
        return CountEvictor(max_count, do_evict_after)

    def _evict(self, elements, size, ctx) -> None:
        if size <= self.max_count:
            return
        del elements[: size - self.max_count]

    def __repr__(self) -> str:
        return f"CountEvictor({self.max_count})"


class TimeEvictor(_BeforeOrAfter):
    """Keeps the elements of the last ``window_size`` ms (Flink's ``TimeEvictor``): with
    ``t_max`` the largest timestamp in the window, removes every element with timestamp
    ``<= t_max - window_size``. Does nothing if the elements have no timestamps.

    :param window_size: ms, > 0.
    :raises ValueError: if ``window_size <= 0``.
    """

    def __init__(self, window_size: Any, do_evict_after: bool = False) -> None:
        ms = to_milliseconds(window_size, "TimeEvictor window_size")
        if ms <= 0:
            raise ValueError(f"TimeEvictor window_size must be > 0 ms, got {ms}")
        self.window_size = ms
        self.do_evict_after = bool(do_evict_after)

    @staticmethod
    def of(window_size: Any, do_evict_after: bool = False) -> "TimeEvictor":
        """Keep the elements of the last ``window_size`` ms (before the function, or after it)."""
        return TimeEvictor(window_size, do_evict_after)

    def _evict(self, elements, size, ctx) -> None:
        if not elements or elements[0].timestamp is None:
            return
        cutoff = max(e.timestamp for e in elements if e.timestamp is not None) - self.window_size
        elements[:] = [e for e in elements if e.timestamp is None or e.timestamp > cutoff]

    def __repr__(self) -> str:
        return f"TimeEvictor({self.window_size})"


class DeltaEvictor(_BeforeOrAfter):
    """Removes every element whose delta to the last element is ``>= threshold`` (Flink's
    ``DeltaEvictor``).

    :param threshold: a number.
    :param delta_function: a ``DeltaFunction`` or a callable ``(element, last) -> float``.
    :raises TypeError: for a bad ``delta_function`` or ``threshold``.
    """

    def __init__(self, threshold: float, delta_function: Union[DeltaFunction, Callable[[Any, Any], float]],
                 do_evict_after: bool = False) -> None:
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
            raise TypeError(f"DeltaEvictor threshold must be a number, got {threshold!r}")
        self.threshold = threshold
        self.delta_function = delta_function
        self._delta = delta_callable(delta_function, "DeltaEvictor")
        self.do_evict_after = bool(do_evict_after)

    @staticmethod
    def of(threshold: float, delta_function: Any, do_evict_after: bool = False) -> "DeltaEvictor":
        """Evict elements whose delta to the last element is >= ``threshold``."""
        return DeltaEvictor(threshold, delta_function, do_evict_after)

    def _evict(self, elements, size, ctx) -> None:
        if not elements:
            return
        last = elements[-1].value
        delta, threshold = self._delta, self.threshold
        elements[:] = [e for e in elements if not delta(e.value, last) >= threshold]

    def __repr__(self) -> str:
        return f"DeltaEvictor({self.delta_function!r}, {self.threshold})"
