"""Operator test harnesses (Flink's ``OneInputStreamOperatorTestHarness`` and
``KeyedOneInputStreamOperatorTestHarness``, ``org.apache.flink.streaming.util``). Public: user
code tests its operators and functions with them.

A harness runs one operator instance as one subtask would, on the same code path production
uses: the operator gets a real :class:`~rill.operators.context.StreamOperatorContext` whose
state services come from the task's
:class:`~rill.operators.state_initializer.StreamTaskStateInitializer` (a
:class:`~rill.operators.runtime_context.StreamingRuntimeContext`, an operator state backend,
and for the keyed harness a ``HeapKeyedStateBackend`` over the subtask's key-group range and an
:class:`~rill.operators.timer_service.InternalTimeServiceManager`); :meth:`snapshot` and
``initialize_state(restored)`` take the operator's state into an ``OperatorSubtaskState`` and
back, as checkpoints and recovery will; processing time is a
``TestProcessingTimeService`` that the test advances with :meth:`set_processing_time` (due
timers fire synchronously, in order). Only the output differs: a collecting ``Output`` that
records every record and watermark in emission order, side outputs per ``OutputTag``, and
checks the batch convention (a ``list`` of values, ``None`` or a ``list`` of as many int
timestamps).

Differences from production: the operator instance is used as given (production deploys a
cloudpickle copy per subtask, see ``SimpleOperatorFactory``), and processing-time callbacks run
on the test's thread inside :meth:`set_processing_time` instead of as mails.

Example::

    with KeyedOneInputStreamOperatorTestHarness(KeyedProcessOperator(fn), lambda v: v[0]) as h:
        h.process_element(("a", 1), 10)
        h.process_watermark(20)
        assert h.extract_output_values() == [...]
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Union

from rill.operators.base import OneInputStreamOperator, Output
from rill.operators.context import StreamOperatorContext
from rill.operators.output_tag import OutputTag
from rill.common.streamrecord import StreamRecord, Watermark
from rill.operators.processing_time_service import TestProcessingTimeService
from rill.operators.state_initializer import (
    KeyedStateBackendFactory,
    StreamTaskStateInitializer,
    snapshot_operator_state,
)
from rill.state.checkpoint.operator_subtask_state import OperatorSubtaskState

__all__ = [
    "CollectingOutput",
    "OneInputStreamOperatorTestHarness",
    "KeyedOneInputStreamOperatorTestHarness",
]


class CollectingOutput(Output):
    """An ``Output`` that records what an operator emits.

    :ivar elements: ``StreamRecord``s and ``Watermark``s in emission order.
    :ivar side_outputs: ``OutputTag`` -> list of ``StreamRecord``.
    :raises AssertionError: when an operator breaks the batch convention or emits to a side
        output with something that is not an ``OutputTag``.
    """

    def __init__(self) -> None:
        self.elements: List[Union[StreamRecord, Watermark]] = []
        self.side_outputs: Dict[OutputTag, List[StreamRecord]] = {}

    def collect(self, value: Any, timestamp: Optional[int] = None) -> None:
        _check_timestamp(timestamp)
        self.elements.append(StreamRecord(value, timestamp))

    def collect_batch(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        assert type(values) is list, f"collect_batch: values must be a list, got {type(values).__name__}"
        if timestamps is None:
            self.elements.extend([StreamRecord(v, None) for v in values])
            return
        assert type(timestamps) is list, (
            f"collect_batch: timestamps must be None or a list, got {type(timestamps).__name__}"
        )
        assert len(timestamps) == len(values), (
            f"collect_batch: {len(values)} values but {len(timestamps)} timestamps"
        )
        for t in timestamps:
            _check_timestamp(t)
        self.elements.extend([StreamRecord(v, t) for v, t in zip(values, timestamps)])

    def collect_side(self, output_tag: Any, value: Any, timestamp: Optional[int] = None) -> None:
        assert isinstance(output_tag, OutputTag), f"collect_side: expected an OutputTag, got {output_tag!r}"
        _check_timestamp(timestamp)
        self.side_outputs.setdefault(output_tag, []).append(StreamRecord(value, timestamp))

    def emit_watermark(self, watermark: Watermark) -> None:
        assert isinstance(watermark, Watermark), f"emit_watermark: expected a Watermark, got {watermark!r}"
        self.elements.append(watermark)

    def emit_watermark_status(self, status) -> None:
        """Watermark statuses are recorded in the output like watermarks."""
        self.elements.append(status)


def _check_timestamp(t: Any) -> None:
    assert t is None or (type(t) is int), f"timestamps must be int epoch ms or None, got {t!r}"


class OneInputStreamOperatorTestHarness:
    """Drives one one-input operator as subtask ``subtask_index`` of ``parallelism``.

    Life cycle as Flink's harness: :meth:`open` runs whatever of ``setup`` →
    ``initialize_state`` → ``open`` has not run yet; :meth:`close` finishes the operator
    (``finish``) unless it failed, then closes it. Used as a context manager it opens on enter
    and closes on exit (without ``finish`` when the block raised).

    :param operator: the operator under test (used as is).
    :param max_parallelism: number of key groups (default 128).
    :param parallelism: number of parallel subtasks (default 1).
    :param subtask_index: this subtask's 0-based index (default 0).
    :param task_name: the task name the runtime context reports (default: the operator's
        ``default_name`` or class name).
    :param job_parameters: global job parameters (str -> str).
    :param attempt_number: execution attempt (default 0).
    :param initial_processing_time_ms: start of the test clock (default 0).
    :param keyed_state_backend_factory: ``(key_group_range, max_parallelism) -> backend`` for
        keyed operators (default the heap backend); e.g. a RocksDB backend's.
    """

    def __init__(
        self,
        operator: OneInputStreamOperator,
        max_parallelism: int = 128,
        parallelism: int = 1,
        subtask_index: int = 0,
        *,
        task_name: Optional[str] = None,
        job_parameters: Optional[Dict[str, str]] = None,
        attempt_number: int = 0,
        initial_processing_time_ms: int = 0,
        keyed_state_backend_factory: Optional[KeyedStateBackendFactory] = None,
    ) -> None:
        if not 0 <= subtask_index < parallelism:
            raise ValueError(f"subtask_index {subtask_index} is not in [0, {parallelism})")
        self.operator = operator
        self.max_parallelism = max_parallelism
        self.parallelism = parallelism
        self.subtask_index = subtask_index
        self.processing_time_service = TestProcessingTimeService(initial_processing_time_ms)
        self.output = CollectingOutput()
        name = task_name or getattr(operator, "default_name", None) or type(operator).__name__
        self.context = StreamOperatorContext(
            task_name=name,
            operator_name=name,
            operator_id="0" * 32,
            subtask_index=subtask_index,
            parallelism=parallelism,
            max_parallelism=max_parallelism,
            attempt_number=attempt_number,
            processing_time_service=self.processing_time_service,
            job_parameters=dict(job_parameters or {}),
        )
        self._set_key_selectors()
        self._state_initializer = (StreamTaskStateInitializer() if keyed_state_backend_factory is None
                                   else StreamTaskStateInitializer(keyed_state_backend_factory))
        self._state_initializer.initialize(self.context)
        self._is_setup = False
        self._is_initialized = False
        self._is_open = False
        self._is_finished = False
        self._is_closed = False

    def _set_key_selectors(self) -> None:
        """Non-keyed: no state key selector, so no keyed backend and no timers."""

    # -- life cycle --------------------------------------------------------------------
    def setup(self) -> None:
        """``operator.setup(context, output)``."""
        if not self._is_setup:
            self.operator.setup(self.context, self.output)
            self._is_setup = True

    def initialize_state(self, restored: Optional[OperatorSubtaskState] = None) -> None:
        """``setup`` if needed, then ``operator.initialize_state()`` (Flink's
        ``initializeState``).

        :param restored: restore the operator from this snapshot (as :meth:`snapshot` gives
            it, or one of several harnesses' for rescaling): the state services are rebuilt
            from it, as the task does on recovery.
        :raises RuntimeError: if ``restored`` is given after the state was initialized.
        """
        if restored is not None:
            if self._is_initialized:
                raise RuntimeError("initialize_state(restored) after the operator state was initialized")
            manager = self.context.timer_service_manager
            if manager is not None:
                manager.close()
            self._state_initializer.initialize(self.context, restored)
        self.setup()
        if not self._is_initialized:
            self.operator.initialize_state()
            self._is_initialized = True

    def open(self) -> None:
        """``setup`` and ``initialize_state`` if needed, then ``operator.open()``."""
        self.initialize_state()
        if not self._is_open:
            self.operator.open()
            self._is_open = True

    def end_input(self) -> None:
        """``operator.end_input()``: the bounded input is exhausted."""
        self.operator.end_input()

    def finish(self) -> None:
        """``operator.finish()`` (once)."""
        if not self._is_finished:
            self._is_finished = True
            self.operator.finish()

    def close(self) -> None:
        """``finish`` (if not yet), then ``operator.close()`` and release the services (once)."""
        if self._is_closed:
            return
        try:
            if self._is_open:
                self.finish()
        finally:
            self._close_without_finish()

    def _close_without_finish(self) -> None:
        if self._is_closed:
            return
        self._is_closed = True
        try:
            if self._is_setup:
                self.operator.close()
        finally:
            manager = self.context.timer_service_manager
            if manager is not None:
                manager.close()
            self.processing_time_service.shutdown()

    def __enter__(self) -> "OneInputStreamOperatorTestHarness":
        self.open()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self._close_without_finish()

    # -- input -------------------------------------------------------------------------
    def process_element(self, value: Any, timestamp: Optional[int] = None) -> None:
        """Feed one record through ``operator.process_element``; ``value`` may be a
        ``StreamRecord`` (then ``timestamp`` must be ``None``)."""
        if isinstance(value, StreamRecord):
            if timestamp is not None:
                raise ValueError("pass the timestamp in the StreamRecord or as an argument, not both")
            value, timestamp = value.value, value.timestamp
        self.operator.process_element(value, timestamp)

    def process_elements(self, elements: List[Any]) -> None:
        """``process_element`` for each element (values or ``StreamRecord``s), one at a time."""
        for element in elements:
            self.process_element(element)

    def process_batch(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        """Feed one batch through ``operator.process_batch`` (the batch convention of
        :mod:`rill.operators.base`)."""
        values = list(values)
        if timestamps is not None:
            timestamps = list(timestamps)
            if len(timestamps) != len(values):
                raise ValueError(f"{len(values)} values but {len(timestamps)} timestamps")
        self.operator.process_batch(values, timestamps)

    def process_watermark(self, watermark: Union[Watermark, int]) -> None:
        """``operator.process_watermark``; an ``int`` is a watermark timestamp (ms)."""
        if not isinstance(watermark, Watermark):
            watermark = Watermark(watermark)
        self.operator.process_watermark(watermark)

    def set_processing_time(self, time_ms: int) -> None:
        """Advance the test clock to ``time_ms``; due processing-time timers fire now, in order."""
        self.processing_time_service.set_current_time(time_ms)

    def get_processing_time(self) -> int:
        return self.processing_time_service.get_current_processing_time()

    # -- output ------------------------------------------------------------------------
    def get_output(self) -> List[Union[StreamRecord, Watermark]]:
        """Records (``StreamRecord``) and watermarks in emission order (the live list, as
        Flink's ``getOutput``: clearing it clears the harness' output)."""
        return self.output.elements

    def extract_output_stream_records(self) -> List[StreamRecord]:
        """The emitted ``StreamRecord``s, without watermarks."""
        return [e for e in self.output.elements if isinstance(e, StreamRecord)]

    def extract_output_values(self) -> List[Any]:
        """The emitted record values, without timestamps and watermarks."""
        return [e.value for e in self.output.elements if isinstance(e, StreamRecord)]

    def get_side_output(self, output_tag: OutputTag) -> List[StreamRecord]:
        """The records emitted to ``output_tag`` (empty if none; Flink returns null)."""
        return list(self.output.side_outputs.get(output_tag, ()))

    # -- timers, state -----------------------------------------------------------------
    def snapshot(self, checkpoint_id: int = 0, timestamp: int = 0) -> OperatorSubtaskState:
        """The operator's state now (operator state, keyed state, timers), as a checkpoint
        takes it (Flink's ``snapshot``); another harness restores from it with
        :meth:`initialize_state`.

        :param checkpoint_id: the checkpoint's id.
        :param timestamp: the checkpoint's timestamp, epoch ms.
        """
        self.setup()
        return snapshot_operator_state(self.operator, checkpoint_id, timestamp)

    def num_event_time_timers(self) -> int:
        manager = self.context.timer_service_manager
        return 0 if manager is None else manager.num_event_time_timers()

    def num_processing_time_timers(self) -> int:
        manager = self.context.timer_service_manager
        return 0 if manager is None else manager.num_processing_time_timers()

    @property
    def keyed_state_backend(self) -> Any:
        """The operator's keyed state backend (``None`` for the non-keyed harness)."""
        return self.context.keyed_state_backend

    def num_keyed_state_entries(self) -> int:
        """Number of (key, namespace) entries over all keyed states (0 if not keyed)."""
        backend = self.context.keyed_state_backend
        return 0 if backend is None else backend.num_key_value_state_entries()


class KeyedOneInputStreamOperatorTestHarness(OneInputStreamOperatorTestHarness):
    """A harness for operators on a keyed stream: the operator gets ``key_selector`` as its
    state key selector, a ``HeapKeyedStateBackend`` over the key-group range of subtask
    ``subtask_index`` of ``parallelism`` (of ``max_parallelism`` key groups) and an
    ``InternalTimeServiceManager``. Records whose key belongs to another subtask fail with the
    backend's ``ValueError``, as in production.

    :param key_selector: a ``KeySelector`` or a callable ``value -> key``.
    :param key_type: type information of the key (the type of a snapshot's ``key`` column).
    Other parameters as :class:`OneInputStreamOperatorTestHarness`.
    """

    def __init__(
        self,
        operator: OneInputStreamOperator,
        key_selector: Union[Callable[[Any], Any], Any],
        key_type: Any = None,
        max_parallelism: int = 128,
        parallelism: int = 1,
        subtask_index: int = 0,
        **kwargs: Any,
    ) -> None:
        self.key_selector = getattr(key_selector, "get_key", key_selector)
        if not callable(self.key_selector):
            raise TypeError(f"key_selector must be a KeySelector or a callable, got {key_selector!r}")
        self.key_type = key_type
        super().__init__(operator, max_parallelism, parallelism, subtask_index, **kwargs)

    def _set_key_selectors(self) -> None:
        self.context.key_selector = self.key_selector
        self.context.key_type = self.key_type

    def get_current_key(self) -> Any:
        return self.context.keyed_state_backend.get_current_key()

    def set_current_key(self, key: Any) -> None:
        """Set the backend's current key (to inspect a key's state from the test)."""
        self.context.keyed_state_backend.set_current_key(key)
