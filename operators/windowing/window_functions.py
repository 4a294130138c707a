"""Window functions: the user-facing bases (PyFlink's ``WindowFunction``,
``ProcessWindowFunction``, ``AllWindowFunction``, ``ProcessAllWindowFunction`` in
``pyflink.datastream.functions``) and the internal adapters the window operators call (Flink's
``InternalWindowFunction`` family in
``org.apache.flink.streaming.runtime.operators.windowing.functions`` plus
``PassThroughWindowFunction``, ``ReduceApplyWindowFunction``, ``AggregateApplyWindowFunction``).

Outputs follow PyFlink: ``apply`` and ``process`` return (or ``yield``) output values; a
yielded 2-tuple whose first item is an ``OutputTag`` goes to that side output, and
``context.output(tag, value)`` does the same. The operator stamps every output with the
window's ``max_timestamp()`` (Flink's ``TimestampedCollector``).

An internal function is called as ``process(key, window, context, contents)`` where
``contents`` is the window state's content: the single reduced / aggregated value for
incremental state, or the elements (an iterable) for list state.
"""

from __future__ import annotations

import abc
import functools
import types
from typing import Any, Generic, Iterable, List, Optional

from rill.common.functions import IN, KEY, OUT, W, W2, Function

__all__ = [
    "KeyedStateStore",
    "WindowFunction",
    "ProcessWindowFunction",
    "AllWindowFunction",
    "ProcessAllWindowFunction",
    "InternalWindowFunction",
    "PassThroughWindowFunction",
    "PassThroughAllWindowFunction",
    "InternalSingleValueWindowFunction",
    "InternalIterableWindowFunction",
    "InternalSingleValueProcessWindowFunction",
    "InternalIterableProcessWindowFunction",
    "ReduceApplyWindowFunction",
    "ReduceApplyProcessWindowFunction",
    "AggregateApplyWindowFunction",
    "AggregateApplyProcessWindowFunction",
    "AllWindowFunctionAdapter",
    "ProcessAllWindowFunctionAdapter",
    "function_name",
]


class KeyedStateStore(abc.ABC):
    """Keyed state by descriptor (PyFlink's ``KeyedStateStore``): what
    ``ProcessWindowFunction.Context.window_state()`` (scoped to key and window) and
    ``global_state()`` (scoped to the key only) return."""

    @abc.abstractmethod
    def get_state(self, state_descriptor: Any) -> Any:
        """The ``ValueState`` of ``state_descriptor`` in this store's scope."""

    @abc.abstractmethod
    def get_list_state(self, state_descriptor: Any) -> Any:
        """The ``ListState`` of ``state_descriptor`` in this store's scope."""

    @abc.abstractmethod
    def get_map_state(self, state_descriptor: Any) -> Any:
        """The ``MapState`` of ``state_descriptor`` in this store's scope."""

    @abc.abstractmethod
    def get_reducing_state(self, state_descriptor: Any) -> Any:
        """The ``ReducingState`` of ``state_descriptor`` in this store's scope."""

    @abc.abstractmethod
    def get_aggregating_state(self, state_descriptor: Any) -> Any:
        """The ``AggregatingState`` of ``state_descriptor`` in this store's scope."""


class WindowFunction(Function, Generic[IN, OUT, KEY, W]):
    """A function over a keyed window's elements (PyFlink's ``WindowFunction``)."""

    @abc.abstractmethod
    def apply(self, key: Any, window: Any, inputs: Iterable[Any]) -> Optional[Iterable[Any]]:
        """Return (or yield) the outputs for ``key`` and ``window``."""


class ProcessWindowFunction(Function, Generic[IN, OUT, KEY, W]):
    """A function over a keyed window's elements with a context: the window, time, per-window
    and global keyed state, side outputs (PyFlink's ``ProcessWindowFunction``)."""

    class Context(abc.ABC, Generic[W2]):
        """The context of :meth:`ProcessWindowFunction.process` (times in epoch ms); generic in
        its window type as PyFlink's (``ProcessWindowFunction.Context[TimeWindow]``)."""

        @abc.abstractmethod
        def window(self) -> Any: ...

        @abc.abstractmethod
        def current_processing_time(self) -> int: ...

        @abc.abstractmethod
        def current_watermark(self) -> int: ...

        @abc.abstractmethod
        def window_state(self) -> KeyedStateStore:
            """State scoped to the current key and window (clear it in :meth:`clear`)."""

        @abc.abstractmethod
        def global_state(self) -> KeyedStateStore:
            """State scoped to the current key, across windows."""

        @abc.abstractmethod
        def output(self, output_tag: Any, value: Any) -> None:
            """Emit ``value`` to a side output, stamped with the window's max timestamp."""

    @abc.abstractmethod
    def process(self, key: Any, context: "ProcessWindowFunction.Context", elements: Iterable[Any]) -> Optional[Iterable[Any]]:
        """Return (or yield) the outputs of the window (``context.window()``)."""

    def clear(self, context: "ProcessWindowFunction.Context") -> None:
        """Called when the window is purged for good (after its cleanup time): delete the
        per-window state kept in ``context.window_state()``."""


