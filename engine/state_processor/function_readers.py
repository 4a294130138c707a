"""Running a :class:`~rill.state_processor.functions.KeyedStateReaderFunction` or a window
reader over one split of an operator's keyed state, on a Spark executor (Flink's
``KeyedStateReaderOperator`` and ``WindowReaderOperator``).

A split is one subtask's handle and its key-group range: the executor reads the subtask's
files for that range, restores a :class:`~rill.state.heap.HeapKeyedStateBackend` from them (the
states the function registers read from it, as in the job), and returns the outputs as one
Arrow batch encoded with the output type's column codec.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Set, Tuple

import pyarrow as pa

from rill.common.functions import RuntimeContext
from rill.common.type_conversion import TypeValueError
from rill.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from rill.state.api import VOID_NAMESPACE
from rill.state.checkpoint.arrow_types import ColumnCodec
from rill.state.checkpoint.metadata import OperatorState, OperatorSubtaskStateHandle
from rill.state.checkpoint.operator_subtask_state import OperatorSubtaskState
from rill.state.heap import HeapKeyedStateBackend
from rill.state.key_groups import KeyGroupRange
from rill.state_processor.functions import KeyedStateReaderFunction, WindowReaderFunction

__all__ = ["FunctionSplit", "plan_function_splits", "SavepointRuntimeContext", "read_keys",
           "read_windows", "to_batch", "USER_TIMERS", "WINDOW_TIMERS", "WINDOW_CONTENTS", "MERGING_WINDOW_SET"]

#: Timer service of keyed process functions (``KeyedProcessOperator.TIMER_SERVICE_NAME``).
USER_TIMERS = "user-timers"
#: The window operator's names (``rill.operators.windowing.window_operator``).
WINDOW_TIMERS = "window-timers"
WINDOW_CONTENTS = "window-contents"
MERGING_WINDOW_SET = "merging-window-set"


@dataclass(frozen=True)
class FunctionSplit:
    """One subtask's keyed state over a key-group range, read by one Spark task."""

    handle: OperatorSubtaskStateHandle
    key_group_range: Tuple[int, int]
    subtask: int
    parallelism: int
    max_parallelism: int
    operator: str


def plan_function_splits(op: OperatorState) -> List[FunctionSplit]:
    """One split per subtask with keyed state (the key-group range its parts cover)."""
    splits = []
    for subtask, handle in sorted(op.subtask_states.items()):
        ranges = [k["key_group_range"] for k in handle.description["keyed_state"]]  # type: ignore[attr-defined]
        if ranges:  # a subtask restored from several old ones wrote one part per old subtask
            covered = (min(r[0] for r in ranges), max(r[1] for r in ranges))
            splits.append(FunctionSplit(handle, covered, subtask, op.parallelism, op.max_parallelism,
                                        op.uid or op.operator_id))
    return splits


class _Collector:
    """Flink's ``Collector``: what ``out.collect`` receives, in order."""

    __slots__ = ("values",)

    def __init__(self) -> None:
        self.values: List[Any] = []

    def collect(self, value: Any) -> None:
        self.values.append(value)


def _emit(result: Optional[Iterable[Any]], out: _Collector) -> None:
    if result is not None:
        out.values.extend(result)


class SavepointRuntimeContext(RuntimeContext):
    """The runtime context of a reader function (Flink's ``SavepointRuntimeContext``): subtask
    facts of the snapshot's subtask, keyed state registered only during ``open``.

    :raises RuntimeError: (from the ``get_*_state`` methods) after ``open``.
    :raises TypeError: for a descriptor of another kind than the method's.
    """

    def __init__(self, backend: HeapKeyedStateBackend, split: FunctionSplit) -> None:
        self._backend = backend
        self._split = split
        self.registered: List[str] = []
        self.open = True

    def get_task_name(self) -> str:
        return f"KeyedStateReader({self._split.operator})"

    def get_number_of_parallel_subtasks(self) -> int:
        return self._split.parallelism

    def get_max_number_of_parallel_subtasks(self) -> int:
        return self._split.max_parallelism

    def get_index_of_this_subtask(self) -> int:
        return self._split.subtask

    def get_attempt_number(self) -> int:
        return 0

    def get_task_name_with_subtasks(self) -> str:
        return f"{self.get_task_name()} ({self._split.subtask + 1}/{self._split.parallelism})"

    def get_job_parameter(self, key: str, default_value: Optional[str] = None) -> Optional[str]:
        return default_value

    def _register(self, descriptor: Any, kind: type, method: str) -> Any:
        if not self.open:
            raise RuntimeError(f"{method}({getattr(descriptor, 'name', descriptor)!r}): state descriptors "
                               f"may only be registered inside open() of a reader function "
                               f"(operator {self._split.operator})")
        if not isinstance(descriptor, kind):
            raise TypeError(f"{method} expects a {kind.__name__}, got {descriptor!r} of type "
                            f"{type(descriptor).__name__} (operator {self._split.operator})")
        state = self._backend.get_or_create_keyed_state(descriptor)
        self.registered.append(descriptor.name)
        return state

    def get_state(self, state_descriptor: Any) -> Any:
        return self._register(state_descriptor, ValueStateDescriptor, "get_state")

    def get_list_state(self, state_descriptor: Any) -> Any:
        return self._register(state_descriptor, ListStateDescriptor, "get_list_state")

    def get_map_state(self, state_descriptor: Any) -> Any:
        return self._register(state_descriptor, MapStateDescriptor, "get_map_state")

    def get_reducing_state(self, state_descriptor: Any) -> Any:
        return self._register(state_descriptor, ReducingStateDescriptor, "get_reducing_state")

    def get_aggregating_state(self, state_descriptor: Any) -> Any:
        return self._register(state_descriptor, AggregatingStateDescriptor, "get_aggregating_state")


