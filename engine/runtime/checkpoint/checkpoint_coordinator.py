"""The JobMaster's checkpoint coordinator (Flink's ``CheckpointCoordinator`` with its
``CheckpointRequestDecider`` and ``CheckpointFailureManager``), the same in embedded and
cluster mode.

Life of a checkpoint:

1. the periodic timer fires every ``interval_ms``; a trigger is held back while
   ``max_concurrent_checkpoints`` are pending (it runs when one ends) and until ``min_pause_ms``
   passed since the last one completed; it is skipped (not a failure) while any task is not
   RUNNING;
2. id ``n`` (1, 2, ...) gets a storage location and a :class:`PendingCheckpoint` that waits
   for every running task's acknowledgement; the source tasks (no network inputs), or once
   tasks finished the running tasks whose producers all finished, get the trigger; the timeout
   (``timeout_ms``) starts;
3. every task acknowledges with its operators' state handles; the last acknowledgement
   completes it: the location is finalized with the metadata, the
   :class:`~rill.runtime.checkpoint.completed_checkpoint.CompletedCheckpoint` goes into the
   :class:`~rill.runtime.checkpoint.completed_checkpoint_store.CompletedCheckpointStore`
   (retaining ``num_retained``), older pending checkpoints are subsumed, and every task is told
   ``notify_checkpoint_complete``;
4. or it is aborted: on its timeout, a task's decline, a task failure or finishing, a failed
   finalization; the location is disposed of and the tasks are told
   ``notify_checkpoint_aborted``. Failures whose reason counts (see
   :class:`~rill.runtime.checkpoint.checkpoint_failure_reason.CheckpointFailureReason`) in a row
   beyond ``tolerable_failed_checkpoints`` fail the job with Flink's "Exceeded checkpoint
   tolerable failure threshold."; a completed checkpoint resets the count.

Threading: any method may be called from any thread (timer, task threads and asynchronous
checkpoint threads embedded; the actor's thread in the cluster); state is guarded by one lock,
and tasks, stores and the failure callback are called outside it.

Checkpoints after tasks finish (FLIP-147, ``checkpoints_after_tasks_finish``): the
:func:`~rill.runtime.checkpoint.checkpoint_plan.calculate_checkpoint_plan` picks the tasks to
trigger (running tasks whose inputs' producers all finished) and to wait for (the running ones);
a task acknowledges with ``task_finished`` once its operators finished (its final checkpoint),
and when that checkpoint completes the task counts as finished from then on. An operator whose
every subtask finished is *fully finished* in the metadata (no state; a restore does not run
it). With the option off, triggers are skipped once any task finished. A task finishing while a
checkpoint waits for it aborts that checkpoint (``CHECKPOINT_DECLINED_TASK_CLOSING``, not counted).

Unaligned checkpoints (FLIP-76): with ``unaligned`` on, checkpoints are ``UNALIGNED`` when the
aligned-checkpoint timeout is 0, else ``ALIGNED`` with that timeout (they switch to unaligned
in the tasks, see :mod:`rill.runtime.checkpoint.barrier_handler`); savepoints are always
aligned, as Flink's.

Savepoints (:meth:`CheckpointCoordinator.trigger_savepoint`, :meth:`~CheckpointCoordinator.stop_with_savepoint`)
go the same way with ``SnapshotType.SAVEPOINT`` and a location from the storage's
``initialize_location_for_savepoint``; as Flink's they are forced (neither held back by
``max_concurrent_checkpoints`` nor by ``min_pause_ms``), never enter the completed checkpoint
store (so retention never discards them, and recovery restores from checkpoints only), neither
subsume nor are subsumed, and do not count towards the tolerable failures. Like checkpoints
they are taken after tasks finished (FLIP-147): the same plan records the finished subtasks and an
operator whose every subtask finished is fully finished in the savepoint's metadata, so a job
restored from it does not run that operator again. Their future
completes with the savepoint's directory (its external pointer).
"""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from rill.common.checkpointing_options import CheckpointingMode, CheckpointingOptions
from rill.graph.states import ExecutionState, JobStatus
from rill.runtime.checkpoint.checkpoint_failure_reason import CheckpointException, CheckpointFailureReason
from rill.runtime.checkpoint.checkpoint_options import AlignmentType, CheckpointMetrics, CheckpointOptions
from rill.runtime.checkpoint.checkpoint_plan import calculate_checkpoint_plan
from rill.runtime.checkpoint.checkpoint_stats import CheckpointStatsSnapshot, CheckpointStatsTracker
from rill.runtime.checkpoint.completed_checkpoint import CompletedCheckpoint
from rill.runtime.checkpoint.completed_checkpoint_store import CompletedCheckpointStore, discard_on_shutdown
from rill.runtime.checkpoint.pending_checkpoint import OperatorInfo, PendingCheckpoint, TaskAcknowledgeResult
from rill.runtime.checkpoint.stop_mode import StopMode
from rill.runtime.checkpoint.timer import Cancellable, CheckpointTimer
from rill.state.checkpoint.metadata import SnapshotType
from rill.state.checkpoint.storage import CheckpointStorage

