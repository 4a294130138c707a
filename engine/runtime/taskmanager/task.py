"""``Task``: one execution attempt of one subtask on a TaskExecutor, on its own thread
(Flink's ``org.apache.flink.runtime.taskmanager.Task``).

State machine (Flink's ``ExecutionState``): CREATED → DEPLOYING → INITIALIZING (the invokable's
``restore``: state restored, operators opened) → RUNNING (its ``invoke``) → FINISHED, or → CANCELING → CANCELED, or → FAILED; a task that stops because a producer released
the partition it read ends CANCELED, as in Flink (the producer's failure is the cause). Every transition is reported to the listener
(the JobMaster) from the task thread. The task owns its network resources: result partitions
are created and registered when the task is constructed (so consumers find them), input gates
request their subpartitions when the task thread starts. A task that fails or is cancelled
releases its partitions and closes its gates before it reports its final state, so every network
buffer it held is back (Flink's ``Task.releaseResources``).
"""

from __future__ import annotations

import logging
import threading
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from rill.graph.states import ExecutionState
from rill.network.buffer.buffer_pool import BufferPoolDestroyedError
from rill.network.partition.exceptions import PartitionReleasedError
from rill.runtime.checkpoint.checkpoint_failure_reason import CheckpointException, CheckpointFailureReason
from rill.runtime.checkpoint.checkpoint_options import CheckpointMetaData, CheckpointOptions
from rill.runtime.checkpoint.checkpoint_responder import CheckpointResponder
from rill.runtime.mailbox.task_mailbox import MailboxClosedError
from rill.runtime.metrics import TaskIOMetrics
from rill.runtime.taskmanager.channel_timeline import ChannelTimelineRecorder, ChannelTimelineSettings
from rill.runtime.tasks.stream_task import (
    CancelTaskException,
    OneInputStreamTask,
    SourceOperatorStreamTask,
    TwoInputStreamTask,
)

__all__ = ["Task", "RuntimeEnvironment", "TaskFailure"]

_LOG = logging.getLogger(__name__)


@dataclass
class RuntimeEnvironment:
    """What a StreamTask sees of its deployment (Flink's ``RuntimeEnvironment``)."""

    task_name: str
    task_name_with_subtasks: str
    subtask_index: int
    parallelism: int
    attempt_number: int
    vertex: Any
    result_partitions: List[Any]
    input_gates: List[Any]
    record_writers: List[Any]
    operator_coordinators: Dict[int, Any]
    job_parameters: Dict[str, str]
    buffer_timeout_ms: int
    records_per_batch: int
    metrics: TaskIOMetrics
    auto_watermark_interval_ms: int = 200
    attempt_id: str = ""
    #: where the task's checkpoint acknowledgements go (``None``: the task takes none)
    checkpoint_responder: Optional[CheckpointResponder] = None
    #: the ``JobManagerTaskRestore`` of the deployment, or ``None``
    task_restore: Any = None
    #: whether the job takes checkpoints (``StreamOperatorContext.checkpointing_enabled``)
    checkpointing_enabled: bool = False
    #: whether they may be unaligned (the task then waits for output buffers in its mailbox)
    unaligned_checkpoints: bool = False
    #: whether the task waits for a final checkpoint after its operators finished (FLIP-147)
    final_checkpoint: bool = False
    #: the job's ``state.backend.*`` keys (``state_backend_loader``)
    state_backend_settings: Dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TaskFailure:
    """Why a task failed: the operator that raised (when known) and the original exception."""

    task_name_with_subtasks: str
    operator_name: Optional[str]
    error: BaseException
    traceback_text: str = field(default="")


_INVOKABLES = {
    "SourceOperatorStreamTask": SourceOperatorStreamTask,
    "OneInputStreamTask": OneInputStreamTask,
    "TwoInputStreamTask": TwoInputStreamTask,
}

