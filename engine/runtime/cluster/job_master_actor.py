"""``JobMasterActor``: one job on the cluster (Flink's ``JobMaster`` RPC endpoint, one per
job, created by the Dispatcher).

It runs the same :class:`~rill.runtime.jobmaster.job_master.JobMaster` as the embedded mode --
ExecutionGraph, source coordinators, slot sharing, state tracking, failure and cancellation
rules -- with a :class:`ClusterDeployer` in place of the in-process TaskExecutor: tasks are
:class:`RemoteTask` handles whose state arrives as messages.

Deployment in two steps, because each task's process must be running before its consumers can
be told where to read: slots from the ResourceManager → ``StartTask`` to each slot's
TaskExecutor → every StreamTask reports its data address (``TaskProcessReady``) → each gets
its descriptor with the location of every partition it reads (``DeployTask``). At a restart,
the processes of the failed attempt's tasks that are still alive are reused for the new attempt
on the same TaskExecutor (``ReuseTaskProcess``, answered with ``TaskProcessReady``); only the
tasks left without one (a killed process, a lost TaskExecutor) get a new process. The descriptor
travels as Flink ships it: the job's and each vertex's shared parts serialized once
(``JobInformation``, ``TaskInformation``, which holds only that vertex's operators), and a
small per-subtask rest.

Failover (:mod:`rill.runtime.jobmaster.failover`): the JobMaster decides and redeploys; this
actor supplies what needs the cluster. The backoff is a wake-up message; a TaskExecutor lost
with the failure (its process killed) leaves its slots lost, and the restart first asks the
ResourceManager for as many new ones (the one the ResourceManager starts in its place, or
free slots elsewhere), retrying until ``slot.request.timeout``; then every task of the new
attempt gets a process (a reused one where it can) and its descriptor as on the first
deployment. The processes of the job are asked to exit when the job ends.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import itertools
import logging
import os
import time
from datetime import timedelta
from typing import Callable, Dict, List, Optional, Tuple

import cloudpickle
from thespian.actors import Actor, ActorExitRequest, PoisonMessage, WakeupMessage

from rill.common.configuration import ConfigOption
from rill.common.pickling import dumps  # user code keeps its file names on its way to the tasks
from rill.graph.states import ExecutionState, JobStatus
from rill.runtime.cluster import messages as m
from rill.runtime.cluster.kv_state import KvStateRequest, route_in_job_master
from rill.runtime.cluster.liveness import ParentWatch
from rill.runtime.checkpoint.timer import Cancellable, CheckpointTimer
from rill.runtime.cluster.shipping import enter_working_directory
from rill.runtime.deployment import JobInformation, TaskInformation, subtask_descriptor
from rill.runtime.errors import JobExecutionException, NoResourceAvailableException, RemoteTaskException
from rill.runtime.metrics import TaskIOMetrics
from rill.runtime.rest.snapshot import snapshot_job_master
from rill.runtime.taskmanager.channel_timeline import ChannelTimelineStateError, timeline_file

__all__ = ["JobMasterActor", "RemoteTask", "ClusterDeployer", "ActorCheckpointTimer", "TaskExecutorLostException",
           "ControlProcessLostException"]

log = logging.getLogger("rill.cluster.jobmaster")

REPORT_INTERVAL = timedelta(milliseconds=100)
#: the wake-up payload of a restart whose backoff passed
_RESTART = "rill.restart"
#: how often a restart asks again for slots while none are free, ms
SLOT_REQUEST_RETRY_MS = 200
#: Flink's ``slot.request.timeout`` (5 min): how long a restart waits for replacement slots
SLOT_REQUEST_TIMEOUT = ConfigOption(
    "slot.request.timeout", 300_000,
    "How long a restart waits for the slots of lost TaskExecutors to be replaced, ms.")


class TaskExecutorLostException(Exception):
    """The TaskExecutor that hosted a task is gone (Flink's ``TaskManagerLostException`` /
    "TaskManager with id ... is no longer reachable")."""


class ControlProcessLostException(Exception):
    """A control process the job depended on (its Dispatcher, the ResourceManager) exited while
    the job ran; there is no JobManager fail-over (Flink's would need HA services)."""


class _RemoteMetrics:
    """The latest metrics a task reported (zeros before the first report)."""

    def __init__(self, task_name: str, subtask_index: int):
        self._snapshot = TaskIOMetrics(task_name, subtask_index).snapshot()
        self._progress = 0

    def update(self, snapshot, progress: int) -> None:
        if snapshot is not None:
            self._snapshot = snapshot
            self._progress = progress

    def snapshot(self):
        return self._snapshot

    def source_progress(self) -> int:
        return self._progress


class RemoteTask:
    """The JobMaster's handle on a task running in a StreamTask actor: the same attributes the
    JobMaster reads from an embedded ``Task``.

    :param tdd: the task's descriptor (locations are added at deployment).
    :param slot: the ``AllocatedSlot`` it runs in.
    :param listener: the JobMaster's state listener.
    :param send: the actor's ``send``.
    """

    def __init__(self, tdd, slot: m.AllocatedSlot, listener, send):
        self.tdd = tdd
        self.slot = slot
        self.listener = listener
        self._send = send
        self.execution_state = ExecutionState.CREATED
        self.metrics = _RemoteMetrics(tdd.task_name, tdd.subtask_index)
        self.actor = None  # the StreamTask actor, once its process is ready
        self.data_address = None
        self.pid = None
        self.network_memory = None  # (available, total) segments of its process, as last reported
        self.cancel_requested = False
        self.released = False  # the JobMaster is done with this task: its process exits or is reused
        self.process_lost = False  # its process exited (TaskProcessFailed): nothing to reuse
        self._timeline_stopped: Optional[concurrent.futures.Future] = None  # until its process answers

    @property
    def task_name_with_subtasks(self) -> str:
        return self.tdd.task_name_with_subtasks

    def start(self) -> None:
        """Nothing: the JobMasterActor deploys all tasks once every process is ready."""

    def update_state(self, state: ExecutionState, failure) -> None:
        if self.execution_state.is_terminal() or state is self.execution_state:
            return
        self.execution_state = state
        if state.is_terminal() and self._timeline_stopped is not None:
            self.channel_timeline_stopped(None, None)  # it wrote its file before it reported the end
        self.listener(self, state, failure)

    # -- channel timelines on demand (rill.runtime.jobmaster.channel_timelines) -----------------
    def start_channel_timeline(self, settings) -> None:
        """Send ``StartChannelTimeline``; a task not deployed yet gets the settings in its
        descriptor instead (the JobMasterActor deploys with the job's running recording)."""
        if self.actor is not None and not self.released and self.execution_state is not ExecutionState.CREATED \
                and not self.execution_state.is_terminal():
            self._send(self.actor, m.StartChannelTimeline(self.tdd.attempt_id, settings))

    def stop_channel_timeline(self) -> "concurrent.futures.Future[Optional[str]]":
        """Send ``StopChannelTimeline``; a future of the file's path, completed by the task's
        answer (:meth:`channel_timeline_stopped`) or, if it ends first, by the file it wrote then."""
        future: "concurrent.futures.Future[Optional[str]]" = concurrent.futures.Future()
        if self.actor is None or self.released or self.execution_state is ExecutionState.CREATED \
                or self.execution_state.is_terminal():
            future.set_result(self._written_timeline())
            return future
        self._timeline_stopped = future
        self._send(self.actor, m.StopChannelTimeline(self.tdd.attempt_id))
        return future

    def channel_timeline_stopped(self, path: Optional[str], error: Optional[str]) -> None:
        """The task's answer to ``StopChannelTimeline`` (or its end: ``path`` ``None``)."""
        future, self._timeline_stopped = self._timeline_stopped, None
        if future is None or future.done():
            return
        if error is not None:
            future.set_exception(OSError(f"{self.task_name_with_subtasks}: {error}"))
        else:
            future.set_result(path if path is not None else self._written_timeline())

    def _written_timeline(self) -> Optional[str]:
        settings = self.tdd.channel_timeline
        if settings is None:
            return None
        path = timeline_file(settings.directory, self.tdd.job_id, self.task_name_with_subtasks,
                             self.tdd.attempt_number)
        return str(path) if path.exists() else None

    # -- checkpoints (the coordinator's calls, on the actor's thread) ---------------------------
    def trigger_checkpoint(self, checkpoint_id: int, timestamp: int, options) -> None:
        """Send ``TriggerCheckpoint`` to the task's process.

        :raises RuntimeError: if the task's process is not deployed (the coordinator declines).
        """
        if self.actor is None or self.released:
            raise RuntimeError(f"{self.task_name_with_subtasks} is not deployed")
        self._send(self.actor, m.TriggerCheckpoint(self.tdd.attempt_id, checkpoint_id, timestamp,
                                                   cloudpickle.dumps(options)))

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        if self.actor is not None and not self.released:
            self._send(self.actor, m.NotifyCheckpointComplete(self.tdd.attempt_id, checkpoint_id))

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        if self.actor is not None and not self.released:
            self._send(self.actor, m.NotifyCheckpointAborted(self.tdd.attempt_id, checkpoint_id))

    def cancel_execution(self) -> None:
        if self.execution_state.is_terminal():
            return
        self.cancel_requested = True
        if self.actor is not None and self.execution_state is not ExecutionState.CREATED:
            self._send(self.actor, m.CancelTask(self.tdd.attempt_id))
        else:  # not deployed yet: nothing runs, it ends here
            self.update_state(ExecutionState.CANCELED, None)


class ClusterDeployer:
    """Stands in for the TaskExecutor the JobMaster deploys to: ``num_slots`` allocated slots
    and ``submit_task`` creating :class:`RemoteTask` handles."""

    def __init__(self, slots: List[m.AllocatedSlot], send):
        self.slots = slots
        self.num_slots = len(slots)
        self._send = send
        self.tasks: Dict[str, RemoteTask] = {}
        #: released tasks whose process is alive and may run a task of the next attempt, by the
        #: resource id of their TaskExecutor
        self.idle: Dict[str, List[RemoteTask]] = {}
        #: attempt id of a released task → attempt id of the task its process was handed to
        self.handed_over: Dict[str, str] = {}

    def submit_task(self, tdd, coordinators, listener, checkpoint_responder=None) -> RemoteTask:
        """A handle on a task to deploy; the task process acknowledges checkpoints with
        messages, so ``checkpoint_responder`` is not used."""
        task = RemoteTask(tdd, self.slots[tdd.slot_index], listener, self._send)
        self.tasks[tdd.attempt_id] = task
        return task

    def release_tasks(self, tasks: List[RemoteTask]) -> None:
        """The JobMaster is done with these (terminal) tasks: the process of each that reported
        ready and still runs waits for a task of the next attempt (:meth:`take_idle`) until
        :meth:`stop_idle`; one that reports later is asked to exit then."""
        for task in tasks:
            if task.released:
                continue
            task.released = True
            if task.actor is None:
                continue
            if task.process_lost or not task.execution_state.is_terminal():
                self._send(task.actor, ActorExitRequest())
            else:
                self.idle.setdefault(task.slot.resource_id, []).append(task)

    def take_idle(self, resource_id: str) -> Optional[RemoteTask]:
        """A released task whose process on TaskExecutor ``resource_id`` can be reused, or None."""
        idle = self.idle.get(resource_id)
        return idle.pop() if idle else None

    def current_attempt(self, attempt_id: str) -> str:
        """The attempt the process that ran ``attempt_id`` runs now (it may have been reused)."""
        while attempt_id in self.handed_over:
            attempt_id = self.handed_over[attempt_id]
        return attempt_id

    def forget_process(self, task: RemoteTask) -> None:
        """``task``'s process exited: it is not reused."""
        task.process_lost = True
        idle = self.idle.get(task.slot.resource_id, [])
        if task in idle:
            idle.remove(task)

    def drop_idle(self, resource_id: Optional[str] = None) -> None:
        """Forget the idle processes on ``resource_id`` (all when None): their TaskExecutor is
        gone, and they with it."""
        for rid in list(self.idle) if resource_id is None else [resource_id]:
            for task in self.idle.pop(rid, []):
                task.process_lost = True

    def stop_idle(self) -> None:
        """The job is over: every idle process is asked to exit."""
        for tasks in self.idle.values():
            for task in tasks:
                self._send(task.actor, ActorExitRequest())
        self.idle.clear()


class ActorCheckpointTimer(CheckpointTimer):
    """The checkpoint coordinator's timers as the actor's wake-ups, so that they run on the
    actor's thread (the only one that may send): ``wakeupAfter`` with a ``(TIMER_PAYLOAD, n)``
    payload that :meth:`run` looks up."""

    TIMER_PAYLOAD = "checkpoint-timer"

    def __init__(self, actor: Actor) -> None:
        self._actor = actor
        self._ids = itertools.count()
        self._actions: Dict[int, Tuple[Cancellable, Callable[[], None]]] = {}
        self._stopped = False

    def schedule(self, delay_ms: float, action: Callable[[], None]) -> Cancellable:
        handle = Cancellable()
        if self._stopped:
            handle.cancel()
            return handle
        n = next(self._ids)
        self._actions[n] = (handle, action)
        self._actor.wakeupAfter(timedelta(milliseconds=max(0.0, delay_ms)), payload=(self.TIMER_PAYLOAD, n))
        return handle

    def run(self, payload) -> bool:
        """Run the action of a wake-up's ``payload``; whether it was one of this timer's."""
        if not (isinstance(payload, tuple) and len(payload) == 2 and payload[0] == self.TIMER_PAYLOAD):
            return False
        handle, action = self._actions.pop(payload[1], (None, None))
        if handle is not None and not handle.cancelled and not self._stopped:
            try:
                action()
            except Exception:  # noqa: BLE001 - as ThreadTimer: logged, the timer goes on
                log.exception("JobMaster checkpoint timer action failed")
        return True

    def shutdown(self) -> None:
        self._stopped = True
        self._actions.clear()


class JobMasterActor(Actor):
    """One job; see the module docstring."""

    def __init__(self):
        super().__init__()
        self.job_id = None
        self.jm = None
        self.deployer: Optional[ClusterDeployer] = None
        self.dispatcher = None
        self.resource_manager = None
        self.submission: Optional[m.SubmitJob] = None
        self.netty_config = None
        self.deployed = False
        self.final_sent = False
        self.early_failure: Optional[BaseException] = None
        self.supervisor = None
        self.heartbeat_interval_s = 1.0
        self.last_heartbeat = 0.0
        self.unanswered_heartbeats: set = set()  # resource ids of TaskExecutors yet to answer
        self.watch = ParentWatch()
        self.orphaned = False
        self.lost_resources = set()  # resource ids of lost TaskExecutors that held this job's slots
        self.slot_request_deadline: Optional[float] = None  # monotonic s, while a restart waits for slots
        self.checkpoint_timer = ActorCheckpointTimer(self)

    def receiveMessage(self, msg, sender):  # noqa: N802, C901 - Thespian's name; one dispatch
        try:
            self._handle(msg, sender)
        except Exception as e:  # noqa: BLE001 - a bug here must fail the job, not hang it
            log.exception("JobMaster %s: %s failed", self.job_id, type(msg).__name__)
            self._fail_all(f"the JobMaster failed handling {type(msg).__name__}: {type(e).__name__}: {e}")

    def _handle(self, msg, sender) -> None:
        if isinstance(msg, m.StartJobMaster):
            self._start(msg)
        elif isinstance(msg, m.SlotsAllocated):
            if self.slot_request_deadline is not None:
                self._replace_lost_slots(msg.slots)
            else:
                self._deploy_processes(msg.slots)
        elif isinstance(msg, m.SlotRequestFailed):
            if self.slot_request_deadline is not None:
                self._retry_slot_request(msg.message)
            else:
                self._fail_before_deployment(msg.message)
        elif isinstance(msg, m.TaskProcessReady):
            task = self._task(msg.attempt_id)
            task.actor, task.data_address, task.pid = sender, tuple(msg.data_address), msg.pid
            if task.released:  # ready after the job ended (its TaskExecutor is stopping it too)
                self.send(sender, ActorExitRequest())
                return
            if task.cancel_requested:
                task.update_state(ExecutionState.CANCELED, None)
            self._maybe_deploy_tasks()
        elif isinstance(msg, m.TaskProcessFailed):
            if self.deployer is not None:
                # a reused process is known to its TaskExecutor by the attempt it last reported
                task = self.deployer.tasks.get(self.deployer.current_attempt(msg.attempt_id))
                if task is not None:
                    self.deployer.forget_process(task)
                self._fail_tasks([task] if task else [], msg.message, RemoteTaskException)
        elif isinstance(msg, m.TaskExecutionStateUpdate):
            task = self._task(msg.attempt_id)
            task.metrics.update(msg.snapshot, msg.source_progress)
            task.network_memory = msg.network_memory or task.network_memory
            failure = None
            if msg.failure is not None:
                failure = cloudpickle.loads(msg.failure)
                _attach_remote_traceback(failure, task)
                log.debug("JobMaster %s: task %s FAILED: %s: %s", self.job_id, task.task_name_with_subtasks,
                          type(failure.error).__name__, failure.error)
            task.update_state(ExecutionState[msg.state], failure)
        elif isinstance(msg, m.TaskMetricsReport):
            task = self._task(msg.attempt_id)
            task.metrics.update(msg.snapshot, msg.source_progress)
            task.network_memory = msg.network_memory
        elif isinstance(msg, m.RequestSplit):
            self._serve_split(msg, sender)
        elif isinstance(msg, m.ReportedWatermarkEvent):
            minimum = self.jm.coordinators[msg.node_id].report_watermark(msg.subtask_index, msg.group, msg.watermark_ms)
            self.send(sender, m.WatermarkAlignmentEvent(msg.request_id, minimum))
        elif isinstance(msg, KvStateRequest):
            route_in_job_master(self.jm, msg, self.send)
        elif isinstance(msg, m.CancelJob):
            if self.jm is not None:
                self.jm.cancel()
        elif isinstance(msg, m.TriggerSavepoint):
            self._trigger_savepoint(msg)
        elif isinstance(msg, m.ChannelTimelineRequest):
            self._channel_timelines(msg)
        elif isinstance(msg, m.ChannelTimelineStopped):
            self._task(msg.attempt_id).channel_timeline_stopped(msg.path, msg.error)
        elif isinstance(msg, m.JobMasterHeartbeatAck):
            self.unanswered_heartbeats.discard(msg.resource_id)
        elif isinstance(msg, m.TaskExecutorLost):
            self.lost_resources.add(msg.resource_id)
            if self.deployer is not None:
                self.deployer.drop_idle(msg.resource_id)
            lost = [t for t in self.deployer.tasks.values() if t.slot.resource_id == msg.resource_id] \
                if self.deployer else []
            for t in lost:  # their processes exit with their TaskExecutor: none is reused
                t.process_lost = True
            self._fail_tasks(lost, msg.cause)
        elif isinstance(msg, m.ResourceManagerLost):
            # its TaskExecutors exit with it, and every task with them: none would confirm a cancel
            self.resource_manager = msg.resource_manager
            if self.deployer is not None:
                self.deployer.drop_idle()
                for t in self.deployer.tasks.values():
                    t.process_lost = True
            self._fail_tasks(list(self.deployer.tasks.values()) if self.deployer else [], msg.cause,
                             ControlProcessLostException)
        elif isinstance(msg, WakeupMessage) and msg.payload == _RESTART:
            self._restart()
        elif isinstance(msg, (m.AcknowledgeCheckpoint, m.DeclineCheckpoint)):
            self._receive_checkpoint_message(msg)
        elif isinstance(msg, WakeupMessage):
            if self.checkpoint_timer.run(msg.payload):
                return
            self._check_dispatcher()
            self._heartbeat()
            self._report()
        elif isinstance(msg, ActorExitRequest):
            self._release_tasks()
        elif isinstance(msg, PoisonMessage) and isinstance(msg.poisonMessage, m.ReuseTaskProcess):
            self._reuse_failed(msg.poisonMessage)
        elif isinstance(msg, PoisonMessage):
            log.warning("JobMaster %s: undeliverable %r", self.job_id, msg.poisonMessage)

    # -- start -------------------------------------------------------------------------------
    def _start(self, msg: m.StartJobMaster) -> None:
        from rill.runtime.jobmaster.job_master import JobMaster  # noqa: PLC0415
        from rill.common.configuration import ConfigOptions  # noqa: PLC0415
        from rill.runtime.jobmaster.scheduler import required_slots  # noqa: PLC0415
        from rill.runtime.taskmanager.python_gc import parse_gc_thresholds  # noqa: PLC0415

        self.job_id = msg.job_id
        self.dispatcher = msg.dispatcher
        self.resource_manager = msg.resource_manager
        self.supervisor = msg.supervisor
        self.heartbeat_interval_s = msg.heartbeat_interval_ms / 1000.0
        self.submission = sub = msg.submission
        conf = sub.configuration
        self.wakeupAfter(REPORT_INTERVAL)
        # a job's bad setting must fail the job at once, before any task process runs
        what = "network configuration"
        try:
            self.netty_config = _netty_config(conf, msg.secret)
            what = "configuration"
            parse_gc_thresholds(conf.get(ConfigOptions.TASK_GC_THRESHOLDS))  # applied by each task process
        except ValueError as e:
            self.early_failure = JobExecutionException(
                self.job_id, f"Job '{sub.job_name}' ({self.job_id}) failed: invalid {what}: {e}")
            self.early_failure.__cause__ = e
            self._report()
            return
        enter_working_directory(sub.working_directory, self.job_id)  # before user code loads
        try:
            job_graph = cloudpickle.loads(sub.job_graph)
        except Exception as e:  # noqa: BLE001 - user code that does not load here
            self.early_failure = JobExecutionException(
                self.job_id, f"Job '{sub.job_name}' ({self.job_id}) failed: its JobGraph could not be loaded "
                f"in the JobMaster: {type(e).__name__}: {e}")
            self.early_failure.__cause__ = e
            self._report()
            return
        self.deployer = ClusterDeployer([], self.send)
        self.jm = JobMaster(job_graph, self.deployer, conf, sub.job_parameters, on_terminal=self._on_terminal,
                            schedule_restart=self._schedule_restart, checkpoint_timer=self.checkpoint_timer)
        self.send(self.resource_manager, m.RequestSlots(self.job_id, sum(required_slots(job_graph).values())))

    def _fail_before_deployment(self, message: str) -> None:
        self.jm.fail_deployment(NoResourceAvailableException(message))

    def _deploy_processes(self, slots: List[m.AllocatedSlot]) -> None:
        self.deployer.slots, self.deployer.num_slots = slots, len(slots)
        self.jm.start()
        if self.jm.result_future.done():
            return
        self._start_task_processes()

    def _start_task_processes(self) -> None:
        """A process per task of the JobMaster's current attempt, in its slot: an idle one of the
        previous attempt on the slot's TaskExecutor if there is one, else a new one."""
        self._send_report()  # RUNNING now: a job may end before the next report tick
        reused = 0
        for task in self.jm.tasks:
            old = self.deployer.take_idle(task.slot.resource_id)
            if old is None:
                self._start_task_process(task)
                continue
            tdd = task.tdd
            self.deployer.handed_over[old.tdd.attempt_id] = tdd.attempt_id
            self.send(old.actor, m.ReuseTaskProcess(old.tdd.attempt_id, tdd.attempt_id, tdd.task_name_with_subtasks))
            reused += 1
        log.debug("JobMaster %s: %d task(s): %d process(es) reused, %d asked of the TaskExecutors", self.job_id,
                  len(self.jm.tasks), reused, len(self.jm.tasks) - reused)

    def _start_task_process(self, task: RemoteTask) -> None:
        tdd = task.tdd
        self.send(task.slot.task_executor, m.StartTask(self.job_id, tdd.attempt_id, tdd.task_name_with_subtasks,
                                                       task.slot.slot_number, self.myAddress, self.netty_config))

    def _reuse_failed(self, msg: m.ReuseTaskProcess) -> None:
        """The process to reuse was gone before the message reached it: a new one instead."""
        self.deployer.handed_over.pop(msg.old_attempt_id, None)
        old = self.deployer.tasks.get(msg.old_attempt_id)
        if old is not None:
            old.process_lost = True
        task = self.deployer.tasks.get(msg.attempt_id)
        if task is not None and task.actor is None and not task.released:
            self._start_task_process(task)

    def _maybe_deploy_tasks(self) -> None:
        tasks = self.deployer.tasks  # every attempt's, by attempt id
        current = list(self.jm.tasks)
        if self.deployed or any(t.data_address is None for t in current):
            return
        self.deployed = True
        if self.jm.result_future.done():
            return
        log.debug("JobMaster %s: every task process is ready: deploying", self.job_id)
        sub = self.submission
        job_information = cloudpickle.dumps(JobInformation(self.job_id, sub.job_name, sub.configuration,
                                                           dict(sub.job_parameters), sub.working_directory))
        # a vertex's operators (a source's whole collection, say) are pickled once for all its
        # subtasks; what differs per subtask is small
        task_informations: Dict[str, bytes] = {}
        for task in current:
            if task.execution_state.is_terminal():
                continue
            tdd = task.tdd
            vertex_id = str(tdd.vertex.get_id())
            task_information = task_informations.get(vertex_id)
            if task_information is None:
                task_information = dumps(TaskInformation.from_job_vertex(tdd.vertex))
                task_informations[vertex_id] = task_information
            gates = []
            for gdd in tdd.input_gates:
                gates.append(dataclasses.replace(gdd, locations=[tasks[pid.producer_id].data_address
                                                                 for pid, _ in gdd.channels]))
            if self.jm.channel_timeline is not None:  # a recording started while the processes started
                tdd = task.tdd = dataclasses.replace(tdd, channel_timeline=self.jm.channel_timeline)
            subtask = dumps(subtask_descriptor(dataclasses.replace(tdd, input_gates=gates)))
            task.execution_state = ExecutionState.DEPLOYING
            log.debug("JobMaster %s: DeployTask %s: %d bytes (subtask %d, task information %d, job information %d)",
                     self.job_id, tdd.task_name_with_subtasks,
                     len(subtask) + len(task_information) + len(job_information), len(subtask),
                     len(task_information), len(job_information))
            self.send(task.actor, m.DeployTask(subtask, task_information, job_information,
                                               sub.collect_endpoints, sub.collect_secret))

    def _task(self, attempt_id: str) -> RemoteTask:
        return self.deployer.tasks[attempt_id]

    # -- sources -------------------------------------------------------------------------------
    def _serve_split(self, msg: m.RequestSplit, sender) -> None:
        coordinator = self.jm.coordinators.get(msg.node_id)
        try:
            split, checkpoint_id = coordinator.assign_split(msg.subtask_index)
            self.send(sender, m.SplitResponse(msg.request_id, None if split is None else cloudpickle.dumps(split),
                                              coordinator_checkpoint_id=checkpoint_id))
        except Exception as e:  # noqa: BLE001 - the enumerator's failure fails the reader
            self.send(sender, m.SplitResponse(msg.request_id, None, f"the split enumerator failed: "
                                                                   f"{type(e).__name__}: {e}"))

    # -- restarts (the JobMaster's schedule_restart) ------------------------------------------------
    def _schedule_restart(self, delay_ms: int, restart) -> None:
        """The backoff as a wake-up; the JobMaster's ``restart_tasks`` runs in :meth:`_redeploy`."""
        self.wakeupAfter(timedelta(milliseconds=delay_ms), payload=_RESTART)

    def _restart(self) -> None:
        """The backoff passed: replace the slots of lost TaskExecutors, then redeploy."""
        if self.jm is None or self.jm.status is not JobStatus.RESTARTING:
            return  # cancelled or failed meanwhile
        lost = [s for s in self.deployer.slots if s.resource_id in self.lost_resources]
        if not lost:
            self._redeploy()
            return
        if self.slot_request_deadline is None:
            timeout_ms = self.submission.configuration.get(SLOT_REQUEST_TIMEOUT)
            self.slot_request_deadline = time.monotonic() + timeout_ms / 1000.0
        self.send(self.resource_manager, m.RequestSlots(self.job_id, len(lost)))

    def _replace_lost_slots(self, slots: List[m.AllocatedSlot]) -> None:
        """New slots in place of the lost ones (same indexes: the slot assignment stays)."""
        fresh = iter(slots)
        self.deployer.slots = [next(fresh) if s.resource_id in self.lost_resources else s
                               for s in self.deployer.slots]
        self.lost_resources.clear()
        self.slot_request_deadline = None
        self._redeploy()

    def _retry_slot_request(self, message: str) -> None:
        """No free slots yet (a replacement TaskExecutor is still starting): ask again soon,
        until ``slot.request.timeout``; then the job fails with the ResourceManager's answer."""
        if time.monotonic() < self.slot_request_deadline:
            self.wakeupAfter(timedelta(milliseconds=SLOT_REQUEST_RETRY_MS), payload=_RESTART)
            return
        self.slot_request_deadline = None
        self.jm.fail_deployment(NoResourceAvailableException(f"the restart found no slots: {message}"))

    def _redeploy(self) -> None:
        """The JobMaster's new attempt: its tasks, then a process for each."""
        log.debug("JobMaster %s: restarting: restoring the new attempt's tasks", self.job_id)
        self.deployed = False
        self.jm.restart_tasks()
        if not self.jm.result_future.done():
            self._start_task_processes()

    # -- checkpoints ----------------------------------------------------------------------------
    def _receive_checkpoint_message(self, msg) -> None:
        coordinator = None if self.jm is None else self.jm.checkpoint_coordinator
        if coordinator is None:
            return
        if isinstance(msg, m.AcknowledgeCheckpoint):
            coordinator.receive_acknowledge_message(msg.attempt_id, msg.checkpoint_id, msg.metrics,
                                                    cloudpickle.loads(msg.subtask_state), msg.task_finished)
        else:
            coordinator.receive_decline_message(msg.checkpoint_id, msg.attempt_id, cloudpickle.loads(msg.reason))

    # -- failures -------------------------------------------------------------------------------
    def _fail_tasks(self, tasks: List[RemoteTask], cause: str, error_type=TaskExecutorLostException) -> None:
        """Fail ``tasks`` (all still running) with ``error_type(cause)``; with no task given, fail
        the job through one live task."""
        from rill.runtime.taskmanager.task import TaskFailure  # noqa: PLC0415
        if self.jm is None or self.deployer is None:
            return
        live = [t for t in tasks if not t.execution_state.is_terminal()]
        if not live and tasks:
            return
        if not live:  # no particular task: fail the job through every live one
            live = [t for t in self.deployer.tasks.values() if not t.execution_state.is_terminal()][:1]
        for t in live:
            error = error_type(cause)
            t.update_state(ExecutionState.FAILED, TaskFailure(t.task_name_with_subtasks, None, error, ""))

    def _fail_all(self, cause: str, error_type=TaskExecutorLostException) -> None:
        try:
            self._fail_tasks([], cause, error_type)
        except Exception:  # noqa: BLE001
            log.exception("JobMaster %s: could not fail the job", self.job_id)

    # -- liveness -----------------------------------------------------------------------------------
    def _check_dispatcher(self) -> None:
        """When the Dispatcher's process is gone, fail the job with that cause, send the final
        report to the supervisor (which hands it to the new Dispatcher) and exit."""
        if self.orphaned or not self.watch.parent_died():
            return
        self.orphaned = True
        cause = f"the Dispatcher (pid {self.watch.parent_pid}) exited"
        log.error("JobMaster %s: %s: failing the job", self.job_id, cause)
        self.dispatcher = self.supervisor
        if self.final_sent or self.supervisor is None:
            self._release_tasks()
            self.send(self.myAddress, ActorExitRequest())
            return
        self._fail_all(cause, ControlProcessLostException)

    def _heartbeat(self) -> None:
        """``JobMasterHeartbeat`` to every TaskExecutor with a slot of this job, every
        ``heartbeat.interval``, but never a second one before it answered the first (see
        ``JobMasterHeartbeatAck``: a hung TaskExecutor must not mute this JobMaster)."""
        now = time.monotonic()
        if self.deployer is None or self.final_sent or now - self.last_heartbeat < self.heartbeat_interval_s:
            return
        self.last_heartbeat = now
        for rid, te in {s.resource_id: s.task_executor for s in self.deployer.slots}.items():
            if rid not in self.unanswered_heartbeats:
                self.unanswered_heartbeats.add(rid)
                self.send(te, m.JobMasterHeartbeat(self.job_id))

    # -- end and reports --------------------------------------------------------------------------
    def _trigger_savepoint(self, msg: m.TriggerSavepoint) -> None:
        """Start the savepoint (or stop-with-savepoint) and report its outcome to the
        Dispatcher under ``msg.trigger_id``. The futures complete on this actor's thread (task
        acknowledgements and state reports are messages here), so the report is sent from it."""
        if self.jm is None:
            self.send(self.dispatcher, m.SavepointStatusReport(
                msg.job_id, msg.trigger_id, "COMPLETED", failure_cause=f"Job {msg.job_id} has not started"))
            return
        if msg.drain is not None:
            future = self.jm.stop_with_savepoint(msg.target_directory, msg.drain)
        elif msg.cancel_job:
            future = self.jm.cancel_with_savepoint(msg.target_directory)
        else:
            future = self.jm.trigger_savepoint(msg.target_directory)

        def report(f) -> None:
            error = f.exception()
            self.send(self.dispatcher, m.SavepointStatusReport(
                msg.job_id, msg.trigger_id, "COMPLETED", location=None if error else f.result(),
                failure_cause=f"{type(error).__name__}: {error}" if error else None))

        future.add_done_callback(report)

    def _channel_timelines(self, msg: m.ChannelTimelineRequest) -> None:
        """Start or stop the job's channel timeline recording and answer ``msg.reply_to`` (a
        stop once every task wrote its file: the futures complete on this actor's thread)."""
        def answer(files=None, error=None, kind="conflict") -> None:
            self.send(msg.reply_to, m.ChannelTimelineResponse(msg.request_id, files, error,
                                                              None if error is None else kind))

        if self.jm is None:
            answer(error=f"Job {msg.job_id} has not started")
            return
        try:
            if msg.settings is not None:
                self.jm.start_channel_timelines(msg.settings)
                answer()
                return
            future = self.jm.stop_channel_timelines()
        except ChannelTimelineStateError as e:
            answer(error=str(e))
            return

        def report(f) -> None:
            error = f.exception()
            if error is None:
                answer(files=f.result())
            else:
                answer(error=f"{type(error).__name__}: {error}", kind="failed")

        future.add_done_callback(report)

    def _on_terminal(self, jm) -> None:
        self._release_tasks()
        self.send(self.resource_manager, m.FreeSlots(self.job_id))
        self._report()  # the result now, not at the next report tick (up to REPORT_INTERVAL later)

    def _release_tasks(self) -> None:
        """Ask every task process that reported ready to exit; one that reports later, while
        this actor still runs, is asked then. The processes of a job cancelled while they were
        starting report after this actor is gone: the ResourceManager's ``ReleaseJobTasks``,
        sent when the job's slots are freed, stops them at their TaskExecutor."""
        if self.deployer is not None:
            self.deployer.release_tasks(list(self.deployer.tasks.values()))
            self.deployer.stop_idle()

    def _report(self) -> None:
        """Send the report and, until it is the final one, schedule the next."""
        if not self._send_report():
            self.wakeupAfter(REPORT_INTERVAL)

    def _send_report(self) -> bool:
        """Send the job's report now; returns whether the final one has been sent."""
        if self.final_sent:
            return True
        report = self._status_report()
        self.send(self.dispatcher, report)
        if report.result is not None:
            self.final_sent = True  # the Dispatcher stops this actor once it has the final report
            if self.orphaned:  # no Dispatcher will: stop here
                self.send(self.myAddress, ActorExitRequest())
        return self.final_sent

    def _status_report(self) -> m.JobStatusReport:
        sub = self.submission
        if self.jm is None:
            return m.JobStatusReport(self.job_id, sub.job_name, "FAILED", {}, [], [], (0, None), False, 0,
                                     _pickle_outcome(None, self.early_failure),
                                     job_master_pid=os.getpid(), failure_cause=str(self.early_failure))
        jm = self.jm
        result = cause = None
        if jm.result_future.done():
            error = self.early_failure or jm.result_future.exception()
            result = _pickle_outcome(None if error else jm.result_future.result(), error)
            cause = None if error is None else str(error)
        return m.JobStatusReport(
            job_id=self.job_id, job_name=jm.job_name,
            status="FAILED" if self.early_failure else jm.status.name,
            execution_states={t.task_name_with_subtasks: t.execution_state.name for t in jm.tasks},
            metrics=jm.task_metrics(), vertex_summaries=jm.vertex_summaries(),
            source_progress=jm.source_progress(),
            source_units_are_bytes=jm.source_units_are_bytes(),
            net_runtime_ms=jm.get_net_runtime_ms(), result=result, rest_snapshot=self._rest_snapshot(jm),
            job_master_pid=os.getpid(), failure_cause=cause, checkpoint_stats=jm.get_checkpoint_stats(),
            network_memory={t.task_name_with_subtasks: t.network_memory for t in self.deployer.tasks.values()
                            if t.network_memory is not None})

    def _rest_snapshot(self, jm):
        """The job as the REST API shows it; None (logged) if it cannot be read: the REST
        picture must never stop the reports."""
        try:
            return snapshot_job_master(jm, location=lambda t: (t.slot.resource_id, t.slot.host))
        except Exception:  # noqa: BLE001 - logged; the report goes out without it
            log.exception("JobMaster %s: the REST snapshot failed", self.job_id)
            return None


def _netty_config(job_configuration, secret: bytes):
    """The task processes' network transport settings for one job (Flink's ``NettyConfig``),
    from the job's configuration -- the one the JobMaster's descriptors take their buffer
    counts from, so that the credit a channel announces matches the buffers it has. A remote
    segment (one credit) is ``taskmanager.memory.segment-size``, the size of a
    NetworkBufferPool segment.

    :param job_configuration: the program's merged ``Configuration``.
    :param secret: the data plane's shared secret (>= 16 bytes).
    :raises ValueError: for a setting the transport does not accept.
    """
    from rill.common.configuration import ConfigOptions  # noqa: PLC0415
    from rill.network.netty.config import NettyConfig  # noqa: PLC0415
    from rill.runtime.taskmanager.network_environment import parse_memory_size  # noqa: PLC0415

    conf = job_configuration
    segment = conf.get_string(ConfigOptions.MEMORY_SEGMENT_SIZE.key)
    return NettyConfig(
        secret=secret,
        host=conf.get(ConfigOptions.TASKMANAGER_HOST),
        segment_size_bytes=(ConfigOptions.MEMORY_SEGMENT_SIZE.default if segment is None
                            else parse_memory_size(segment, ConfigOptions.MEMORY_SEGMENT_SIZE.key)),
        flow_control=conf.get(ConfigOptions.NETWORK_CREDIT_MODEL),
        compression=conf.get(ConfigOptions.NETWORK_COMPRESSION),
        exclusive_buffers_per_channel=conf.get(ConfigOptions.BUFFERS_PER_CHANNEL),
        floating_buffers_per_gate=conf.get(ConfigOptions.FLOATING_BUFFERS_PER_GATE),
        max_payload_size_bytes=conf.get(ConfigOptions.NETWORK_MAX_PAYLOAD_SIZE),
    )


def _attach_remote_traceback(failure, task: RemoteTask) -> None:
    if failure.traceback_text and hasattr(failure.error, "add_note"):
        failure.error.add_note(f"Remote traceback (task {task.task_name_with_subtasks}, pid {task.pid}):\n"
                               f"{failure.traceback_text.rstrip()}")


def _pickle_outcome(result, error: Optional[BaseException]) -> bytes:
    """``(result, error, cause)`` for the client; pickle drops ``__cause__``, so it travels
    alongside; a cause that cannot be pickled travels as a RemoteTaskException."""
    cause = error.__cause__ if error is not None else None
    try:
        return cloudpickle.dumps((result, error, cause))
    except Exception:  # noqa: BLE001
        text = RemoteTaskException(f"{type(cause).__name__}: {cause}")
        for note in getattr(cause, "__notes__", []):
            text.add_note(note)
        return cloudpickle.dumps((result, error, text))
