"""``ClusterSupervisorActor``: keeps a cluster's control actors alive (Flink's
``ClusterEntrypoint`` with its ``DispatcherResourceManagerComponent``, which restarts a
failed leader component; without ZooKeeper, Rill's supervisor restarts it in place).

The supervisor (global name ``rill.supervisor``) creates the ResourceManager and the
Dispatcher as its children, so it hears at once (``ChildActorExited``) when either process
exits, and creates a new one:

- a new **ResourceManager** starts the cluster's TaskExecutors again (the old ones and their
  tasks exit when their parent does, see :mod:`~rill.runtime.cluster.liveness`); the
  Dispatcher gets ``ResourceManagerLost`` and fails every running job with its cause;
- a new **Dispatcher** is told what happened to the previous one; the JobMasters of the old
  one fail their jobs and send their final reports here, and they are forwarded to it.

Clients find the current Dispatcher and ResourceManager by asking the supervisor
(``RequestLeaders``). When the supervisor's own parent, the Thespian admin, is gone, nothing
can reach the cluster any more: it shuts the whole cluster down (asks its children to exit,
then kills its process group, which holds only this cluster's processes). So it does when one
role's process exits more than ``MAX_RESTARTS`` times within ``RESTART_WINDOW_S`` (a crash
loop would only burn CPU; Flink's failure-rate restart strategy bounds restarts the same way).
"""

from __future__ import annotations

import collections
import logging
import time
from datetime import timedelta
from typing import Optional

from thespian.actors import Actor, ActorExitRequest, ChildActorExited, PoisonMessage, WakeupMessage

from rill.runtime.cluster import messages as m
from rill.runtime.cluster.dispatcher import DispatcherActor
from rill.runtime.cluster.liveness import SHUTDOWN_GRACE_S, ParentWatch, kill_cluster_process_group
from rill.runtime.cluster.preload import preload_pyarrow_conversions
from rill.runtime.cluster.resource_manager import ResourceManagerActor

__all__ = ["ClusterSupervisorActor"]

log = logging.getLogger("rill.cluster.supervisor")

TICK = timedelta(milliseconds=200)
#: Restarts of one role (Dispatcher, ResourceManager) allowed within ``RESTART_WINDOW_S`` seconds.
MAX_RESTARTS = 5
RESTART_WINDOW_S = 60.0


class ClusterSupervisorActor(Actor):
    """The cluster's supervisor; see the module docstring."""

    def __init__(self):
        super().__init__()
        self.init: Optional[m.InitSupervisor] = None
        self.dispatcher = None
        self.resource_manager = None
        self.pids = {}  # role → pid
        self.watch = ParentWatch()
        self.orphaned_at: Optional[float] = None  # when the cluster started shutting itself down
        self.stopping = False
        self.restarts = collections.defaultdict(collections.deque)  # role → monotonic restart times

    def receiveMessage(self, msg, sender):  # noqa: N802 - Thespian's name
        if isinstance(msg, m.InitSupervisor):
            self.init = msg
            preload_pyarrow_conversions()  # once: every control and task process forks from here on
            self._start_resource_manager()
            self._start_dispatcher(None)
            self.wakeupAfter(TICK)
            self.send(sender, m.Leaders(self.dispatcher, self.resource_manager))
        elif isinstance(msg, m.RequestLeaders):
            self.send(sender, m.Leaders(self.dispatcher, self.resource_manager))
        elif isinstance(msg, m.ControlActorStarted):
            self.pids[msg.role] = msg.pid
            log.info("%s started (pid %s)", msg.role, msg.pid)
        elif isinstance(msg, m.JobStatusReport):  # from a JobMaster whose Dispatcher is gone
            if self.dispatcher is not None:
                self.send(self.dispatcher, msg)
        elif isinstance(msg, ChildActorExited):
            self._child_exited(msg.childAddress)
        elif isinstance(msg, WakeupMessage):
            self._tick()
        elif isinstance(msg, ActorExitRequest):
            self.stopping = True
        elif isinstance(msg, PoisonMessage):
            log.warning("undeliverable %r", msg.poisonMessage)

    def _start_resource_manager(self) -> None:
        init = self.init
        self.resource_manager = self.createActor(ResourceManagerActor)
        self.send(self.resource_manager, m.InitResourceManager(init.heartbeat_interval_ms, init.heartbeat_timeout_ms))
        self.send(self.resource_manager, m.StartTaskExecutors(init.task_executors, init.slots, init.host))

    def _start_dispatcher(self, previous_exit: Optional[str]) -> None:
        init = self.init
        self.dispatcher = self.createActor(DispatcherActor)
        # a restarted Dispatcher waits this long for the final reports of the old one's jobs
        recovery_ms = 2 * init.heartbeat_interval_ms + 5000
        self.send(self.dispatcher, m.InitDispatcher(self.resource_manager, init.secret, self.myAddress,
                                                    init.heartbeat_interval_ms, previous_exit, recovery_ms))

    def _child_exited(self, address) -> None:
        if self.stopping or self.orphaned_at is not None or self.init is None:
            return
        role = ("ResourceManager" if address == self.resource_manager else
                "Dispatcher" if address == self.dispatcher else None)
        if role is not None and not self._may_restart(role):
            self._shut_down(f"the {role} exited {MAX_RESTARTS + 1} times within {RESTART_WINDOW_S:.0f} s")
            return
        if address == self.resource_manager:
            cause = f"the ResourceManager (pid {self.pids.pop('ResourceManager', '?')}) exited"
            log.warning("%s: starting a new one", cause)
            self._start_resource_manager()
            self.send(self.dispatcher, m.ResourceManagerLost(cause, self.resource_manager))
        elif address == self.dispatcher:
            cause = f"the Dispatcher (pid {self.pids.pop('Dispatcher', '?')}) exited"
            log.warning("%s: starting a new one", cause)
            self._start_dispatcher(f"{cause} at {time.strftime('%H:%M:%S')} and was restarted")

    def _may_restart(self, role: str) -> bool:
        now = time.monotonic()
        times = self.restarts[role]
        while times and now - times[0] > RESTART_WINDOW_S:
            times.popleft()
        if len(times) >= MAX_RESTARTS:
            return False
        times.append(now)
        return True

    def _shut_down(self, why: str) -> None:
        """Ask the control actors to exit; the next ticks kill what is left."""
        self.orphaned_at = time.monotonic()
        log.error("%s: shutting the cluster down", why)
        for child in (self.dispatcher, self.resource_manager):
            if child is not None:
                self.send(child, ActorExitRequest())

    def _tick(self) -> None:
        if self.orphaned_at is None and self.watch.parent_died():
            self._shut_down(f"the cluster's actor system admin (pid {self.watch.parent_pid}) exited")
        if self.orphaned_at is not None and time.monotonic() - self.orphaned_at > SHUTDOWN_GRACE_S:
            kill_cluster_process_group()  # whatever did not exit by now: Thespian's logger, a stuck task
        self.wakeupAfter(TICK)
