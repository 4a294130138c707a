"""``TaskExecutorActor``: offers slots to the ResourceManager, sends heartbeats, and starts one
StreamTask actor (its own process) per task deployed into its slots (Flink's
``TaskExecutor`` as an RPC endpoint)."""

from __future__ import annotations

import collections
import logging
import os
from datetime import timedelta

from thespian.actors import Actor, ActorExitRequest, ChildActorExited, PoisonMessage, WakeupMessage

from rill.runtime.cluster import messages as m

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
        self.resource_manager = None
        self.heartbeat_interval = timedelta(seconds=1)
        self.tasks = {}
        self.released_jobs = collections.deque(maxlen=1000)  # ReleaseJobTasks seen (recent jobs)

    def receiveMessage(self, msg, sender):  # noqa: N802 - Thespian's name
        if isinstance(msg, m.InitTaskExecutor):
            _preload()
            self.resource_id = msg.resource_id
            self.resource_manager = msg.resource_manager
            self.heartbeat_interval = timedelta(milliseconds=msg.heartbeat_interval_ms)
            self.send(msg.resource_manager, m.RegisterTaskExecutor(msg.resource_id, msg.slots, msg.host, os.getpid()))
            self.wakeupAfter(self.heartbeat_interval)
        elif isinstance(msg, WakeupMessage):
            if self.resource_manager is not None:
                self.send(self.resource_manager, m.Heartbeat(self.resource_id))
            self.wakeupAfter(self.heartbeat_interval)
        elif isinstance(msg, m.StartTask):
            if msg.job_id in self.released_jobs:  # its job ended already
                return
            from rill.runtime.cluster.stream_task_actor import StreamTaskActor  # noqa: PLC0415
            task = self.createActor(StreamTaskActor)
            self.tasks[str(task)] = (task, msg)
            self.send(task, m.StartTaskProcess(msg.job_id, msg.attempt_id, msg.task_name, msg.job_master,
                                               msg.netty_config, self.resource_id))
        elif isinstance(msg, m.TaskProcessReady):
            # the task's real address: ChildActorExited names it, not the one createActor returned
            for key, (task, start) in list(self.tasks.items()):
                if start.attempt_id == msg.attempt_id:
                    del self.tasks[key]
                    self.tasks[str(sender)] = (sender, start)
        elif isinstance(msg, m.ReleaseJobTasks):
            # the job's slots are free: none of its task processes may run on (those whose
            # JobMaster exited before they reported ready were never told to exit)
            self.released_jobs.append(msg.job_id)
            for key, (task, start) in list(self.tasks.items()):
                if start.job_id == msg.job_id:
                    del self.tasks[key]  # its exit is expected: no TaskProcessFailed
                    self.send(task, ActorExitRequest())
        elif isinstance(msg, ChildActorExited):
            entry = self.tasks.pop(str(msg.childAddress), None)
            if entry is not None:  # the JobMaster knows whether the task was done with it
                start = entry[1]
                self.send(start.job_master, m.TaskProcessFailed(
                    start.attempt_id, f"the process of task {start.task_name} exited (TaskExecutor "
                                      f"{self.resource_id})"))
        elif isinstance(msg, ActorExitRequest):
            for task, _ in list(self.tasks.values()):
                self.send(task, ActorExitRequest())
        elif isinstance(msg, PoisonMessage):
            log.warning("TaskExecutor %s: undeliverable message %r", self.resource_id, msg.poisonMessage)


def _preload() -> None:
    """Import the task runtime once here: task processes fork from this one and start without
    paying for the imports again."""
    import rill.datastream  # noqa: F401, PLC0415
    import rill.network.netty.connection_manager  # noqa: F401, PLC0415
    import rill.operators.collect_sink  # noqa: F401, PLC0415
    import rill.runtime.cluster.stream_task_actor  # noqa: F401, PLC0415
    import rill.runtime.taskmanager.network_environment  # noqa: F401, PLC0415
    import rill.runtime.taskmanager.task  # noqa: F401, PLC0415