__all__ = ["CheckpointCoordinator", "operators_of_job_graph", "TOLERABLE_FAILURE_MESSAGE"]

_LOG = logging.getLogger(__name__)

#: Flink's message when too many checkpoints failed in a row.
TOLERABLE_FAILURE_MESSAGE = "Exceeded checkpoint tolerable failure threshold."

#: ``() -> [(task, its ExecutionState as the JobMaster recorded it)]``
TasksProvider = Callable[[], Sequence[Tuple[Any, ExecutionState]]]


def _now_ms() -> int:
    return int(time.time() * 1000)


def operators_of_job_graph(job_graph) -> List[OperatorInfo]:
    """Every operator of ``job_graph`` as the checkpoint metadata lists it."""
    out = []
    for v in job_graph.get_vertices():
        for cfg in v.stream_configs.values():
            out.append(OperatorInfo(str(cfg.operator_id), v.get_parallelism(), cfg.max_parallelism,
                                    cfg.operator_name, cfg.uid, str(v.get_id())))
    return out


class CheckpointCoordinator:
    """
    :param job_id: the job (32 hex digits).
    :param options: the job's ``CheckpointingOptions`` (validated already).
    :param operators: every operator of the job (:func:`operators_of_job_graph`).
    :param tasks: what the coordinator triggers and waits for (:data:`TasksProvider`); a task
        has ``tdd`` (``attempt_id``, ``subtask_index``, ``input_gates``, ``task_name``) and
        ``trigger_checkpoint(checkpoint_id, timestamp, options)``,
        ``notify_checkpoint_complete(checkpoint_id)``, ``notify_checkpoint_aborted(checkpoint_id)``.
    :param storage: where checkpoints are written.
    :param timer: runs the periodic trigger and the timeouts.
    :param fail_job: ``(exception) -> None``: fails the job when too many checkpoints failed in
        a row (a ``RuntimeError`` with Flink's message).
    :param operator_coordinators: ``() -> {operator id: coordinator}``: the job's operator
        coordinators (``SourceCoordinator`` s); each one's ``snapshot_state(checkpoint_id)`` is
        taken before the sources are triggered and stored with the operator's state (Flink's
        ``OperatorCoordinatorCheckpoints``); a failure fails the checkpoint (``IO_EXCEPTION``).
    """

    def __init__(self, job_id: str, options: CheckpointingOptions, operators: Sequence[OperatorInfo], tasks: TasksProvider,
                 storage: CheckpointStorage, timer: CheckpointTimer,
                 fail_job: Callable[[BaseException], None],
                 operator_coordinators: Optional[Callable[[], Mapping[str, Any]]] = None) -> None:
        self._operator_coordinators = operator_coordinators or dict
        self.job_id = job_id
        self.options = options
        self._alignment = (AlignmentType.ALIGNED if options.mode is CheckpointingMode.EXACTLY_ONCE
                           else AlignmentType.AT_LEAST_ONCE)
        #: savepoints keep the plain alignment; checkpoints may be unaligned (FLIP-76)
        self._savepoint_alignment = self._alignment
        self._aligned_checkpoint_timeout_ms = 0
        if options.unaligned:
            self._aligned_checkpoint_timeout_ms = options.aligned_checkpoint_timeout_ms
            if not self._aligned_checkpoint_timeout_ms:
                self._alignment = AlignmentType.UNALIGNED
        self._operators = list(operators)
        self._tasks = tasks
        self.storage = storage
        self._timer = timer
        self._fail_job = fail_job
        #: the job's completed checkpoints (what recovery restores from)
        self.completed_checkpoint_store = CompletedCheckpointStore(options.num_retained)
        self.stats_tracker = CheckpointStatsTracker()
        self._lock = threading.RLock()
        self._ids = itertools.count(1)
        self._pending: Dict[int, PendingCheckpoint] = {}
        self._periodic: Optional[Cancellable] = None
        self._retry: Optional[Cancellable] = None
        self._request_queued = False
        self._last_completion_ns: Optional[int] = None
        #: fully acknowledged checkpoints whose metadata is being written: still in progress
        #: for max-concurrent-checkpoints and min-pause (a trigger meanwhile would start the
        #: next one before this one ended)
        self._completing = 0
        self._continuous_failures = 0
        self._shutdown = False
        self._job_failed = False
        #: checkpoint id -> the future of a pending savepoint's directory
        self._savepoint_futures: Dict[int, concurrent.futures.Future] = {}
        #: attempt ids whose final checkpoint completed: they exit and count as finished
        self._finishing_attempts: Set[str] = set()

    # -- scheduling ---------------------------------------------------------------------------
    def start_checkpoint_scheduler(self) -> None:
        """Start periodic checkpoints: the first one ``interval_ms`` from now (Flink's
        ``startCheckpointScheduler``)."""
        with self._lock:
            if self._shutdown or self._periodic is not None:
                return
            self._periodic = self._timer.schedule(self.options.interval_ms, self._on_periodic)

    def stop_checkpoint_scheduler(self) -> None:
        """No more periodic triggers (pending checkpoints go on)."""
        with self._lock:
            for c in (self._periodic, self._retry):
                if c is not None:
                    c.cancel()
            self._periodic = self._retry = None
            self._request_queued = False

    def _on_periodic(self) -> None:
        with self._lock:
            if self._shutdown or self._periodic is None:
                return
            self._periodic = self._timer.schedule(self.options.interval_ms, self._on_periodic)
        self.trigger_checkpoint()

    def _on_retry(self) -> None:
        with self._lock:
            self._retry = None
            if not self._request_queued:
                return
            self._request_queued = False
        self.trigger_checkpoint()

    # -- triggering ---------------------------------------------------------------------------
    def trigger_checkpoint(self) -> Optional[int]:
        """Trigger a checkpoint now if the limits allow; returns its id, or ``None`` when it was
        held back (queued behind a pending one or the minimum pause), skipped (a task not
        running) or failed to start."""
        with self._lock:
            if self._shutdown:
                return None
            if len(self._pending) + self._completing >= self.options.max_concurrent_checkpoints:
                self._request_queued = True  # run when one ends (Flink's queued request)
                return None
            if self._last_completion_ns is not None and self.options.min_pause_ms > 0:
                wait_ms = self.options.min_pause_ms - (time.monotonic_ns() - self._last_completion_ns) / 1e6
                if wait_ms > 0:
                    self._request_queued = True
                    if self._retry is None:
                        self._retry = self._timer.schedule(wait_ms, self._on_retry)
                    return None
            plan, why = calculate_checkpoint_plan(list(self._tasks()), self.options.checkpoints_after_tasks_finish,
                                                  self._finishing_attempts)
            if plan is None:
                _LOG.debug("Checkpoint skipped: %s (%s)",
                           CheckpointFailureReason.NOT_ALL_REQUIRED_TASKS_RUNNING.message, why)
                return None
            tasks = plan.tasks_to_wait_for
            checkpoint_id = next(self._ids)
            timestamp = _now_ms()
            try:
                coordinator_states = self._snapshot_operator_coordinators(checkpoint_id)
                location = self.storage.initialize_location_for_checkpoint(checkpoint_id)
            except Exception as e:  # noqa: BLE001 - counted as Flink's IO_EXCEPTION
                _LOG.warning("Checkpoint %d could not be started: %s", checkpoint_id, e)
                self.stats_tracker.report_pending_checkpoint(checkpoint_id, timestamp, len(tasks))
                self.stats_tracker.report_failed_checkpoint(checkpoint_id, _now_ms(), f"{type(e).__name__}: {e}")
                fail = self._count_failure(CheckpointFailureReason.IO_EXCEPTION)
                location = None
            if location is not None:
                pending = PendingCheckpoint(
                    self.job_id, checkpoint_id, timestamp,
                    {t.tdd.attempt_id: t.task_name_with_subtasks for t in tasks}, self._operators, location,
                    coordinator_states=coordinator_states,
                    finished_subtasks=[(str(t.tdd.vertex.get_id()), t.tdd.subtask_index) for t in plan.finished_tasks])
                self._pending[checkpoint_id] = pending
                pending.cancellable = self._timer.schedule(
                    self.options.timeout_ms, lambda: self._on_timeout(checkpoint_id))
                self.stats_tracker.report_pending_checkpoint(checkpoint_id, timestamp, len(tasks))
                options = CheckpointOptions(SnapshotType.CHECKPOINT, location, self._alignment,
                                            aligned_checkpoint_timeout_ms=self._aligned_checkpoint_timeout_ms)
                sources = plan.tasks_to_trigger
        if location is None:
            if fail is not None:
                self._fail_job(fail)
            return None
        for t in sources:
            try:
                t.trigger_checkpoint(checkpoint_id, timestamp, options)
            except Exception as e:  # noqa: BLE001 - a task that cannot take the trigger declines it
                self.receive_decline_message(checkpoint_id, t.tdd.attempt_id, CheckpointException(
                    CheckpointFailureReason.CHECKPOINT_DECLINED_TASK_NOT_READY, f"{t.task_name_with_subtasks}: {e}"))
        return checkpoint_id

    def trigger_savepoint(self, target_directory: Optional[str] = None,
                          stop_mode: Optional[StopMode] = None) -> "concurrent.futures.Future[str]":
        """Take a savepoint now (Flink's ``triggerSavepoint``; with ``stop_mode`` the synchronous
        savepoint of ``triggerSynchronousSavepoint``).

        :param target_directory: a path or fsspec URL under which the savepoint's directory
            ``savepoint-<job[:6]>-<random>`` is created; ``None``: the configured
            ``execution.checkpointing.savepoint-dir``.
        :param stop_mode: ``None`` for a savepoint the job runs on after; a
            :class:`StopMode` makes every task stop once it completed (see
            :meth:`stop_with_savepoint`).
        :returns: a future of the savepoint's directory. It fails with ``ValueError`` when
            there is no target directory (Flink's message), with a
            :class:`CheckpointException` when a task is neither running nor finished, or
            tasks finished with ``checkpoints_after_tasks_finish`` off, or every task finished
            (``NOT_ALL_REQUIRED_TASKS_RUNNING``), the coordinator is shut down, or the
            savepoint is aborted (declined, expired after ``timeout_ms``, a task failed), and
            with ``OSError`` when its directory cannot be created.
        """
        future: "concurrent.futures.Future[str]" = concurrent.futures.Future()
        if target_directory is None and not getattr(self.storage, "savepoint_dir", None):
            future.set_exception(ValueError(
                "No savepoint directory: give a target directory or configure "
                "execution.checkpointing.savepoint-dir (Flink: \"No savepoint directory has been specified. "
                "You can either specify a target directory when triggering the savepoint or configure a "
                "default savepoint directory\")"))
            return future
        with self._lock:
            if self._shutdown:
                future.set_exception(CheckpointException(CheckpointFailureReason.CHECKPOINT_COORDINATOR_SHUTDOWN))
                return future
            # the same plan as a checkpoint's (Flink's CheckpointPlanCalculator serves both): tasks
            # that finished are recorded as finished, their running consumers are triggered
            plan, why = calculate_checkpoint_plan(list(self._tasks()), self.options.checkpoints_after_tasks_finish,
                                                  self._finishing_attempts)
            if plan is None:
                future.set_exception(CheckpointException(CheckpointFailureReason.NOT_ALL_REQUIRED_TASKS_RUNNING,
                                                         f"({why})"))
                return future
            tasks = plan.tasks_to_wait_for
            checkpoint_id = next(self._ids)
            timestamp = _now_ms()
            try:
                coordinator_states = self._snapshot_operator_coordinators(checkpoint_id)
                location = self.storage.initialize_location_for_savepoint(checkpoint_id, target_directory)
            except Exception as e:  # noqa: BLE001 - the caller's future says why
                future.set_exception(e)
                return future
            pending = PendingCheckpoint(
                self.job_id, checkpoint_id, timestamp,
                {t.tdd.attempt_id: t.task_name_with_subtasks for t in tasks}, self._operators, location,
                SnapshotType.SAVEPOINT, coordinator_states,
                finished_subtasks=[(str(t.tdd.vertex.get_id()), t.tdd.subtask_index) for t in plan.finished_tasks])
            self._pending[checkpoint_id] = pending
            self._savepoint_futures[checkpoint_id] = future
            pending.cancellable = self._timer.schedule(self.options.timeout_ms, lambda: self._on_timeout(checkpoint_id))
            self.stats_tracker.report_pending_checkpoint(checkpoint_id, timestamp, len(tasks), is_savepoint=True,
                                                         is_synchronous=stop_mode is not None)
            options = CheckpointOptions(SnapshotType.SAVEPOINT, location, self._savepoint_alignment, stop_mode)
            sources = plan.tasks_to_trigger
        _LOG.info("Triggering %ssavepoint %d of job %s into %s", "synchronous " if stop_mode else "", checkpoint_id,
                  self.job_id, location.location_reference)
        for t in sources:
            try:
                t.trigger_checkpoint(checkpoint_id, timestamp, options)
            except Exception as e:  # noqa: BLE001 - a task that cannot take the trigger declines it
                self.receive_decline_message(checkpoint_id, t.tdd.attempt_id, CheckpointException(
                    CheckpointFailureReason.CHECKPOINT_DECLINED_TASK_NOT_READY, f"{t.task_name_with_subtasks}: {e}"))
        return future

    def continue_after(self, checkpoint_id: int) -> None:
        """Number the next checkpoints from ``checkpoint_id + 1``: a job restored from checkpoint
        or savepoint ``checkpoint_id`` goes on from there, as Flink's (its source readers and
        coordinators compare checkpoint ids with the restored one). Call before the first trigger."""
        with self._lock:
            self._ids = itertools.count(checkpoint_id + 1)

    def _snapshot_operator_coordinators(self, checkpoint_id: int) -> Dict[str, bytes]:
        """Under the lock, before the sources are triggered: every operator coordinator's state."""
        return {oid: c.snapshot_state(checkpoint_id) for oid, c in self._operator_coordinators().items()}

    def stop_with_savepoint(self, target_directory: Optional[str], drain: bool) -> "concurrent.futures.Future[str]":
        """Stop periodic checkpoints and take a synchronous savepoint (FLIP-34, Flink's
        ``stopWithSavepoint``): the sources take it and stop reading; with ``drain`` they emit
        ``MAX_WATERMARK`` first. Once it completed every task ends (FINISHED); without drain no
        operator is told its input ended. If the savepoint fails the periodic checkpoints start
        again and the job runs on, as in Flink.

        :returns: the future of :meth:`trigger_savepoint`.
        """
        self.stop_checkpoint_scheduler()
        future = self.trigger_savepoint(target_directory, StopMode.DRAIN if drain else StopMode.NO_DRAIN)

        def restart_scheduler(f: concurrent.futures.Future) -> None:
            if f.exception() is not None:
                self.start_checkpoint_scheduler()

        future.add_done_callback(restart_scheduler)
        return future

    def _on_timeout(self, checkpoint_id: int) -> None:
        self._abort(checkpoint_id, CheckpointException(
            CheckpointFailureReason.CHECKPOINT_EXPIRED, f"(checkpoint {checkpoint_id}, timeout "
                                                        f"{self.options.timeout_ms} ms)"))

    # -- messages from tasks ------------------------------------------------------------------
    def receive_acknowledge_message(self, attempt_id: str, checkpoint_id: int, metrics: CheckpointMetrics,
                                    subtask_state, task_finished: bool = False) -> bool:
        """A task acknowledged checkpoint ``checkpoint_id`` with ``subtask_state``
        (operator id -> handle or ``None``); returns whether it was accepted (a late or unknown
        acknowledgement is dropped, as Flink's ``receiveAcknowledgeMessage``).

        :param task_finished: the task's operators had finished when it took the snapshot
            (Flink's ``TaskStateSnapshot.isTaskFinished``): it exits once a checkpoint it took
            part in completes (FLIP-147's final checkpoint).
        """
        completed = None
        with self._lock:
            pending = self._pending.get(checkpoint_id)
            if pending is None:
                return False
            task = self._task(attempt_id)
            subtask_index = task.tdd.subtask_index if task is not None else -1
            finished_vertex = str(task.tdd.vertex.get_id()) if task_finished and task is not None else None
            result = pending.acknowledge_task(attempt_id, subtask_index, subtask_state, finished_vertex)
            if result is not TaskAcknowledgeResult.SUCCESS:
                return False
            self.stats_tracker.report_subtask_stats(checkpoint_id, task.tdd.task_name, subtask_index, _now_ms(),
                                                    metrics)
            if pending.is_fully_acknowledged():
                completed = pending
                del self._pending[checkpoint_id]
                self._completing += 1
                pending.cancellable.cancel()
        if completed is not None:
            self._complete(completed)
        return True

    def receive_decline_message(self, checkpoint_id: int, attempt_id: str, reason: BaseException) -> None:
        """A task declined checkpoint ``checkpoint_id`` (``reason``: a
        :class:`CheckpointException`, or any exception, read as ``CHECKPOINT_DECLINED``)."""
        with self._lock:
            pending = self._pending.get(checkpoint_id)
            if pending is None or not pending.is_waiting_for(attempt_id):
                return
        if not isinstance(reason, CheckpointException):
            reason = CheckpointException(CheckpointFailureReason.CHECKPOINT_DECLINED, f"{type(reason).__name__}: {reason}")
        self._abort(checkpoint_id, reason)

    # -- job events ---------------------------------------------------------------------------
    def on_task_failure(self) -> None:
        """A task failed: every pending checkpoint is aborted (``TASK_FAILURE``, not counted).
        Periodic triggering goes on: triggers are skipped until every task runs again, so a
        restarted job checkpoints again without being told."""
        self._abort_all(CheckpointFailureReason.TASK_FAILURE)

    def on_task_finished(self, attempt_id: str) -> None:
        """A task finished: the pending checkpoints it did not acknowledge cannot complete
        (``CHECKPOINT_DECLINED_TASK_CLOSING``, not counted); later ones are planned without it
        (FLIP-147)."""
        with self._lock:
            waiting = [cid for cid, p in self._pending.items() if p.is_waiting_for(attempt_id)]
        for cid in waiting:
            self._abort(cid, CheckpointException(CheckpointFailureReason.CHECKPOINT_DECLINED_TASK_CLOSING))

    def shutdown(self, job_status: Optional[JobStatus] = None) -> None:
        """The job ended: stop triggering, abort what is pending (idempotent). With the job's
        terminal ``job_status`` the completed checkpoints are discarded or kept as
        ``externalized_checkpoint_retention`` says (see
        :func:`~rill.runtime.checkpoint.completed_checkpoint_store.discard_on_shutdown`); the
        kept ones are logged with their directories.

        :raises ValueError: if ``job_status`` is not globally terminal.
        """
        discard = (None if job_status is None
                   else discard_on_shutdown(self.options.externalized_checkpoint_retention, job_status))
        self.stop_checkpoint_scheduler()
        self._abort_all(CheckpointFailureReason.CHECKPOINT_COORDINATOR_SHUTDOWN)
        with self._lock:
            self._shutdown = True
        if discard is None:
            return
        if not discard:
            for c in self.completed_checkpoint_store.get_all():
                _LOG.info("Checkpoint %d of job %s at %s not discarded (job %s, %s)", c.checkpoint_id, self.job_id,
                          c.external_pointer, job_status.name, self.options.externalized_checkpoint_retention.name)
        self.completed_checkpoint_store.shutdown(discard)

    # -- observation --------------------------------------------------------------------------
    def get_checkpoint_stats_snapshot(self) -> CheckpointStatsSnapshot:
        """The checkpoint statistics now."""
        return self.stats_tracker.create_snapshot()

    def get_number_of_pending_checkpoints(self) -> int:
        with self._lock:
            return len(self._pending)

    # -- completion and abort -----------------------------------------------------------------
    def _complete(self, pending: PendingCheckpoint) -> None:
        try:
            pointer = pending.location.finalize(pending.metadata())
        except Exception as e:  # noqa: BLE001 - Flink's FINALIZE_CHECKPOINT_FAILURE
            with self._lock:
                self._completing -= 1
                self._pending[pending.checkpoint_id] = pending  # so that _abort finds it
            self._abort(pending.checkpoint_id, CheckpointException(
                CheckpointFailureReason.FINALIZE_CHECKPOINT_FAILURE, f"{type(e).__name__}: {e}"))
            return
        now = _now_ms()
        completed = CompletedCheckpoint(pending.checkpoint_id, pending.timestamp, now, pending.metadata(pointer),
                                        pointer, pending.location)
        savepoint = pending.snapshot_type is SnapshotType.SAVEPOINT
        if not savepoint:  # a savepoint belongs to the user: retention never discards it
            self.completed_checkpoint_store.add(completed)
        self.stats_tracker.report_completed_checkpoint(pending.checkpoint_id, now, pointer)
        with self._lock:
            self._completing -= 1
            self._last_completion_ns = time.monotonic_ns()
            self._continuous_failures = 0
            # their final checkpoint completed: they exit on its notification (FLIP-147)
            self._finishing_attempts.update(pending.finished_attempts)
            subsumed = [] if savepoint else [cid for cid, p in self._pending.items()
                                             if cid < pending.checkpoint_id
                                             and p.snapshot_type is SnapshotType.CHECKPOINT]
            tasks = [t for t, _ in self._tasks()]
            future = self._savepoint_futures.pop(pending.checkpoint_id, None)
        for cid in subsumed:
            self._abort(cid, CheckpointException(CheckpointFailureReason.CHECKPOINT_SUBSUMED))
        _LOG.info("Completed checkpoint %d for job %s (%d bytes, %d ms)", completed.checkpoint_id, self.job_id,
                  completed.state_size, now - completed.timestamp)
        for t in tasks:
            try:
                t.notify_checkpoint_complete(completed.checkpoint_id)
            except Exception:  # noqa: BLE001 - a task that ended cannot be told
                _LOG.debug("notify_checkpoint_complete(%d) not delivered", completed.checkpoint_id, exc_info=True)
        if future is not None:
            future.set_result(pointer)
        self._after_checkpoint_ended()

    def _abort(self, checkpoint_id: int, exception: CheckpointException, notify: bool = True) -> None:
        with self._lock:
            pending = self._pending.pop(checkpoint_id, None)
            if pending is None:
                return
            # savepoints do not count towards the tolerable failures (Flink's CheckpointFailureManager)
            fail = (self._count_failure(exception.reason) if pending.snapshot_type is SnapshotType.CHECKPOINT
                    else None)
            tasks = [t for t, _ in self._tasks()] if notify else []
            future = self._savepoint_futures.pop(checkpoint_id, None)
        pending.dispose()
        self.stats_tracker.report_failed_checkpoint(checkpoint_id, _now_ms(), str(exception))
        _LOG.info("Checkpoint %d of job %s aborted: %s", checkpoint_id, self.job_id, exception)
        for t in tasks:
            try:
                t.notify_checkpoint_aborted(checkpoint_id)
            except Exception:  # noqa: BLE001 - a task that ended cannot be told
                _LOG.debug("notify_checkpoint_aborted(%d) not delivered", checkpoint_id, exc_info=True)
        if future is not None:
            future.set_exception(exception)
        if fail is not None:
            self._fail_job(fail)
        else:
            self._after_checkpoint_ended()

    def _abort_all(self, reason: CheckpointFailureReason) -> None:
        with self._lock:
            ids = sorted(self._pending)
        for cid in ids:
            self._abort(cid, CheckpointException(reason), notify=False)

    def _count_failure(self, reason: CheckpointFailureReason) -> Optional[BaseException]:
        """Under the lock: count a failure; the exception to fail the job with when too many
        counted ones came in a row (once)."""
        if not reason.counted or self._job_failed:
            return None
        self._continuous_failures += 1
        if self._continuous_failures <= self.options.tolerable_failed_checkpoints:
            return None
        self._job_failed = True
        self._shutdown = True
        for c in (self._periodic, self._retry):
            if c is not None:
                c.cancel()
        self._periodic = self._retry = None
        return RuntimeError(f"{TOLERABLE_FAILURE_MESSAGE} The latest checkpoint failed due to {reason.message} "
                            f"({self._continuous_failures} failed in a row, tolerable: "
                            f"{self.options.tolerable_failed_checkpoints}); see the checkpoint statistics "
                            "(JobClient.get_checkpoint_stats) for why")

    def _after_checkpoint_ended(self) -> None:
        with self._lock:
            run = self._request_queued and not self._shutdown and self._retry is None
            if run:
                self._request_queued = False
        if run:
            self.trigger_checkpoint()

    def _task(self, attempt_id: str):
        for t, _ in self._tasks():
            if t.tdd.attempt_id == attempt_id:
                return t
        return None
