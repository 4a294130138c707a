"""What a task with network inputs does with checkpoint barriers (Flink's
``CheckpointBarrierHandler``, ``SingleCheckpointBarrierHandler`` for aligned exactly-once and
``CheckpointBarrierTracker`` for at-least-once).

A handler sees only events: the task calls it for a
:class:`~rill.network.events.CheckpointBarrier`, a
:class:`~rill.network.events.CancelCheckpointMarker` and an end of partition, never per record
or buffer, so a job's record path costs the same with checkpoints on. Channels are numbered
over all the task's gates (both inputs of a two-input task), so alignment spans every input.

- :class:`AlignedBarrierHandler` (exactly-once): a channel that delivered barrier *n* is blocked
  (:meth:`SingleInputGate.block_consumption`: what follows it waits in the channel) until every
  channel delivered it or ended; then the task checkpoints and the channels are resumed. A
  barrier of a newer checkpoint during an alignment abandons the older one
  (``CHECKPOINT_DECLINED_SUBSUMED``); a cancellation marker abandons it
  (``CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER``).
- :class:`BarrierTracker` (at-least-once): nothing is blocked; the task checkpoints when the
  last channel delivered the barrier (or ended); several checkpoints may be tracked at once.

Threading: the task thread only.
"""

from __future__ import annotations

import abc
import time
from typing import Dict, List, Optional, Protocol, Sequence, Set, Tuple

from rill.network.events import CancelCheckpointMarker, CheckpointBarrier
from rill.runtime.checkpoint.checkpoint_failure_reason import CheckpointException, CheckpointFailureReason
from rill.runtime.checkpoint.checkpoint_options import AlignmentType, CheckpointMetaData

__all__ = ["CheckpointableTask", "CheckpointBarrierHandler", "AlignedBarrierHandler", "BarrierTracker",
           "create_barrier_handler"]


class CheckpointableTask(Protocol):
    """What a barrier handler calls on its task (Flink's ``CheckpointableTask``)."""

    def trigger_checkpoint_on_barrier(self, metadata: CheckpointMetaData, options,
                                      alignment_duration_ms: float) -> None:
        """Every channel delivered the barrier (or ended): checkpoint now."""

    def abort_checkpoint_on_barrier(self, checkpoint_id: int, cause: CheckpointException) -> None:
        """The checkpoint cannot be taken here: decline it and tell downstream tasks."""


class CheckpointBarrierHandler(abc.ABC):
    """
    :param task: the :class:`CheckpointableTask`.
    :param gates: the task's input gates in channel-numbering order.
    """

    def __init__(self, task: CheckpointableTask, gates: Sequence) -> None:
        self._task = task
        self._offsets: Dict[int, int] = {}
        self._channels: List[Tuple[object, int]] = []  # global index -> (gate, index in gate)
        for gate in gates:
            self._offsets[id(gate)] = len(self._channels)
            self._channels.extend((gate, i) for i in range(gate.get_number_of_input_channels()))
        # channels that ended before the handler existed count as aligned too
        self._finished: Set[int] = {i for i, (gate, c) in enumerate(self._channels) if gate.is_channel_finished(c)}
        #: the newest checkpoint this handler has seen a barrier or cancellation of
        self.latest_checkpoint_id = 0

    def _index(self, gate, channel_index: int) -> int:
        return self._offsets[id(gate)] + channel_index

    @property
    def number_of_channels(self) -> int:
        return len(self._channels)

    @abc.abstractmethod
    def process_barrier(self, barrier: CheckpointBarrier, gate, channel_index: int) -> None:
        """Channel ``channel_index`` of ``gate`` delivered ``barrier``."""

    @abc.abstractmethod
    def process_cancellation_barrier(self, marker: CancelCheckpointMarker, gate, channel_index: int) -> None:
        """Channel ``channel_index`` of ``gate`` delivered a cancellation marker."""

    @abc.abstractmethod
    def process_end_of_partition(self, gate, channel_index: int) -> None:
        """Channel ``channel_index`` of ``gate`` ended: it counts as aligned from now on."""

    @abc.abstractmethod
    def on_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """The coordinator aborted ``checkpoint_id``: stop waiting for its barriers (an
        upstream task that declined it sends none), so blocked channels flow again at once
        rather than when the next checkpoint's barrier arrives."""

    def close(self) -> None:
        """Resume whatever is blocked (the task ends)."""


