"""``JobMaster``: runs one job (Flink's ``JobMaster`` + ``DefaultScheduler``).

Expands the JobGraph into the ExecutionGraph, creates the source coordinators (split
enumerators), assigns slots with slot sharing, deploys one Task per ExecutionVertex, tracks
every execution's state and the job status, and finishes, fails or cancels the job:

- all executions FINISHED → job FINISHED;
- any execution FAILED while RUNNING → the restart strategy decides
  (:mod:`rill.runtime.jobmaster.failover`): either job RESTARTING → every execution cancelled
  → after the backoff every subtask deployed again as a new attempt, restored from the latest
  completed checkpoint (else the snapshot the job started from, else empty) → RUNNING; or job
  FAILING → every other execution cancelled → job FAILED with a ``JobExecutionException``
  naming the failing operator and subtask of the last attempt (``__cause__`` is the original
  exception);
- ``cancel()`` → job CANCELLING → every execution cancelled → job CANCELED.

A job restores from a snapshot on its first deployment when ``execution.state-recovery.path``
is set (:class:`~rill.graph.savepoint_restore_settings.SavepointRestoreSettings`) or
:meth:`JobMaster.restore_from` was called before :meth:`JobMaster.start`; each subtask's share
is computed by :mod:`rill.runtime.checkpoint.state_assignment` and travels in its descriptor.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from rill.common.checkpointing_options import CheckpointingOptions
from rill.common.configuration import ConfigOptions, Configuration
from rill.common.network_options import NetworkOptions
from rill.common.job_execution_result import JobExecutionResult, VertexSummary
from rill.graph.savepoint_restore_settings import SavepointRestoreSettings
from rill.runtime.source_coordinator import SourceCoordinator
from rill.graph.execution_graph import ExecutionGraph
from rill.graph.states import ExecutionState, JobStatus
from rill.network.partition.exceptions import PartitionReleasedError
from rill.network.partition.result_partition_id import ResultPartitionID
from rill.runtime.deployment import (
    InputGateDeploymentDescriptor,
    ResultPartitionDeploymentDescriptor,
    TaskDeploymentDescriptor,
)
from rill.runtime.checkpoint.state_assignment import StateAssignment, VertexRestoreTarget, assign_states
from rill.runtime.checkpoint.checkpoint_coordinator import CheckpointCoordinator, operators_of_job_graph
from rill.runtime.checkpoint.checkpoint_responder import CoordinatorCheckpointResponder
from rill.runtime.checkpoint.checkpoint_stats import CheckpointStatsSnapshot
from rill.runtime.checkpoint.source_replay import check_sources_replayable
from rill.runtime.checkpoint.timer import CheckpointTimer, ThreadTimer
from rill.runtime.errors import JobCancellationException, JobExecutionException
from rill.runtime.executiongraph.failover.restart_backoff_time_strategy import (
    restart_backoff_time_strategy_from_configuration,
)
from rill.runtime.jobmaster.failover import (
    ExceptionHistoryEntry,
    ExecutionFailureHandler,
    RestartScheduler,
    schedule_on_timer,
)
from rill.runtime.jobmaster.scheduler import assign_slots
from rill.runtime.jobmaster import channel_timelines, savepoints
from rill.runtime.taskmanager.channel_timeline import ChannelTimelineSettings
from rill.state.checkpoint.metadata import CheckpointMetadata
from rill.runtime.taskmanager.task import TaskFailure
from rill.state.checkpoint.storage import create_checkpoint_storage
from rill.runtime.watermark_alignment import WatermarkAlignmentGroups

__all__ = ["JobMaster"]


class JobMaster:
    """
    :param job_graph: the JobGraph to run.
    :param task_executor: where tasks are deployed (embedded: one in this process).
    :param configuration: job configuration (buffer sizes, timeouts, restart strategy,
        ``execution.state-recovery.*``).
    :param schedule_restart: how a restart waits for its backoff (default: a timer thread;
        the cluster's JobMasterActor passes its own wake-up).
    :raises ValueError: for invalid checkpointing, restart or state recovery settings, naming
        the key (the client checks them before it submits, so a job normally never gets here
        with one).

    :param checkpoint_timer: where the checkpoint coordinator's timers run (default: a thread;
        the cluster's JobMasterActor passes its own wake-ups).

    :ivar checkpointing_options: the job's ``CheckpointingOptions``, parsed once, for the
        checkpoint coordinator.
    :ivar checkpoint_coordinator: the job's
        :class:`~rill.runtime.checkpoint.checkpoint_coordinator.CheckpointCoordinator` once the
        job started with checkpointing enabled, else ``None``; a restart restores from its
        ``completed_checkpoint_store.get_latest()``.
    :ivar failure_handler: the ``ExecutionFailureHandler`` over the job's restart strategy
        (``failure_handler.number_of_restarts``: restarts so far).
    :ivar exception_history: every failure the job went through, oldest first
        (``ExceptionHistoryEntry``).
    """

    def __init__(self, job_graph, task_executor, configuration: Configuration,
                 job_parameters: Optional[Dict[str, str]] = None, on_terminal=None,
                 schedule_restart: RestartScheduler = schedule_on_timer,
                 checkpoint_timer: Optional[CheckpointTimer] = None):
        self.job_graph = job_graph
        self.task_executor = task_executor
        self.config = configuration
        self.checkpointing_options = CheckpointingOptions.from_configuration(configuration)
        self.savepoint_restore_settings = SavepointRestoreSettings.from_configuration(configuration)
        self.failure_handler = ExecutionFailureHandler(restart_backoff_time_strategy_from_configuration(
            configuration, self.checkpointing_options.enabled))
        self.exception_history: List[ExceptionHistoryEntry] = []
        self._schedule_restart = schedule_restart
        self._restart_delay_ms = 0
        self._restart_scheduled = False  # the failed attempt's last report scheduled the restart
        self._initial_restore: Optional[CheckpointMetadata] = None
        self._allow_non_restored_state = self.savepoint_restore_settings.allow_non_restored_state
        self.checkpoint_coordinator: Optional[CheckpointCoordinator] = None
        self._checkpoint_timer = checkpoint_timer
        #: how embedded tasks acknowledge checkpoints (cluster tasks send messages instead)
        self.checkpoint_responder = CoordinatorCheckpointResponder(lambda: self.checkpoint_coordinator)
        self.job_parameters = dict(job_parameters or {})
        self.job_id = str(job_graph.get_job_id())
        self.job_name = job_graph.get_name()
        self.status = JobStatus.CREATED
        self.result_future: "concurrent.futures.Future[JobExecutionResult]" = concurrent.futures.Future()
        self.execution_graph = ExecutionGraph(job_graph)
        self.tasks: List[Any] = []
        self._first_failure = None
        self._consequent_failure = None  # a consumer that failed because its producer did
        self._lock = threading.RLock()
        self._on_terminal = on_terminal
        self._start_ns: Optional[int] = None
        self._end_ns: Optional[int] = None
        self.coordinators: Dict[int, SourceCoordinator] = {}
        #: every source's watermark group (FLIP-182), shared by the job's source coordinators
        self.watermark_alignment = WatermarkAlignmentGroups()
        self._source_totals: List[Optional[int]] = []
        #: the channel timeline recording started on demand (REST), while it runs
        self.channel_timeline: Optional[ChannelTimelineSettings] = None

    # -- deployment ------------------------------------------------------------------------
    def _create_coordinators(self) -> None:
        for v in self.job_graph.get_vertices():
            for cfg in v.stream_configs.values():
                if cfg.source is not None:
                    self.coordinators[cfg.node_id] = SourceCoordinator(cfg.source, v.get_parallelism(), cfg.node_id,
                                                                       self.watermark_alignment)
                    if cfg.watermark_alignment is not None:
                        self.watermark_alignment.expect(cfg.watermark_alignment.watermark_group,
                                                        [(cfg.node_id, i) for i in range(v.get_parallelism())])
                    self._source_totals.append(cfg.source.estimated_total_units())
        self._restore_source_coordinators()

    def _restore_source_coordinators(self) -> None:
        """Reset every source's enumerator to the snapshot the job restores from, so that it
        hands out only the splits no restored reader holds (Flink's ``resetToCheckpoint``)."""
        metadata = self._metadata_to_restore()
        if metadata is None:
            return
        for v in self.job_graph.get_vertices():
            for cfg in v.stream_configs.values():
                op = metadata.operator_states.get(str(cfg.operator_id))
                if cfg.source is not None and op is not None and op.coordinator_state is not None:
                    self.coordinators[cfg.node_id].reset_to_checkpoint(metadata.checkpoint_id, op.coordinator_state)

    def _tdds(self) -> List[TaskDeploymentDescriptor]:
        conf = self.config
        network = NetworkOptions.from_configuration(conf)
        slots = assign_slots(self.job_graph, self.task_executor.num_slots)
        timeline = self.channel_timeline or ChannelTimelineSettings.from_configuration(conf)
        backend_settings = {k: v for k, v in conf.to_dict().items() if k.startswith("state.backend")}
        assignment = self._assign_states()
        tdds = []
        for v in self.job_graph.get_vertices_sorted_topologically_from_sources():
            ejv = self.execution_graph.get_job_vertex(v.get_id())
            head_cfg = v.stream_configs[v.head_node_id]
            timeout = network.buffer_timeout_ms if head_cfg.buffer_timeout_ms is None else head_cfg.buffer_timeout_ms
            for ev in ejv.get_task_vertices():
                execution = ev.get_current_execution()
                produced = []
                for idx, ds in enumerate(v.get_produced_data_sets()):
                    irp = ev.get_produced_partition(ds.get_id())
                    edge = v.transitive_out_edges[idx]
                    consumer = ds.get_consumers()[0].get_target()
                    produced.append(ResultPartitionDeploymentDescriptor(
                        partition_id=ResultPartitionID(str(irp.partition_id), str(execution.attempt_id)),
                        num_subpartitions=irp.get_number_of_subpartitions(),
                        partitioner=edge.partitioner.copy(),
                        target_max_parallelism=consumer.get_effective_max_parallelism(),
                        target_name=consumer.get_name(),
                    ))
                gates = []
                for input_idx, _ in enumerate(v.get_inputs()):
                    channels = []
                    for irp, sub_idx in ev.get_consumed_partitions(input_idx):
                        producer_attempt = irp.get_producer().get_current_execution().attempt_id
                        channels.append((ResultPartitionID(str(irp.partition_id), str(producer_attempt)), sub_idx))
                    gates.append(InputGateDeploymentDescriptor(input_idx, channels))
                tdds.append(TaskDeploymentDescriptor(
                    job_id=self.job_id, job_name=self.job_name, vertex=v,
                    subtask_index=ev.subtask_index, parallelism=v.get_parallelism(),
                    attempt_number=execution.attempt_number, attempt_id=str(execution.attempt_id),
                    task_name=v.get_name(), produced_partitions=produced, input_gates=gates,
                    job_parameters=self.job_parameters, buffer_timeout_ms=timeout, network_options=network,
                    slot_index=slots[(str(v.get_id()), ev.subtask_index)].slot_index,
                    auto_watermark_interval_ms=conf.get(ConfigOptions.AUTO_WATERMARK_INTERVAL),
                    source_batch_size=conf.get(ConfigOptions.SOURCE_BATCH_SIZE),
                    channel_timeline=timeline,
                    checkpointing_enabled=self.checkpointing_options.enabled,
                    unaligned_checkpoints=self.checkpointing_options.enabled and self.checkpointing_options.unaligned,
                    final_checkpoint=(self.checkpointing_options.enabled
                                      and self.checkpointing_options.checkpoints_after_tasks_finish),
                    state_backend_settings=backend_settings,
                    task_restore=None if assignment is None
                    else assignment.get_task_restore(str(v.get_id()), ev.subtask_index),
                ))
                execution.state = ExecutionState.SCHEDULED
        return tdds

    # -- restore -------------------------------------------------------------------------------
    def restore_from(self, metadata: CheckpointMetadata, allow_non_restored_state: bool = False) -> None:
        """Restore the job from ``metadata`` on its first deployment (call before :meth:`start`);
        also what a restart restores from while no checkpoint completed. The entry point of
        ``execution.state-recovery.path`` once the snapshot is read, and of tests that hand
        the JobMaster a snapshot. The state is assigned to the subtasks at deployment
        (another parallelism is fine: :mod:`rill.runtime.checkpoint.state_assignment`).

        :raises RuntimeError: if the job was started already.
        """
        with self._lock:
            if self.status is not JobStatus.CREATED:
                raise RuntimeError(f"Job '{self.job_name}' ({self.job_id}) is {self.status.name}: a restore "
                                   "snapshot must be given before it starts")
            self._initial_restore = metadata
            self._allow_non_restored_state = allow_non_restored_state

    def _load_initial_restore(self) -> None:
        """Read the snapshot of ``execution.state-recovery.path``, unless one was given.

        :raises FileNotFoundError: if there is no completed snapshot at the path.
        """
        settings = self.savepoint_restore_settings
        if self._initial_restore is None and settings.restore_savepoint():
            path = settings.get_restore_path()
            self._initial_restore = create_checkpoint_storage(path, self.job_id).resolve_checkpoint(path)

    def _metadata_to_restore(self) -> Optional[CheckpointMetadata]:
        """The latest completed checkpoint, else the snapshot the job started from, else None."""
        coordinator = self.checkpoint_coordinator
        latest = None if coordinator is None else coordinator.completed_checkpoint_store.get_latest()
        return latest.metadata if latest is not None else self._initial_restore

    def _assign_states(self) -> Optional[StateAssignment]:
        """Each subtask's share of the snapshot to restore, or None (start empty).

        :raises ValueError: if the snapshot does not fit the job (see ``assign_states``).
        """
        metadata = self._metadata_to_restore()
        if metadata is None:
            return None
        return assign_states(metadata, [VertexRestoreTarget.from_job_vertex(v) for v in self.job_graph.get_vertices()],
                             self._allow_non_restored_state)

    def start(self) -> None:
        """Deploy and start every task. Errors during deployment fail the job at once."""
        with self._lock:
            self.status = JobStatus.RUNNING
            self._start_ns = time.monotonic_ns()
        try:
            check_sources_replayable(self.job_graph, self.checkpointing_options)
            self._load_initial_restore()
            self._create_coordinators()
            self._create_checkpoint_coordinator()
            tdds = self._tdds()
            for tdd in tdds:
                self.tasks.append(self.task_executor.submit_task(tdd, self.coordinators, self._on_task_state,
                                                                 self.checkpoint_responder))
        except BaseException as e:
            self.fail_deployment(e)
            return
        for t in self.tasks:
            t.start()
        if self.checkpoint_coordinator is not None:
            self.checkpoint_coordinator.start_checkpoint_scheduler()

    # -- checkpoints (rill.runtime.checkpoint) -----------------------------------------------
    def _create_checkpoint_coordinator(self) -> None:
        """The checkpoint coordinator, when checkpointing is enabled."""
        options = self.checkpointing_options
        if not options.enabled:
            return
        if self._checkpoint_timer is None:
            self._checkpoint_timer = ThreadTimer(f"rill-checkpoint-timer-{self.job_id[:8]}")
        self.checkpoint_coordinator = CheckpointCoordinator(
            self.job_id, options, operators_of_job_graph(self.job_graph), self._checkpoint_tasks,
            create_checkpoint_storage(options.checkpoint_dir, self.job_id, options.savepoint_dir),
            self._checkpoint_timer, self._fail_on_checkpoint_failure, self._source_coordinators_by_operator)
        if self._initial_restore is not None:
            self.checkpoint_coordinator.continue_after(self._initial_restore.checkpoint_id)

    def _source_coordinators_by_operator(self) -> Dict[str, Any]:
        """Operator id -> the source's coordinator (what the checkpoint coordinator snapshots)."""
        with self._lock:
            return {str(cfg.operator_id): self.coordinators[cfg.node_id] for v in self.job_graph.get_vertices()
                    for cfg in v.stream_configs.values() if cfg.source is not None and cfg.node_id in self.coordinators}

    def _checkpoint_tasks(self):
        """Every task with its state as recorded here (what the coordinator triggers and waits for)."""
        with self._lock:
            return [(t, self._execution(t).state) for t in self.tasks]

    def _fail_on_checkpoint_failure(self, error: BaseException) -> None:
        """Too many checkpoints failed in a row: the job fails with ``error`` (Flink's
        ``CheckpointFailureManager`` failing the job)."""
        with self._lock:
            if self.status is not JobStatus.RUNNING:
                return
            self._first_failure = TaskFailure("CheckpointCoordinator", None, error)
            self.status = JobStatus.FAILING
            tasks = list(self.tasks)
        for t in tasks:
            t.cancel_execution()

    def _on_checkpoint_task_state(self, task, state: ExecutionState) -> None:
        coordinator = self.checkpoint_coordinator
        if coordinator is None:
            return
        if state is ExecutionState.FAILED:
            coordinator.on_task_failure()
        elif state is ExecutionState.FINISHED:
            coordinator.on_task_finished(task.tdd.attempt_id)

    def _shutdown_checkpointing(self) -> None:
        """The job ended: its completed checkpoints are kept or discarded as its
        ``externalized_checkpoint_retention`` says for its final status."""
        if self.checkpoint_coordinator is not None:
            self.checkpoint_coordinator.shutdown(self.status)
        if self._checkpoint_timer is not None:
            self._checkpoint_timer.shutdown()

    def trigger_savepoint(self, target_directory: Optional[str] = None) -> "concurrent.futures.Future[str]":
        """A savepoint of the running job: see :func:`rill.runtime.jobmaster.savepoints.trigger_savepoint`."""
        return savepoints.trigger_savepoint(self, target_directory)

    def stop_with_savepoint(self, target_directory: Optional[str] = None,
                            drain: bool = False) -> "concurrent.futures.Future[str]":
        """Stop with a synchronous savepoint: see :func:`rill.runtime.jobmaster.savepoints.stop_with_savepoint`."""
        return savepoints.stop_with_savepoint(self, target_directory, drain)

    def cancel_with_savepoint(self, target_directory: Optional[str] = None) -> "concurrent.futures.Future[str]":
        """A savepoint, then cancel: see :func:`rill.runtime.jobmaster.savepoints.cancel_with_savepoint`."""
        return savepoints.cancel_with_savepoint(self, target_directory)

    def start_channel_timelines(self, settings: ChannelTimelineSettings) -> None:
        """Record every task's channel timeline: see :func:`rill.runtime.jobmaster.channel_timelines.start_channel_timelines`."""
        channel_timelines.start_channel_timelines(self, settings)

    def stop_channel_timelines(self) -> "concurrent.futures.Future[List[str]]":
        """Stop the recording: see :func:`rill.runtime.jobmaster.channel_timelines.stop_channel_timelines`."""
        return channel_timelines.stop_channel_timelines(self)

    def get_checkpoint_stats(self) -> Optional[CheckpointStatsSnapshot]:
        """The job's checkpoint statistics, ``None`` without checkpointing."""
        coordinator = self.checkpoint_coordinator
        return None if coordinator is None else coordinator.get_checkpoint_stats_snapshot()

    def fail_deployment(self, error: BaseException) -> None:
        """End the job as FAILED before it ran: cancel whatever was deployed and complete the
        result with ``JobExecutionException("... failed during deployment: <error>")``."""
        with self._lock:
            if self.status.is_globally_terminal_state():
                return
            self.status = JobStatus.FAILED  # first: the cancelled tasks' reports must not end the job
            if self._start_ns is None:
                self._start_ns = time.monotonic_ns()
            self._end_ns = time.monotonic_ns()
            tasks = list(self.tasks)
        for t in tasks:
            t.cancel_execution()
        self._complete(JobExecutionException(self.job_id, f"Job '{self.job_name}' failed during deployment: {error}"),
                       error)

    # -- state tracking (called from task threads) -------------------------------------------
    def _on_task_state(self, task, state: ExecutionState, failure) -> None:
        with self._lock:
            execution = self._execution(task)
            if execution.attempt_id != task.tdd.attempt_id:
                return  # a late report of an attempt a restart has replaced

            # The job's view of a task is the ExecutionGraph's execution, moved only here, by
            # the task's reports (Flink's ExecutionGraph.updateState): a task sets its own
            # execution_state before it reports it, so another task's report read from
            # task.execution_state could see this task FAILED before its failure was recorded
            # and end the job FINISHED. transition_state keeps a terminal state: a task's
            # CANCELING (reported by the cancelling thread) may arrive after its CANCELED.
            execution.transition_state(state, failure.error if failure is not None else None)
            # A task failing while the job is CANCELLING (a consumer whose producer was cancelled
            # first, say) is a consequence of the cancellation: as in Flink, the job still ends
            # CANCELED. While FAILING, the first failure stays the root cause. A consumer that
            # failed because its producer released the partition with an error is a consequence
            # of that producer's failure, not a cause: across processes its report can reach the
            # JobMaster before the producer's own, so it is the root cause only if no other
            # failure arrives (Flink cancels such a consumer instead of failing it).
            cancel = []
            if state is ExecutionState.FAILED and self.status is not JobStatus.CANCELLING:
                consequence = _is_producer_failure(failure.error)
                if consequence and self._consequent_failure is None:
                    self._consequent_failure = failure
                elif not consequence and self._first_failure is None:
                    self._first_failure = failure
                if self.status is JobStatus.RUNNING:
                    self.status = self._handle_task_failure(task, failure)
                    cancel = [t for t in self.tasks if t is not task]
            done = all(self._execution(t).state.is_terminal() for t in self.tasks)
            # once: a late report of this attempt (a CANCELING after its CANCELED) finds it done too
            restart = done and self.status is JobStatus.RESTARTING and not self._restart_scheduled
            self._restart_scheduled = self._restart_scheduled or restart
        self._on_checkpoint_task_state(task, state)
        for t in cancel:
            t.cancel_execution()
        if restart:
            self._restart_when_released()
        elif done:
            self._job_terminated()

    def _execution(self, task):
        """The ExecutionGraph's current execution of ``task``'s subtask."""
        vertex = self.execution_graph.get_job_vertex(task.tdd.vertex.get_id())
        return vertex.get_task_vertices()[task.tdd.subtask_index].get_current_execution()

    # -- failover (rill.runtime.jobmaster.failover) -------------------------------------------
    def _handle_task_failure(self, task, failure) -> JobStatus:
        """Under the lock, the first failure of a running attempt: RESTARTING if the restart
        strategy allows it (the failure goes into the exception history), else FAILING."""
        result = self.failure_handler.get_failure_handling_result(failure.error, int(time.time() * 1000))
        if not result.can_restart:
            return JobStatus.FAILING
        self.exception_history.append(ExceptionHistoryEntry(failure, result.timestamp_ms, task, True))
        self._restart_delay_ms = result.restart_delay_ms
        return JobStatus.RESTARTING

    def _restart_when_released(self) -> None:
        """Every task of the failed attempt is terminal: release what they still hold, then
        restart after the backoff."""
        with self._lock:
            old = list(self.tasks)
        self.task_executor.release_tasks(old)
        self._schedule_restart(self._restart_delay_ms, self.restart_tasks)

    def restart_tasks(self) -> None:
        """Deploy every subtask again as a new attempt, restored from the latest completed
        checkpoint (else the snapshot the job started from, else empty); the job is RUNNING
        again. Nothing happens if the job left RESTARTING meanwhile (cancelled). A failure to
        deploy fails the job."""
        with self._lock:
            if self.status is not JobStatus.RESTARTING:
                return
            for ev in self.execution_graph.get_all_execution_vertices():
                ev.reset_for_new_execution()
            self._first_failure = self._consequent_failure = None
            self._restart_scheduled = False
            self.tasks = []
            self.coordinators = {}
            self.watermark_alignment = WatermarkAlignmentGroups()
            self._source_totals = []
            self.status = JobStatus.RUNNING
            try:
                self._create_coordinators()
                for tdd in self._tdds():
                    self.tasks.append(self.task_executor.submit_task(tdd, self.coordinators, self._on_task_state,
                                                                     self.checkpoint_responder))
            except BaseException as e:  # noqa: BLE001 - any deployment error fails the job
                error = e
            else:
                error = None
            tasks = list(self.tasks)
        if error is not None:
            self.fail_deployment(error)
            return
        for t in tasks:
            t.start()
        if self.checkpoint_coordinator is not None:  # the failure stopped it (Flink restarts it after a restore)
            self.checkpoint_coordinator.start_checkpoint_scheduler()

    def get_exception_history(self) -> List[ExceptionHistoryEntry]:
        """Every failure so far, oldest first (the REST API's ``/jobs/:id/exceptions``)."""
        with self._lock:
            return list(self.exception_history)

    def _job_terminated(self) -> None:
        with self._lock:
            if self.status.is_globally_terminal_state():
                return
            self._end_ns = time.monotonic_ns()
            if self._first_failure is None:
                self._first_failure = self._consequent_failure
            if self._first_failure is not None:
                f = self._first_failure
                self.exception_history.append(ExceptionHistoryEntry(
                    f, int(time.time() * 1000), next((t for t in self.tasks
                                                      if t.task_name_with_subtasks == f.task_name_with_subtasks), None),
                    False))
                self.status = JobStatus.FAILED
            elif self.status is JobStatus.CANCELLING or any(
                    self._execution(t).state is ExecutionState.CANCELED for t in self.tasks):
                self.status = JobStatus.CANCELED
            else:
                self.status = JobStatus.FINISHED
            status = self.status
        if status is JobStatus.FINISHED:
            self._complete(None, None)
        elif status is JobStatus.FAILED:
            f = self._first_failure
            where = f"operator '{f.operator_name}' in " if f.operator_name else ""
            msg = (f"Job '{self.job_name}' ({self.job_id}) failed: {where}task "
                   f"'{f.task_name_with_subtasks}' raised {type(f.error).__name__}: {f.error}")
            self._complete(JobExecutionException(self.job_id, msg), f.error)
        else:
            self._complete(JobCancellationException(self.job_id, f"Job '{self.job_name}' ({self.job_id}) was cancelled."), None)

    def _complete(self, error: Optional[BaseException], cause: Optional[BaseException]) -> None:
        self._shutdown_checkpointing()
        if error is not None:
            error.__cause__ = cause
            self.result_future.set_exception(error)
        else:
            self.result_future.set_result(JobExecutionResult(
                job_id=self.job_id, job_name=self.job_name, net_runtime_ms=self.get_net_runtime_ms() or 0,
                vertices=self.vertex_summaries()))
        if self._on_terminal is not None:
            self._on_terminal(self)

    # -- control ---------------------------------------------------------------------------
    def cancel(self) -> None:
        with self._lock:
            if self.status.is_globally_terminal_state():
                return
            if self.status is JobStatus.RESTARTING:
                # the failure being recovered from is in the exception history; the job ends
                # CANCELED, as Flink's cancelled in RESTARTING
                self._first_failure = self._consequent_failure = None
            if self.status in (JobStatus.RUNNING, JobStatus.CREATED, JobStatus.RESTARTING):
                self.status = JobStatus.CANCELLING
            tasks = list(self.tasks)
        for t in tasks:
            t.cancel_execution()
        with self._lock:
            # cancelled between attempts (RESTARTING: every task terminal already), or before any
            done = all(self._execution(t).state.is_terminal() for t in self.tasks)
        if done:
            self._job_terminated()

    # -- observation -------------------------------------------------------------------------
    def get_net_runtime_ms(self) -> Optional[int]:
        if self._start_ns is None:
            return None
        end = self._end_ns if self._end_ns is not None else time.monotonic_ns()
        return int((end - self._start_ns) / 1e6)

    def task_metrics(self):
        return [t.metrics.snapshot() for t in self.tasks]

    def observe(self) -> Tuple[JobStatus, List[Any], Optional[int], Optional[int], Any]:
        """(status, tasks, start and end in ``time.monotonic_ns()`` or None, first failure or
        None), read together under the lock (the REST API's view of the job)."""
        with self._lock:
            return self.status, list(self.tasks), self._start_ns, self._end_ns, self._first_failure

    def source_progress(self):
        done = sum(t.metrics.source_progress() for t in self.tasks)
        totals = self._source_totals
        total = sum(totals) if totals and all(x is not None for x in totals) else None
        return done, total

    def source_units_are_bytes(self) -> bool:
        """Whether the sources count their progress in bytes (any file source) or records."""
        return any(c.source.progress_units_are_bytes for c in self.coordinators.values())

    def vertex_summaries(self) -> List[VertexSummary]:
        out = []
        for v in self.job_graph.get_vertices_sorted_topologically_from_sources():
            snaps = [t.metrics.snapshot() for t in self.tasks if t.tdd.vertex is v]
            if not snaps:
                continue
            out.append(VertexSummary(
                vertex_id=str(v.get_id()), name=v.get_name(), parallelism=v.get_parallelism(),
                records_in=sum(s.num_records_in for s in snaps),
                records_out=sum(s.num_records_out for s in snaps),
                duration_ms=max(s.duration_ms for s in snaps),
                busy_time_ms=sum(s.busy_time_ms for s in snaps) / len(snaps),
                idle_time_ms=sum(s.idle_time_ms for s in snaps) / len(snaps),
                back_pressured_time_ms=sum(s.back_pressured_time_ms for s in snaps) / len(snaps),
                cpu_time_ms=sum(s.cpu_time_ms for s in snaps) / len(snaps),
            ))
        return out


def _is_producer_failure(error: BaseException) -> bool:
    """Whether a task failed only because a producer it reads released its partition with an
    error (the producer failed and reports that failure itself)."""
    return isinstance(error, PartitionReleasedError) and error.cause is not None
