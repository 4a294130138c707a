"""``WindowOperator``: keyed windows with triggers, allowed lateness and late side outputs
(Flink's ``org.apache.flink.streaming.runtime.operators.windowing.WindowOperator``).

Per element (as Flink's ``processElement``): the assigner gives the element's windows; for a
merging assigner each window is added to the key's :class:`MergingWindowSet` (merges move
state by ``merge_namespaces`` and call the trigger's ``on_merge``); windows that are already
late (their cleanup time has passed the watermark) are skipped; otherwise the element is added
to the window's state (namespace = the window, or its state window when merging), the trigger's
``on_element`` decides whether to fire / purge, and a cleanup timer is registered at the
window's cleanup time. An element that no window took and whose
``timestamp + allowed_lateness <= watermark`` is late: it goes to the late side output (with
its timestamp) if one is set, otherwise it is dropped and counted in
``num_late_records_dropped`` (Flink's metric ``numLateRecordsDropped``).

Timers live in the internal timer service ``"window-timers"``, with the window as namespace.
A firing timer calls the trigger; the cleanup timer (event time: ``window.max_timestamp() +
allowed_lateness``; processing time: ``window.max_timestamp()``) then removes the window's
contents, the trigger's state and the window function's per-window state (``clear``).
Firing emits the window function's outputs stamped with ``window.max_timestamp()`` (Flink's
``TimestampedCollector``). Times are epoch ms.

Window state: a ``ReducingState`` / ``AggregatingState`` (incremental: only the accumulator is
kept) or a ``ListState`` of all elements, named ``"window-contents"``.

Fast path (Rill): the common case (a tumbling or sliding assigner with its default trigger,
no evictor) runs in :mod:`~rill.operators.windowing.fast_path`, with the same results.
"""

from __future__ import annotations

from typing import Any, Iterable, List, Optional

from rill.common.functions import Function
from rill.operators.base import AbstractUdfStreamOperator, Output
from rill.operators.output_tag import OutputTag
from rill.operators.timer_service import InternalTimer, Triggerable
from rill.operators.windowing.assigners import MergingWindowAssigner, WindowAssigner
from rill.operators.windowing.fast_path import WindowFastPath
from rill.operators.windowing.merging_window_set import MergingWindowSet
from rill.operators.windowing.triggers import OnMergeContext, Trigger
from rill.operators.windowing.window_functions import InternalWindowFunction, KeyedStateStore, ProcessWindowFunction
from rill.common.streamrecord import MAX_TIMESTAMP, Watermark
from rill.state.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
)
from rill.state.heap_states import AbstractHeapMergingState

__all__ = [
    "WindowOperator",
    "SimpleCounter",
    "LATE_ELEMENTS_DROPPED_METRIC_NAME",
    "WINDOW_STATE_NAME",
    "MERGING_WINDOW_SET_STATE_NAME",
    "TIMER_SERVICE_NAME",
]

#: Flink's metric name (``WindowOperator.LATE_ELEMENTS_DROPPED_METRIC_NAME``).
LATE_ELEMENTS_DROPPED_METRIC_NAME = "numLateRecordsDropped"
#: Flink's names of the window contents' state, the merging window sets' state, the timers.
WINDOW_STATE_NAME = "window-contents"
MERGING_WINDOW_SET_STATE_NAME = "merging-window-set"
TIMER_SERVICE_NAME = "window-timers"