class _KeyContext(KeyedStateReaderFunction.Context):
    __slots__ = ("event", "processing")

    def __init__(self) -> None:
        self.event: Set[int] = set()
        self.processing: Set[int] = set()

    def registered_event_time_timers(self) -> Set[int]:
        return set(self.event)

    def registered_processing_time_timers(self) -> Set[int]:
        return set(self.processing)


def _timers_by_key(state: OperatorSubtaskState, service: str) -> Dict[Any, Tuple[Set[int], Set[int]]]:
    """``(key, namespace)`` -> (event-time, processing-time) timestamps of ``service``."""
    out: Dict[Any, Tuple[Set[int], Set[int]]] = {}
    timers = state.timers.get(service)
    if timers is None:
        return out
    for per_kg in timers.key_groups.values():
        for ts, key, ns in per_kg.event_time:
            out.setdefault((key, ns), (set(), set()))[0].add(ts)
        for ts, key, ns in per_kg.processing_time:
            out.setdefault((key, ns), (set(), set()))[1].add(ts)
    return out


def read_keys(split: FunctionSplit, function: KeyedStateReaderFunction) -> List[Any]:
    """The outputs of ``function`` over the keys of ``split`` (see the module docstring).

    :raises RuntimeError, TypeError, ValueError: from registration (after ``open``; a
        descriptor of another kind than the stored state's), or what the function raises.
    """
    rng = KeyGroupRange(*split.key_group_range)
    state = split.handle.read(rng)
    backend = HeapKeyedStateBackend(rng, split.max_parallelism)
    backend.restore(state.keyed_state)
    context = SavepointRuntimeContext(backend, split)
    function.open(context)
    context.open = False
    timers = _timers_by_key(state, USER_TIMERS)
    out = _Collector()
    try:
        for key in _keys(state, context.registered):
            backend.set_current_key(key)
            ctx = _KeyContext()
            found = timers.get((key, VOID_NAMESPACE))
            if found is not None:
                ctx.event, ctx.processing = found
            _emit(function.read_key(key, ctx, out), out)
    finally:
        function.close()
        backend.dispose()
    return out.values


def _keys(state: OperatorSubtaskState, names: List[str]) -> List[Any]:
    """Keys with an entry of one of ``names`` in the void namespace, key group by key group."""
    seen: Dict[Any, None] = {}
    for snap in state.keyed_state:
        for kg in sorted(snap.key_groups):
            for name in names:
                for key, ns, _ in snap.entries(name, kg):
                    if ns == VOID_NAMESPACE:
                        seen.setdefault(key, None)
    return list(seen)


class _WindowContext(WindowReaderFunction.Context):
    __slots__ = ("_window", "event", "processing")

    def __init__(self, window: Any, timers: Tuple[Set[int], Set[int]]) -> None:
        self._window = window
        self.event, self.processing = timers

    def window(self) -> Any:
        return self._window

    def registered_event_time_timers(self) -> Set[int]:
        return set(self.event)

    def registered_processing_time_timers(self) -> Set[int]:
        return set(self.processing)


class _PassThrough(WindowReaderFunction):
    """Flink's ``PassThroughReader``: the window's contents as they are."""

    def read_window(self, key: Any, context: Any, elements: Iterable[Any], out: Any) -> Iterable[Any]:
        return elements


def read_windows(split: FunctionSplit, contents: Callable[[Any], List[Any]],
                 function: Optional[WindowReaderFunction], merging: bool) -> List[Any]:
    """The outputs of ``function`` (default: the contents themselves) over every key and
    window of the window operator's ``"window-contents"`` state in ``split``.

    :param contents: stored value of a window -> its elements (the aggregate's result, the
        reduced value, or the list of elements).
    :param merging: whether the assigner merges windows: state windows are then mapped to the
        windows through the ``"merging-window-set"`` state.
    """
    reader = function if function is not None else _PassThrough()
    rng = KeyGroupRange(*split.key_group_range)
    state = split.handle.read(rng)
    backend = HeapKeyedStateBackend(rng, split.max_parallelism)
    backend.restore(state.keyed_state)
    context = SavepointRuntimeContext(backend, split)
    reader.open(context)
    context.open = False
    timers = _timers_by_key(state, WINDOW_TIMERS)
    out = _Collector()
    try:
        for snap in state.keyed_state:
            for kg in sorted(snap.key_groups):
                merged = {(key, state_window): window
                          for key, _, pairs in snap.entries(MERGING_WINDOW_SET, kg)
                          for window, state_window in pairs} if merging else {}
                for key, namespace, stored in snap.entries(WINDOW_CONTENTS, kg):
                    window = merged.get((key, namespace), namespace)
                    ctx = _WindowContext(window, timers.get((key, window), (set(), set())))
                    _emit(reader.read_window(key, ctx, contents(stored), out), out)
    finally:
        reader.close()
        backend.dispose()
    return out.values


def to_batch(values: List[Any], codec: ColumnCodec, schema: pa.Schema, where: str) -> pa.RecordBatch:
    """``values`` (outputs of the output type) as one batch of ``schema``.

    :raises TypeValueError: if an output does not fit the output type (naming ``where``).
    """
    try:
        array = codec.encode(values)
    except (TypeValueError, pa.ArrowInvalid, pa.ArrowTypeError, TypeError, KeyError) as e:
        raise TypeValueError(f"{where}: an output does not fit the output type: {e}") from e
    if pa.types.is_struct(codec.arrow_type) and schema.names != ["value"]:
        return pa.RecordBatch.from_struct_array(array).cast(schema)
    return pa.RecordBatch.from_arrays([array], schema=schema)
