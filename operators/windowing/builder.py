"""``WindowOperatorBuilder``: turns a window specification (assigner, trigger, evictor,
lateness, late tag) and a function into a window operator and its name (Flink's
``org.apache.flink.streaming.runtime.operators.windowing.WindowOperatorBuilder``). The
``WindowedStream`` / ``AllWindowedStream`` API and the operator tests build through it, so
both exercise the same operators.

Which operator and state (as Flink):

==========================  ======================================  ==========================
function                    without evictor                         with evictor
==========================  ======================================  ==========================
``reduce``                  ``ReducingState`` (one value)           ``ListState`` + reduce on
                                                                    firing
``aggregate``               ``AggregatingState`` (the accumulator)  ``ListState`` + aggregate
                                                                    on firing
``process`` / ``apply``     ``ListState`` (all elements)            ``ListState``
==========================  ======================================  ==========================

Operator names follow Flink's ``generateOperatorName``:
``Window(<assigner>, <trigger class>, [<evictor class>, ]<function>[, <window function>])``,
e.g. ``Window(TumblingEventTimeWindows(5000), EventTimeTrigger, SumAggregator,
PassThroughWindowFunction)``.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Tuple

from rill.common import functions as F
from rill.operators.output_tag import OutputTag
from rill.operators.windowing.assigners import MergingWindowAssigner, WindowAssigner
from rill.operators.windowing.evicting_window_operator import EvictingWindowOperator
from rill.operators.windowing.evictors import Evictor
from rill.operators.windowing.triggers import Trigger
from rill.operators.windowing.window_functions import (
    AggregateApplyProcessWindowFunction,
    AggregateApplyWindowFunction,
    AllWindowFunction,
    AllWindowFunctionAdapter,
    InternalIterableProcessWindowFunction,
    InternalIterableWindowFunction,
    InternalSingleValueProcessWindowFunction,
    InternalSingleValueWindowFunction,
    PassThroughAllWindowFunction,
    PassThroughWindowFunction,
    ProcessAllWindowFunction,
    ProcessAllWindowFunctionAdapter,
    ProcessWindowFunction,
    ReduceApplyProcessWindowFunction,
    ReduceApplyWindowFunction,
    WindowFunction,
    function_name,
)
from rill.operators.windowing.window_operator import WINDOW_STATE_NAME, WindowOperator
from rill.operators.windowing.windows import to_milliseconds
from rill.state.descriptors import AggregatingStateDescriptor, ListStateDescriptor, ReducingStateDescriptor

__all__ = ["WindowOperatorBuilder"]


class _CallableWindowFunction(WindowFunction):
    """A plain callable ``(key, window, inputs) -> outputs`` as a ``WindowFunction``."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.apply = fn  # bound straight to the callable

    def apply(self, key, window, inputs):  # pragma: no cover - replaced per instance
        raise AssertionError


