"""``EvictingWindowOperator``: a :class:`WindowOperator` with an evictor (Flink's
``org.apache.flink.streaming.runtime.operators.windowing.EvictingWindowOperator``).

The window state keeps every element with its timestamp (a ``ListState`` of
:class:`~rill.operators.windowing.evictors.TimestampedValue`, ``"window-contents"``), also when
the user asked for ``reduce`` / ``aggregate``: the function then runs over the elements left
after ``evict_before`` at every firing (``ReduceApplyWindowFunction``,
``AggregateApplyWindowFunction``). On firing (Flink's ``emitWindowContents``):
``evict_before(elements)`` → the window function over the remaining values →
``evict_after(elements)`` → the state is replaced by what is left.
"""

from __future__ import annotations

from typing import Any, Optional

from rill.operators.windowing.evictors import Evictor, EvictorContext, TimestampedValue
from rill.operators.windowing.window_operator import WindowOperator
from rill.state.descriptors import ListStateDescriptor

__all__ = ["EvictingWindowOperator"]


class _EvictorContext(EvictorContext):
    __slots__ = ("_operator",)

    def __init__(self, operator: "EvictingWindowOperator") -> None:
        self._operator = operator

    def get_current_processing_time(self) -> int:
        return self._operator._timers.current_processing_time()

    def get_current_watermark(self) -> int:
        return self._operator._timers.current_watermark()

    def get_metric_group(self) -> Any:
        return self._operator.context.metrics


class EvictingWindowOperator(WindowOperator):
    """A window operator that evicts elements before / after the window function (Flink's
    ``EvictingWindowOperator``).

    :param evictor: an :class:`~rill.operators.windowing.evictors.Evictor`.
    :param window_state_descriptor: must be a ``ListStateDescriptor`` (elements are stored as
        ``TimestampedValue``).
    Other parameters and errors as :class:`WindowOperator`.
    :raises TypeError: for a non-list window state or a non-``Evictor``.
    """

    def __init__(self, window_assigner, window_state_descriptor, window_function, trigger, evictor: Evictor,
                 allowed_lateness: Any = 0, late_data_output_tag=None) -> None:
        if not isinstance(evictor, Evictor):
            raise TypeError(f"EvictingWindowOperator needs an Evictor, got {evictor!r}")
        if not isinstance(window_state_descriptor, ListStateDescriptor):
            raise TypeError(
                f"EvictingWindowOperator keeps all elements: its window state must be a list state, got "
                f"{window_state_descriptor!r}"
            )
        super().__init__(window_assigner, window_state_descriptor, window_function, trigger,
                         allowed_lateness, late_data_output_tag)
        self.evictor = evictor

    def open(self) -> None:
        """As :meth:`WindowOperator.open`, plus the evictor context."""
        super().open()
        self._evictor_context = _EvictorContext(self)

    def _add_to_state(self, ws: Any, value: Any, timestamp: Optional[int]) -> None:
        ws.add(TimestampedValue(value, timestamp))

    def _emit_window_contents(self, window: Any, contents: Any) -> None:
        elements = list(contents)
        ctx = self._evictor_context
        self.evictor.evict_before(elements, len(elements), window, ctx)
        self._process_context.window_ = window
        result = self.user_function.process(
            self._trigger_context.key, window, self._process_context, [e.value for e in elements])
        self._emit(result, window.max_timestamp())
        self.evictor.evict_after(elements, len(elements), window, ctx)
        ws = self._window_state
        if elements:
            ws.update(elements)
        else:
            ws.clear()
