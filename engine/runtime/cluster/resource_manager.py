"""``ResourceManagerActor``: registers TaskExecutors, allocates their slots to JobMasters and
notices lost TaskExecutors (Flink's ``ResourceManager`` with its ``SlotManager`` and heartbeat
manager).

A TaskExecutor is lost when its process exits (Thespian tells the parent, this actor, with
``ChildActorExited``), when its host's actor system leaves the convention, or when no heartbeat
arrived for ``heartbeat.timeout`` ms. Every JobMaster with slots on it then gets a
``TaskExecutorLost`` naming it and the cause, and a TaskExecutor this ResourceManager started
itself (``rill cluster start -n N``) is replaced by a new one, so the cluster keeps N of them
(Flink's active resource managers request a new TaskManager the same way).

When a JobMaster's process exits (``JobMasterLost`` from the Dispatcher) it frees the job's
slots and tells the TaskExecutors that ran its tasks to stop them. When its own parent, the
supervisor, is gone, it exits (its TaskExecutors with it).
"""

from __future__ import annotations

import logging
import os
import time
from datetime import timedelta

from thespian.actors import (
    Actor,
    ActorExitRequest,
    ActorSystemConventionUpdate,
    ChildActorExited,
    PoisonMessage,
    WakeupMessage,
)

from rill.runtime.cluster import messages as m
from rill.runtime.cluster.liveness import ParentWatch
from rill.runtime.cluster.slot_manager import SlotManager
from rill.runtime.cluster.task_executor_actor import TaskExecutorActor
from rill.runtime.errors import NoResourceAvailableException

__all__ = ["ResourceManagerActor"]

log = logging.getLogger("rill.cluster.resourcemanager")


