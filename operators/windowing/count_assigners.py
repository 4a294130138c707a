"""Count window assigners (PyFlink's ``CountTumblingWindowAssigner`` and
``CountSlidingWindowAssigner``): numbered ``CountWindow`` s, from a per-key count of the
elements seen, kept in keyed state (``ValueState`` of LONG, as PyFlink keeps it).

Element ``n`` of a key (counting from 0) goes to window ``n // size`` (tumbling), or to every
window ``i`` with ``i * slide <= n <= i * slide + size - 1`` (sliding). Each window gets at most
``size`` elements and fires when it has them (``CountTrigger(size)``); a window that has not
filled when the input ends never fires, as in PyFlink.

Rill difference: the default trigger is ``PurgingTrigger.of(CountTrigger.of(size))`` where
PyFlink's is ``CountTrigger(size)``: a full window receives no further element, so the
results are the same, and purging frees the window's contents (PyFlink keeps them forever).
"""

from __future__ import annotations

from typing import Any, Collection, List, Optional

from rill.operators.windowing.assigners import WindowAssigner
from rill.operators.windowing.triggers import CountTrigger, PurgingTrigger, Trigger
from rill.operators.windowing.window_serializers import CountWindowSerializer
from rill.operators.windowing.windows import CountWindow
from rill.common.typeinfo import Types
from rill.state.descriptors import ValueStateDescriptor

__all__ = ["CountTumblingWindowAssigner", "CountSlidingWindowAssigner"]


def _positive(value: Any, what: str, assigner: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{assigner}: the window {what} must be a positive number of elements, got {value!r}")
    return value


def _next_count(descriptor: ValueStateDescriptor, context: WindowAssigner.WindowAssignerContext) -> int:
    """This element's number within its key (0, 1, ...); counts it."""
    state = context.get_runtime_context().get_state(descriptor)
    count = state.value() or 0
    state.update(count + 1)
    return count


class CountTumblingWindowAssigner(WindowAssigner):
    """Windows of ``window_size`` consecutive elements per key, not overlapping; use on a keyed
    stream (``key_by(...).window(CountTumblingWindowAssigner.of(3))``).

    :raises ValueError: unless ``window_size`` is an int >= 1.
    """

    def __init__(self, window_size: int):
        self._window_size = _positive(window_size, "size", "CountTumblingWindowAssigner")
        self._count_descriptor = ValueStateDescriptor("tumble-count-assigner", Types.LONG())

    @staticmethod
    def of(window_size: int) -> "CountTumblingWindowAssigner":
        return CountTumblingWindowAssigner(window_size)

    def assign_windows(self, element: Any, timestamp: Optional[int], context) -> Collection[CountWindow]:
        return [CountWindow(_next_count(self._count_descriptor, context) // self._window_size)]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return PurgingTrigger.of(CountTrigger.of(self._window_size))

    def get_window_serializer(self) -> CountWindowSerializer:
        return CountWindowSerializer()

    def is_event_time(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"CountTumblingWindowAssigner({self._window_size})"


class CountSlidingWindowAssigner(WindowAssigner):
    """Windows of ``window_size`` elements per key, one starting every ``window_slide``
    elements (so they overlap when ``window_slide < window_size``).

    :raises ValueError: unless both are ints >= 1.
    """

    def __init__(self, window_size: int, window_slide: int):
        self._window_size = _positive(window_size, "size", "CountSlidingWindowAssigner")
        self._window_slide = _positive(window_slide, "slide", "CountSlidingWindowAssigner")
        self._count_descriptor = ValueStateDescriptor("slide-count-assigner", Types.LONG())

    @staticmethod
    def of(window_size: int, window_slide: int) -> "CountSlidingWindowAssigner":
        return CountSlidingWindowAssigner(window_size, window_slide)

    def assign_windows(self, element: Any, timestamp: Optional[int], context) -> Collection[CountWindow]:
        n = _next_count(self._count_descriptor, context)
        size, slide = self._window_size, self._window_slide
        windows: List[CountWindow] = []
        last = n // slide
        while last >= 0 and last * slide + size - 1 >= n:
            windows.append(CountWindow(last))
            last -= 1
        return windows

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return PurgingTrigger.of(CountTrigger.of(self._window_size))

    def get_window_serializer(self) -> CountWindowSerializer:
        return CountWindowSerializer()

    def is_event_time(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"CountSlidingWindowAssigner({self._window_size}, {self._window_slide})"
