"""What one Spark task of a savepoint write does (Flink's ``KeyedStateBootstrapOperator``,
``StateBootstrapOperator``, ``BroadcastStateBootstrapOperator`` and ``SnapshotUtils``): run a
bootstrap function over the rows of one subtask, take the subtask's state the way a job's
operator is snapshotted (heap keyed state backend, timer services, operator state backend), and
write it with the checkpoint writer itself
(:meth:`~rill.state.checkpoint.filesystem.FileSystemCheckpointStorageLocation.write_operator_subtask_state`),
so the files are exactly a checkpoint's. Each function returns ``(subtask index, handle
description)``; the driver puts the descriptions into ``_metadata``.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, Optional, Tuple

from rill.common.functions import RuntimeContext
from rill.operators.checkpointed_function import (
    DefaultKeyedStateStore,
    StateInitializationContextImpl,
    snapshot_function_state,
)
from rill.operators.processing_time_service import ProcessingTimeService, ScheduledTimer
from rill.operators.process import KeyedProcessOperator, SimpleTimerService
from rill.operators.timer_service import InternalTimeServiceManager, Triggerable
from rill.state.checkpoint.filesystem import FileOperatorSubtaskStateHandle, FileSystemCheckpointStorageLocation
from rill.state.checkpoint.operator_subtask_state import OperatorSubtaskState
from rill.state.heap import HeapKeyedStateBackend
from rill.state.key_groups import compute_key_group_range_for_operator_index
from rill.state.operator_state import DefaultOperatorStateBackend
from rill.state_processor.bootstrap_functions import (
    BroadcastStateBootstrapFunction,
    KeyedStateBootstrapFunction,
    StateBootstrapFunction,
)

__all__ = ["BootstrapError", "BootstrapTask", "NeverFireProcessingTimeService", "BootstrapRuntimeContext",
           "write_keyed_subtask", "write_operator_state_subtask", "write_broadcast_subtask",
           "rewrite_subtask"]

class BootstrapError(RuntimeError):
    """Writing an operator's state on Spark failed: a key selector or bootstrap function raised,
    or a value did not fit its declared type. The message names the operator and the row or
    value; the executor's error is the cause."""


#: ``(subtask index, the handle's description as _metadata stores it)``
SubtaskResult = Tuple[int, Dict[str, Any]]


@dataclass(frozen=True)
class BootstrapTask:
    """What every Spark task of one operator's write needs (pickled to the executors).

    :ivar directory: the savepoint directory (path or URL).
    :ivar operator_id: the operator's id, 32 hex digits.
    :ivar uid: the operator's uid, or ``None`` (named by ``for_uid_hash``).
    :ivar parallelism: the number of subtasks written.
    :ivar max_parallelism: the operator's number of key groups.
    :ivar function: the bootstrap function (each task unpickles its own copy).
    :ivar checkpoint_id: written in every row's ``checkpoint_id``.
    :ivar timestamp: the savepoint's timestamp, epoch ms (the snapshot context's).
    :ivar key_type: the declared key type (typed ``key`` column), or ``None`` (untyped).
    """

    directory: str
    operator_id: str
    uid: Optional[str]
    parallelism: int
    max_parallelism: int
    function: Any
    checkpoint_id: int
    timestamp: int
    key_type: Any = None

    @property
    def name(self) -> str:
        """The operator, for messages."""
        return f"uid {self.uid!r}" if self.uid is not None else f"operator id {self.operator_id}"

    def write(self, index: int, state: OperatorSubtaskState) -> SubtaskResult:
        """Write subtask ``index``'s state as a checkpoint writes it."""
        location = FileSystemCheckpointStorageLocation(self.directory, self.checkpoint_id)
        handle = location.write_operator_subtask_state(self.operator_id, index, state, self.uid)
        return index, handle.description


class _NeverFiringTimer(ScheduledTimer):
    __slots__ = ("_timestamp", "_cancelled")

    def __init__(self, timestamp_ms: int) -> None:
        self._timestamp = timestamp_ms
        self._cancelled = False

    @property
    def timestamp_ms(self) -> int:
        return self._timestamp

    def cancel(self) -> bool:
        self._cancelled = True
        return True

    def is_cancelled(self) -> bool:
        return self._cancelled

    def is_done(self) -> bool:
        return self._cancelled


