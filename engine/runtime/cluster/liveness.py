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

__all__ = ["ParentWatch"]


class ParentWatch:
    """The parent process of the calling process, as it was at construction."""

    def __init__(self) -> None:
        self.parent_pid = os.getppid()

    def parent_died(self) -> bool:
        """Whether the parent process exited (this process was re-parented)."""
        return os.getppid() != self.parent_pid
