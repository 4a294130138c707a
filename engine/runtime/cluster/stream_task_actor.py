"""``StreamTaskActor``: one task attempt in its own process.

The actor owns the process' network stack (a ``NettyConnectionManager`` serving the task's
partitions and reading its remote channels) and runs the task's mailbox loop on the task
thread (the same :class:`~rill.runtime.taskmanager.task.Task` as in embedded mode). Actor
messages reach the task as calls the task's mailbox expects from other threads
(``cancel_execution``); what the task thread has to say (state changes, split requests) goes
through an outbox that wakes the actor through a socket pair it watches (``ThespianWatch``),
because a Thespian actor must only send from its own thread.

Life: ``PoolTaskProcess`` when its TaskExecutor starts it ahead of a deployment (it waits in the
pool, named ``rill-pooled``, watching its parent) → ``StartTaskProcess`` (named ``rill-task``
from then on; start the network stack, report the data address) →
``DeployTask`` (descriptor with partition locations, put together from its per-subtask, task
and job parts; the job's configuration sizes the network buffers: create partitions and
gates, start the task thread) → state updates and metrics every ``METRICS_INTERVAL`` →
``ActorExitRequest`` from the JobMaster when the job is over (cancel if still running, release
partitions, stop the network stack, exit). At a restart of the job the JobMaster reuses the
process for a task of the new attempt (``ReuseTaskProcess``: the old task, already terminal, is
dropped and its partitions released; the data plane stays, and the process reports ready again)
instead of waiting for a new process per task, as Flink keeps its TaskManagers across attempts. When its TaskExecutor's process is gone, the task
tells the JobMaster so (``TaskProcessFailed``) and exits the same way: no task process outlives
the TaskExecutor that started it (see :mod:`~rill.runtime.cluster.liveness`).
"""

from __future__ import annotations

import collections
import itertools
import logging
import os
import socket
import threading
import traceback
from datetime import timedelta
from typing import Any, Dict, Optional

import cloudpickle
from thespian.actors import Actor, ActorExitRequest, PoisonMessage, ThespianWatch, WakeupMessage, WatchMessage

from rill.runtime.checkpoint.checkpoint_failure_reason import CheckpointException, CheckpointFailureReason
from rill.runtime.checkpoint.checkpoint_responder import CheckpointResponder
from rill.runtime.cluster import messages as m
from rill.runtime.cluster.kv_state import KvStateRequest, answer_in_task
from rill.runtime.cluster.liveness import ParentWatch
from rill.runtime.cluster.process_name import POOLED, TASK, set_process_name

__all__ = ["StreamTaskActor", "RemoteSourceCoordinator", "ActorCheckpointResponder"]

log = logging.getLogger("rill.cluster.task")

METRICS_INTERVAL = timedelta(milliseconds=200)


class _Outbox:
    """Messages from any thread to the actor's thread; ``post`` wakes the actor.

    Its socket pair is never closed: it lives until the process exits. Thespian keeps watching
    the read end while it drains the last transmits after an ``ActorExitRequest`` (it clears an
    actor's watch list only after other messages), and a closed descriptor whose number a new
    transmit socket reuses makes its selector raise ``KeyError: ... is already registered``
    out of the actor process (the traceback once seen in a cluster's output). ``seal`` stops
    the wake-ups instead.
    """

    def __init__(self) -> None:
        self._queue: collections.deque = collections.deque()
        self._r, self._w = socket.socketpair()
        self._r.setblocking(False)
        self._w.setblocking(False)
        self._sealed = False

    def fileno(self) -> int:
        return self._r.fileno()

    def post(self, target: Any, msg: Any) -> None:
        if self._sealed:
            return  # the actor is exiting: nobody would deliver it
        self._queue.append((target, msg))
        try:
            self._w.send(b"x")
        except (BlockingIOError, OSError):
            pass  # already awake (buffer full) or closing

    def drain(self):
        try:
            while self._r.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass
        while self._queue:
            yield self._queue.popleft()

    def seal(self) -> None:
        """Drop what is posted from now on (the actor has sent its last messages)."""
        self._sealed = True