class AllWindowFunction(Function, Generic[IN, OUT, W]):
    """A function over a non-keyed window's elements (PyFlink's ``AllWindowFunction``)."""

    @abc.abstractmethod
    def apply(self, window: Any, inputs: Iterable[Any]) -> Optional[Iterable[Any]]:
        """Return (or yield) the outputs of ``window``."""


class ProcessAllWindowFunction(Function, Generic[IN, OUT, W]):
    """:class:`ProcessWindowFunction` for ``window_all`` (PyFlink's
    ``ProcessAllWindowFunction``); ``context`` has the same methods."""

    Context = ProcessWindowFunction.Context

    @abc.abstractmethod
    def process(self, context: "ProcessWindowFunction.Context", elements: Iterable[Any]) -> Optional[Iterable[Any]]:
        """Return (or yield) the outputs of the window (``context.window()``)."""

    def clear(self, context: "ProcessWindowFunction.Context") -> None:
        """See :meth:`ProcessWindowFunction.clear`."""


# -- names --------------------------------------------------------------------------------------

def function_name(fn: Any) -> str:
    """A readable name for operator names: the class name of a function object, the
    ``__name__`` of a plain callable (also inside Rill's wrappers of plain callables)."""
    cls = type(fn)
    if cls.__name__.startswith("_") and cls.__module__.startswith("rill."):  # wraps a callable
        for inner in getattr(fn, "__dict__", {}).values():
            if callable(inner):
                return function_name(inner)
    if isinstance(fn, (types.FunctionType, types.BuiltinFunctionType, types.MethodType, functools.partial)):
        return getattr(fn, "__name__", cls.__name__)
    return cls.__name__


def _open(fn: Any, runtime_context: Any) -> None:
    open_fn = getattr(fn, "open", None)
    if open_fn is not None:
        open_fn(runtime_context)


def _close(fn: Any) -> None:
    close_fn = getattr(fn, "close", None)
    if close_fn is not None:
        close_fn()


# -- adapters for window_all ---------------------------------------------------------------------

