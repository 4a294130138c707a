"""``TaskExecutorActor``: offers slots to the ResourceManager, sends heartbeats, and starts one
StreamTask actor (its own process) per task deployed into its slots (Flink's
``TaskExecutor`` as an RPC endpoint). A process the JobMaster reuses for a task of its job's
next attempt reports ready again, and is filed here under that attempt.

It keeps ``taskmanager.python.task-process-pool.size`` task processes started ahead of any
deployment (a pool: each forked, registered with Thespian and answering ``TaskProcessPooled``,
named ``rill-pooled``, see :mod:`~rill.runtime.cluster.process_name`): ``StartTask`` takes a
ready one when there is one and the pool is refilled at once, so the replacement of a killed
task process does not wait for a fork. A pooled process has never loaded a job's code; once
given to a job it serves that job only and exits with it.

It watches the JobMasters of the tasks it runs as Flink's TaskExecutor does: a JobMaster sends
``JobMasterHeartbeat`` every ``heartbeat.interval`` ms (answered with ``JobMasterHeartbeatAck``);
without one for ``heartbeat.timeout`` ms
the JobMaster is lost, and the TaskExecutor stops that job's tasks and frees their slots at the
ResourceManager (``CancelJobTasks`` from the ResourceManager does the same at once when the
Dispatcher saw the JobMaster's process exit). When its parent, the ResourceManager, is gone it
exits, and its tasks with it (see :mod:`~rill.runtime.cluster.liveness`); so does a TaskExecutor
in another actor system (whose parent process is that system's admin) when its heartbeats go
unanswered for ``heartbeat.timeout`` ms -- a new ResourceManager creates a new one there.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import logging
import os
import time
from datetime import timedelta
from typing import Any, Dict, Optional

from thespian.actors import Actor, ActorExitRequest, ChildActorExited, PoisonMessage, WakeupMessage

from rill.common.configuration import ConfigOptions, load_configuration
from rill.runtime.cluster import messages as m
from rill.runtime.cluster.liveness import ParentWatch
from rill.runtime.cluster.preload import preload_pyarrow_conversions

__all__ = ["TaskExecutorActor"]

log = logging.getLogger("rill.cluster.taskexecutor")


class TaskExecutorActor(Actor):
    """One TaskExecutor. Created by the ResourceManager, in its own actor system or, on another
    host, in a system that joined the convention with capability ``rill.task_executor`` equal
    to its resource id."""

    @staticmethod
    def actorSystemCapabilityCheck(capabilities, requirements):  # noqa: N802 - Thespian's name
        wanted = (requirements or {}).get("rill.task_executor")
        return wanted is None or capabilities.get("rill.task_executor") == wanted

    def __init__(self):
        super().__init__()
        self.resource_id = None
        self.host = "?"
        self.resource_manager = None
        self.heartbeat_interval = timedelta(seconds=1)
        self.heartbeat_timeout_s = 50.0
        self.tasks = {}
        self.released_jobs = collections.deque(maxlen=1000)  # ReleaseJobTasks seen (recent jobs)
        self.job_masters = {}  # job id → monotonic seconds of its JobMaster's last heartbeat
        self.watch = ParentWatch()
        self.exiting = False
        #: why this TaskExecutor is exiting on its own (its ResourceManager is gone), if it is
        self.lost: Optional[str] = None
        self.last_ack = time.monotonic()
        self.pool_size = 0
        self.pool: Dict[str, Any] = {}  # address → pooled task process, ready
        self.pool_starting: Dict[int, Any] = {}  # token → a pooled process not ready yet
        self._tokens = itertools.count()

    def receiveMessage(self, msg, sender):  # noqa: N802 - Thespian's name
        if isinstance(msg, m.InitTaskExecutor):
            _preload()
            self.resource_id = msg.resource_id
            self.host = msg.host
            self.resource_manager = msg.resource_manager
            self.heartbeat_interval = timedelta(milliseconds=msg.heartbeat_interval_ms)
            self.heartbeat_timeout_s = msg.heartbeat_timeout_ms / 1000.0
            self.last_ack = time.monotonic()
            self.send(msg.resource_manager, m.RegisterTaskExecutor(msg.resource_id, msg.slots, msg.host, os.getpid()))
            self.wakeupAfter(self.heartbeat_interval)
            self.pool_size = _pool_size(msg.resource_id)
            self._refill_pool()
        elif isinstance(msg, m.TaskProcessPooled):
            self.pool_starting.pop(msg.token, None)
            if self.exiting:
                self.send(sender, ActorExitRequest())
            else:
                self.pool[str(sender)] = sender
        elif isinstance(msg, WakeupMessage):
            self._tick()
        elif isinstance(msg, m.HeartbeatAck):
            self.last_ack = time.monotonic()
        elif isinstance(msg, m.JobMasterHeartbeat):
            if msg.job_id in self.job_masters:
                self.job_masters[msg.job_id] = time.monotonic()
            self.send(sender, m.JobMasterHeartbeatAck(msg.job_id, self.resource_id))
        elif isinstance(msg, m.CancelJobTasks):
            self._stop_job_tasks(msg.job_id, msg.cause)
        elif isinstance(msg, m.StartTask):
            if msg.job_id in self.released_jobs:  # its job ended already
                return
            if self.pool:  # a ready process: no fork on the deployment's path
                task = self.pool.pop(next(iter(self.pool)))
            else:
                task = self.createActor(_stream_task_actor())
            self.tasks[str(task)] = (task, msg)
            self.job_masters.setdefault(msg.job_id, time.monotonic())
            self.send(task, m.StartTaskProcess(msg.job_id, msg.attempt_id, msg.task_name, msg.job_master,
                                               msg.netty_config, self.resource_id, self.host))
            self._refill_pool()
        elif isinstance(msg, m.TaskProcessReady):
            # the task's real address: ChildActorExited names it, not the one createActor returned
            for key, (task, start) in list(self.tasks.items()):
                if start.attempt_id == msg.attempt_id:
                    del self.tasks[key]
                    self.tasks[str(sender)] = (sender, start)
                    return
            entry = self.tasks.get(str(sender))
            if entry is not None:  # a process its JobMaster reused for a new attempt of the job
                self.tasks[str(sender)] = (sender, dataclasses.replace(entry[1], attempt_id=msg.attempt_id,
                                                                       task_name=msg.task_name))
        elif isinstance(msg, m.ReleaseJobTasks):
            # the job's slots are free: none of its task processes may run on (those whose
            # JobMaster exited before they reported ready were never told to exit)
            self.released_jobs.append(msg.job_id)
            self.job_masters.pop(msg.job_id, None)  # no more heartbeats expected from its JobMaster
            for key, (task, start) in list(self.tasks.items()):
                if start.job_id == msg.job_id:
                    del self.tasks[key]  # its exit is expected: no TaskProcessFailed
                    self.send(task, ActorExitRequest())
        elif isinstance(msg, ChildActorExited):
            self.pool.pop(str(msg.childAddress), None)  # a pooled one: refilled at the next StartTask
            entry = self.tasks.pop(str(msg.childAddress), None)
            if entry is not None:  # the JobMaster knows whether the task was done with it
                start = entry[1]
                why = f": the TaskExecutor stopped it because {self.lost}" if self.lost else ""
                self.send(start.job_master, m.TaskProcessFailed(
                    start.attempt_id, f"the process of task {start.task_name} exited (TaskExecutor "
                                      f"{self.resource_id}){why}"))
                if not any(s.job_id == start.job_id for _, s in self.tasks.values()):
                    self.job_masters.pop(start.job_id, None)  # done here: no more heartbeats expected
        elif isinstance(msg, ActorExitRequest):
            self.exiting = True
            for task in [t for t, _ in self.tasks.values()] + [*self.pool.values(), *self.pool_starting.values()]:
                self.send(task, ActorExitRequest())
            self.pool.clear()
        elif isinstance(msg, PoisonMessage):
            log.warning("TaskExecutor %s: undeliverable message %r", self.resource_id, msg.poisonMessage)

    def _tick(self) -> None:
        if self.exiting:
            return
        now = time.monotonic()
        lost = None
        if self.watch.parent_died():
            lost = f"the ResourceManager (pid {self.watch.parent_pid}) exited"
        elif now - self.last_ack > self.heartbeat_timeout_s:
            lost = (f"its ResourceManager answered no heartbeat for {int(self.heartbeat_timeout_s * 1000)} ms "
                    "(heartbeat.timeout)")
        if lost is not None:
            log.error("TaskExecutor %s: %s: stopping its tasks and exiting", self.resource_id, lost)
            # the JobMaster may hear of the task processes' exits before of the ResourceManager's:
            # their reports carry the cause
            self.lost = lost
            self.exiting = True
            self.send(self.myAddress, ActorExitRequest())
            return
        if self.resource_manager is not None:
            self.send(self.resource_manager, m.Heartbeat(self.resource_id))
        for job_id, last in list(self.job_masters.items()):
            if now - last > self.heartbeat_timeout_s:
                cause = (f"the JobMaster of job {job_id} was lost: no heartbeat for "
                         f"{int(self.heartbeat_timeout_s * 1000)} ms (heartbeat.timeout)")
                self._stop_job_tasks(job_id, cause)
                self.send(self.resource_manager, m.FreeSlots(job_id))
        self.wakeupAfter(self.heartbeat_interval)

    def _refill_pool(self) -> None:
        """Start processes until ``pool_size`` are ready or starting."""
        while not self.exiting and len(self.pool) + len(self.pool_starting) < self.pool_size:
            token = next(self._tokens)
            process = self.createActor(_stream_task_actor())
            self.pool_starting[token] = process
            self.send(process, m.PoolTaskProcess(token))

    def _stop_job_tasks(self, job_id: str, cause: str) -> None:
        """Stop every task of ``job_id`` here (their processes exit); nobody is told, as the
        JobMaster that would listen is gone."""
        self.job_masters.pop(job_id, None)
        stopped = 0
        for key, (task, start) in list(self.tasks.items()):
            if start.job_id == job_id:
                del self.tasks[key]
                self.send(task, ActorExitRequest())
                stopped += 1
        log.warning("TaskExecutor %s: %s; stopped %d task(s)", self.resource_id, cause, stopped)


def _pool_size(resource_id: str) -> int:
    """``taskmanager.python.task-process-pool.size`` of this process's configuration; a bad
    value is logged, naming the key, the value and the rule, and no pool is kept."""
    value = load_configuration().get(ConfigOptions.TASK_PROCESS_POOL_SIZE)
    try:
        size = int(value)
    except (TypeError, ValueError):
        size = -1
    if size < 0 or str(value).strip() != str(size):
        log.error("TaskExecutor %s: %s must be an integer >= 0, got %r: no task process pool",
                  resource_id, ConfigOptions.TASK_PROCESS_POOL_SIZE.key, value)
        return 0
    return size


def _stream_task_actor():
    """The StreamTask actor class (imported here: its module imports the task runtime, which the
    TaskExecutor loads in :func:`_preload`, after Thespian created it)."""
    from rill.runtime.cluster.stream_task_actor import StreamTaskActor  # noqa: PLC0415
    return StreamTaskActor


def _preload() -> None:
    """Import the task runtime once here: task processes fork from this one and start without
    paying for the imports again, pyarrow's lazy ones included (see
    :mod:`~rill.runtime.cluster.preload`)."""
    import rill.datastream  # noqa: F401, PLC0415
    import rill.network.netty.connection_manager  # noqa: F401, PLC0415
    import rill.operators.collect_sink  # noqa: F401, PLC0415
    import rill.runtime.cluster.stream_task_actor  # noqa: F401, PLC0415
    import rill.runtime.taskmanager.network_environment  # noqa: F401, PLC0415
    import rill.runtime.taskmanager.task  # noqa: F401, PLC0415
    preload_pyarrow_conversions()
