"""The operator that runs a FLIP-27 source inside a source task (Flink's ``SourceOperator``).

The task's mailbox default action calls :meth:`SourceOperator.emit_next` which emits at most
one batch and says whether more input is available, so mails (timers, checkpoints, cancel)
run between batches and a source never monopolizes its task thread.

Checkpoints (Flink's ``SourceOperator.snapshotState`` / ``initializeState``). The operator
keeps the split it reads with the number of its records emitted so far (counted per batch)
and, at a snapshot, stores every unfinished split it holds as ``(split bytes, records
emitted)`` in the list state ``"SourceReaderState"`` (split bytes: the source's split
serializer in ``write_version_and_serialize`` layout). A restored operator reads those splits
first, each from where it stopped (``SourceReader.read_from``), then asks the coordinator for
more. Split-level redistribution on rescaling comes from the list state's.

Splits and coordinator checkpoints. A split the coordinator hands out after it snapshotted
checkpoint ``n`` (``SourceCoordinator.snapshot_state``) is still in the enumerator's state of
``n``; so that it is not also in this reader's state of ``n`` nor read before barrier ``n``,
the operator holds such a split (reports ``NOTHING_AVAILABLE``) until it took its own snapshot
``n`` or heard that ``n`` completed or was aborted: Flink holds the coordinator's events
(``OperatorCoordinatorHolder``'s valve) for the same reason. The coordinator stamps each
assignment with the id of its latest checkpoint (``SourceCoordinator.assign_split``; in
cluster mode the ``coordinator_checkpoint_id`` of the ``AddSplitEvent``).

Cluster mode needs one more thing of the runtime: an ``AddSplitEvent`` the coordinator sent
before its snapshot of ``n`` must reach the operator before the task's own snapshot ``n``
(Flink's coordinator gateway guarantees the same); otherwise that split is in neither state.
The answer arrives as a mail at checkpoint priority (``context.coordinator_event_executor``),
so a checkpoint mail queued after it cannot overtake it. Embedded mode answers synchronously.
"""

from __future__ import annotations

import enum
from collections import deque
from typing import Any, Deque, Dict, Iterator, List, Optional, Tuple

from rill.common.connector.source import read_version_and_deserialize, write_version_and_serialize
from rill.operators.base import AbstractStreamOperator, ChainingStrategy
from rill.common.streamrecord import MAX_WATERMARK
from rill.state.descriptors import ListStateDescriptor
from rill.operators.watermark.timestamps_and_watermarks import GeneratesWatermarks, TimestampsAndWatermarks

__all__ = ["SourceOperator", "InputStatus", "SPLITS_STATE_NAME"]

#: The list state of the reader's splits (Flink's ``SourceOperator.SPLITS_STATE_DESC`` name).
SPLITS_STATE_NAME = "SourceReaderState"


class InputStatus(enum.Enum):
    """Flink's ``DataInputStatus``."""

    MORE_AVAILABLE = "MORE_AVAILABLE"
    NOTHING_AVAILABLE = "NOTHING_AVAILABLE"
    END_OF_INPUT = "END_OF_INPUT"


