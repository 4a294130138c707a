"""``SlotManager``: the ResourceManager's book of TaskExecutors and their slots (Flink's
``FineGrainedSlotManager``/``DeclarativeSlotManager``, reduced to uniform slots).

Pure bookkeeping, no actors: the ResourceManager actor feeds it registrations, heartbeats,
requests and releases, and sends the messages it decides on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Set, Tuple

from rill.runtime.errors import NoResourceAvailableException

__all__ = ["SlotManager", "RegisteredTaskExecutor"]


@dataclass
class RegisteredTaskExecutor:
    """One TaskExecutor: its actor address, resource id, host, pid and slots.

    :ivar allocated: slot number → job id of every allocated slot.
    :ivar last_heartbeat: monotonic seconds of the last heartbeat (or registration).
    """

    address: Any
    resource_id: str
    host: str
    pid: int
    num_slots: int
    last_heartbeat: float
    allocated: Dict[int, str] = field(default_factory=dict)

    @property
    def free_slots(self) -> List[int]:
        return [i for i in range(self.num_slots) if i not in self.allocated]


class SlotManager:
    """Registered TaskExecutors and slot allocations per job.

    Allocation fills TaskExecutors in registration order (Flink's default, without
    ``cluster.evenly-spread-out-slots``); all of a job's slots are allocated at once or none.
    """

    def __init__(self) -> None:
        self.task_executors: Dict[str, RegisteredTaskExecutor] = {}

    def register(self, address: Any, resource_id: str, host: str, pid: int, num_slots: int, now: float) -> None:
        """Register (or re-register after a restart) a TaskExecutor with ``num_slots`` free slots.

        :raises ValueError: for ``num_slots < 1``.
        """
        if num_slots < 1:
            raise ValueError(f"TaskExecutor {resource_id} offers {num_slots} slots; it needs at least 1")
        self.task_executors[resource_id] = RegisteredTaskExecutor(address, resource_id, host, pid, num_slots, now)

    def heartbeat(self, resource_id: str, now: float) -> bool:
        te = self.task_executors.get(resource_id)
        if te is None:
            return False
        te.last_heartbeat = now
        return True

    def allocate(self, job_id: str, num_slots: int) -> List[Tuple[RegisteredTaskExecutor, int]]:
        """``num_slots`` free slots for ``job_id`` as (TaskExecutor, slot number) pairs.

        :raises NoResourceAvailableException: naming the slots needed, free and registered,
            when there are not enough free slots (nothing is allocated then).
        """
        free = [(te, s) for te in self.task_executors.values() for s in te.free_slots]
        if len(free) < num_slots:
            total = sum(te.num_slots for te in self.task_executors.values())
            raise NoResourceAvailableException(
                f"Could not acquire the minimum required resources: the job needs {num_slots} slots, "
                f"{len(free)} of the cluster's {total} slots are free "
                f"({len(self.task_executors)} TaskExecutors). Start more TaskExecutors or slots "
                "(`rill cluster start --task-executors N --slots M`) or lower the parallelism.")
        chosen = free[:num_slots]
        for te, s in chosen:
            te.allocated[s] = job_id
        return chosen

    def free(self, job_id: str) -> int:
        """Free every slot of ``job_id``; returns how many."""
        n = 0
        for te in self.task_executors.values():
            for s in [s for s, j in te.allocated.items() if j == job_id]:
                del te.allocated[s]
                n += 1
        return n

    def task_executors_of(self, job_id: str) -> List[RegisteredTaskExecutor]:
        """The TaskExecutors holding at least one slot of ``job_id``."""
        return [te for te in self.task_executors.values() if job_id in te.allocated.values()]

    def remove(self, resource_id: str) -> Tuple[Optional[RegisteredTaskExecutor], Set[str]]:
        """Forget a TaskExecutor; returns it and the jobs that had slots on it."""
        te = self.task_executors.pop(resource_id, None)
        if te is None:
            return None, set()
        return te, set(te.allocated.values())

    def timed_out(self, now: float, timeout_s: float) -> List[str]:
        """Resource ids whose last heartbeat is older than ``timeout_s``."""
        return [rid for rid, te in self.task_executors.items() if now - te.last_heartbeat > timeout_s]

    def find_by_address(self, address: Any) -> Optional[str]:
        for rid, te in self.task_executors.items():
            if te.address == address:
                return rid
        return None

    def overview(self) -> List[Tuple[str, int, int, int, str]]:
        return [(te.resource_id, te.num_slots, len(te.free_slots), te.pid, te.host)
                for te in self.task_executors.values()]