class SimpleCounter:
    """A counter metric (Flink's ``SimpleCounter``)."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def inc(self, n: int = 1) -> None:
        """Add ``n`` (default 1)."""
        self.count += n

    def get_count(self) -> int:
        """The count."""
        return self.count

    def __repr__(self) -> str:
        return f"SimpleCounter({self.count})"


def _open_function(fn: Any, runtime_context: Any) -> None:
    if isinstance(fn, Function):
        fn.open(runtime_context)


def _close_function(fn: Any) -> None:
    if isinstance(fn, Function):
        fn.close()


# -- contexts -----------------------------------------------------------------------------------

class _TriggerContext(OnMergeContext):
    """Flink's ``WindowOperator.Context``: the trigger's view, for the current key and
    ``window``; also runs the trigger's callbacks."""

    __slots__ = ("_operator", "_timers", "_backend", "_trigger", "key", "window", "merged_windows")

    def __init__(self, operator: "WindowOperator") -> None:
        self._operator = operator
        self._timers = operator._timers
        self._backend = operator._backend
        self._trigger = operator.trigger
        self.key: Any = None
        self.window: Any = None
        self.merged_windows: Optional[List[Any]] = None

    # TriggerContext
    def get_current_processing_time(self) -> int:
        return self._timers.current_processing_time()

    def get_current_watermark(self) -> int:
        return self._timers.current_watermark()

    def get_metric_group(self) -> Any:
        return self._operator.context.metrics

    def register_processing_time_timer(self, time: int) -> None:
        self._timers.register_processing_time_timer(self.window, time)

    def register_event_time_timer(self, time: int) -> None:
        self._timers.register_event_time_timer(self.window, time)

    def delete_processing_time_timer(self, time: int) -> None:
        self._timers.delete_processing_time_timer(self.window, time)

    def delete_event_time_timer(self, time: int) -> None:
        self._timers.delete_event_time_timer(self.window, time)

    def get_partitioned_state(self, state_descriptor: StateDescriptor) -> Any:
        return self._backend.get_partitioned_state(self.window, state_descriptor)

    def merge_partitioned_state(self, state_descriptor: StateDescriptor) -> None:
        if self.merged_windows:
            state = self._backend.get_partitioned_state(self.window, state_descriptor)
            if not isinstance(state, AbstractHeapMergingState):
                raise ValueError(
                    f"The given state descriptor does not refer to a mergeable state (MergingState): "
                    f"{state_descriptor!r} (operator '{self._operator.context.operator_name}')"
                )
            state.merge_namespaces(self.window, self.merged_windows)

    # callbacks
    def on_element(self, value: Any, timestamp: Optional[int]):
        return self._trigger.on_element(value, timestamp, self.window, self)

    def on_event_time(self, time: int):
        return self._trigger.on_event_time(time, self.window, self)

    def on_processing_time(self, time: int):
        return self._trigger.on_processing_time(time, self.window, self)

    def on_merge(self, merged_windows: List[Any]) -> None:
        self.merged_windows = merged_windows
        try:
            self._trigger.on_merge(self.window, self)
        finally:
            self.merged_windows = None

    def clear(self) -> None:
        self._trigger.clear(self.window, self)


class _StateStore(KeyedStateStore):
    """Keyed state for a window function: per window (``namespace`` is the window) or global
    (``namespace`` is ``None``: the void namespace)."""

    __slots__ = ("_backend", "_namespace")

    def __init__(self, backend: Any, namespace: Any) -> None:
        self._backend = backend
        self._namespace = namespace

    def _get(self, descriptor: Any) -> Any:
        if self._namespace is None:
            return self._backend.get_or_create_keyed_state(descriptor)
        return self._backend.get_partitioned_state(self._namespace, descriptor)

    get_state = get_list_state = get_map_state = get_reducing_state = get_aggregating_state = _get


class _WindowContext(ProcessWindowFunction.Context):
    """Flink's ``WindowOperator.WindowContext``: what a ``ProcessWindowFunction`` sees."""

    __slots__ = ("_operator", "_timers", "_backend", "window_")

    def __init__(self, operator: "WindowOperator") -> None:
        self._operator = operator
        self._timers = operator._timers
        self._backend = operator._backend
        self.window_: Any = None

    def window(self) -> Any:
        return self.window_

    def current_processing_time(self) -> int:
        return self._timers.current_processing_time()

    def current_watermark(self) -> int:
        return self._timers.current_watermark()

    def window_state(self) -> KeyedStateStore:
        return _StateStore(self._backend, self.window_)

    def global_state(self) -> KeyedStateStore:
        return _StateStore(self._backend, None)

    def output(self, output_tag: OutputTag, value: Any) -> None:
        if not isinstance(output_tag, OutputTag):
            raise TypeError(f"output() needs an OutputTag, got {output_tag!r}")
        self._operator.output.collect_side(output_tag, value, self.window_.max_timestamp())


