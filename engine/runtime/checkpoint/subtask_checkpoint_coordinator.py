"""One task's part of a checkpoint (Flink's ``SubtaskCheckpointCoordinatorImpl``), in Flink's
order:

1. ``prepare_snapshot_pre_barrier`` on every operator of the chain, head first (an operator may
   still emit here: what it emits belongs before the barrier);
2. the :class:`~rill.network.events.CheckpointBarrier` on every output, after the records
   already written (``RecordWriter.broadcast_event`` flushes first: aligned checkpoints);
3. the synchronous snapshot of every operator (:func:`~rill.operators.state_initializer.snapshot_operator_state`:
   the backends copy what they hold, so later updates do not leak into it);
4. the asynchronous part on the task's checkpoint thread: each operator's state is written
   through the checkpoint's :class:`~rill.state.checkpoint.storage.CheckpointStorageLocation`
   and the coordinator is acknowledged with the handles and the
   :class:`~rill.runtime.checkpoint.checkpoint_options.CheckpointMetrics`; a failure declines
   the checkpoint (``CHECKPOINT_ASYNC_EXCEPTION``).

A failure of the synchronous part declines the checkpoint (``CHECKPOINT_DECLINED``) without
failing the task; the coordinator's tolerable-failure count decides about the job. Before a
task reports FINISHED it waits for its asynchronous parts (Flink's
``waitForPendingCheckpoints``), so its acknowledgement reaches the coordinator first.

Threading: everything but the asynchronous part runs on the task thread.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from typing import Any, Callable, List, Optional, Sequence, Set, Tuple

from rill.network.events import CancelCheckpointMarker, CheckpointBarrier
from rill.operators.base import attribute_error
from rill.operators.state_initializer import snapshot_operator_state
from rill.runtime.checkpoint.checkpoint_failure_reason import CheckpointException, CheckpointFailureReason
from rill.runtime.checkpoint.checkpoint_options import CheckpointMetaData, CheckpointMetrics, CheckpointOptions
from rill.runtime.checkpoint.checkpoint_responder import CheckpointResponder
from rill.state.checkpoint.operator_subtask_state import OperatorSubtaskState

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
    :param task_cancelled: ``() -> bool``: whether the task is being cancelled; a synchronous
        part that fails then (a writer's buffer pool destroyed under it) declines with
        ``CHECKPOINT_DECLINED_TASK_CLOSING``, which does not count towards the tolerable
        failures (Flink's task declines as closing when it no longer runs): the cancellation
        of a failed attempt must not fail the job that is restarting.
    """

    def __init__(self, task_name_with_subtasks: str, subtask_index: int, attempt_id: str, operator_chain,
                 record_writers: Sequence[Any], responder: CheckpointResponder,
                 task_cancelled: Callable[[], bool] = lambda: False) -> None:
        self._name = task_name_with_subtasks
        self._subtask_index = subtask_index
        self._attempt_id = attempt_id
        self._chain = operator_chain
        self._writers = list(record_writers)
        self._responder = responder
        self._task_cancelled = task_cancelled
        self._executor: Optional[concurrent.futures.ThreadPoolExecutor] = None
        self._running: Set[concurrent.futures.Future] = set()
        self._closed = False

    # -- the checkpoint (task thread) ---------------------------------------------------------
    def checkpoint_state(self, metadata: CheckpointMetaData, options: CheckpointOptions,
                         alignment_duration_ms: float = 0.0, task_finished: bool = False) -> None:
        """Take this task's part of checkpoint ``metadata.checkpoint_id``: barrier out,
        synchronous snapshot, asynchronous write and acknowledgement (see the module).

        :param task_finished: the operators have finished (end of input; FLIP-147): the
            acknowledgement says so, so that the coordinator records them as finished.
        """
        cid, ts = metadata.checkpoint_id, metadata.timestamp
        start_ns = time.monotonic_ns()
        start_delay_ms = max(0.0, time.time() * 1000 - ts)
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
            for writer in self._writers:
                writer.broadcast_event(barrier)
            states: List[Tuple[str, OperatorSubtaskState]] = []
            for cfg, op in operators:
                try:
                    states.append((str(cfg.operator_id), snapshot_operator_state(op, cid, ts)))
                except BaseException as e:
                    attribute_error(e, cfg.operator_name)
                    raise
        except Exception as e:  # noqa: BLE001 - a failed snapshot declines, the task goes on
            closing = self._task_cancelled()
            if not closing:
                _LOG.warning("%s: checkpoint %d failed in its synchronous part: %s", self._name, cid, e)
            self._responder.decline_checkpoint(self._attempt_id, cid, CheckpointException(
                CheckpointFailureReason.CHECKPOINT_DECLINED_TASK_CLOSING if closing
                else CheckpointFailureReason.CHECKPOINT_DECLINED, f"{self._name}: {type(e).__name__}: {e}"))
            return
        sync_ms = (time.monotonic_ns() - start_ns) / 1e6
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                1, thread_name_prefix=f"{self._name} async checkpoint")
        future = self._executor.submit(self._async_part, cid, options, states,
                                       (sync_ms, alignment_duration_ms, start_delay_ms), task_finished)
        self._running.add(future)
        future.add_done_callback(self._running.discard)

    def _async_part(self, checkpoint_id: int, options: CheckpointOptions,
                    states: List[Tuple[str, OperatorSubtaskState]], timings, task_finished: bool) -> None:
        sync_ms, alignment_ms, start_delay_ms = timings
        start_ns = time.monotonic_ns()
        try:
            location = options.target_location
            handles = {}
            for operator_id, state in states:
                handles[operator_id] = (location.write_operator_subtask_state(operator_id, self._subtask_index, state)
                                        if state.has_state() else None)
            size = sum(h.state_size for h in handles.values() if h is not None)
            metrics = CheckpointMetrics(sync_ms, (time.monotonic_ns() - start_ns) / 1e6, alignment_ms,
                                        start_delay_ms, size)
        except Exception as e:  # noqa: BLE001 - Flink's CHECKPOINT_ASYNC_EXCEPTION
            _LOG.warning("%s: checkpoint %d failed writing its state: %s", self._name, checkpoint_id, e)
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
