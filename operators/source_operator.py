"""The operator that runs a FLIP-27 source inside a source task (Flink's ``SourceOperator``).

The task's mailbox default action calls :meth:`SourceOperator.emit_next` which emits at most
one batch and says whether more input is available, so mails (timers, checkpoints, cancel)
run between batches and a source never monopolizes its task thread.
"""

from __future__ import annotations

import enum
from typing import Any, Iterator, List, Optional

from rill.operators.base import AbstractStreamOperator, ChainingStrategy
from rill.common.streamrecord import MAX_WATERMARK
from rill.operators.watermark.timestamps_and_watermarks import GeneratesWatermarks, TimestampsAndWatermarks

__all__ = ["SourceOperator", "InputStatus"]


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
        self._arrived_split: Optional[tuple] = None
        self._timestamps_and_watermarks = None

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
                coordinator = self.context.operator_coordinator
                if getattr(coordinator, "asynchronous", False):
                    if self._arrived_split is None:
                        if not self._split_requested:
                            self._split_requested = True
                            coordinator.request_split_async(self.context.subtask_index, self._on_split_event)
                        return InputStatus.NOTHING_AVAILABLE
                    (split,), self._arrived_split = self._arrived_split, None
                else:
                    split = coordinator.request_split(self.context.subtask_index)
                if split is None:
                    self._finished = True
                    if self._timestamps_and_watermarks is not None:
                        self._timestamps_and_watermarks.emit_end_of_input()
                    else:
                        self.output.emit_watermark(MAX_WATERMARK)
                    return InputStatus.END_OF_INPUT
                self._batches = iter(self._reader.read(split))
            batch = next(self._batches, None)
            if batch is None:
                self._batches = None
                continue
            if not batch:
                return InputStatus.NOTHING_AVAILABLE
            if self._timestamps_and_watermarks is None:
                self.output.collect_batch(batch, None)
            else:
                self._timestamps_and_watermarks.emit_batch(batch, None)
            return InputStatus.MORE_AVAILABLE

    def _on_split_event(self, split: Any, error: Optional[BaseException] = None) -> None:
        """Any thread: the coordinator's answer, handed to the task thread as a mail (Flink's
        ``AddSplitEvent`` / ``NoMoreSplitsEvent``, ``split`` is ``None`` for the latter). An
        ``error`` (the enumerator failed) is raised by the mail and fails the task."""
        def add_split() -> None:
            if error is not None:
                raise error
            self._split_requested = False
            self._arrived_split = (split,)

        self.context.mailbox_executor.execute(add_split, "AddSplitEvent")

    def close(self) -> None:
        if self._timestamps_and_watermarks is not None:
            self._timestamps_and_watermarks.close()
        if self._reader is not None:
            self._reader.close()
