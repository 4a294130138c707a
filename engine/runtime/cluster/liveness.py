"""``ParentWatch``: how a cluster actor notices that the actor which created it is gone.

In Thespian's ``multiprocTCPBase`` every actor is a process forked by its parent actor's
process (the admin forks the supervisor, the supervisor the Dispatcher and the
ResourceManager, the Dispatcher the JobMasters, the ResourceManager the TaskExecutors, a
TaskExecutor its task processes). A parent that is killed never sends its children anything:
they are re-parented by the kernel and would run on forever, holding slots and, since forked
processes inherit every socket, the admin's port. Each actor therefore compares its parent pid
with the one it was born with on every tick, and acts (fails its job, stops its tasks, exits)
when it changed. This is the same-host half of Flink's heartbeats; heartbeat messages cover
what a parent pid cannot see (an actor on another host, a JobMaster that is not the parent).
"""

from __future__ import annotations

import os
import signal

__all__ = ["ParentWatch", "kill_cluster_process_group"]

#: How long an actor that shuts the cluster down waits for the others to exit on their own
#: before it kills the process group.
SHUTDOWN_GRACE_S = 1.0


class ParentWatch:
    """The parent process of the calling process, as it was at construction."""

    def __init__(self) -> None:
        self.parent_pid = os.getppid()

    def parent_died(self) -> bool:
        """Whether the parent process exited (this process was re-parented)."""
        return os.getppid() != self.parent_pid


def kill_cluster_process_group() -> None:
    """SIGKILL the calling process' group, this process included: the cluster's last resort
    when a process it cannot replace (the admin, the supervisor) is gone and the cluster can no
    longer be reached or stopped through its actors. Thespian's admin made itself a session
    and process group leader and every actor process (and Thespian's logger, which would
    otherwise keep the admin's port) was forked from it, so the group is exactly this cluster's
    processes on this host."""
    os.killpg(os.getpgid(0), signal.SIGKILL)
