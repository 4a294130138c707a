"""User function interfaces, with PyFlink's names and signatures
(``pyflink.datastream.functions``).

Every API method that takes a function accepts either an instance of the matching class or a
plain callable; :func:`wrap` turns callables into function objects once, when the graph is
built. Rich life cycle: ``open(runtime_context)`` before the first record, ``close()`` at the
end (also after a failure).

Functions are copied per subtask (serialized with cloudpickle, as Flink serializes user code
into the task deployment), so attributes set in ``open`` are per-subtask state.
"""

from __future__ import annotations

import abc
from typing import Any, Callable, Dict, Generic, Iterable, Optional, TypeVar

__all__ = [
    "Function",
    "SourceFunction",
    "MapFunction",
    "FlatMapFunction",
    "FilterFunction",
    "ReduceFunction",
    "AggregateFunction",
    "KeySelector",
    "Partitioner",
    "ProcessFunction",
    "KeyedProcessFunction",
    "SinkFunction",
    "CheckpointListener",
    "RuntimeContext",
    "TimerService",
    "wrap",
    "is_rich",
]

# Type parameters of the generic function interfaces (PyFlink's names in
# ``pyflink.datastream.functions``). They are annotations only: Rill never checks them; a
# declared ``output_type`` is what fixes a stream's type (see ``rill.common.typeinfo``).
IN = TypeVar("IN")
OUT = TypeVar("OUT")
IN1 = TypeVar("IN1")
IN2 = TypeVar("IN2")
KEY = TypeVar("KEY")
ACC = TypeVar("ACC")
W = TypeVar("W")
W2 = TypeVar("W2")


class RuntimeContext(abc.ABC):
    """Information about the subtask a function runs in, and access to keyed state
    (PyFlink's ``RuntimeContext``)."""

    @abc.abstractmethod
    def get_task_name(self) -> str: ...

    @abc.abstractmethod
    def get_number_of_parallel_subtasks(self) -> int: ...

    @abc.abstractmethod
    def get_max_number_of_parallel_subtasks(self) -> int: ...

    @abc.abstractmethod
    def get_index_of_this_subtask(self) -> int: ...

    @abc.abstractmethod
    def get_attempt_number(self) -> int: ...

    @abc.abstractmethod
    def get_task_name_with_subtasks(self) -> str: ...

    @abc.abstractmethod
    def get_job_parameter(self, key: str, default_value: Optional[str] = None) -> Optional[str]: ...

    @abc.abstractmethod
    def get_state(self, state_descriptor): ...

    @abc.abstractmethod
    def get_list_state(self, state_descriptor): ...

    @abc.abstractmethod
    def get_map_state(self, state_descriptor): ...

    @abc.abstractmethod
    def get_reducing_state(self, state_descriptor): ...

    @abc.abstractmethod
    def get_aggregating_state(self, state_descriptor): ...


class TimerService(abc.ABC):
    """Access to time and timers (PyFlink's ``TimerService``). Times are epoch ms."""

    @abc.abstractmethod
    def current_processing_time(self) -> int: ...

    @abc.abstractmethod
    def current_watermark(self) -> int: ...

    def register_processing_time_timer(self, timestamp: int) -> None:
        raise NotImplementedError("Setting timers is only supported on a keyed streams.")

    def register_event_time_timer(self, timestamp: int) -> None:
        raise NotImplementedError("Setting timers is only supported on a keyed streams.")

    def delete_processing_time_timer(self, timestamp: int) -> None:
        raise NotImplementedError("Deleting timers is only supported on a keyed streams.")

    def delete_event_time_timer(self, timestamp: int) -> None:
        raise NotImplementedError("Deleting timers is only supported on a keyed streams.")


class Function(abc.ABC):
    """Base of all user functions: ``open`` / ``close`` life cycle.

    Generic interfaces: every function base can be subscripted with its type parameters and
    subclassed, ``class Avg(AggregateFunction[tuple, tuple, float])``. The bases that PyFlink
    2.3 makes ``typing.Generic`` take PyFlink's parameters in PyFlink's order
    (``WindowFunction[IN, OUT, KEY, W]``, ``ProcessWindowFunction[IN, OUT, KEY, W]``,
    ``AllWindowFunction[IN, OUT, W]``, ``ProcessAllWindowFunction[IN, OUT, W]``,
    ``BroadcastProcessFunction[IN1, IN2, OUT]``, ``KeyedBroadcastProcessFunction[KEY, IN1, IN2,
    OUT]``, ``AsyncFunction[IN, OUT]``); the others, which PyFlink leaves unsubscriptable, take
    Flink's Java parameters (``MapFunction<T, O>`` -> ``MapFunction[IN, OUT]``, and so on), so a
    PyFlink program and one annotated the Java way both run. A wrong number of parameters raises
    ``TypeError`` from ``typing``. The parameters are annotations only, never checked.
    """

    def open(self, runtime_context: RuntimeContext) -> None:
        pass

    def close(self) -> None:
        pass