class NeverFireProcessingTimeService(ProcessingTimeService):
    """The processing-time service of a bootstrap (Flink's ``NeverFireProcessingTimeService``):
    the wall clock, and timers that are kept (to be written) but never fire."""

    def get_current_processing_time(self) -> int:
        return int(time.time() * 1000)

    def register_timer(self, timestamp_ms: int, callback: Any) -> ScheduledTimer:
        return _NeverFiringTimer(timestamp_ms)

    def schedule_with_fixed_delay(self, callback: Any, initial_delay_ms: int, period_ms: int) -> ScheduledTimer:
        return _NeverFiringTimer(initial_delay_ms)

    def schedule_at_fixed_rate(self, callback: Any, initial_delay_ms: int, period_ms: int) -> ScheduledTimer:
        return _NeverFiringTimer(initial_delay_ms)

    def quiesce(self) -> None:
        pass

    def shutdown(self) -> None:
        pass

    def is_terminated(self) -> bool:
        return False


class _VoidTriggerable(Triggerable):
    """Flink's ``VoidTriggerable``: a bootstrap's timers never fire."""

    def on_event_time(self, timer: Any) -> None:
        pass

    def on_processing_time(self, timer: Any) -> None:
        pass


class BootstrapRuntimeContext(RuntimeContext):
    """The runtime context of a bootstrap function: the subtask's facts and, for a keyed
    bootstrap, its keyed state (registered at any time, as in a job).

    :raises RuntimeError: (``get_*_state``) when the operator is not keyed.
    :raises TypeError: (``get_*_state``) for a descriptor of another kind than the method's.
    """

    def __init__(self, task: BootstrapTask, index: int, parallelism: int,
                 backend: Optional[HeapKeyedStateBackend]) -> None:
        self._task = task
        self._index = index
        self._parallelism = parallelism
        self._store = None if backend is None else DefaultKeyedStateStore(backend, self.get_task_name())

    def get_task_name(self) -> str:
        return f"Bootstrap({self._task.name})"

    def get_number_of_parallel_subtasks(self) -> int:
        return self._parallelism

    def get_max_number_of_parallel_subtasks(self) -> int:
        return self._task.max_parallelism

    def get_index_of_this_subtask(self) -> int:
        return self._index

    def get_attempt_number(self) -> int:
        return 0

    def get_task_name_with_subtasks(self) -> str:
        return f"{self.get_task_name()} ({self._index + 1}/{self._parallelism})"

    def get_job_parameter(self, key: str, default_value: Optional[str] = None) -> Optional[str]:
        return default_value

    def _keyed(self, method: str) -> DefaultKeyedStateStore:
        if self._store is None:
            raise RuntimeError(f"{method}: keyed state needs a keyed bootstrap "
                               f"(bootstrap_with(df).key_by(...)) ({self.get_task_name()})")
        return self._store

    def get_state(self, state_descriptor: Any) -> Any:
        return self._keyed("get_state").get_state(state_descriptor)

    def get_list_state(self, state_descriptor: Any) -> Any:
        return self._keyed("get_list_state").get_list_state(state_descriptor)

    def get_map_state(self, state_descriptor: Any) -> Any:
        return self._keyed("get_map_state").get_map_state(state_descriptor)

    def get_reducing_state(self, state_descriptor: Any) -> Any:
        return self._keyed("get_reducing_state").get_reducing_state(state_descriptor)

    def get_aggregating_state(self, state_descriptor: Any) -> Any:
        return self._keyed("get_aggregating_state").get_aggregating_state(state_descriptor)


class _KeyedContext(KeyedStateBootstrapFunction.Context):
    __slots__ = ("_timers", "_backend")

    def __init__(self, timers: SimpleTimerService, backend: HeapKeyedStateBackend) -> None:
        self._timers = timers
        self._backend = backend

    def timer_service(self) -> SimpleTimerService:
        return self._timers

    def get_current_key(self) -> Any:
        return self._backend.get_current_key()


class _OperatorContext(StateBootstrapFunction.Context):
    __slots__ = ()

    def current_processing_time(self) -> int:
        return int(time.time() * 1000)


class _BroadcastContext(_OperatorContext, BroadcastStateBootstrapFunction.Context):
    __slots__ = ("_backend",)

    def __init__(self, backend: DefaultOperatorStateBackend) -> None:
        self._backend = backend

    def get_broadcast_state(self, descriptor: Any) -> Any:
        return self._backend.get_broadcast_state(descriptor)