class AllWindowFunctionAdapter(WindowFunction):
    """An :class:`AllWindowFunction` (or a callable ``(window, inputs)``) as a
    :class:`WindowFunction` that ignores the (constant) key (Flink's
    ``InternalAllWindowFunction`` family does the same)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self._apply = getattr(fn, "apply", None) if isinstance(fn, AllWindowFunction) else fn

    def open(self, runtime_context: Any) -> None:
        _open(self.fn, runtime_context)

    def close(self) -> None:
        _close(self.fn)

    def apply(self, key, window, inputs):
        return self._apply(window, inputs)


class ProcessAllWindowFunctionAdapter(ProcessWindowFunction):
    """A :class:`ProcessAllWindowFunction` as a :class:`ProcessWindowFunction` that ignores
    the (constant) key."""

    def __init__(self, fn: ProcessAllWindowFunction) -> None:
        self.fn = fn

    def open(self, runtime_context: Any) -> None:
        _open(self.fn, runtime_context)

    def close(self) -> None:
        _close(self.fn)

    def process(self, key, context, elements):
        return self.fn.process(context, elements)

    def clear(self, context) -> None:
        self.fn.clear(context)


# -- internal functions --------------------------------------------------------------------------

class InternalWindowFunction:
    """What the window operators call (Flink's ``InternalWindowFunction``).

    :param wrapped: the user-level function (opened and closed with the operator).
    """

    __slots__ = ("wrapped",)

    def __init__(self, wrapped: Any) -> None:
        self.wrapped = wrapped

    def open(self, runtime_context: Any) -> None:
        """Open the wrapped function with the operator's ``RuntimeContext``."""
        _open(self.wrapped, runtime_context)

    def close(self) -> None:
        """Close the wrapped function."""
        _close(self.wrapped)

    def process(self, key: Any, window: Any, context: Any, contents: Any) -> Optional[Iterable[Any]]:
        """The outputs for ``contents`` of ``window``."""
        raise NotImplementedError

    def clear(self, window: Any, context: Any) -> None:
        """The window is purged for good (Flink's ``InternalWindowFunction.clear``)."""

    def name(self) -> str:
        """The wrapped function's name, for operator names."""
        return function_name(self.wrapped)


class PassThroughWindowFunction(WindowFunction):
    """Emits its inputs unchanged (Flink's ``PassThroughWindowFunction``): the window function
    of a plain ``reduce`` / ``aggregate``."""

    def apply(self, key, window, inputs):
        return inputs


class PassThroughAllWindowFunction(AllWindowFunction):
    """Emits its inputs unchanged (Flink's ``PassThroughAllWindowFunction``)."""

    def apply(self, window, inputs):
        """The inputs."""
        return inputs


class InternalSingleValueWindowFunction(InternalWindowFunction):
    """A :class:`WindowFunction` over a single (reduced / aggregated) value (Flink's class of
    the same name)."""

    __slots__ = ("_apply",)

    def __init__(self, wrapped: Any) -> None:
        super().__init__(wrapped)
        self._apply = wrapped.apply

    def process(self, key, window, context, contents):
        return self._apply(key, window, [contents])


class InternalIterableWindowFunction(InternalWindowFunction):
    """A :class:`WindowFunction` over the window's elements (Flink's class of the same name)."""

    __slots__ = ("_apply",)

    def __init__(self, wrapped: Any) -> None:
        super().__init__(wrapped)
        self._apply = wrapped.apply

    def process(self, key, window, context, contents):
        return self._apply(key, window, contents)


class InternalSingleValueProcessWindowFunction(InternalWindowFunction):
    """A :class:`ProcessWindowFunction` over a single (reduced / aggregated) value (Flink's
    class of the same name)."""

    __slots__ = ()

    def process(self, key, window, context, contents):
        return self.wrapped.process(key, context, [contents])

    def clear(self, window, context) -> None:
        self.wrapped.clear(context)


class InternalIterableProcessWindowFunction(InternalWindowFunction):
    """A :class:`ProcessWindowFunction` over the window's elements (Flink's class of the same
    name)."""

    __slots__ = ()

    def process(self, key, window, context, contents):
        return self.wrapped.process(key, context, contents)

    def clear(self, window, context) -> None:
        self.wrapped.clear(context)


class _PreAggregateThenApply:
    """Opens and closes the pre-aggregating function (``_pre``), then the window function, for
    the reduce/aggregate-then-apply functions below."""

    window_function: Any

    @property
    def _pre(self) -> Any:
        raise NotImplementedError

    def open(self, runtime_context: Any) -> None:
        _open(self._pre, runtime_context)
        _open(self.window_function, runtime_context)

    def close(self) -> None:
        _close(self._pre)
        _close(self.window_function)


class _ReduceThenApply(_PreAggregateThenApply):
    def __init__(self, reduce_function: Any, window_function: Any) -> None:
        self.reduce_function = reduce_function
        self.window_function = window_function

    @property
    def _pre(self) -> Any:
        return self.reduce_function


class _AggregateThenApply(_PreAggregateThenApply):
    def __init__(self, aggregate_function: Any, window_function: Any) -> None:
        self.aggregate_function = aggregate_function
        self.window_function = window_function

    @property
    def _pre(self) -> Any:
        return self.aggregate_function


def _reduce_all(reduce: Any, inputs: Iterable[Any]) -> List[Any]:
    current = None
    for value in inputs:
        current = value if current is None else reduce(current, value)
    return [] if current is None else [current]


class ReduceApplyWindowFunction(_ReduceThenApply, WindowFunction):
    """Reduces the window's elements, then applies a :class:`WindowFunction` to the result
    (Flink's ``ReduceApplyWindowFunction``; used when an evictor keeps all elements).

    Rill difference: an empty window (every element evicted) gives the window function no
    input at all instead of Flink's single ``null``.
    """

    def apply(self, key, window, inputs):
        return self.window_function.apply(key, window, _reduce_all(self.reduce_function.reduce, inputs))


class ReduceApplyProcessWindowFunction(_ReduceThenApply, ProcessWindowFunction):
    """:class:`ReduceApplyWindowFunction` for a :class:`ProcessWindowFunction` (Flink's class
    of the same name)."""

    def process(self, key, context, elements):
        return self.window_function.process(key, context, _reduce_all(self.reduce_function.reduce, elements))

    def clear(self, context) -> None:
        self.window_function.clear(context)


def _aggregate_all(agg: Any, inputs: Iterable[Any]) -> List[Any]:
    acc = agg.create_accumulator()
    for value in inputs:
        acc = agg.add(value, acc)
    return [agg.get_result(acc)]


class AggregateApplyWindowFunction(_AggregateThenApply, WindowFunction):
    """Aggregates the window's elements from a fresh accumulator, then applies a
    :class:`WindowFunction` to the result (Flink's ``AggregateApplyWindowFunction``)."""

    def apply(self, key, window, inputs):
        return self.window_function.apply(key, window, _aggregate_all(self.aggregate_function, inputs))


class AggregateApplyProcessWindowFunction(_AggregateThenApply, ProcessWindowFunction):
    """:class:`AggregateApplyWindowFunction` for a :class:`ProcessWindowFunction` (Flink's
    ``InternalAggregateProcessWindowFunction``)."""

    def process(self, key, context, elements):
        return self.window_function.process(key, context, _aggregate_all(self.aggregate_function, elements))

    def clear(self, context) -> None:
        self.window_function.clear(context)