def _producer_released(error: BaseException) -> bool:
    """Whether ``error`` (or an exception in its ``__cause__`` chain) says that the task's
    network resources were released under it: a producer released the partition this task read
    (``PartitionReleasedError``: the producer failed or was cancelled, and its own report
    carries the cause), or this task's buffer pool was destroyed while it waited for a buffer
    (``BufferPoolDestroyedError``: its partition was released, by its cancellation or its
    consumers going away). Flink's ``Task`` moves to CANCELED, not FAILED, when
    ``findThrowable(t, CancelTaskException.class)`` finds one -- Flink raises
    ``ProducerFailedException`` and ``LocalBufferPool``'s "Buffer pool has already been
    destroyed" as ``CancelTaskException`` -- so such a task is never the job's root cause,
    whichever report reaches the JobMaster first."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, (PartitionReleasedError, BufferPoolDestroyedError)):
            return True
        seen.add(id(error))
        error = error.__cause__
    return False


TaskListener = Callable[["Task", ExecutionState, Optional[TaskFailure]], None]


class Task:
    """
    :param tdd: the ``TaskDeploymentDescriptor``.
    :param network: the TaskExecutor's ``NetworkEnvironment``.
    :param coordinators: operator coordinators of the job by StreamNode id (sources' split
        enumerators).
    :param listener: called on every state change, from the task thread.
    :param checkpoint_responder: where checkpoint acknowledgements and declines go.
    """

    def __init__(self, tdd, network, coordinators: Dict[int, Any], listener: TaskListener,
                 checkpoint_responder: Optional[CheckpointResponder] = None):
        self.tdd = tdd
        self.checkpoint_responder = checkpoint_responder
        self.network = network
        self.coordinators = coordinators
        self.listener = listener
        self.execution_state = ExecutionState.CREATED
        self.failure: Optional[TaskFailure] = None
        self.metrics = TaskIOMetrics(tdd.task_name, tdd.subtask_index)
        self._lock = threading.Lock()
        self._canceled = False
        self.invokable = None
        self.result_partitions = network.create_result_partitions(tdd)
        self.input_gates = network.create_input_gates(tdd)
        self.record_writers: List[Any] = []
        self._timeline: Optional[ChannelTimelineRecorder] = None
        # recording on demand (REST) may start before the network is set up or after the end
        self._timeline_lock = threading.Lock()
        self._timeline_settings: Optional[ChannelTimelineSettings] = tdd.channel_timeline
        self._network_ready = False
        self._timeline_closed = False
        self._thread = threading.Thread(target=self._run, name=tdd.task_name_with_subtasks, daemon=True)

    @property
    def task_name_with_subtasks(self) -> str:
        return self.tdd.task_name_with_subtasks

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout_s: Optional[float] = None) -> bool:
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _transition(self, expected, new) -> bool:
        with self._lock:
            old = self.execution_state
            if old not in expected:
                return False
            self.execution_state = new
        # Flink's line ("Map (1/2)#0 (<attempt id>) switched from RUNNING to FINISHED."), with
        # the job: the cluster log holds every job's tasks. The logger is looked up now, not at
        # import: in a task process Thespian replaced the logging tree after this module loaded
        logging.getLogger(__name__).info("%s#%d (%s) switched from %s to %s. [job %s]", self.tdd.task_name_with_subtasks,
                  self.tdd.attempt_number, self.tdd.attempt_id, old.name, new.name, self.tdd.job_id)
        self.listener(self, new, self.failure if new is ExecutionState.FAILED else None)
        return True

    def _run(self) -> None:
        if not self._transition({ExecutionState.CREATED}, ExecutionState.DEPLOYING):
            self._finish_canceled()
            return
        try:
            for gate in self.input_gates:
                gate.setup()
            self.record_writers = self.network.create_record_writers(self.tdd, self.result_partitions)
            self.metrics.records_out = lambda: sum(w.num_records_out for w in self.record_writers)
            self.metrics.buffers_out = lambda: sum(w.num_buffers_out for w in self.record_writers)
            self.metrics.back_pressured_ns = lambda: sum(
                p.buffer_pool.back_pressured_time_ns for p in self.result_partitions)
            self.metrics.output_pool_usage = lambda: max(
                [p.buffer_pool.usage() for p in self.result_partitions], default=0.0)
            network = self.network
            self.metrics.bytes_in = lambda: network.num_bytes_in(self.input_gates)
            self.metrics.bytes_out = lambda: network.num_bytes_out(self.result_partitions)
            self.metrics.input_pool_usage = lambda: network.input_pool_usage(self.input_gates)
            with self._timeline_lock:
                self._network_ready = True
                if self._timeline_settings is not None:
                    self._begin_timeline_locked()
            env = RuntimeEnvironment(
                task_name=self.tdd.task_name,
                task_name_with_subtasks=self.tdd.task_name_with_subtasks,
                subtask_index=self.tdd.subtask_index,
                parallelism=self.tdd.parallelism,
                attempt_number=self.tdd.attempt_number,
                vertex=self.tdd.vertex,
                result_partitions=self.result_partitions,
                input_gates=self.input_gates,
                record_writers=self.record_writers,
                operator_coordinators=self.coordinators,
                job_parameters=self.tdd.job_parameters,
                buffer_timeout_ms=self.tdd.buffer_timeout_ms,
                records_per_batch=self.tdd.source_batch_size,
                metrics=self.metrics,
                auto_watermark_interval_ms=self.tdd.auto_watermark_interval_ms,
                attempt_id=self.tdd.attempt_id,
                checkpoint_responder=self.checkpoint_responder,
                task_restore=self.tdd.task_restore,
                checkpointing_enabled=self.tdd.checkpointing_enabled,
                unaligned_checkpoints=self.tdd.unaligned_checkpoints,
                final_checkpoint=self.tdd.final_checkpoint,
                state_backend_settings=self.tdd.state_backend_settings,
            )
            invokable_cls = _INVOKABLES[self.tdd.vertex.invokable_class_name]
            self.invokable = invokable_cls(env)
            if self._canceled:
                raise CancelTaskException()
            if not self._transition({ExecutionState.DEPLOYING}, ExecutionState.INITIALIZING):
                raise CancelTaskException()
            # Flink's Task.restoreAndInvoke: RUNNING once the state is restored and the operators open
            self.invokable.restore()
            if not self._transition({ExecutionState.INITIALIZING}, ExecutionState.RUNNING):
                raise CancelTaskException()
            self.invokable.invoke()
            errors = self.invokable.cleanup()
            self._stop_timeline()  # written before the task reports its end
            if errors:
                raise errors[0]
            if not self._transition({ExecutionState.RUNNING}, ExecutionState.FINISHED):
                # cancelled while it was finishing: Flink reports CANCELED then
                raise CancelTaskException()
        except BaseException as e:  # noqa: BLE001 - a task reports every failure
            if self.invokable is not None:
                try:
                    self.invokable.cleanup()
                except BaseException:  # pragma: no cover - best effort after the first error
                    pass
            self._stop_timeline()
            if self._canceled or isinstance(e, CancelTaskException) or _producer_released(e):
                self._finish_canceled()
            else:
                self.failure = TaskFailure(
                    self.tdd.task_name_with_subtasks, getattr(e, "_rill_operator", None), e,
                    "".join(traceback.format_exception(e)))
                self._release_resources(e)
                self._transition({ExecutionState.DEPLOYING, ExecutionState.INITIALIZING, ExecutionState.RUNNING,
                                  ExecutionState.CANCELING}, ExecutionState.FAILED)
        finally:
            self.metrics.mark_end()
            self._stop_timeline()
            if not self.execution_state.is_terminal():  # never leave the job waiting
                self._finish_canceled()

    # -- channel timelines (rill.runtime.taskmanager.channel_timeline) ---------------------------
    def _begin_timeline_locked(self) -> None:
        self._timeline = ChannelTimelineRecorder(
            self._timeline_settings, self.tdd.job_id, self.tdd.task_name_with_subtasks, self.tdd.subtask_index,
            self.tdd.attempt_number, self.result_partitions, self.input_gates, self.network.reader_statistics,
            self.network.floating_pool)
        self._timeline.start()

    def start_channel_timeline(self, settings: ChannelTimelineSettings) -> None:
        """Record this task's channel timeline with ``settings`` from now on (or from the moment
        its network is set up); nothing when it records already or has ended. Any thread."""
        with self._timeline_lock:
            if self._timeline_closed or self._timeline is not None:
                return
            self._timeline_settings = settings
            if self._network_ready:
                self._begin_timeline_locked()

    def stop_channel_timeline(self) -> Optional[str]:
        """End the recording (if any) and write its file; the file's path, ``None`` when nothing
        was recorded. After the task ended: the file it wrote then. Any thread (blocks until
        the file is written).

        :raises OSError: if the file cannot be written.
        """
        with self._timeline_lock:
            recorder = self._timeline
            if not self._timeline_closed:  # a new recording may start later
                self._timeline, self._timeline_settings = None, None
        if recorder is None:
            return None
        path = recorder.stop()
        return None if path is None else str(path)

    def _stop_timeline(self) -> None:
        with self._timeline_lock:
            self._timeline_closed = True
            recorder = self._timeline
        if recorder is None:
            return
        try:
            recorder.stop()
        except OSError:  # the job's outcome does not depend on an experiment's file
            _LOG.exception("%s: writing the channel timeline %s failed", self.tdd.task_name_with_subtasks,
                           recorder.path)

    def _release_resources(self, cause: Optional[BaseException]) -> None:
        """Give back every network buffer of a task that failed or was cancelled, before it
        reports its final state (Flink's ``Task.releaseResources``).

        Its result partitions are released with the cause (Flink's ``failAllResultPartitions``
        -> ``ResultPartition.fail``): queued buffers recycled, the pool destroyed, consumers see
        ``cause``. Its input gates are closed (Flink's ``closeAllInputGates``): a local channel
        releases the producer's subpartition view, a remote channel its exclusive buffers, the
        gate's floating buffers and the server's reader of its subpartition. Releasing the
        partitions alone leaked the gates of a task that failed (a cancelled one has its gates
        closed by ``StreamTask.cancel``, a finished one released every channel at
        EndOfPartition): the receiving buffers never went back to the NetworkBufferPool and the
        producers' subpartitions stayed unconsumed. Gates are closed one by one, each error
        logged, so one gate cannot keep the others, or the final state, from happening.
        """
        for p in self.result_partitions:
            p.release(cause)
        for gate in self.input_gates:
            try:
                gate.close()
            except Exception:  # noqa: BLE001 - as Flink's closeAllInputGates: log, go on
                _LOG.exception("%s: closing %r failed", self.tdd.task_name_with_subtasks, gate)

    def _finish_canceled(self) -> None:
        self._release_resources(None)
        self._transition({ExecutionState.CREATED, ExecutionState.DEPLOYING, ExecutionState.INITIALIZING,
                          ExecutionState.RUNNING, ExecutionState.CANCELING}, ExecutionState.CANCELED)

    # -- checkpoints (the coordinator's calls; any thread) ------------------------------------
    def trigger_checkpoint(self, checkpoint_id: int, timestamp: int, options: CheckpointOptions) -> None:
        """Take checkpoint ``checkpoint_id`` as one of its source tasks (Flink's
        ``Task.triggerCheckpointBarrier``): a priority mail to the task thread; a task that is
        not running declines it (``CHECKPOINT_DECLINED_TASK_NOT_READY``)."""
        invokable = self.invokable
        if invokable is not None and self.execution_state is ExecutionState.RUNNING:
            try:
                invokable.trigger_checkpoint_async(CheckpointMetaData(checkpoint_id, timestamp), options)
                return
            except MailboxClosedError:
                pass
        if self.checkpoint_responder is not None:
            self.checkpoint_responder.decline_checkpoint(self.tdd.attempt_id, checkpoint_id, CheckpointException(
                CheckpointFailureReason.CHECKPOINT_DECLINED_TASK_NOT_READY,
                f"{self.task_name_with_subtasks} is {self.execution_state.name}"))

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` completed: a priority mail telling every operator; a
        task that no longer runs mails is not told."""
        invokable = self.invokable
        if invokable is not None and self.execution_state is ExecutionState.RUNNING:
            try:
                invokable.notify_checkpoint_complete_async(checkpoint_id)
            except MailboxClosedError:
                pass

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` was aborted: a priority mail telling every operator."""
        invokable = self.invokable
        if invokable is not None and self.execution_state is ExecutionState.RUNNING:
            try:
                invokable.notify_checkpoint_aborted_async(checkpoint_id)
            except MailboxClosedError:
                pass

    def cancel_execution(self) -> None:
        """Cancel from any thread; returns at once (the task thread finishes the job)."""
        self._canceled = True
        moved = self._transition({ExecutionState.INITIALIZING, ExecutionState.RUNNING}, ExecutionState.CANCELING)
        invokable = self.invokable
        if invokable is not None:
            invokable.cancel()
        elif not moved:
            for g in self.input_gates:
                g.close()
        if not self._thread.is_alive() and self.execution_state is ExecutionState.CREATED:
            self._finish_canceled()
