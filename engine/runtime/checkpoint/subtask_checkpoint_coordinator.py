"""One task's part of a checkpoint (Flink's ``SubtaskCheckpointCoordinatorImpl``), in Flink's
order:

1. ``prepare_snapshot_pre_barrier`` on every operator of the chain, head first (an operator may
   still emit here: what it emits belongs before the barrier);
2. the :class:`~rill.network.events.CheckpointBarrier` on every output: aligned, after the
   records already written (``RecordWriter.broadcast_event`` flushes first); unaligned
   (FLIP-76), ahead of them as a priority event (``RecordWriter.broadcast_priority_event``),
   the data it overtook going to the checkpoint's
   :class:`~rill.runtime.checkpoint.channel_state_writer.ChannelStateWriter`;
3. the synchronous snapshot of every operator
   (:func:`~rill.operators.state_initializer.snapshot_operator_state_sync`: operator state and
   timers are copied, the keyed state backend pins a copy-on-write view in O(key groups), so
   later updates do not leak into it);
4. the asynchronous part on the task's checkpoint thread: each operator's record is built from
   that view (``OperatorSnapshotFutures.finalize``), written
   through the checkpoint's :class:`~rill.state.checkpoint.storage.CheckpointStorageLocation`
   (a large heap snapshot by a helper process: :mod:`rill.runtime.checkpoint.snapshot_encoder`)
   and the coordinator is acknowledged with the handles and the
   :class:`~rill.runtime.checkpoint.checkpoint_options.CheckpointMetrics`; a failure declines
   the checkpoint (``CHECKPOINT_ASYNC_EXCEPTION``). Unaligned, it starts once the channel
   state writer completed (every input channel delivered the barrier: the in-flight data is
   known), and the in-flight data is written with the head operator's state.

A source task's trigger whose options allow an aligned-checkpoint timeout that has already
passed (the task was busy, e.g. back-pressured) takes the checkpoint unaligned, as Flink's.

The synchronous duration in the acknowledgement's metrics is step 3 alone, as Flink's
``takeSnapshotSync`` measures it: not the pre-barrier hooks, nor the barrier's emission (which
waits for buffers under backpressure).

A failure of the synchronous part declines the checkpoint (``CHECKPOINT_DECLINED``) without
failing the task; the coordinator's tolerable-failure count decides about the job. Before a
task reports FINISHED it waits for its asynchronous parts (Flink's
``waitForPendingCheckpoints``), so its acknowledgement reaches the coordinator first.

Threading: everything but the asynchronous part runs on the task thread.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import time
from typing import Any, Callable, List, Optional, Sequence, Set, Tuple

from rill.network.events import CancelCheckpointMarker, CheckpointBarrier
from rill.operators.base import attribute_error
from rill.operators.state_initializer import OperatorSnapshotFutures, snapshot_operator_state_sync
from rill.runtime.checkpoint.channel_state_writer import ChannelStateWriter
from rill.runtime.checkpoint.checkpoint_failure_reason import CheckpointException, CheckpointFailureReason
from rill.runtime.checkpoint.checkpoint_options import CheckpointMetaData, CheckpointMetrics, CheckpointOptions
from rill.runtime.checkpoint.checkpoint_responder import CheckpointResponder
from rill.runtime.checkpoint.snapshot_encoder import write_operator_subtask_state
from rill.state.checkpoint.storage_api import CheckpointLocationDisposedError

__all__ = ["SubtaskCheckpointCoordinator"]

_LOG = logging.getLogger(__name__)


class SubtaskCheckpointCoordinator:
    """
    :param task_name_with_subtasks: e.g. ``"Map (1/2)"`` (messages, the thread's name).
    :param subtask_index: the subtask (what handles are written for).
    :param attempt_id: the execution attempt the coordinator counts acknowledgements by.
    :param operator_chain: the task's ``OperatorChain`` (``all_operators``: tail first).
    :param record_writers: every output of the task.
    :param responder: a :class:`CheckpointResponder`.
    :param register_timer: ``(deadline epoch ms, callback) -> timer with cancel()``: runs
        ``callback`` on the task thread (the task's processing-time service); with
        ``run_on_task_thread`` (``(callback) -> None``, any thread: a mail), what a timeoutable
        aligned checkpoint needs on the output side (see :meth:`checkpoint_state`); without
        them such a checkpoint stays aligned at this task's outputs.
    :param task_cancelled: ``() -> bool``: whether the task is being cancelled; a synchronous
        part that fails then (a writer's buffer pool destroyed under it) declines with
        ``CHECKPOINT_DECLINED_TASK_CLOSING``, which does not count towards the tolerable
        failures (Flink's task declines as closing when it no longer runs): the cancellation
        of a failed attempt must not fail the job that is restarting.
    """

    def __init__(self, task_name_with_subtasks: str, subtask_index: int, attempt_id: str, operator_chain,
                 record_writers: Sequence[Any], responder: CheckpointResponder,
                 task_cancelled: Callable[[], bool] = lambda: False, register_timer=None,
                 run_on_task_thread: Optional[Callable[[Callable[[], None]], None]] = None) -> None:
        self._name = task_name_with_subtasks
        self._subtask_index = subtask_index
        self._attempt_id = attempt_id
        self._chain = operator_chain
        self._writers = list(record_writers)
        self._responder = responder
        self._task_cancelled = task_cancelled
        self._register_timer = register_timer
        self._run_on_task_thread = run_on_task_thread
        self._executor: Optional[concurrent.futures.ThreadPoolExecutor] = None
        self._running: Set[concurrent.futures.Future] = set()
        self._closed = False

    # -- the checkpoint (task thread) ---------------------------------------------------------
    def checkpoint_state(self, metadata: CheckpointMetaData, options: CheckpointOptions,
                         alignment_duration_ms: float = 0.0,
                         channel_state: Optional[ChannelStateWriter] = None,
                         task_finished: bool = False) -> None:
        """Take this task's part of checkpoint ``metadata.checkpoint_id``: barrier out,
        synchronous snapshot, asynchronous write and acknowledgement (see the module).

        :param task_finished: the operators have finished (end of input; FLIP-147): the
            acknowledgement says so, so that the coordinator records them as finished.

        :param channel_state: of an unaligned checkpoint at a task with inputs, the writer its
            barrier handler made (the acknowledgement waits for it); a source task's is made here.

        An aligned checkpoint with a timeout (``options.is_timeoutable()``) watches its barriers
        in the output subpartitions (Flink's timeoutable barriers): once every consumer took its
        barrier the task acknowledges, aligned; if some barrier is still queued at the timeout
        (the trigger time plus ``aligned_checkpoint_timeout_ms``), it overtakes the data before
        it as a priority event with unaligned options, that data is stored as the task's
        output channel state, and the task acknowledges the checkpoint as unaligned.
        """
        cid, ts = metadata.checkpoint_id, metadata.timestamp
        start_delay_ms = max(0.0, time.time() * 1000 - ts)
        if options.is_timeoutable() and start_delay_ms >= options.aligned_checkpoint_timeout_ms:
            options = options.to_unaligned()
        unaligned = options.is_unaligned()
        own_writer = unaligned and channel_state is None
        if own_writer:
            channel_state = ChannelStateWriter(cid)
        operators = self._chain.all_operators  # tail first
        head_first = list(reversed(operators))
        try:
            for cfg, op in head_first:
                try:
                    op.prepare_snapshot_pre_barrier(cid)
                except BaseException as e:
                    attribute_error(e, cfg.operator_name)
                    raise
            barrier = CheckpointBarrier(cid, ts, options)
            watch = (None if unaligned or not options.is_timeoutable() or self._register_timer is None
                     or self._run_on_task_thread is None or not self._writers
                     else _TimeoutableBarriers(barrier, self._writers))
            for partition_index, writer in enumerate(self._writers):
                if unaligned:
                    channel_state.add_output_data(partition_index, writer.broadcast_priority_event(barrier))
                elif watch is not None:
                    writer.broadcast_timeoutable_event(barrier, watch.on_polled_callback(
                        partition_index, self._run_on_task_thread))
                else:
                    writer.broadcast_event(barrier)
            sync_start_ns = time.monotonic_ns()
            states: List[Tuple[str, OperatorSnapshotFutures]] = []
            for cfg, op in operators:
                try:
                    states.append((str(cfg.operator_id), snapshot_operator_state_sync(op, cid, ts)))
                except BaseException as e:
                    attribute_error(e, cfg.operator_name)
                    raise
        except Exception as e:  # noqa: BLE001 - a failed snapshot declines, the task goes on
            if channel_state is not None:
                channel_state.abort()
            closing = self._task_cancelled()
            if not closing:
                _LOG.warning("%s: checkpoint %d failed in its synchronous part: %s", self._name, cid, e)
            self._responder.decline_checkpoint(self._attempt_id, cid, CheckpointException(
                CheckpointFailureReason.CHECKPOINT_DECLINED_TASK_CLOSING if closing
                else CheckpointFailureReason.CHECKPOINT_DECLINED, f"{self._name}: {type(e).__name__}: {e}"))
            return
        sync_ms = (time.monotonic_ns() - sync_start_ns) / 1e6
        if watch is not None:  # acknowledged once every barrier left, or converted at the timeout
            timings = (sync_ms, alignment_duration_ms, start_delay_ms)
            watch.on_done(lambda converted: self._submit(
                cid, options.to_unaligned() if converted is not None else options, states, timings, converted,
                task_finished))
            watch.timer = self._register_timer(ts + options.aligned_checkpoint_timeout_ms, watch.on_timeout)
            return
        if channel_state is None:
            self._submit(cid, options, states, (sync_ms, alignment_duration_ms, start_delay_ms), None,
                         task_finished)
            return
        channel_state.on_done(
            lambda alignment_ms: self._submit(cid, options, states, (sync_ms, alignment_ms, start_delay_ms),
                                              channel_state, task_finished),
            lambda: None)
        if own_writer:  # no input to wait for
            channel_state.complete(0.0)

    def _submit(self, checkpoint_id: int, options: CheckpointOptions,
                states: List[Tuple[str, OperatorSnapshotFutures]], timings,
                channel_state: Optional[ChannelStateWriter], task_finished: bool) -> None:
        if self._closed:
            return
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                1, thread_name_prefix=f"{self._name} async checkpoint")
        future = self._executor.submit(self._async_part, checkpoint_id, options, states, timings,
                                       channel_state, task_finished)
        self._running.add(future)
        future.add_done_callback(self._running.discard)

    def _async_part(self, checkpoint_id: int, options: CheckpointOptions,
                    states: List[Tuple[str, OperatorSnapshotFutures]], timings,
                    channel_state: Optional[ChannelStateWriter], task_finished: bool) -> None:
        sync_ms, alignment_ms, start_delay_ms = timings
        start_ns = time.monotonic_ns()
        persisted = 0
        try:
            finalized = [(operator_id, futures.finalize()) for operator_id, futures in states]
            if channel_state is not None:  # the in-flight data goes with the head operator's state
                encoded = channel_state.encode()
                persisted = encoded.persisted_data_bytes
                head_id, head_state = finalized[-1]
                finalized[-1] = (head_id, dataclasses.replace(head_state, channel_state=encoded))
            location = options.target_location
            handles = {}
            for operator_id, state in finalized:
                handles[operator_id] = (write_operator_subtask_state(location, operator_id, self._subtask_index, state)
                                        if state.has_state() else None)
            size = sum(h.state_size for h in handles.values() if h is not None)
            metrics = CheckpointMetrics(sync_ms, (time.monotonic_ns() - start_ns) / 1e6, alignment_ms,
                                        start_delay_ms, size, persisted, options.is_unaligned())
        except Exception as e:  # noqa: BLE001 - Flink's CHECKPOINT_ASYNC_EXCEPTION
            # a location disposed of meanwhile is a checkpoint aborted meanwhile: not worth a warning
            _LOG.log(logging.DEBUG if isinstance(e, CheckpointLocationDisposedError) else logging.WARNING,
                     "%s: checkpoint %d failed writing its state: %s", self._name, checkpoint_id, e)
            self._responder.decline_checkpoint(self._attempt_id, checkpoint_id, CheckpointException(
                CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION, f"{self._name}: {type(e).__name__}: {e}"))
            return
        if not self._closed:
            self._responder.acknowledge_checkpoint(self._attempt_id, checkpoint_id, metrics, handles, task_finished)

    def abort_checkpoint_on_barrier(self, checkpoint_id: int, cause: CheckpointException) -> None:
        """Decline ``checkpoint_id`` and send a cancellation marker downstream, so that the
        tasks there stop aligning on it (Flink's ``abortCheckpointOnBarrier``)."""
        self._responder.decline_checkpoint(self._attempt_id, checkpoint_id, cause)
        marker = CancelCheckpointMarker(checkpoint_id)
        for writer in self._writers:
            writer.broadcast_event(marker)

    def decline(self, checkpoint_id: int, cause: CheckpointException) -> None:
        """Decline ``checkpoint_id`` (the task cannot take it now)."""
        self._responder.decline_checkpoint(self._attempt_id, checkpoint_id, cause)

    # -- notifications (task thread) ----------------------------------------------------------
    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Tell every operator, head first (Flink's ``notifyCheckpointComplete``).

        :raises BaseException: what an operator raised, tagged with its name (fails the task).
        """
        self._notify("notify_checkpoint_complete", checkpoint_id)

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """Tell every operator, head first (Flink's ``notifyCheckpointAborted``)."""
        self._notify("notify_checkpoint_aborted", checkpoint_id)

    def _notify(self, method: str, checkpoint_id: int) -> None:
        for cfg, op in reversed(self._chain.all_operators):
            try:
                getattr(op, method)(checkpoint_id)
            except BaseException as e:
                attribute_error(e, cfg.operator_name)
                raise

    # -- end ----------------------------------------------------------------------------------
    def wait_for_pending_checkpoints(self, timeout_s: Optional[float] = None) -> None:
        """Wait until every asynchronous part ended (before the task reports FINISHED)."""
        concurrent.futures.wait(list(self._running), timeout=timeout_s)

    def close(self) -> None:
        """Drop asynchronous parts that have not started; no acknowledgement after this."""
        self._closed = True
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)


class _TimeoutableBarriers:
    """The barriers of one timeoutable aligned checkpoint in a task's output subpartitions
    (task thread): which ones a consumer has not taken yet, and what happens at the timeout."""

    def __init__(self, barrier: CheckpointBarrier, writers: Sequence[Any]) -> None:
        self.barrier = barrier
        self._writers = list(writers)
        self._waiting = {(p, s) for p, w in enumerate(self._writers)
                         for s in range(w.partition.get_number_of_subpartitions())}
        self._on_done: Optional[Callable[[Optional[ChannelStateWriter]], None]] = None
        self._done = False
        self.timer = None

    def on_polled_callback(self, partition_index: int, run_on_task_thread) -> Callable[[int], None]:
        """What a partition calls (consumer or network thread) as a consumer takes a barrier."""
        return lambda subpartition: run_on_task_thread(lambda: self._on_polled(partition_index, subpartition))

    def on_done(self, callback: Callable[[Optional[ChannelStateWriter]], None]) -> None:
        """``callback(None)`` when every barrier left aligned, ``callback(writer)`` with the
        output data the converted ones overtook."""
        self._on_done = callback
        if not self._waiting:
            self._finish(None)

    def _on_polled(self, partition_index: int, subpartition: int) -> None:
        self._waiting.discard((partition_index, subpartition))
        if not self._waiting and self._on_done is not None:
            self._finish(None)

    def on_timeout(self) -> None:
        if self._done:
            return
        barrier = self.barrier
        replacement = CheckpointBarrier(barrier.checkpoint_id, barrier.timestamp, barrier.options.to_unaligned())
        writer = ChannelStateWriter(barrier.checkpoint_id)
        for partition_index, w in enumerate(self._writers):
            overtaken = w.partition.convert_to_priority_event(barrier, replacement)
            writer.add_output_data(partition_index, [o or [] for o in overtaken])
        self._finish(writer)

    def _finish(self, converted: Optional[ChannelStateWriter]) -> None:
        if self._done:
            return
        self._done = True
        timer, self.timer = self.timer, None
        if timer is not None:
            timer.cancel()
        self._on_done(converted)