class _AssignerContext(WindowAssigner.WindowAssignerContext):
    __slots__ = ("_operator", "operator_name")

    def __init__(self, operator: "WindowOperator") -> None:
        self._operator = operator
        self.operator_name = operator.context.operator_name

    def get_current_processing_time(self) -> int:
        return self._operator._timers.current_processing_time()

    def get_runtime_context(self) -> Any:
        return self._operator.context.runtime_context


# -- the operator ---------------------------------------------------------------------------

class WindowOperator(WindowFastPath, AbstractUdfStreamOperator, Triggerable):
    """Windows on a keyed stream (Flink's ``WindowOperator``); see the module docstring.

    :param window_assigner: a :class:`~rill.operators.windowing.assigners.WindowAssigner`.
    :param window_state_descriptor: a ``ReducingStateDescriptor``,
        ``AggregatingStateDescriptor`` or ``ListStateDescriptor`` for the window contents.
    :param window_function: an :class:`InternalWindowFunction` (called on firing).
    :param trigger: a :class:`~rill.operators.windowing.triggers.Trigger`.
    :param allowed_lateness: ms (or a duration) that event-time windows are kept after their
        end; elements arriving meanwhile re-fire the window. Ignored for processing time.
    :param late_data_output_tag: where late elements go (else they are dropped and counted).
    :raises ValueError: for a negative ``allowed_lateness``, or a merging assigner with a
        trigger that cannot merge.
    :raises TypeError: for arguments of the wrong kind.
    :raises RuntimeError: at ``open`` if the operator is not on a keyed stream.
    :raises MissingTimestampError: per record, for a record without timestamp reaching an
        event-time assigner (Flink's message, naming the operator).
    """

    default_name = "Window"

    def __init__(
        self,
        window_assigner: WindowAssigner,
        window_state_descriptor: StateDescriptor,
        window_function: InternalWindowFunction,
        trigger: Trigger,
        allowed_lateness: Any = 0,
        late_data_output_tag: Optional[OutputTag] = None,
    ) -> None:
        from rill.operators.windowing.windows import to_milliseconds  # noqa: PLC0415

        if not isinstance(window_assigner, WindowAssigner):
            raise TypeError(f"{type(self).__name__} needs a WindowAssigner, got {window_assigner!r}")
        if not isinstance(trigger, Trigger):
            raise TypeError(f"{type(self).__name__} needs a Trigger, got {trigger!r}")
        if not isinstance(window_function, InternalWindowFunction):
            raise TypeError(f"{type(self).__name__} needs an InternalWindowFunction, got {window_function!r}")
        if not isinstance(window_state_descriptor, (ReducingStateDescriptor, AggregatingStateDescriptor, ListStateDescriptor)):
            raise TypeError(
                f"{type(self).__name__}: the window state must be a reducing, aggregating or list state, "
                f"got {window_state_descriptor!r}"
            )
        lateness = to_milliseconds(allowed_lateness, "allowed lateness")
        if lateness < 0:
            raise ValueError(f"The allowed lateness cannot be negative, got {lateness} ms ({window_assigner})")
        if isinstance(window_assigner, MergingWindowAssigner) and not trigger.can_merge():
            raise ValueError(
                f"A merging window assigner cannot be used with a trigger that does not support merging: "
                f"{window_assigner} with {trigger!r}"
            )
        if late_data_output_tag is not None and not isinstance(late_data_output_tag, OutputTag):
            raise TypeError(f"The late data output tag must be an OutputTag, got {late_data_output_tag!r}")
        super().__init__(window_function)
        self.window_assigner = window_assigner
        self.window_state_descriptor = window_state_descriptor
        self.trigger = trigger
        self.allowed_lateness = lateness
        self.late_data_output_tag = late_data_output_tag
        self.num_late_records_dropped = SimpleCounter()

    # -- life cycle ------------------------------------------------------------------------------
    def setup(self, context: Any, output: Output) -> None:
        """Use the task's counter ``numLateRecordsDropped`` when its metrics provide counters."""
        super().setup(context, output)
        metrics = context.metrics
        counter = getattr(metrics, "counter", None)
        if callable(counter):
            self.num_late_records_dropped = counter(LATE_ELEMENTS_DROPPED_METRIC_NAME)

    def open(self) -> None:
        """Bind the keyed state backend, the ``"window-timers"`` service and the window state;
        open the functions.

        :raises RuntimeError: if the operator is not on a keyed stream.
        """
        context = self.context
        backend = context.keyed_state_backend
        if backend is None or context.key_selector is None or context.timer_service_manager is None:
            raise RuntimeError(
                f"Operator '{context.operator_name}' ({type(self).__name__}) needs a keyed stream: "
                "key_by() must come before window(), or use window_all()"
            )
        super().open()
        self._incremental_function = self._descriptor_function()
        _open_function(self._incremental_function, context.runtime_context)
        selector = context.key_selector
        self._key_of = getattr(selector, "get_key", selector)
        self._backend = backend
        self._timers = context.timer_service_manager.get_internal_timer_service(TIMER_SERVICE_NAME, self)
        self._is_event_time = self.window_assigner.is_event_time()
        self._merging = isinstance(self.window_assigner, MergingWindowAssigner)
        self._window_state = backend.get_partitioned_state(None, self.window_state_descriptor)
        self._is_list_state = isinstance(self.window_state_descriptor, ListStateDescriptor)
        self._merging_sets_state = (
            backend.get_or_create_keyed_state(ListStateDescriptor(MERGING_WINDOW_SET_STATE_NAME))
            if self._merging else None
        )
        self._trigger_context = _TriggerContext(self)
        self._process_context = _WindowContext(self)
        self._assigner_context = _AssignerContext(self)
        self._assign = self.window_assigner.assign_windows
        self._pending_values: List[Any] = []
        self._pending_timestamps: List[int] = []
        self._fired: set = set()
        self._setup_fast_path()

    def _descriptor_function(self) -> Any:
        d = self.window_state_descriptor
        if isinstance(d, ReducingStateDescriptor):
            return d.get_reduce_function()
        if isinstance(d, AggregatingStateDescriptor):
            return d.get_agg_function()
        return None

    def close(self) -> None:
        """Close the incremental function, then the window function."""
        try:
            _close_function(getattr(self, "_incremental_function", None))
        finally:
            super().close()

    # -- elements --------------------------------------------------------------------------------
    def process_element(self, value: Any, timestamp: Optional[int] = None) -> None:
        """One record (``timestamp``: epoch ms or ``None``)."""
        self.process_batch([value], None if timestamp is None else [timestamp])

    def process_batch(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        """A batch (the convention of :mod:`rill.operators.base`): the fast path where it
        applies, else Flink's ``processElement`` per record."""
        fast = self._fast_kind
        if fast is not None:
            self._process_batch_fast(values, timestamps)
            return
        process = self._process_record
        if timestamps is None:
            for value in values:
                process(value, None)
        else:
            for value, timestamp in zip(values, timestamps):
                process(value, timestamp)

    def _process_record(self, value: Any, timestamp: Optional[int]) -> None:
        """Set the record's key, then Flink's ``processElement``."""
        self._backend.set_current_key(self._key_of(value))
        windows = self._assign(value, timestamp, self._assigner_context)
        key = self._backend.get_current_key()
        tc = self._trigger_context
        ws = self._window_state
        is_skipped = True
        if self._merging:
            merging_windows = self._get_merging_window_set()
            for window in windows:
                actual = merging_windows.add_window(window, self._merge_function(key))
                if self._is_window_late(actual):
                    merging_windows.retire_window(actual)
                    continue
                is_skipped = False
                state_window = merging_windows.get_state_window(actual)
                if state_window is None:
                    raise RuntimeError(f"Window {window} is not in in-flight window set.")
                ws.set_current_namespace(state_window)
                self._add_to_state(ws, value, timestamp)
                tc.key = key
                tc.window = actual
                result = tc.on_element(value, timestamp)
                if result.value[0]:  # fire
                    contents = self._contents(ws)
                    if contents is None:
                        continue
                    self._emit_window_contents(actual, contents)
                if result.value[1]:  # purge
                    ws.clear()
                self._register_cleanup_timer(actual)
            merging_windows.persist()
        else:
            for window in windows:
                if self._is_window_late(window):
                    continue
                is_skipped = False
                ws.set_current_namespace(window)
                self._add_to_state(ws, value, timestamp)
                tc.key = key
                tc.window = window
                result = tc.on_element(value, timestamp)
                if result.value[0]:
                    contents = self._contents(ws)
                    if contents is None:
                        continue
                    self._emit_window_contents(window, contents)
                if result.value[1]:
                    ws.clear()
                self._register_cleanup_timer(window)
        if is_skipped and self._is_element_late(timestamp):
            if self.late_data_output_tag is not None:
                self.output.collect_side(self.late_data_output_tag, value, timestamp)
            else:
                self.num_late_records_dropped.inc()

    def _merge_function(self, key: Any):
        def merge(merge_result, merged_windows, state_window_result, merged_state_windows) -> None:
            timers = self._timers
            if self._is_event_time:
                if merge_result.max_timestamp() + self.allowed_lateness <= timers.current_watermark():
                    raise RuntimeError(
                        "The end timestamp of an event-time window cannot become earlier than the current "
                        f"watermark by merging. Current watermark: {timers.current_watermark()} window: "
                        f"{merge_result} (operator '{self.context.operator_name}')"
                    )
            else:
                now = timers.current_processing_time()
                if merge_result.max_timestamp() <= now:
                    raise RuntimeError(
                        "The end timestamp of a processing-time window cannot become earlier than the "
                        f"current processing time by merging. Current processing time: {now} window: "
                        f"{merge_result} (operator '{self.context.operator_name}')"
                    )
            tc = self._trigger_context
            tc.key = key
            tc.window = merge_result
            tc.on_merge(merged_windows)
            for m in merged_windows:
                tc.window = m
                tc.clear()
                self._delete_cleanup_timer(m)
            self._window_state.merge_namespaces(state_window_result, merged_state_windows)

        return merge

    def _get_merging_window_set(self) -> MergingWindowSet:
        return MergingWindowSet(self.window_assigner, self._merging_sets_state)

    # -- state hooks (overridden by the evicting operator) ----------------------------------------
    def _add_to_state(self, ws: Any, value: Any, timestamp: Optional[int]) -> None:
        ws.add(value)

    def _contents(self, ws: Any) -> Any:
        """The window's contents, or ``None`` if it has none (Flink's ``null``)."""
        contents = ws.get()
        if self._is_list_state and not contents:
            return None
        return contents

    def _emit_window_contents(self, window: Any, contents: Any) -> None:
        self._process_context.window_ = window
        result = self.user_function.process(self._trigger_context.key, window, self._process_context, contents)
        self._emit(result, window.max_timestamp())

    def _emit(self, result: Optional[Iterable[Any]], timestamp: int) -> None:
        if self._pending_values:
            self._flush_pending()
        if result is None:
            return
        try:
            items = iter(result)
        except TypeError:
            raise TypeError(
                f"The window function {self.user_function.name()} of operator '{self.context.operator_name}' "
                f"must return an iterable of outputs (or yield them), got {result!r}"
            ) from None
        out: List[Any] = []
        append = out.append
        collect_side = self.output.collect_side
        try:
            for item in items:
                if item.__class__ is tuple and len(item) == 2 and isinstance(item[0], OutputTag):
                    collect_side(item[0], item[1], timestamp)
                else:
                    append(item)
        finally:
            if out:
                self.output.collect_batch(out, [timestamp] * len(out))

    # -- time ------------------------------------------------------------------------------------
    def _cleanup_time(self, window: Any) -> int:
        if self._is_event_time:
            cleanup = window.max_timestamp() + self.allowed_lateness
            return cleanup if cleanup < MAX_TIMESTAMP else MAX_TIMESTAMP
        return window.max_timestamp()

    def _is_window_late(self, window: Any) -> bool:
        return self._is_event_time and self._cleanup_time(window) <= self._timers.current_watermark()

    def _is_element_late(self, timestamp: Optional[int]) -> bool:
        return (
            self._is_event_time
            and timestamp is not None
            and timestamp + self.allowed_lateness <= self._timers.current_watermark()
        )

    def _register_cleanup_timer(self, window: Any) -> None:
        cleanup = self._cleanup_time(window)
        if cleanup == MAX_TIMESTAMP:
            return  # no cleanup timer for "end of time"
        if self._is_event_time:
            self._timers.register_event_time_timer(window, cleanup)
        else:
            self._timers.register_processing_time_timer(window, cleanup)

    def _delete_cleanup_timer(self, window: Any) -> None:
        cleanup = self._cleanup_time(window)
        if cleanup == MAX_TIMESTAMP:
            return
        if self._is_event_time:
            self._timers.delete_event_time_timer(window, cleanup)
        else:
            self._timers.delete_processing_time_timer(window, cleanup)

    # -- Triggerable -----------------------------------------------------------------------------
    def on_event_time(self, timer: InternalTimer) -> None:
        """An event-time timer of a window fired (the timer's key is current)."""
        if self._fast_kind is not None:
            self._on_timer_fast(timer, True)
        else:
            self._on_timer(timer, True)

    def on_processing_time(self, timer: InternalTimer) -> None:
        """A processing-time timer of a window fired (the timer's key is current)."""
        if self._fast_kind is not None:
            self._on_timer_fast(timer, False)
        else:
            self._on_timer(timer, False)

    def process_watermark(self, watermark: Watermark) -> None:
        """Fire due event-time timers, then forward the watermark (outputs the timers
        buffered on the fast path go out before it)."""
        manager = self.context.timer_service_manager
        try:
            if manager is not None:
                manager.advance_watermark(watermark.timestamp)
        finally:
            self._fired.clear()
            self._flush_pending()
        self.output.emit_watermark(watermark)

    def _flush_pending(self) -> None:
        pending = self._pending_values
        if pending:
            timestamps = self._pending_timestamps
            self._pending_values = []
            self._pending_timestamps = []
            self.output.collect_batch(pending, timestamps)

    def _on_timer(self, timer: InternalTimer, event_time: bool) -> None:
        tc = self._trigger_context
        tc.key = timer.key
        tc.window = window = timer.namespace
        ws = self._window_state
        merging_windows = None
        if self._merging:
            merging_windows = self._get_merging_window_set()
            state_window = merging_windows.get_state_window(window)
            if state_window is None:
                # a timer of a window that merged away (its trigger did not delete it)
                return
            ws.set_current_namespace(state_window)
        else:
            ws.set_current_namespace(window)
        if event_time:
            result = tc.on_event_time(timer.timestamp)
        else:
            result = tc.on_processing_time(timer.timestamp)
        if result.value[0]:
            contents = self._contents(ws)
            if contents is not None:
                self._emit_window_contents(window, contents)
        if result.value[1]:
            ws.clear()
        if event_time == self._is_event_time and timer.timestamp == self._cleanup_time(window):
            self._clear_all_state(window, ws, merging_windows)
        if merging_windows is not None:
            merging_windows.persist()

    def _clear_all_state(self, window: Any, ws: Any, merging_windows: Optional[MergingWindowSet]) -> None:
        ws.clear()
        self._trigger_context.clear()
        self._process_context.window_ = window
        self.user_function.clear(window, self._process_context)
        if merging_windows is not None:
            merging_windows.retire_window(window)
            merging_windows.persist()