class CheckpointListener(abc.ABC):
    """A function (or any object an operator calls) that wants to hear about checkpoints
    (Flink's ``org.apache.flink.api.common.state.CheckpointListener``; PyFlink has no Python
    counterpart, so Rill offers Flink's interface with Python names).

    A user function implements it by subclassing (with its function base class); the
    operator around the function (``AbstractUdfStreamOperator``) forwards the calls on the task
    thread, between records. As Flink documents: a notification may be skipped or arrive late
    (a later checkpoint's ``notify_checkpoint_complete`` subsumes earlier ones, so a function
    must treat "checkpoint ``n`` complete" as "every checkpoint up to ``n`` complete"); an
    exception raised by either method fails the task.
    """

    @abc.abstractmethod
    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` completed: its state is durable on every task. The place
        to commit side effects a checkpoint made safe (two-phase-commit sinks)."""

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` was aborted (timeout, a task failed or declined); the
        default does nothing (Flink's default method). Side effects prepared for it stay
        prepared: a later checkpoint's completion covers them."""


def is_rich(function: Any) -> bool:
    """Whether ``function`` overrides ``Function.open`` — only such a function can reach keyed
    state, so only for it must a keyed operator set the current key before each call."""
    open_fn = getattr(type(function), "open", None)
    return open_fn is not None and open_fn is not Function.open


class MapFunction(Function, Generic[IN, OUT]):
    """One output per input: ``map(value) -> result``."""

    @abc.abstractmethod
    def map(self, value: Any) -> Any: ...


class FlatMapFunction(Function, Generic[IN, OUT]):
    """Zero or more outputs per input: ``flat_map(value)`` returns or yields them."""

    @abc.abstractmethod
    def flat_map(self, value: Any) -> Iterable[Any]:
        """Return (or ``yield``) zero or more output values."""


class FilterFunction(Function, Generic[IN]):
    """Keeps the inputs for which ``filter(value)`` is true."""

    @abc.abstractmethod
    def filter(self, value: Any) -> bool: ...


class ReduceFunction(Function, Generic[IN]):
    """Combines two values of the same type into one: ``reduce(value1, value2)``."""

    @abc.abstractmethod
    def reduce(self, value1: Any, value2: Any) -> Any: ...


class AggregateFunction(Function, Generic[IN, ACC, OUT]):
    """Incremental aggregation with an accumulator (PyFlink's ``AggregateFunction``)."""

    @abc.abstractmethod
    def create_accumulator(self) -> Any: ...

    @abc.abstractmethod
    def add(self, value: Any, accumulator: Any) -> Any: ...

    @abc.abstractmethod
    def get_result(self, accumulator: Any) -> Any: ...

    def merge(self, acc_a: Any, acc_b: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement merge()")


class KeySelector(Function, Generic[IN, KEY]):
    """Extracts the key of a record: ``get_key(value)``; keys need a stable hash (see ``rill.state.key_groups``)."""

    @abc.abstractmethod
    def get_key(self, value: Any) -> Any: ...


class Partitioner(Function, Generic[KEY]):
    """Chooses the target partition of a key for ``partition_custom``."""

    @abc.abstractmethod
    def partition(self, key: Any, num_partitions: int) -> int: ...


class SourceFunction(Function, Generic[OUT]):
    """A legacy source (Flink's ``SourceFunction``, reached through ``env.add_source``):
    :meth:`run` emits records through ``ctx.collect`` until its input ends (it returns) or
    :meth:`cancel` is called, after which it must return soon. It runs in a thread of its own,
    as Flink's ``LegacySourceFunctionThread``; ``collect`` blocks while the job is
    backpressured. It is non-parallel (parallelism 1).

    Rill difference: PyFlink's ``SourceFunction`` wraps a Java source (``SourceFunction(
    "com.x.MySource")``); Rill's is implemented in Python. ``ctx.collect_with_timestamp`` and
    ``ctx.emit_watermark`` raise ``NotImplementedError`` (records of Rill's sources carry no
    timestamps: assign them with ``assign_timestamps_and_watermarks``); ``open`` / ``close`` are
    not called, as Rill's sources have no ``RuntimeContext``.
    """

    class SourceContext(abc.ABC):
        """What :meth:`SourceFunction.run` emits through."""

        @abc.abstractmethod
        def collect(self, element: Any) -> None: ...

        @abc.abstractmethod
        def collect_with_timestamp(self, element: Any, timestamp: int) -> None: ...

        @abc.abstractmethod
        def emit_watermark(self, watermark: Any) -> None: ...

        @abc.abstractmethod
        def mark_as_temporarily_idle(self) -> None: ...

        @abc.abstractmethod
        def get_checkpoint_lock(self) -> Any: ...

    @abc.abstractmethod
    def run(self, ctx: "SourceFunction.SourceContext") -> None: ...

    @abc.abstractmethod
    def cancel(self) -> None: ...


class SinkFunction(Function, Generic[IN]):
    """A sink that is called once per record (Flink's ``SinkFunction.invoke``)."""

    @abc.abstractmethod
    def invoke(self, value: Any, context: Any) -> None: ...


class ProcessFunction(Function, Generic[IN, OUT]):
    """A low-level function on each element (PyFlink's ``ProcessFunction``): ``yield`` outputs,
    or ``yield output_tag, value`` for a side output."""

    class Context(abc.ABC):
        @abc.abstractmethod
        def timer_service(self) -> TimerService: ...

        @abc.abstractmethod
        def timestamp(self) -> Optional[int]: ...

    @abc.abstractmethod
    def process_element(self, value: Any, ctx: "ProcessFunction.Context") -> Optional[Iterable[Any]]: ...


class KeyedProcessFunction(Function, Generic[KEY, IN, OUT]):
    """A ``ProcessFunction`` on a keyed stream, with keyed state and timers (PyFlink's
    ``KeyedProcessFunction``)."""

    class Context(abc.ABC):
        @abc.abstractmethod
        def timer_service(self) -> TimerService: ...

        @abc.abstractmethod
        def timestamp(self) -> Optional[int]: ...

        @abc.abstractmethod
        def get_current_key(self) -> Any: ...

    class OnTimerContext(Context):
        @abc.abstractmethod
        def time_domain(self) -> Any: ...

    @abc.abstractmethod
    def process_element(self, value: Any, ctx: "KeyedProcessFunction.Context") -> Optional[Iterable[Any]]: ...

    def on_timer(self, timestamp: int, ctx: "KeyedProcessFunction.OnTimerContext") -> Optional[Iterable[Any]]:
        pass


# -- wrapping plain callables -------------------------------------------------------------

class _MapWrapper(MapFunction):
    def __init__(self, fn: Callable[[Any], Any]):
        self.map = fn  # bound straight to the callable: no extra call per record

    def map(self, value):  # pragma: no cover - replaced per instance
        raise AssertionError


class _FlatMapWrapper(FlatMapFunction):
    def __init__(self, fn):
        self.flat_map = fn

    def flat_map(self, value):  # pragma: no cover
        raise AssertionError


class _FilterWrapper(FilterFunction):
    def __init__(self, fn):
        self.filter = fn

    def filter(self, value):  # pragma: no cover
        raise AssertionError


class _ReduceWrapper(ReduceFunction):
    def __init__(self, fn):
        self.reduce = fn

    def reduce(self, value1, value2):  # pragma: no cover
        raise AssertionError


class _KeySelectorWrapper(KeySelector):
    def __init__(self, fn):
        self.get_key = fn

    def get_key(self, value):  # pragma: no cover
        raise AssertionError


class _PartitionerWrapper(Partitioner):
    def __init__(self, fn):
        self.partition = fn

    def partition(self, key, num_partitions):  # pragma: no cover
        raise AssertionError


class _SinkWrapper(SinkFunction):
    def __init__(self, fn):
        self._fn = fn

    def invoke(self, value, context):
        self._fn(value)


class _ProcessWrapper(ProcessFunction):
    def __init__(self, fn):
        self.process_element = fn

    def process_element(self, value, ctx):  # pragma: no cover
        raise AssertionError


_WRAPPERS: Dict[type, type] = {
    MapFunction: _MapWrapper,
    FlatMapFunction: _FlatMapWrapper,
    FilterFunction: _FilterWrapper,
    ReduceFunction: _ReduceWrapper,
    KeySelector: _KeySelectorWrapper,
    Partitioner: _PartitionerWrapper,
    SinkFunction: _SinkWrapper,
    ProcessFunction: _ProcessWrapper,
}


def wrap(func: Any, kind: type, api_call: str) -> Function:
    """Return ``func`` as an instance of the function class ``kind``.

    :raises TypeError: if ``func`` is neither a ``kind`` instance nor callable; the message
        names the API call (e.g. ``"DataStream.map"``) and the value's type.
    """
    if isinstance(func, kind):
        return func
    if isinstance(func, Function) and not isinstance(func, kind):
        raise TypeError(
            f"{api_call} expects a {kind.__name__} or a callable, got a {type(func).__name__}"
        )
    if callable(func) and kind in _WRAPPERS:
        return _WRAPPERS[kind](func)
    raise TypeError(f"{api_call} expects a {kind.__name__} or a callable, got {func!r} of type {type(func).__name__}")