class RemoteSourceCoordinator:
    """The task side of a source's ``SourceCoordinator``, which lives in the JobMaster: a split
    request is a ``RequestSplit`` message, and the ``SplitResponse`` goes to the source
    operator's callback, which hands it to the task thread as a mail (Flink's
    ``RequestSplitEvent`` / ``AddSplitEvent``). The task thread never waits for it.
    """

    asynchronous = True
    _ids = itertools.count()

    def __init__(self, node_id: int, attempt_id: str, outbox: _Outbox, job_master: Any):
        self.node_id = node_id
        self.attempt_id = attempt_id
        self._outbox = outbox
        self._job_master = job_master
        self._pending: Dict[int, Any] = {}
        self._lock = threading.Lock()

    def request_split_async(self, subtask_index: int, callback) -> None:
        """Ask for the next split; ``callback(split_or_None, None, coordinator_checkpoint_id)``
        runs on the actor's thread, or ``callback(None, error)`` when the split enumerator
        failed."""
        request_id = next(self._ids)
        with self._lock:
            self._pending[request_id] = callback
        self._outbox.post(self._job_master, m.RequestSplit(self.attempt_id, request_id, self.node_id, subtask_index))

    def report_watermark_async(self, subtask_index: int, group: str, watermark_ms: int, callback) -> None:
        """Report the subtask's watermark for watermark alignment; ``callback(group_minimum_ms)``
        runs on the actor's thread."""
        request_id = next(self._ids)
        with self._lock:
            self._pending[request_id] = callback
        self._outbox.post(self._job_master, m.ReportedWatermarkEvent(self.attempt_id, request_id, self.node_id,
                                                                     subtask_index, group, watermark_ms))

    def complete(self, response) -> bool:
        """Actor thread: deliver a ``SplitResponse`` or ``WatermarkAlignmentEvent``; ``False``
        if it is not one of this source's."""
        with self._lock:
            callback = self._pending.pop(response.request_id, None)
        if callback is None:
            return False
        try:
            if isinstance(response, m.WatermarkAlignmentEvent):
                callback(response.group_minimum_ms)
            elif response.error is not None:
                callback(None, RuntimeError(response.error))
            else:
                callback(None if response.split is None else cloudpickle.loads(response.split), None,
                         response.coordinator_checkpoint_id)
        except Exception:  # noqa: BLE001 - the mailbox is closed: the task is ending anyway
            log.debug("coordinator answer for a task that is ending dropped", exc_info=True)
        return True


class ActorCheckpointResponder(CheckpointResponder):
    """The task's acknowledgements and declines as messages to the JobMaster, through the
    outbox (they come from the task's asynchronous checkpoint thread or its task thread). The
    outbox keeps their order with the task's state updates: an acknowledgement sent before the
    task finished arrives before its FINISHED."""

    def __init__(self, outbox: _Outbox, job_master: Any) -> None:
        self._outbox = outbox
        self._job_master = job_master

    def acknowledge_checkpoint(self, attempt_id, checkpoint_id, metrics, subtask_state, task_finished=False) -> None:
        self._outbox.post(self._job_master, m.AcknowledgeCheckpoint(attempt_id, checkpoint_id, metrics,
                                                                    cloudpickle.dumps(dict(subtask_state)),
                                                                    task_finished))

    def decline_checkpoint(self, attempt_id, checkpoint_id, reason) -> None:
        try:
            payload = cloudpickle.dumps(reason)
        except Exception:  # noqa: BLE001 - an exception that does not pickle travels as text
            payload = cloudpickle.dumps(RuntimeError(f"{type(reason).__name__}: {reason}"))
        self._outbox.post(self._job_master, m.DeclineCheckpoint(attempt_id, checkpoint_id, payload))


