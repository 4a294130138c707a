"""BATCH execution of keyed (and broadcast) operators: their input is grouped by key and fed to
them key by key, and each key's timers fire at the end of its input.

Follows Flink's sort-based BATCH execution (FLIP-140): a keyed input is sorted by key
(``SortingDataInput`` / ``MultiInputSortingDataInput``), the keyed operator sees one key's
records after the other, and on each key switch the ``BatchExecutionInternalTimeService``
fires every event-time and processing-time timer of the finished key with the watermark at
the end of time, then resets it. A broadcast input is read completely before the keyed (or
non-keyed) input of a broadcast operator (Flink's ``BatchCoBroadcastWith[Non]KeyedOperator``).

Rill realizes the sort as a grouping (:class:`~rill.operators.batch_sort_buffer.KeyGroupedBuffer`):
records are appended to their key's group (one key selector call, one dict look-up and two
appends per record, amortized per batch), spilled to disk by key group beyond
``max_buffered_records``; at the end of input each group is put in timestamp order (stable,
as Flink's sort compares the key, then the timestamp) and fed to the wrapped operator as one
batch. Keys come in the order of their first record, or key group by key group after a spill
(Flink: the order of their serialized bytes); nothing else observable depends on it.
Differences from Flink, and why:

- the held input of a non-keyed broadcast operator stays in memory (no spill);
- the keyed state backend is the normal heap backend (Flink's BATCH backend holds only the
  current key's state); a finished key's state is dropped after its timers fired, since the
  key never comes back, so state is as bounded as Flink's;
- of the two inputs of a keyed two-input operator, a key's records of input 1 come before
  its records of input 2 (each in timestamp order).

Watermarks from upstream are swallowed (in BATCH only ``MAX_WATERMARK`` exists, at the end);
the wrapped operator's own per-key watermarks are held back, and ``MAX_WATERMARK`` is emitted
once after the last key, before ``end_input``.
"""

from __future__ import annotations

from typing import Any, List, Optional

from rill.common.execution_options import ExecutionOptions
from rill.common.streamrecord import MAX_WATERMARK
from rill.operators.batch_sort_buffer import KeyGroupedBuffer
from rill.operators.base import (
    AbstractStreamOperator,
    OneInputStreamOperator,
    Output,
    StreamOperator,
    TwoInputStreamOperator,
)

__all__ = [
    "HeldWatermarkOutput",
    "BatchKeyedOneInputOperator",
    "BatchTwoInputOperator",
    "in_timestamp_order",
    "DEFAULT_MAX_BUFFERED_RECORDS",
]

_ABSENT = object()

#: records a keyed BATCH input holds in memory before it spills to disk (per subtask)
DEFAULT_MAX_BUFFERED_RECORDS = ExecutionOptions.SORTED_INPUTS_MAX_RECORDS.default


class HeldWatermarkOutput(Output):
    """Forwards records and side outputs to ``output``; drops watermarks and watermark statuses
    until :meth:`release` (the per-key ``MAX_WATERMARK`` of BATCH execution must not travel
    downstream)."""

    def __init__(self, output: Output) -> None:
        self._output = output
        self._released = False
        # the record paths cost no extra call: bound straight to the real output
        self.collect_batch = output.collect_batch  # type: ignore[method-assign]
        self.collect = output.collect  # type: ignore[method-assign]
        self.collect_side = output.collect_side  # type: ignore[method-assign]

    def release(self) -> None:
        """From now on watermarks and statuses are forwarded."""
        self._released = True

    def emit_watermark(self, watermark) -> None:
        if self._released:
            self._output.emit_watermark(watermark)

    def emit_watermark_status(self, status) -> None:
        if self._released:
            self._output.emit_watermark_status(status)

    def close(self) -> None:
        self._output.close()


def in_timestamp_order(values: List[Any], timestamps: List[Optional[int]]):
    """``(values, timestamps)`` of one group, sorted by timestamp (stable): ``timestamps`` is
    ``None`` when no record has one. Records with and without timestamps in one group keep
    arrival order, returned as ``(values, timestamps with None)`` for per-record feeding."""
    missing = timestamps.count(None)
    if missing == len(timestamps):
        return values, None
    if missing:
        return values, timestamps
    order = sorted(range(len(values)), key=timestamps.__getitem__)
    return [values[i] for i in order], [timestamps[i] for i in order]


def _feed(process_batch, process_element, values: List[Any], timestamps: List[Optional[int]]) -> None:
    values, timestamps = in_timestamp_order(values, timestamps)
    if timestamps is not None and None in timestamps:
        for v, t in zip(values, timestamps):
            process_element(v, t)
    else:
        process_batch(values, timestamps)