class ResourceManagerActor(Actor):
    """The cluster's ResourceManager (one, global name ``rill.resourcemanager``)."""

    def __init__(self):
        super().__init__()
        self.slot_manager = SlotManager()
        self.job_masters = {}  # job id → JobMaster address
        self.heartbeat_interval_ms = 1000
        self.heartbeat_timeout_ms = 50000
        self.next_te = 0
        self.local_task_executors = {}  # resource id → (slots, host) of those started here, to replace
        self.watch = ParentWatch()
        self.stopping = False

    def receiveMessage(self, msg, sender):  # noqa: N802, C901 - Thespian's name; one dispatch
        now = time.monotonic()
        if isinstance(msg, m.InitResourceManager):
            self.heartbeat_interval_ms = msg.heartbeat_interval_ms
            self.heartbeat_timeout_ms = msg.heartbeat_timeout_ms
            self.notifyOnSystemRegistrationChanges(True)
            self._tick()
            self.send(sender, m.ControlActorStarted("ResourceManager", os.getpid()))
        elif isinstance(msg, m.StartTaskExecutors):
            for _ in range(msg.count):
                self._start_local_task_executor(msg.slots, msg.host)
            self.send(sender, m.Ack())
        elif isinstance(msg, ActorSystemConventionUpdate):
            caps = msg.remoteCapabilities or {}
            rid = caps.get("rill.task_executor")
            if rid is None:
                return
            if msg.remoteAdded:
                self._create_task_executor(rid, int(caps.get("rill.slots", 1)), caps.get("rill.host", "127.0.0.1"),
                                           {"rill.task_executor": rid})
            else:
                self._lose(rid, f"its actor system at {msg.remoteAdminAddress} left the cluster")
        elif isinstance(msg, m.RegisterTaskExecutor):
            self.slot_manager.register(sender, msg.resource_id, msg.host, msg.pid, msg.slots, now)
            log.info("registered %s (pid %s, %s slots)", msg.resource_id, msg.pid, msg.slots)
        elif isinstance(msg, m.Heartbeat):
            if self.slot_manager.heartbeat(msg.resource_id, now):
                self.send(sender, m.HeartbeatAck())
        elif isinstance(msg, m.RequestSlots):
            self.job_masters[msg.job_id] = sender
            try:
                chosen = self.slot_manager.allocate(msg.job_id, msg.num_slots)
            except NoResourceAvailableException as e:
                self.send(sender, m.SlotRequestFailed(msg.job_id, str(e)))
                return
            self.send(sender, m.SlotsAllocated(msg.job_id, [
                m.AllocatedSlot(te.address, te.resource_id, slot, te.host) for te, slot in chosen]))
        elif isinstance(msg, m.FreeSlots):
            holders = [te for te in self.slot_manager.task_executors.values()
                       if msg.job_id in te.allocated.values()]
            self.slot_manager.free(msg.job_id)
            self.job_masters.pop(msg.job_id, None)
            for te in holders:  # see ReleaseJobTasks: the JobMaster's own last messages may be lost
                self.send(te.address, m.ReleaseJobTasks(msg.job_id))
        elif isinstance(msg, m.JobMasterLost):
            for te in self.slot_manager.task_executors_of(msg.job_id):
                self.send(te.address, m.CancelJobTasks(msg.job_id, msg.cause))
            freed = self.slot_manager.free(msg.job_id)
            self.job_masters.pop(msg.job_id, None)
            log.warning("job %s: %s; %d slot(s) freed", msg.job_id, msg.cause, freed)
        elif isinstance(msg, ChildActorExited):
            rid = self.slot_manager.find_by_address(msg.childAddress)
            if rid is not None:
                self._lose(rid, "its process exited")
        elif isinstance(msg, WakeupMessage):
            if self.watch.parent_died():
                log.error("the cluster's supervisor (pid %s) exited: the ResourceManager exits", self.watch.parent_pid)
                self.stopping = True
                self.send(self.myAddress, ActorExitRequest())
                return
            for rid in self.slot_manager.timed_out(now, self.heartbeat_timeout_ms / 1000.0):
                self._lose(rid, f"no heartbeat for {self.heartbeat_timeout_ms} ms (heartbeat.timeout)")
            self._tick()
        elif isinstance(msg, m.RequestClusterOverview):
            self.send(sender, m.ClusterOverview(self.slot_manager.overview(), []))
        elif isinstance(msg, ActorExitRequest):
            self.stopping = True  # its TaskExecutors exit with it: none is replaced
        elif isinstance(msg, PoisonMessage):
            log.warning("undeliverable message %r", msg.poisonMessage)

    def _tick(self) -> None:
        self.wakeupAfter(timedelta(milliseconds=max(100, self.heartbeat_interval_ms)))

    def _start_local_task_executor(self, slots: int, host: str) -> None:
        rid = f"taskexecutor-{self.next_te}"
        self.next_te += 1
        self.local_task_executors[rid] = (slots, host)
        self._create_task_executor(rid, slots, host, None)

    def _create_task_executor(self, rid: str, slots: int, host: str, requirements) -> None:
        te = self.createActor(TaskExecutorActor, targetActorRequirements=requirements)
        self.send(te, m.InitTaskExecutor(rid, slots, host, self.myAddress, self.heartbeat_interval_ms,
                                         self.heartbeat_timeout_ms))

    def _lose(self, rid: str, why: str) -> None:
        te, jobs = self.slot_manager.remove(rid)
        if te is None:
            return
        cause = f"TaskExecutor {rid} (pid {te.pid} on {te.host}) was lost: {why}"
        log.warning(cause)
        for job_id in jobs:
            jm = self.job_masters.get(job_id)
            if jm is not None:
                self.send(jm, m.TaskExecutorLost(rid, cause))
        self.send(te.address, ActorExitRequest())  # one that only stopped answering must not linger
        local = self.local_task_executors.pop(rid, None)
        if local is not None and not self.stopping:
            log.info("starting a TaskExecutor in place of %s", rid)
            self._start_local_task_executor(*local)
