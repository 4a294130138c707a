"""What a task with network inputs does with checkpoint barriers (Flink's
``CheckpointBarrierHandler``, ``SingleCheckpointBarrierHandler`` for aligned exactly-once and
``CheckpointBarrierTracker`` for at-least-once).

A handler sees only events (the task itself hands an unaligned checkpoint's
:class:`~rill.runtime.checkpoint.channel_state_writer.ChannelStateWriter` the buffers it
processes while the writer persists): the task calls it for a
:class:`~rill.network.events.CheckpointBarrier`, a
:class:`~rill.network.events.CancelCheckpointMarker` and an end of partition, never per record
or buffer, so a job's record path costs the same with checkpoints on. Channels are numbered
over all the task's gates (both inputs of a two-input task), so alignment spans every input.

- :class:`SingleCheckpointBarrierHandler` (exactly-once): aligned, a channel that delivered
  barrier *n* is blocked (:meth:`SingleInputGate.block_consumption`: what follows it waits in the
  channel) until every channel delivered it or ended; then the task checkpoints and the channels
  are resumed. Unaligned (FLIP-76), the task checkpoints at the first barrier and stores the
  in-flight data until every channel delivered it; an aligned checkpoint switches to unaligned
  after the aligned-checkpoint timeout. A barrier of a newer checkpoint during an alignment
  abandons the older one (``CHECKPOINT_DECLINED_SUBSUMED``); a cancellation marker abandons it
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
from rill.runtime.checkpoint.channel_state_writer import ChannelStateWriter
from rill.runtime.checkpoint.checkpoint_options import AlignmentType, CheckpointMetaData

__all__ = ["CheckpointableTask", "CheckpointBarrierHandler", "SingleCheckpointBarrierHandler", "BarrierTracker",
           "create_barrier_handler"]


class CheckpointableTask(Protocol):
    """What a barrier handler calls on its task (Flink's ``CheckpointableTask``)."""

    def trigger_checkpoint_on_barrier(self, metadata: CheckpointMetaData, options,
                                      alignment_duration_ms: float,
                                      channel_state: Optional[ChannelStateWriter] = None) -> None:
        """Checkpoint now: every channel delivered the barrier (or ended), or, unaligned
        (``channel_state`` given), the first barrier arrived; the task acknowledges once
        ``channel_state`` completed."""

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
        #: the in-flight data of an unaligned checkpoint in progress, else ``None`` (the task
        #: hands it every buffer it processes while it is ``active``)
        self.channel_state_writer: Optional[ChannelStateWriter] = None

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


def _is_unaligned(barrier: CheckpointBarrier) -> bool:
    return barrier.options is not None and barrier.options.is_unaligned()


class SingleCheckpointBarrierHandler(CheckpointBarrierHandler):
    """Exactly-once, aligned and unaligned (Flink's ``SingleCheckpointBarrierHandler``, its
    ``aligned``, ``unaligned`` and ``alternating`` forms in one state machine).

    :param task: the :class:`CheckpointableTask`.
    :param gates: the task's input gates in channel-numbering order.
    :param register_timer: ``(deadline epoch ms, callback) -> timer with cancel()``: runs
        ``callback`` on the task thread at the deadline (the task's processing-time service);
        needed for the aligned-checkpoint timeout only (``None``: checked when barriers arrive).

    One checkpoint at a time:

    - aligned (``AlignmentType.ALIGNED``): a channel that delivered the barrier is blocked until
      every channel did; then the task checkpoints;
    - unaligned (``AlignmentType.UNALIGNED``, FLIP-76): at the first barrier the task checkpoints
      at once with a :class:`~rill.runtime.checkpoint.channel_state_writer.ChannelStateWriter`
      that stores, per channel, what the task processes from it until its barrier and what
      waits behind that barrier; nothing is blocked; the writer completes (and the task
      acknowledges) when every channel delivered the barrier;
    - aligned with a timeout (``aligned_checkpoint_timeout_ms > 0``): starts aligned and
      switches to unaligned once the timeout has passed since the trigger (at the first
      barrier already, if it came later; else on a timer or at a later barrier), or when an
      upstream task's barrier arrives unaligned. The blocked channels are resumed after the
      snapshot: what follows their barriers belongs to the next checkpoint.
    """

    def __init__(self, task: CheckpointableTask, gates: Sequence, register_timer=None) -> None:
        super().__init__(task, gates)
        self._received: Set[int] = set()
        self._barrier: Optional[CheckpointBarrier] = None  # the one being aligned on
        self._start_ns = 0
        self._register_timer = register_timer
        self._timer = None

    @property
    def is_aligning(self) -> bool:
        """Whether a checkpoint is in progress (aligned or collecting in-flight data)."""
        return self._barrier is not None

    def process_barrier(self, barrier: CheckpointBarrier, gate, channel_index: int) -> None:
        # taken on every barrier, so that data queued behind an ignored one is never kept
        inflight = gate.get_channel(channel_index).take_inflight_buffers()
        cid = barrier.checkpoint_id
        index = self._index(gate, channel_index)
        if cid > self.latest_checkpoint_id:
            if self._barrier is not None:  # a newer checkpoint started: the older cannot complete
                old = self._barrier.checkpoint_id
                self._stop_alignment()
                self._task.abort_checkpoint_on_barrier(
                    old, CheckpointException(CheckpointFailureReason.CHECKPOINT_DECLINED_SUBSUMED))
            self.latest_checkpoint_id = cid
            self._barrier = barrier
            self._start_ns = time.monotonic_ns()
            self._received.add(index)
            if _is_unaligned(barrier) or self._timed_out(barrier):
                self._switch_to_unaligned(gate, channel_index, inflight)
            else:
                gate.block_consumption(channel_index)
                self._start_timer(barrier)
            self._maybe_complete()
            return
        if self._barrier is None or cid < self.latest_checkpoint_id:
            return  # of a checkpoint already taken or abandoned here
        self._received.add(index)
        writer = self.channel_state_writer
        if writer is not None:
            writer.on_channel_barrier(gate.gate_index, channel_index, inflight)
        elif _is_unaligned(barrier) or self._timed_out(barrier):
            self._switch_to_unaligned(gate, channel_index, inflight)
        else:
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
        writer = self.channel_state_writer
        if writer is not None:
            writer.stop_persisting(gate.gate_index, channel_index)
        if self._barrier is not None:
            self._maybe_complete()

    def on_checkpoint_aborted(self, checkpoint_id: int) -> None:
        if checkpoint_id < self.latest_checkpoint_id or (self._barrier is None and checkpoint_id == self.latest_checkpoint_id):
            return
        self._stop_alignment()
        self.latest_checkpoint_id = checkpoint_id

    # -- unaligned ------------------------------------------------------------------------------
    @staticmethod
    def _timed_out(barrier: CheckpointBarrier) -> bool:
        options = barrier.options
        return (options is not None and options.is_timeoutable()
                and time.time() * 1000 - barrier.timestamp >= options.aligned_checkpoint_timeout_ms)

    def _start_timer(self, barrier: CheckpointBarrier) -> None:
        options = barrier.options
        if self._register_timer is None or self._timer is not None or options is None or not options.is_timeoutable():
            return
        cid = barrier.checkpoint_id
        self._timer = self._register_timer(barrier.timestamp + barrier.options.aligned_checkpoint_timeout_ms,
                                           lambda: self._on_alignment_timeout(cid))

    def _on_alignment_timeout(self, checkpoint_id: int) -> None:
        self._timer = None
        barrier = self._barrier
        if barrier is None or barrier.checkpoint_id != checkpoint_id or self.channel_state_writer is not None:
            return
        self._switch_to_unaligned(None, -1, ())
        self._maybe_complete()

    def _switch_to_unaligned(self, gate, channel_index: int, inflight) -> None:
        """Checkpoint now, unaligned: store what waits behind the barrier just polled (of
        ``gate``/``channel_index``; ``None`` on a timeout) and persist the channels whose
        barrier has not come; resume the blocked ones after the snapshot."""
        self._cancel_timer()
        barrier = self._barrier
        done = self._received | self._finished
        writer = ChannelStateWriter(barrier.checkpoint_id,
                                    [(g.gate_index, c) for i, (g, c) in enumerate(self._channels) if i not in done])
        if gate is not None:
            writer.add_inflight_buffers(gate.gate_index, channel_index, inflight)
        self.channel_state_writer = writer
        options = barrier.options if _is_unaligned(barrier) else barrier.options.to_unaligned()
        try:
            self._task.trigger_checkpoint_on_barrier(
                CheckpointMetaData(barrier.checkpoint_id, barrier.timestamp), options,
                (time.monotonic_ns() - self._start_ns) / 1e6, writer)
        finally:
            self._resume_blocked()

    # -- completion -----------------------------------------------------------------------------
    def _maybe_complete(self) -> None:
        if len(self._received | self._finished) < len(self._channels):
            return
        barrier = self._barrier
        alignment_ms = (time.monotonic_ns() - self._start_ns) / 1e6
        writer = self.channel_state_writer
        if writer is not None:
            self.channel_state_writer = None
            self._reset()
            writer.complete(alignment_ms)
            return
        try:
            self._task.trigger_checkpoint_on_barrier(
                CheckpointMetaData(barrier.checkpoint_id, barrier.timestamp), barrier.options, alignment_ms)
        finally:
            self._stop_alignment()

    def _resume_blocked(self) -> None:
        for index in self._received:
            gate, channel_index = self._channels[index]
            gate.resume_consumption(channel_index)

    def _cancel_timer(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def _reset(self) -> None:
        self._cancel_timer()
        self._received.clear()
        self._barrier = None

    def _stop_alignment(self) -> None:
        writer, self.channel_state_writer = self.channel_state_writer, None
        if writer is not None:
            writer.abort()
        self._resume_blocked()
        self._reset()

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


def create_barrier_handler(alignment: AlignmentType, task: CheckpointableTask, gates: Sequence,
                           register_timer=None) -> CheckpointBarrierHandler:
    """The handler for ``alignment`` (Flink's ``InputProcessorUtil.createCheckpointBarrierHandler``):
    :class:`SingleCheckpointBarrierHandler` for exactly-once (aligned or unaligned; it is given
    ``register_timer`` for the aligned-checkpoint timeout), :class:`BarrierTracker` for
    at-least-once."""
    if alignment is AlignmentType.AT_LEAST_ONCE:
        return BarrierTracker(task, gates)
    return SingleCheckpointBarrierHandler(task, gates, register_timer)