def _key_of(selector: Any, operator_name: str, which: str):
    if selector is None:
        raise RuntimeError(f"Operator '{operator_name}' runs in BATCH mode as a keyed operator but its "
                           f"{which} has no key selector")
    return getattr(selector, "get_key", selector)


class _BatchWrapper(StreamOperator):
    """The life cycle of the wrapped operator, delegated; watermarks held (see module)."""

    def __init__(self, operator: StreamOperator, max_buffered_records: int = DEFAULT_MAX_BUFFERED_RECORDS) -> None:
        self.operator = operator
        self.max_buffered_records = max_buffered_records
        self._buffer: Optional[KeyGroupedBuffer] = None

    def setup(self, context, output: Output) -> None:
        self.context = context
        self.output = output
        self._held = HeldWatermarkOutput(output)
        self.operator.setup(context, self._held)

    def _new_buffer(self, width: int) -> KeyGroupedBuffer:
        backend = self.context.keyed_state_backend
        if backend is None:
            raise RuntimeError(f"Operator '{self.context.operator_name}' runs in BATCH mode as a keyed "
                               f"operator but has no keyed state backend")
        return KeyGroupedBuffer(width, backend.compute_key_group_offset, self.max_buffered_records,
                                self.context.operator_name)

    def initialize_state(self) -> None:
        self.operator.initialize_state()

    def open(self) -> None:
        self.operator.open()

    def finish(self) -> None:
        self.operator.finish()

    def close(self) -> None:
        try:
            self.operator.close()
        finally:
            if self._buffer is not None:
                self._buffer.close()

    def get_operator_name(self) -> str:
        return self.operator.get_operator_name()

    def snapshot_state(self, checkpoint_id: int, timestamp: int):
        return self.operator.snapshot_state(checkpoint_id, timestamp)

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self.operator.notify_checkpoint_complete(checkpoint_id)

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        self.operator.notify_checkpoint_aborted(checkpoint_id)

    def process_watermark(self, watermark) -> None:
        """Swallowed: BATCH inputs carry only the final ``MAX_WATERMARK``, re-emitted after the
        last key."""

    def process_watermark_status(self, status) -> None:
        """Swallowed: a bounded BATCH input has no idleness."""

    def _end_key(self, key: Any) -> None:
        """``key``'s input is complete: its timers fire, event time first (through the
        operator's own watermark handling, which also flushes what it buffers), then
        processing time; the watermark is back at the start of time for the next key, and the
        key's state is dropped (it never comes back)."""
        self._event_time_to_end()
        timers = self.context.timer_service_manager
        if timers is not None:
            timers.fire_all_for_batch_key()
        backend = self.context.keyed_state_backend
        remove_key_state = getattr(backend, "remove_key_state", None)
        if remove_key_state is not None:  # a backend without heap tables (RocksDB)
            remove_key_state(key)
            return
        offset = backend.compute_key_group_offset(key)
        for name in backend.get_registered_state_names():
            by_namespace = backend.get_state_table(name).key_group_maps[offset]
            emptied = [ns for ns, by_key in by_namespace.items()
                       if by_key.pop(key, _ABSENT) is not _ABSENT and not by_key]
            for ns in emptied:
                del by_namespace[ns]

    def _event_time_to_end(self) -> None:
        self.operator.process_watermark(MAX_WATERMARK)


