"""``JobMaster``: runs one job (Flink's ``JobMaster`` + ``DefaultScheduler``).

Expands the JobGraph into the ExecutionGraph, creates the source coordinators (split
enumerators), assigns slots with slot sharing, deploys one Task per ExecutionVertex, tracks
every execution's state and the job status, and finishes, fails or cancels the job:

- all executions FINISHED → job FINISHED;
- any execution FAILED → job FAILING: every other execution is cancelled → job FAILED with a
  ``JobExecutionException`` naming the failing operator and subtask (``__cause__`` is the
  original exception); no restart (Flink's default without checkpointing);
- ``cancel()`` → job CANCELLING → every execution cancelled → job CANCELED.
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
from rill.runtime.errors import JobCancellationException, JobExecutionException
from rill.runtime.jobmaster.scheduler import assign_slots
from rill.runtime.taskmanager.channel_timeline import ChannelTimelineSettings
from rill.runtime.watermark_alignment import WatermarkAlignmentGroups

__all__ = ["JobMaster"]


class JobMaster:
    """
    :param job_graph: the JobGraph to run.
    :param task_executor: where tasks are deployed (embedded: one in this process).
    :param configuration: job configuration (buffer sizes, timeouts).
    :raises ValueError: for invalid checkpointing settings, naming the key (the client checks
        them before it submits, so a job normally never gets here with one).

    :ivar checkpointing_options: the job's ``CheckpointingOptions``, parsed once, for the
        checkpoint coordinator.
    """

    def __init__(self, job_graph, task_executor, configuration: Configuration,
                 job_parameters: Optional[Dict[str, str]] = None, on_terminal=None):
        self.job_graph = job_graph
        self.task_executor = task_executor
        self.config = configuration
        self.checkpointing_options = CheckpointingOptions.from_configuration(configuration)
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

    def _tdds(self) -> List[TaskDeploymentDescriptor]:
        conf = self.config
        network = NetworkOptions.from_configuration(conf)
        slots = assign_slots(self.job_graph, self.task_executor.num_slots)
        timeline = ChannelTimelineSettings.from_configuration(conf)
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
                ))
                execution.state = ExecutionState.SCHEDULED
        return tdds

    def start(self) -> None:
        """Deploy and start every task. Errors during deployment fail the job at once."""
        with self._lock:
            self.status = JobStatus.RUNNING
            self._start_ns = time.monotonic_ns()
        try:
            self._create_coordinators()
            tdds = self._tdds()
            for tdd in tdds:
                self.tasks.append(self.task_executor.submit_task(tdd, self.coordinators, self._on_task_state))
        except BaseException as e:
            self.fail_deployment(e)
            return
        for t in self.tasks:
            t.start()

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
            # The job's view of a task is the ExecutionGraph's execution, moved only here, by
            # the task's reports (Flink's ExecutionGraph.updateState): a task sets its own
            # execution_state before it reports it, so another task's report read from
            # task.execution_state could see this task FAILED before its failure was recorded
            # and end the job FINISHED. transition_state keeps a terminal state: a task's
            # CANCELING (reported by the cancelling thread) may arrive after its CANCELED.
            self._execution(task).transition_state(state, failure.error if failure is not None else None)
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
                    self.status = JobStatus.FAILING
                    cancel = [t for t in self.tasks if t is not task]
            done = all(self._execution(t).state.is_terminal() for t in self.tasks)
        for t in cancel:
            t.cancel_execution()
        if done:
            self._job_terminated()

    def _execution(self, task):
        """The ExecutionGraph's current execution of ``task``'s subtask."""
        vertex = self.execution_graph.get_job_vertex(task.tdd.vertex.get_id())
        return vertex.get_task_vertices()[task.tdd.subtask_index].get_current_execution()

    def _job_terminated(self) -> None:
        with self._lock:
            if self.status.is_globally_terminal_state():
                return
            self._end_ns = time.monotonic_ns()
            if self._first_failure is None:
                self._first_failure = self._consequent_failure
            if self._first_failure is not None:
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
            if self.status in (JobStatus.RUNNING, JobStatus.CREATED):
                self.status = JobStatus.CANCELLING
            tasks = list(self.tasks)
        for t in tasks:
            t.cancel_execution()
        if not tasks:
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