class SourceOperator(AbstractStreamOperator, GeneratesWatermarks):
    """Pulls splits from the job's ``SourceCoordinator`` (``context.operator_coordinator``) and
    reads them with the source's reader, one batch per :meth:`emit_next`.

    In the embedded mode the coordinator answers a split request at once; in cluster mode it
    lives in the JobMaster's process (``asynchronous``): the operator reports
    ``NOTHING_AVAILABLE`` until the answer arrives as an ``AddSplitEvent`` mail.

    At the end of a bounded input it emits ``MAX_WATERMARK`` (Flink does the same, so
    event-time timers and windows fire at the end of bounded jobs).

    With a ``watermark_strategy`` (``env.from_source(source, strategy, name)``) the operator
    assigns timestamps and generates watermarks itself, as Flink's SourceOperator does, with
    periodic emission every ``auto_watermark_interval_ms`` as a timer mail. Rill difference:
    one generator per source subtask, not per split (a reader reads its splits one after the
    other, so per-split generators would not hold the watermark back any differently).
    ``no_watermarks()`` without a timestamp assigner is the same as no strategy.

    Checkpointing: see the module docstring; whether the source can replay at all is
    ``source.supports_replay``, which the runtime checks before it allows EXACTLY_ONCE.
    """

    chaining_strategy = ChainingStrategy.HEAD

    def __init__(self, source: Any, watermark_strategy: Any = None):
        self.source = source
        self.watermark_strategy = watermark_strategy
        self._reader = None
        self._batches: Optional[Iterator[List[Any]]] = None
        self._finished = False
        # an asynchronous coordinator (cluster mode) answers with an AddSplitEvent mail
        self._split_requested = False
        self._timestamps_and_watermarks = None
        # [split, records emitted] of the split being read; restored splits not started yet
        self._current: Optional[List[Any]] = None
        self._restored_splits: Deque[Tuple[Any, int]] = deque()
        # the coordinator's last answer, (split or None, its checkpoint stamp), not started:
        # held while this reader has not snapshotted the checkpoint it is stamped with
        self._held: Optional[Tuple[Any, int]] = None
        self._last_checkpoint_id = 0
        self._splits_state = None

    def initialize_state(self) -> None:
        """Register ``"SourceReaderState"`` and queue the restored splits with their positions
        (Flink's ``SourceOperator.initializeState``; the reader gets them before it asks the
        coordinator)."""
        super().initialize_state()
        self._splits_state = self.operator_state_backend.get_list_state(ListStateDescriptor(SPLITS_STATE_NAME))
        if self.is_restored():
            serializer = self.source.get_split_serializer()
            for data, emitted in self._splits_state.get():
                self._restored_splits.append((read_version_and_deserialize(serializer, data), emitted))
            self._last_checkpoint_id = self.restored_checkpoint_id or 0

    def snapshot_state(self, checkpoint_id: int, timestamp: int) -> Dict[str, Tuple[str, List[Any]]]:
        """Store the unfinished splits with their positions in ``"SourceReaderState"`` (Flink's
        ``SourceReader.snapshotState``), then snapshot the operator state; releases a split held
        for this checkpoint (see the module docstring)."""
        serializer = self.source.get_split_serializer()
        positions = list(self._restored_splits)
        if self._current is not None:
            positions.insert(0, tuple(self._current))
        held = self._held
        if held is not None and checkpoint_id > held[1]:
            positions.append((held[0], 0))
        self._splits_state.update([(write_version_and_serialize(serializer, split), emitted)
                                   for split, emitted in positions])
        self._advance_checkpoint(checkpoint_id)
        return super().snapshot_state(checkpoint_id, timestamp)

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """A completed checkpoint releases a split held for it (or an earlier one)."""
        super().notify_checkpoint_complete(checkpoint_id)
        self._advance_checkpoint(checkpoint_id)

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """An aborted checkpoint is never restored: a split held for it is released."""
        super().notify_checkpoint_aborted(checkpoint_id)
        self._advance_checkpoint(checkpoint_id)

    def _advance_checkpoint(self, checkpoint_id: int) -> None:
        self._last_checkpoint_id = max(self._last_checkpoint_id, checkpoint_id)

    def open(self) -> None:
        strategy = self.watermark_strategy
        if strategy is not None and not (strategy.is_no_watermarks and strategy.get_timestamp_assigner() is None):
            ctx = self.context
            self._timestamps_and_watermarks = TimestampsAndWatermarks(strategy, ctx.operator_name)
            self._timestamps_and_watermarks.open(self.output, ctx.processing_time_service,
                                                 ctx.auto_watermark_interval_ms)
        self._reader = self.source.create_reader()
        self._reader.batch_size = self.context.records_per_batch
        self._reader.open(self.context.subtask_index, self.context.parallelism)

    @property
    def progress_units(self) -> int:
        return self._reader.progress_units if self._reader is not None else 0

    def emit_next(self) -> InputStatus:
        if self._finished:
            return InputStatus.END_OF_INPUT
        while True:
            if self._batches is None:
                if self._restored_splits:
                    split, emitted = self._restored_splits.popleft()
                    self._start(split, emitted)
                    continue
                if self._held is None:
                    assignment = self._next_assignment()
                    if assignment is None:
                        return InputStatus.NOTHING_AVAILABLE
                    self._held = assignment
                split, stamp = self._held
                if split is not None and stamp > self._last_checkpoint_id:
                    return InputStatus.NOTHING_AVAILABLE
                self._held = None
                if split is None:
                    self._finished = True
                    if self._timestamps_and_watermarks is not None:
                        self._timestamps_and_watermarks.emit_end_of_input()
                    else:
                        self.output.emit_watermark(MAX_WATERMARK)
                    return InputStatus.END_OF_INPUT
                self._start(split, 0)
            batch = next(self._batches, None)
            if batch is None:
                self._batches = None
                self._current = None
                continue
            if not batch:
                return InputStatus.NOTHING_AVAILABLE
            self._current[1] += len(batch)
            if self._timestamps_and_watermarks is None:
                self.output.collect_batch(batch, None)
            else:
                self._timestamps_and_watermarks.emit_batch(batch, None)
            return InputStatus.MORE_AVAILABLE

    def _start(self, split: Any, emitted: int) -> None:
        self._current = [split, emitted]
        self._batches = iter(self._reader.read_from(split, emitted) if emitted else self._reader.read(split))

    def _next_assignment(self) -> Optional[Tuple[Any, int]]:
        """``(split or None at the end, coordinator checkpoint stamp)``, or ``None`` while an
        asynchronous coordinator has not answered."""
        coordinator = self.context.operator_coordinator
        if getattr(coordinator, "asynchronous", False):
            if not self._split_requested:
                self._split_requested = True
                coordinator.request_split_async(self.context.subtask_index, self._on_split_event)
            return None  # the answer's mail sets _held
        return coordinator.assign_split(self.context.subtask_index)

    def _on_split_event(self, split: Any, error: Optional[BaseException] = None,
                        coordinator_checkpoint_id: int = 0) -> None:
        """Any thread: the coordinator's answer, handed to the task thread as a mail (Flink's
        ``AddSplitEvent`` / ``NoMoreSplitsEvent``, ``split`` is ``None`` for the latter). An
        ``error`` (the enumerator failed) is raised by the mail and fails the task.
        ``coordinator_checkpoint_id``: the coordinator's latest checkpoint when it assigned the
        split (``SourceCoordinator.assign_split``); 0 when it has taken none."""
        def add_split() -> None:
            if error is not None:
                raise error
            self._split_requested = False
            self._held = (split, coordinator_checkpoint_id)

        executor = self.context.coordinator_event_executor or self.context.mailbox_executor
        executor.execute(add_split, "AddSplitEvent")

    def close(self) -> None:
        if self._timestamps_and_watermarks is not None:
            self._timestamps_and_watermarks.close()
        if self._reader is not None:
            self._reader.close()