class WindowOperatorBuilder:
    """Builds window operators (Flink's ``WindowOperatorBuilder``).

    :param window_assigner: a ``WindowAssigner``.
    :param non_keyed: ``True`` for ``window_all``: functions are the ``AllWindowFunction`` /
        ``ProcessAllWindowFunction`` kinds (the key is a constant).
    :param api: the API name used in error messages (``"WindowedStream"``).
    :raises TypeError: if ``window_assigner`` is not a ``WindowAssigner``.
    """

    def __init__(self, window_assigner: WindowAssigner, non_keyed: bool = False, api: str = "WindowedStream") -> None:
        if not isinstance(window_assigner, WindowAssigner):
            raise TypeError(
                f"{api} needs a WindowAssigner (e.g. TumblingEventTimeWindows.of(5000)), got "
                f"{window_assigner!r} of type {type(window_assigner).__name__}"
            )
        self.window_assigner = window_assigner
        self.non_keyed = non_keyed
        self.api = api
        self.trigger: Trigger = window_assigner.get_default_trigger()
        self.evictor: Optional[Evictor] = None
        self.allowed_lateness_ms = 0
        self.late_data_output_tag: Optional[OutputTag] = None

    # -- settings ------------------------------------------------------------------------------
    def set_trigger(self, trigger: Trigger) -> None:
        """:raises TypeError: for a non-Trigger; :raises ValueError: if the assigner merges and
        the trigger cannot (Flink: "A merging window assigner cannot be used with a trigger
        that does not support merging.")."""
        if not isinstance(trigger, Trigger):
            raise TypeError(f"{self.api}.trigger needs a Trigger, got {trigger!r} of type {type(trigger).__name__}")
        if isinstance(self.window_assigner, MergingWindowAssigner) and not trigger.can_merge():
            raise ValueError(
                "A merging window assigner cannot be used with a trigger that does not support merging: "
                f"{self.window_assigner} with {trigger!r}"
            )
        self.trigger = trigger

    def set_evictor(self, evictor: Evictor) -> None:
        """:raises TypeError: for a non-Evictor."""
        if not isinstance(evictor, Evictor):
            raise TypeError(f"{self.api}.evictor needs an Evictor, got {evictor!r} of type {type(evictor).__name__}")
        self.evictor = evictor

    def set_allowed_lateness(self, lateness: Any) -> None:
        """:raises ValueError: for a negative lateness (Flink: "The allowed lateness cannot be
        negative."); :raises TypeError: for a non-duration."""
        ms = to_milliseconds(lateness, f"{self.api}.allowed_lateness")
        if ms < 0:
            raise ValueError(f"The allowed lateness cannot be negative, got {ms} ms ({self.api} on {self.window_assigner})")
        self.allowed_lateness_ms = ms

    def set_late_data_output_tag(self, output_tag: OutputTag) -> None:
        """:raises TypeError: for a non-OutputTag."""
        if not isinstance(output_tag, OutputTag):
            raise TypeError(f"{self.api}.side_output_late_data needs an OutputTag, got {output_tag!r}")
        self.late_data_output_tag = output_tag

    # -- functions -----------------------------------------------------------------------------
    def _window_function(self, fn: Any, call: str) -> Tuple[Any, bool]:
        """``(function as a keyed WindowFunction / ProcessWindowFunction, is_process)``."""
        if self.non_keyed:
            if isinstance(fn, ProcessAllWindowFunction):
                return ProcessAllWindowFunctionAdapter(fn), True
            if isinstance(fn, AllWindowFunction) or (callable(fn) and not isinstance(fn, F.Function)):
                return AllWindowFunctionAdapter(fn), False
            raise TypeError(
                f"{call} expects an AllWindowFunction, a ProcessAllWindowFunction or a callable "
                f"(window, inputs) -> outputs, got {fn!r} of type {type(fn).__name__}"
            )
        if isinstance(fn, ProcessWindowFunction):
            return fn, True
        if isinstance(fn, WindowFunction):
            return fn, False
        if callable(fn) and not isinstance(fn, F.Function):
            return _CallableWindowFunction(fn), False
        raise TypeError(
            f"{call} expects a WindowFunction, a ProcessWindowFunction or a callable "
            f"(key, window, inputs) -> outputs, got {fn!r} of type {type(fn).__name__}"
        )

    def _pass_through(self) -> WindowFunction:
        return PassThroughWindowFunction()

    def _pass_through_name(self) -> str:
        return (PassThroughAllWindowFunction if self.non_keyed else PassThroughWindowFunction).__name__

    def _optional_window_function(self, fn: Any, call: str) -> Tuple[Any, bool, str]:
        """``(window function, is_process, name)`` for the optional window function of
        ``reduce`` / ``aggregate``: the pass-through function when ``fn`` is ``None``."""
        if fn is None:
            return self._pass_through(), False, self._pass_through_name()
        wf, is_process = self._window_function(fn, call)
        return wf, is_process, function_name(fn)

    @staticmethod
    def _single_value_internal(wf: Any, is_process: bool) -> Any:
        """The internal function over the one pre-aggregated value of a window (no evictor)."""
        return InternalSingleValueProcessWindowFunction(wf) if is_process else InternalSingleValueWindowFunction(wf)

    def reduce(self, reduce_function: Any, window_function: Any = None, value_type: Any = None) -> Tuple[WindowOperator, str]:
        """The operator of ``reduce(reduce_function, window_function)`` and its name.

        :raises TypeError: for a bad function.
        """
        call = f"{self.api}.reduce"
        fn = F.wrap(reduce_function, F.ReduceFunction, call)
        wf, is_process, wf_name = self._optional_window_function(window_function, call)
        if self.evictor is None:
            descriptor = ReducingStateDescriptor(WINDOW_STATE_NAME, fn, value_type)
            internal = self._single_value_internal(wf, is_process)
        else:
            descriptor = ListStateDescriptor(WINDOW_STATE_NAME)
            internal = (InternalIterableProcessWindowFunction(ReduceApplyProcessWindowFunction(fn, wf)) if is_process
                        else InternalIterableWindowFunction(ReduceApplyWindowFunction(fn, wf)))
        return self._build(descriptor, internal), self.operator_name(function_name(fn), wf_name)

    def aggregate(self, aggregate_function: Any, window_function: Any = None,
                  accumulator_type: Any = None) -> Tuple[WindowOperator, str]:
        """The operator of ``aggregate(aggregate_function, window_function)`` and its name.

        :raises TypeError: if ``aggregate_function`` lacks ``create_accumulator`` / ``add`` /
            ``get_result``, or for a bad window function.
        :raises ValueError: for a merging (session) assigner with an ``AggregateFunction``
            that does not implement ``merge`` (merging windows merge accumulators).
        """
        call = f"{self.api}.aggregate"
        for method in ("create_accumulator", "add", "get_result"):
            if not callable(getattr(aggregate_function, method, None)):
                raise TypeError(
                    f"{call} expects an AggregateFunction, got {aggregate_function!r} of type "
                    f"{type(aggregate_function).__name__} without a {method}() method"
                )
        if isinstance(self.window_assigner, MergingWindowAssigner) and self.evictor is None:
            merge = getattr(type(aggregate_function), "merge", None)
            if merge is None or merge is F.AggregateFunction.merge:
                raise ValueError(
                    f"{call}: {self.window_assigner} merges windows, so the AggregateFunction "
                    f"{type(aggregate_function).__name__} must implement merge(acc_a, acc_b)"
                )
        wf, is_process, wf_name = self._optional_window_function(window_function, call)
        if self.evictor is None:
            descriptor = AggregatingStateDescriptor(WINDOW_STATE_NAME, aggregate_function, accumulator_type)
            internal = self._single_value_internal(wf, is_process)
        else:
            descriptor = ListStateDescriptor(WINDOW_STATE_NAME)
            internal = (
                InternalIterableProcessWindowFunction(AggregateApplyProcessWindowFunction(aggregate_function, wf))
                if is_process else
                InternalIterableWindowFunction(AggregateApplyWindowFunction(aggregate_function, wf))
            )
        return self._build(descriptor, internal), self.operator_name(function_name(aggregate_function), wf_name)

    def process(self, process_window_function: Any) -> Tuple[WindowOperator, str]:
        """The operator of ``process(process_window_function)`` and its name.

        :raises TypeError: unless given a ``ProcessWindowFunction`` (``ProcessAllWindowFunction``
            for ``window_all``).
        """
        expected = ProcessAllWindowFunction if self.non_keyed else ProcessWindowFunction
        if not isinstance(process_window_function, expected):
            raise TypeError(
                f"{self.api}.process expects a {expected.__name__}, got {process_window_function!r} of type "
                f"{type(process_window_function).__name__}"
            )
        wf, _ = self._window_function(process_window_function, f"{self.api}.process")
        internal = InternalIterableProcessWindowFunction(wf)
        return (self._build(ListStateDescriptor(WINDOW_STATE_NAME), internal),
                self.operator_name(function_name(process_window_function)))

    def apply(self, window_function: Any) -> Tuple[WindowOperator, str]:
        """The operator of ``apply(window_function)`` (a ``WindowFunction``, an
        ``AllWindowFunction`` for ``window_all``, a ``ProcessWindowFunction`` or a callable)
        and its name.

        :raises TypeError: for a bad function.
        """
        wf, is_process = self._window_function(window_function, f"{self.api}.apply")
        internal = InternalIterableProcessWindowFunction(wf) if is_process else InternalIterableWindowFunction(wf)
        return (self._build(ListStateDescriptor(WINDOW_STATE_NAME), internal),
                self.operator_name(function_name(window_function)))

    # -- operator ------------------------------------------------------------------------------
    def _build(self, descriptor: Any, internal: Any) -> WindowOperator:
        if self.evictor is not None:
            return EvictingWindowOperator(self.window_assigner, descriptor, internal, self.trigger, self.evictor,
                                          self.allowed_lateness_ms, self.late_data_output_tag)
        return WindowOperator(self.window_assigner, descriptor, internal, self.trigger,
                              self.allowed_lateness_ms, self.late_data_output_tag)

    def operator_name(self, function1: str, function2: Optional[str] = None) -> str:
        """Flink's ``generateOperatorName``."""
        parts = [repr(self.window_assigner), type(self.trigger).__name__]
        if self.evictor is not None:
            parts.append(type(self.evictor).__name__)
        parts.append(function1)
        if function2 is not None:
            parts.append(function2)
        return "Window(" + ", ".join(parts) + ")"