def _process(task: BootstrapTask, rows: Iterable[Any], process: Callable[[Any], None],
             describe: Callable[[Any], str] = repr) -> None:
    """``process`` each row; a failure names the operator, the function and the row
    (``describe(row)``)."""
    for row in rows:
        try:
            process(row)
        except Exception as e:
            raise BootstrapError(f"with_operator({task.name}): {type(task.function).__name__}.process_element "
                                 f"failed on the row {describe(row)}: {type(e).__name__}: {e}") from e


def write_keyed_subtask(task: BootstrapTask, index: int, items: Iterable[Tuple[Any, Any]]) -> SubtaskResult:
    """Run the ``KeyedStateBootstrapFunction`` of ``task`` over ``items`` (``(key, row)`` of the
    key groups of subtask ``index``) and write the subtask's keyed state and timers.

    :raises Exception: what the function raises, or the writer's ``TypeValueError`` when a value
        does not fit its declared type.
    """
    rng = compute_key_group_range_for_operator_index(task.max_parallelism, task.parallelism, index)
    backend = HeapKeyedStateBackend(rng, task.max_parallelism)
    timers = InternalTimeServiceManager(rng, backend, NeverFireProcessingTimeService())
    service = timers.get_internal_timer_service(KeyedProcessOperator.TIMER_SERVICE_NAME, _VoidTriggerable())
    function: KeyedStateBootstrapFunction = task.function
    ctx = _KeyedContext(SimpleTimerService(service), backend)
    function.open(BootstrapRuntimeContext(task, index, task.parallelism, backend))

    def process(item: Tuple[Any, Any]) -> None:
        backend.set_current_key(item[0])
        function.process_element(item[1], ctx)

    try:
        _process(task, items, process, lambda item: f"{item[1]!r} (key {item[0]!r})")
    finally:
        function.close()
    keyed = backend.snapshot()
    if task.key_type is not None:
        keyed = dataclasses.replace(keyed, key_type=task.key_type)
    snapshots = timers.snapshot()
    state = OperatorSubtaskState(task.checkpoint_id, keyed_state=(keyed,),
                                 timers=snapshots if any(s.key_groups for s in snapshots.values()) else {})
    backend.dispose()
    return task.write(index, state)


def write_operator_state_subtask(task: BootstrapTask, index: int, rows: Iterable[Any]) -> SubtaskResult:
    """Run the ``StateBootstrapFunction`` of ``task`` over the rows of one partition and write
    its operator state as subtask ``index`` (``initialize_state``, ``open``, ``process_element``
    per row, ``snapshot_state``, then the operator state backend's snapshot)."""
    backend = DefaultOperatorStateBackend(f"Bootstrap({task.name})")
    function: StateBootstrapFunction = task.function
    function.initialize_state(StateInitializationContextImpl(False, backend, None))
    function.open(BootstrapRuntimeContext(task, index, task.parallelism, None))
    ctx = _OperatorContext()
    try:
        _process(task, rows, lambda row: function.process_element(row, ctx))
        snapshot_function_state(function, task.checkpoint_id, task.timestamp)
    finally:
        function.close()
    return task.write(index, OperatorSubtaskState(task.checkpoint_id, operator_state=backend.snapshot()))


def write_broadcast_subtask(task: BootstrapTask, rows: Iterable[Any]) -> SubtaskResult:
    """Run the ``BroadcastStateBootstrapFunction`` of ``task`` over every row and write its
    broadcast state as subtask 0 (of parallelism 1)."""
    backend = DefaultOperatorStateBackend(f"Bootstrap({task.name})")
    function: BroadcastStateBootstrapFunction = task.function
    function.open(BootstrapRuntimeContext(task, 0, 1, None))
    ctx = _BroadcastContext(backend)
    try:
        _process(task, rows, lambda row: function.process_element(row, ctx))
    finally:
        function.close()
    return task.write(0, OperatorSubtaskState(task.checkpoint_id, operator_state=backend.snapshot()))


def rewrite_subtask(task: BootstrapTask, index: int, handle: FileOperatorSubtaskStateHandle) -> SubtaskResult:
    """Subtask ``index``'s state read from ``handle`` (another snapshot) and written again under
    ``task``'s operator id and uid (an operator whose identifier changed: its files' directory
    and ``operator_id`` / ``operator_uid`` columns follow the new one)."""
    return task.write(index, handle.read())
