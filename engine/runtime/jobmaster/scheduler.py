"""Slot allocation with slot sharing (Flink's ``SlotSharingGroup`` / slot-sharing execution
slot allocator).

Subtask *i* of every vertex in a slot sharing group goes into the group's *i*-th shared slot,
so a group needs as many slots as its largest parallelism, and a job needs the sum over its
groups. Vertices of different groups never share a slot.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Dict, Tuple

from rill.runtime.errors import NoResourceAvailableException

__all__ = ["SlotAssignment", "required_slots", "assign_slots"]


@dataclass(frozen=True)
class SlotAssignment:
    """Where one subtask runs: the slot's index on the TaskExecutor, and its sharing group."""

    slot_index: int
    slot_sharing_group: str


def _group(vertex) -> str:
    return vertex.slot_sharing_group or "default"


def required_slots(job_graph) -> "OrderedDict[str, int]":
    """Slots needed per slot sharing group, in order of first appearance."""
    need: "OrderedDict[str, int]" = OrderedDict()
    for v in job_graph.get_vertices_sorted_topologically_from_sources():
        g = _group(v)
        need[g] = max(need.get(g, 0), v.get_parallelism())
    return need


def assign_slots(job_graph, available_slots: int) -> Dict[Tuple[str, int], SlotAssignment]:
    """Map (vertex id hex, subtask index) → slot.

    :raises NoResourceAvailableException: if ``available_slots`` is smaller than the sum of
        the groups' needs, naming both numbers.
    """
    need = required_slots(job_graph)
    total = sum(need.values())
    if total > available_slots:
        raise NoResourceAvailableException(
            f"Could not acquire the minimum required resources: the job needs {total} slots "
            f"({', '.join(f'{g}: {n}' for g, n in need.items())}) but only {available_slots} are available."
        )
    base: Dict[str, int] = {}
    offset = 0
    for g, n in need.items():
        base[g] = offset
        offset += n
    out: Dict[Tuple[str, int], SlotAssignment] = {}
    for v in job_graph.get_vertices():
        g = _group(v)
        for i in range(v.get_parallelism()):
            out[(str(v.get_id()), i)] = SlotAssignment(base[g] + i, g)
    return out
