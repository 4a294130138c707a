"""Slot sharing groups with resources (Flink's ``api.common.operators.SlotSharingGroup`` and
``ResourceSpec``; PyFlink's ``pyflink.datastream.slot_sharing_group``).

A ``SlotSharingGroup`` names the group whose operators share slots and, optionally, the
resources one slot of the group needs (fine-grained resource management, FLIP-156). Set on a
stream with ``DataStream.slot_sharing_group(ssg)``; the group's :class:`ResourceSpec` is kept in
the StreamGraph (``slot_sharing_group_resources``) and the JobGraph, as Flink keeps them.

Rill difference: Rill's slots are uniform (each TaskExecutor offers ``taskmanager.numberOfTaskSlots``
equal slots), so the resources are carried and shown, not used to size slots.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional

from rill.common.memory_size import MemorySize

__all__ = ["ResourceSpec", "SlotSharingGroup"]


@dataclass(frozen=True)
class ResourceSpec:
    """The resources of one slot of a group: CPU cores, task heap, task off-heap and managed
    memory, and external resources by name (Flink's ``ResourceSpec``)."""

    cpu_cores: float
    task_heap_memory: MemorySize
    task_off_heap_memory: MemorySize = MemorySize.ZERO
    managed_memory: MemorySize = MemorySize.ZERO
    external_resources: Dict[str, float] = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash((self.cpu_cores, self.task_heap_memory, self.task_off_heap_memory, self.managed_memory,
                     tuple(sorted(self.external_resources.items()))))


class SlotSharingGroup:
    """A slot sharing group: a name and, when specified, a :class:`ResourceSpec`. Build one with
    ``SlotSharingGroup.builder(name)...build()``; two groups are equal when name and resources
    are."""

    def __init__(self, name: str, resource_spec: Optional[ResourceSpec] = None):
        if not isinstance(name, str) or not name:
            raise ValueError(f"SlotSharingGroup: the name must be a non-empty string, got {name!r}")
        self._name = name
        self.resource_spec = resource_spec

    def get_name(self) -> str:
        return self._name

    def get_cpu_cores(self) -> Optional[float]:
        return self.resource_spec.cpu_cores if self.resource_spec else None

    def get_task_heap_memory(self) -> Optional[MemorySize]:
        return self.resource_spec.task_heap_memory if self.resource_spec else None

    def get_task_off_heap_memory(self) -> Optional[MemorySize]:
        return self.resource_spec.task_off_heap_memory if self.resource_spec else None

    def get_managed_memory(self) -> Optional[MemorySize]:
        return self.resource_spec.managed_memory if self.resource_spec else None

    def get_external_resources(self) -> Dict[str, float]:
        return dict(self.resource_spec.external_resources) if self.resource_spec else {}

    @staticmethod
    def builder(name: str) -> "SlotSharingGroup.Builder":
        return SlotSharingGroup.Builder(name)

    def __eq__(self, other) -> bool:
        return (isinstance(other, SlotSharingGroup) and other._name == self._name
                and other.resource_spec == self.resource_spec)

    def __hash__(self) -> int:
        return hash((self._name, self.resource_spec))

    def __repr__(self) -> str:
        return f"SlotSharingGroup({self._name!r}, {self.resource_spec!r})"

    class Builder:
        """Builds a :class:`SlotSharingGroup` (Flink's ``SlotSharingGroup.Builder``).

        :raises ValueError: from a setter, for CPU cores or task heap memory that are not
            positive, or other memory below zero; from :meth:`build`, for resources without both
            CPU cores and task heap memory (Flink's rule).
        """

        def __init__(self, name: str):
            self._name = name
            self._cpu: Optional[float] = None
            self._heap: Optional[MemorySize] = None
            self._off_heap: Optional[MemorySize] = None
            self._managed: Optional[MemorySize] = None
            self._external: Dict[str, float] = {}

        def set_cpu_cores(self, cpu_cores: float) -> "SlotSharingGroup.Builder":
            if isinstance(cpu_cores, bool) or not isinstance(cpu_cores, (int, float)) or cpu_cores <= 0:
                raise ValueError(f"SlotSharingGroup '{self._name}': the cpu cores should be positive, got {cpu_cores!r}")
            self._cpu = float(cpu_cores)
            return self

        def set_task_heap_memory(self, task_heap_memory: MemorySize) -> "SlotSharingGroup.Builder":
            if not isinstance(task_heap_memory, MemorySize) or task_heap_memory <= MemorySize.ZERO:
                raise ValueError(f"SlotSharingGroup '{self._name}': the task heap memory should be positive, "
                                 f"got {task_heap_memory!r}")
            self._heap = task_heap_memory
            return self

        def set_task_heap_memory_mb(self, task_heap_memory_mb: int) -> "SlotSharingGroup.Builder":
            return self.set_task_heap_memory(MemorySize.of_mebi_bytes(task_heap_memory_mb))

        def set_task_off_heap_memory(self, task_off_heap_memory: MemorySize) -> "SlotSharingGroup.Builder":
            self._off_heap = _memory(task_off_heap_memory, self._name, "task off-heap memory")
            return self

        def set_task_off_heap_memory_mb(self, task_off_heap_memory_mb: int) -> "SlotSharingGroup.Builder":
            return self.set_task_off_heap_memory(MemorySize.of_mebi_bytes(task_off_heap_memory_mb))

        def set_managed_memory(self, managed_memory: MemorySize) -> "SlotSharingGroup.Builder":
            self._managed = _memory(managed_memory, self._name, "managed memory")
            return self

        def set_managed_memory_mb(self, managed_memory_mb: int) -> "SlotSharingGroup.Builder":
            return self.set_managed_memory(MemorySize.of_mebi_bytes(managed_memory_mb))

        def set_external_resource(self, name: str, value: float) -> "SlotSharingGroup.Builder":
            """Add (or replace) the external resource ``name`` (e.g. ``"gpu"``) of ``value``."""
            self._external[name] = float(value)
            return self

        def build(self) -> "SlotSharingGroup":
            if self._cpu is not None and self._heap is not None:
                return SlotSharingGroup(self._name, ResourceSpec(
                    self._cpu, self._heap, self._off_heap or MemorySize.ZERO, self._managed or MemorySize.ZERO,
                    dict(self._external)))
            if (self._cpu, self._heap, self._off_heap, self._managed) != (None,) * 4 or self._external:
                raise ValueError(f"SlotSharingGroup '{self._name}': the cpu cores and task heap memory are required "
                                 f"when specifying the resource of a slot sharing group. You need to explicitly "
                                 f"configure them with positive value.")
            return SlotSharingGroup(self._name)


def _memory(value: MemorySize, group: str, what: str) -> MemorySize:
    if not isinstance(value, MemorySize):
        raise ValueError(f"SlotSharingGroup '{group}': the {what} must be a MemorySize, got {value!r}")
    return value