class StreamTaskActor(Actor):
    """One task attempt; see the module docstring for its life."""

    def __init__(self):
        super().__init__()
        self.outbox = _Outbox()
        self.attempt_id: Optional[str] = None
        self.job_master = None
        self.partition_manager = None
        self.connection_manager = None
        self.task = None
        self.network = None  # the task's NetworkEnvironment (its process's buffer budget)
        self.coordinators: Dict[int, RemoteSourceCoordinator] = {}
        self.released = False
        self.task_name = "?"
        self.resource_id = "?"
        self.task_executor_host = "?"
        self.task_executor = None
        self.data_address = None
        self.ticking = False  # the wake-ups (parent watch, metrics) run
        self.watch = ParentWatch()

    def receiveMessage(self, msg, sender):  # noqa: N802 - Thespian's name
        try:
            self._handle(msg, sender)
        except Exception as e:  # noqa: BLE001 - report, never let Thespian retry a deployment
            log.exception("task %s: handling %s failed", self.attempt_id, type(msg).__name__)
            if self.job_master is not None and not self.released:
                self.send(self.job_master, m.TaskProcessFailed(
                    self.attempt_id or "?", f"{type(msg).__name__} failed in pid {os.getpid()}: "
                    f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))
        if self.released:
            return None
        return ThespianWatch([self.outbox.fileno()])

    def _handle(self, msg, sender) -> None:
        if isinstance(msg, WatchMessage):
            self._flush_outbox()
        elif isinstance(msg, m.PoolTaskProcess):
            set_process_name(POOLED)
            self._tick_from_now()  # a pooled process exits with its TaskExecutor too
            self.send(sender, m.TaskProcessPooled(msg.token, os.getpid()))
        elif isinstance(msg, m.StartTaskProcess):
            self._start_process(msg, sender)
        elif isinstance(msg, m.DeployTask):
            self._deploy(msg)
        elif isinstance(msg, m.ReuseTaskProcess):
            self._reuse(msg)
        elif isinstance(msg, (m.SplitResponse, m.WatermarkAlignmentEvent)):
            for c in self.coordinators.values():
                if c.complete(msg):
                    break
        elif isinstance(msg, KvStateRequest):
            answer_in_task(self.task, msg, self.outbox.post)
        elif isinstance(msg, m.CancelTask):
            if self._runs(msg.attempt_id):
                self.task.cancel_execution()
        elif isinstance(msg, m.TriggerCheckpoint):
            self._trigger_checkpoint(msg)
        elif isinstance(msg, m.StartChannelTimeline):
            if self._runs(msg.attempt_id):
                self.task.start_channel_timeline(msg.settings)
        elif isinstance(msg, m.StopChannelTimeline):
            self._stop_channel_timeline(sender)
        elif isinstance(msg, m.NotifyCheckpointComplete):
            if self._runs(msg.attempt_id):
                self.task.notify_checkpoint_complete(msg.checkpoint_id)
        elif isinstance(msg, m.NotifyCheckpointAborted):
            if self._runs(msg.attempt_id):
                self.task.notify_checkpoint_aborted(msg.checkpoint_id)
        elif isinstance(msg, WakeupMessage):
            if self.watch.parent_died() and not self.released:
                self._orphaned()
                return
            self._report_metrics()
            self._flush_outbox()
            if not self.released:
                self.wakeupAfter(METRICS_INTERVAL)
        elif isinstance(msg, ActorExitRequest):
            self._release()
        elif isinstance(msg, PoisonMessage):
            log.warning("task %s: undeliverable %r", self.attempt_id, msg.poisonMessage)

    # -- life ------------------------------------------------------------------------------
    def _start_process(self, msg: m.StartTaskProcess, task_executor) -> None:
        from rill.network.netty.connection_manager import NettyConnectionManager  # noqa: PLC0415
        from rill.network.partition.result_partition_manager import ResultPartitionManager  # noqa: PLC0415

        from rill.runtime.cluster.actor_system import cluster_log_level  # noqa: PLC0415
        from rill.runtime.cluster.auth_transport import log_to_cluster_file  # noqa: PLC0415

        # the data plane logs refused connections from its IO thread, and the task logs its state
        # changes from its own thread; neither may send through this actor's transport
        # (Thespian's log forwarding does): straight to the file
        set_process_name(TASK)
        log_to_cluster_file("rill.network.netty", "rill.runtime.taskmanager.task", level=cluster_log_level())
        self.attempt_id = msg.attempt_id
        self.job_master = msg.job_master
        self.task_executor = task_executor
        self.task_name, self.resource_id, self.task_executor_host = msg.task_name, msg.resource_id, msg.host
        self._tick_from_now()  # metrics once deployed; the parent watch from now on
        self.partition_manager = ResultPartitionManager()
        self.connection_manager = NettyConnectionManager(msg.netty_config, self.partition_manager,
                                                         name=f"task-{msg.attempt_id[:8]}")
        self.data_address = tuple(self.connection_manager.start())
        self._report_ready()

    def _tick_from_now(self) -> None:
        if not self.ticking:
            self.ticking = True
            self.wakeupAfter(METRICS_INTERVAL)

    def _report_ready(self) -> None:
        ready = m.TaskProcessReady(self.attempt_id, self.data_address, os.getpid(), self.task_name)
        self.send(self.job_master, ready)
        self.send(self.task_executor, ready)

    def _runs(self, attempt_id: str) -> bool:
        """Whether this process's current task is attempt ``attempt_id`` (a message for an
        attempt the process ran before it was reused must not reach the next one)."""
        return self.task is not None and self.task.tdd.attempt_id == attempt_id

    def _reuse(self, msg: m.ReuseTaskProcess) -> None:
        """Drop the ended task of attempt ``old_attempt_id`` and report ready for the next one.

        The attempt id changes first: a failure here is the new attempt's (the JobMaster fails
        it and restarts the job again).

        :raises RuntimeError: if the old task's thread does not end within 10 s (it is
            terminal when the JobMaster restarts, so its thread is about to return).
        """
        old = self.task
        self.attempt_id, self.task_name = msg.attempt_id, msg.task_name
        if old is not None:
            if not old.join(10.0):
                raise RuntimeError(f"the thread of the previous task {old.task_name_with_subtasks} (attempt "
                                   f"{msg.old_attempt_id}) did not end within 10 s: the process cannot be reused")
            for partition in old.result_partitions:  # a cancelled task's are released, not yet forgotten
                self.partition_manager.release_partition(partition.partition_id)
        self._flush_outbox()  # the old task's last reports, under its own attempt id
        self.task, self.network, self.coordinators = None, None, {}
        self._report_ready()

    def _deploy(self, msg: m.DeployTask) -> None:
        from rill.common.configuration import ConfigOptions, load_configuration  # noqa: PLC0415
        from rill.operators.collect_sink import register_remote_endpoint  # noqa: PLC0415
        from rill.runtime.cluster.shipping import enter_working_directory  # noqa: PLC0415
        from rill.runtime.deployment import assemble_descriptor  # noqa: PLC0415
        from rill.runtime.taskmanager.network_environment import NetworkEnvironment  # noqa: PLC0415
        from rill.runtime.taskmanager.python_gc import apply_gc_thresholds, parse_gc_thresholds  # noqa: PLC0415
        from rill.runtime.taskmanager.task import Task  # noqa: PLC0415

        job_information = cloudpickle.loads(msg.job_information)
        # this process serves one task of one job: the job's relative paths are the client's
        enter_working_directory(job_information.working_directory, job_information.job_id)
        tdd = assemble_descriptor(cloudpickle.loads(msg.tdd), cloudpickle.loads(msg.task_information),
                                  job_information)
        for channel_id, address in msg.collect_endpoints.items():
            register_remote_endpoint(channel_id, tuple(address), msg.collect_secret)
        for cfg in tdd.vertex.stream_configs.values():
            if cfg.source is not None:
                self.coordinators[cfg.node_id] = RemoteSourceCoordinator(
                    cfg.node_id, self.attempt_id, self.outbox, self.job_master)
        # the job's settings over this process's own (config file, RILL_* variables): a job's
        # network memory and segment size apply to its tasks, as in the embedded mode
        configuration = load_configuration(job_information.job_configuration)
        # this process runs this one task: its collector is tuned for records (see python_gc)
        apply_gc_thresholds(parse_gc_thresholds(configuration.get(ConfigOptions.TASK_GC_THRESHOLDS)))
        self.network = NetworkEnvironment(self.partition_manager, connection_manager=self.connection_manager,
                                          configuration=configuration)
        self.task = Task(tdd, self.network, self.coordinators, self._on_state,
                         ActorCheckpointResponder(self.outbox, self.job_master))
        self.task.start()

    def _trigger_checkpoint(self, msg: m.TriggerCheckpoint) -> None:
        """A trigger for a task not deployed (yet) is declined by its Task once it exists; here,
        with no Task, it is declined directly."""
        if self.task is not None:
            self.task.trigger_checkpoint(msg.checkpoint_id, msg.timestamp, cloudpickle.loads(msg.options))
            return
        ActorCheckpointResponder(self.outbox, self.job_master).decline_checkpoint(
            msg.attempt_id, msg.checkpoint_id,
            CheckpointException(CheckpointFailureReason.CHECKPOINT_DECLINED_TASK_NOT_READY, "not deployed"))

    def _stop_channel_timeline(self, job_master) -> None:
        """End the task's recording, write its file and tell the JobMaster where (blocks this
        actor while the file is written: the task's sampling thread is joined first)."""
        try:
            path, error = (None if self.task is None else self.task.stop_channel_timeline()), None
        except OSError as e:
            path, error = None, f"writing the channel timeline failed: {e}"
        self.send(job_master, m.ChannelTimelineStopped(self.attempt_id, path, error))

    def _on_state(self, task, state, failure) -> None:
        """Task thread: report a state change (with the final metrics when terminal)."""
        payload = None
        if failure is not None:
            payload = _pickle_failure(failure)
        snapshot = task.metrics.snapshot() if state.is_terminal() else None
        progress = task.metrics.source_progress() if state.is_terminal() else 0
        self.outbox.post(self.job_master, m.TaskExecutionStateUpdate(task.tdd.attempt_id, state.name, payload,
                                                                     snapshot, progress, self._network_memory()))

    def _network_memory(self):
        """``(available, total)`` memory segments of this process's NetworkBufferPool."""
        pool = self.network.network_buffer_pool
        return pool.get_number_of_available_memory_segments(), pool.get_total_number_of_memory_segments()

    def _flush_outbox(self) -> None:
        for target, message in self.outbox.drain():
            self.send(target, message)

    def _report_metrics(self) -> None:
        task = self.task
        if task is not None and not task.execution_state.is_terminal():
            self.send(self.job_master, m.TaskMetricsReport(task.tdd.attempt_id, task.metrics.snapshot(),
                                                          task.metrics.source_progress(), self._network_memory()))

    def _orphaned(self) -> None:
        """The TaskExecutor's process exited: fail this task with that cause and exit."""
        if self.job_master is None:  # pooled, never given a task: nobody to tell
            log.info("pooled task process %d: its TaskExecutor (pid %d) exited", os.getpid(), self.watch.parent_pid)
            self._release()
            self.send(self.myAddress, ActorExitRequest())
            return
        # the ResourceManager's words for the same loss (whichever report reaches the JobMaster
        # first fails the job, so both name it alike)
        cause = (f"TaskExecutor {self.resource_id} (pid {self.watch.parent_pid} on {self.task_executor_host}) "
                 f"was lost: its process exited (seen by task {self.task_name})")
        log.error("task %s: %s", self.attempt_id, cause)
        if self.job_master is not None:
            self.send(self.job_master, m.TaskProcessFailed(self.attempt_id or "?", cause))
        self._release()
        self.send(self.myAddress, ActorExitRequest())

    def _release(self) -> None:
        if self.released:
            return
        self.released = True
        task = self.task
        if task is not None:
            if not task.execution_state.is_terminal():
                task.cancel_execution()
            task.join(10.0)
        self._flush_outbox()
        if self.partition_manager is not None:
            self.partition_manager.shutdown()
        if self.connection_manager is not None:
            self.connection_manager.shutdown()
        self.outbox.seal()


def _pickle_failure(failure) -> bytes:
    """The TaskFailure, pickled; an exception that cannot be pickled and loaded again travels as a
    ``RemoteTaskException`` with its type and message."""
    try:
        data = cloudpickle.dumps(failure)
        cloudpickle.loads(data)  # exceptions with their own __init__ signature often fail here
        return data
    except Exception:  # noqa: BLE001 - any pickling problem
        from rill.runtime.taskmanager.task import TaskFailure  # noqa: PLC0415
        from rill.runtime.errors import RemoteTaskException  # noqa: PLC0415
        error = RemoteTaskException(f"{type(failure.error).__name__}: {failure.error}")
        return cloudpickle.dumps(TaskFailure(failure.task_name_with_subtasks, failure.operator_name, error,
                                             failure.traceback_text))