class AlignedBarrierHandler(CheckpointBarrierHandler):
    """Aligned exactly-once (Flink's ``SingleCheckpointBarrierHandler.aligned``)."""

    def __init__(self, task: CheckpointableTask, gates: Sequence) -> None:
        super().__init__(task, gates)
        self._received: Set[int] = set()
        self._barrier: Optional[CheckpointBarrier] = None  # the one being aligned on
        self._start_ns = 0

    @property
    def is_aligning(self) -> bool:
        """Whether an alignment is in progress."""
        return self._barrier is not None

    def process_barrier(self, barrier: CheckpointBarrier, gate, channel_index: int) -> None:
        cid = barrier.checkpoint_id
        if cid > self.latest_checkpoint_id:
            if self._barrier is not None:  # a newer checkpoint started: the older cannot complete
                old = self._barrier.checkpoint_id
                self._stop_alignment()
                self._task.abort_checkpoint_on_barrier(
                    old, CheckpointException(CheckpointFailureReason.CHECKPOINT_DECLINED_SUBSUMED))
            self.latest_checkpoint_id = cid
            self._barrier = barrier
            self._start_ns = time.monotonic_ns()
        elif self._barrier is None or cid < self.latest_checkpoint_id:
            return  # of a checkpoint already taken or abandoned here
        index = self._index(gate, channel_index)
        self._received.add(index)
        gate.block_consumption(channel_index)
        self._maybe_complete()

    def process_cancellation_barrier(self, marker: CancelCheckpointMarker, gate, channel_index: int) -> None:
        cid = marker.checkpoint_id
        if cid < self.latest_checkpoint_id or (cid == self.latest_checkpoint_id and self._barrier is None):
            return
        self._stop_alignment()
        self.latest_checkpoint_id = cid
        self._task.abort_checkpoint_on_barrier(
            cid, CheckpointException(CheckpointFailureReason.CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER))

    def process_end_of_partition(self, gate, channel_index: int) -> None:
        self._finished.add(self._index(gate, channel_index))
        if self._barrier is not None:
            self._maybe_complete()

    def on_checkpoint_aborted(self, checkpoint_id: int) -> None:
        if checkpoint_id < self.latest_checkpoint_id or (self._barrier is None and checkpoint_id == self.latest_checkpoint_id):
            return
        self._stop_alignment()
        self.latest_checkpoint_id = checkpoint_id

    def _maybe_complete(self) -> None:
        if len(self._received | self._finished) < len(self._channels):
            return
        barrier = self._barrier
        alignment_ms = (time.monotonic_ns() - self._start_ns) / 1e6
        try:
            self._task.trigger_checkpoint_on_barrier(
                CheckpointMetaData(barrier.checkpoint_id, barrier.timestamp), barrier.options, alignment_ms)
        finally:
            self._stop_alignment()

    def _stop_alignment(self) -> None:
        for index in self._received:
            gate, channel_index = self._channels[index]
            gate.resume_consumption(channel_index)
        self._received.clear()
        self._barrier = None

    def close(self) -> None:
        self._stop_alignment()


class BarrierTracker(CheckpointBarrierHandler):
    """At-least-once (Flink's ``CheckpointBarrierTracker``): no channel is blocked."""

    def __init__(self, task: CheckpointableTask, gates: Sequence) -> None:
        super().__init__(task, gates)
        # checkpoint id -> (channels that delivered its barrier, first barrier's time, barrier)
        self._pending: Dict[int, Tuple[Set[int], int, CheckpointBarrier]] = {}

    def process_barrier(self, barrier: CheckpointBarrier, gate, channel_index: int) -> None:
        cid = barrier.checkpoint_id
        entry = self._pending.get(cid)
        if entry is None:
            if cid <= self.latest_checkpoint_id:
                return  # taken or abandoned already
            self.latest_checkpoint_id = cid
            entry = self._pending[cid] = (set(), time.monotonic_ns(), barrier)
        entry[0].add(self._index(gate, channel_index))
        self._trigger_complete()

    def process_cancellation_barrier(self, marker: CancelCheckpointMarker, gate, channel_index: int) -> None:
        cid = marker.checkpoint_id
        if cid not in self._pending and cid <= self.latest_checkpoint_id:
            return
        self.latest_checkpoint_id = max(self.latest_checkpoint_id, cid)
        for older in [c for c in self._pending if c <= cid]:
            del self._pending[older]
        self._task.abort_checkpoint_on_barrier(
            cid, CheckpointException(CheckpointFailureReason.CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER))

    def process_end_of_partition(self, gate, channel_index: int) -> None:
        self._finished.add(self._index(gate, channel_index))
        self._trigger_complete()

    def on_checkpoint_aborted(self, checkpoint_id: int) -> None:
        for cid in [c for c in self._pending if c <= checkpoint_id]:
            del self._pending[cid]
        self.latest_checkpoint_id = max(self.latest_checkpoint_id, checkpoint_id)

    def _trigger_complete(self) -> None:
        total = len(self._channels)
        complete = [cid for cid, (received, _, _) in self._pending.items() if len(received | self._finished) >= total]
        if not complete:
            return
        cid = max(complete)
        _, start_ns, barrier = self._pending[cid]
        for older in [c for c in self._pending if c <= cid]:  # older ones can no longer complete here
            del self._pending[older]
        self._task.trigger_checkpoint_on_barrier(CheckpointMetaData(cid, barrier.timestamp), barrier.options,
                                                 (time.monotonic_ns() - start_ns) / 1e6)


def create_barrier_handler(alignment: AlignmentType, task: CheckpointableTask, gates: Sequence) -> CheckpointBarrierHandler:
    """The handler for ``alignment`` (Flink's ``InputProcessorUtil.createCheckpointBarrierHandler``)."""
    if alignment is AlignmentType.ALIGNED:
        return AlignedBarrierHandler(task, gates)
    return BarrierTracker(task, gates)