class BatchKeyedOneInputOperator(_BatchWrapper, OneInputStreamOperator):
    """Runs a keyed one-input operator (``KeyedProcessOperator``, window operators, ...) in
    BATCH mode: its input grouped by key, fed key by key at the end of input, each key's timers
    fired after its records (see the module docstring).

    :param operator: the keyed operator prototype (its context must carry a key selector).
    :param max_buffered_records: records held in memory before a spill to disk (>= 1).
    :raises RuntimeError: at ``setup`` if the operator's context has no key selector or keyed
        state backend.
    :raises ValueError: at ``setup`` for ``max_buffered_records`` below 1.
    """

    def setup(self, context, output: Output) -> None:
        super().setup(context, output)
        self._key_of = _key_of(context.key_selector, context.operator_name, "input")
        self._buffer = self._new_buffer(2)

    def process_element(self, value: Any, timestamp: Optional[int] = None) -> None:
        self.process_batch([value], None if timestamp is None else [timestamp])

    def process_batch(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        self._buffer.add(self._key_of, values, timestamps, 0)

    def end_input(self) -> None:
        op = self.operator
        for key, (values, timestamps) in self._buffer.drain():
            _feed(op.process_batch, op.process_element, values, timestamps)
            self._end_key(key)
        self._held.release()
        op.process_watermark(MAX_WATERMARK)
        op.end_input()


class BatchTwoInputOperator(_BatchWrapper, TwoInputStreamOperator):
    """Runs a two-input operator in BATCH mode.

    - ``keyed_inputs=(True, True)`` (keyed ``connect``/co-process, interval join): both inputs
      grouped by key; at the end of both, each key's records of input 1 then of input 2 are
      fed, then the key's timers fire.
    - ``keyed_inputs=(True, False)`` (``KeyedBroadcastProcessFunction``): input 2 (broadcast)
      goes straight through; input 1 is grouped and fed key by key once both inputs ended, so
      the broadcast side is complete first.
    - ``keyed_inputs=(False, False)`` (``BroadcastProcessFunction``): input 1 is held, in
      arrival order, until the broadcast input 2 ended, then passes through.

    :param operator: the two-input operator prototype.
    :param keyed_inputs: which of the two inputs are keyed (input 2 keyed needs input 1 keyed).
    :param max_buffered_records: records of the keyed inputs held in memory before a spill to
        disk (>= 1).
    :raises ValueError: for ``(False, True)``; at ``setup`` for ``max_buffered_records`` below 1.
    """

    def __init__(self, operator: StreamOperator, keyed_inputs=(True, True),
                 max_buffered_records: int = DEFAULT_MAX_BUFFERED_RECORDS) -> None:
        super().__init__(operator, max_buffered_records)
        if keyed_inputs[1] and not keyed_inputs[0]:
            raise ValueError(f"BatchTwoInputOperator of {type(operator).__name__}: input 2 keyed needs "
                             f"input 1 keyed, got keyed_inputs={keyed_inputs!r}")
        self.keyed_inputs = tuple(keyed_inputs)

    def setup(self, context, output: Output) -> None:
        super().setup(context, output)
        keyed1, keyed2 = self.keyed_inputs
        name = context.operator_name
        self._key_of1 = _key_of(context.key_selector, name, "input 1") if keyed1 else None
        self._key_of2 = _key_of(context.key_selector2, name, "input 2") if keyed2 else None
        if keyed1:
            self._buffer = self._new_buffer(4)
        self._held_values: List[Any] = []
        self._held_timestamps: List[Optional[int]] = []
        self._ended = [False, False]

    def _event_time_to_end(self) -> None:
        # the timers' part of the operator's watermark handling only: the watermark its
        # contexts report (combined over both inputs) stays at the start of time until the
        # final one, as the timer service's does between keys
        AbstractStreamOperator.process_watermark(self.operator, MAX_WATERMARK)

    def process_element1(self, value: Any, timestamp: Optional[int] = None) -> None:
        self.process_batch1([value], None if timestamp is None else [timestamp])

    def process_element2(self, value: Any, timestamp: Optional[int] = None) -> None:
        self.process_batch2([value], None if timestamp is None else [timestamp])

    def process_batch1(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        if self._key_of1 is not None:
            self._buffer.add(self._key_of1, values, timestamps, 0)
        elif self._ended[1]:
            self.operator.process_batch1(values, timestamps)
        else:
            self._held_values.extend(values)
            self._held_timestamps.extend([None] * len(values) if timestamps is None else timestamps)

    def process_batch2(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        if self._key_of2 is not None:
            self._buffer.add(self._key_of2, values, timestamps, 2)
        else:
            self.operator.process_batch2(values, timestamps)

    def process_watermark1(self, watermark) -> None:
        """Swallowed (see :meth:`_BatchWrapper.process_watermark`)."""

    def process_watermark2(self, watermark) -> None:
        """Swallowed (see :meth:`_BatchWrapper.process_watermark`)."""

    def process_watermark_status1(self, status) -> None:
        """Swallowed: a bounded BATCH input has no idleness."""

    def process_watermark_status2(self, status) -> None:
        """Swallowed: a bounded BATCH input has no idleness."""

    def end_input(self, input_id: int) -> None:
        self._ended[input_id - 1] = True
        op = self.operator
        if input_id == 2 and self._key_of1 is None and self._held_values:
            values, timestamps = self._held_values, self._held_timestamps
            self._held_values, self._held_timestamps = [], []
            _feed(op.process_batch1, op.process_element1, values, timestamps)
        if not all(self._ended):
            return
        if self._key_of1 is not None:
            for key, (values1, timestamps1, values2, timestamps2) in self._buffer.drain():
                if values1:
                    _feed(op.process_batch1, op.process_element1, values1, timestamps1)
                if values2:
                    _feed(op.process_batch2, op.process_element2, values2, timestamps2)
                self._end_key(key)
        self._held.release()
        op.process_watermark1(MAX_WATERMARK)
        op.process_watermark2(MAX_WATERMARK)
        op.end_input(1)
        op.end_input(2)
