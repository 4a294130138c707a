"""Backpressure, explained: Flink's per-subtask ratios and levels, and the vertex (and subtask)
that causes a chain's backpressure.

Flink's levels (``JobVertexBackPressureInfo``): a subtask's back-pressured ratio is
``backPressuredTimeMsPerSecond / 1000``; ``ok`` up to 0.10, ``low`` up to 0.50, ``high``
above; a vertex's level is its worst subtask's.

The root cause (a Rill addition; Flink's UI leaves the reading to the user): a back-pressured
vertex waits for buffers its consumers do not free. Walking downstream from every
back-pressured vertex, the first vertex that is *not* back-pressured itself and is busy is
where the time goes: the most downstream busy vertex whose own outputs are not back-pressured.
Within it, a subtask is named when it alone is busy (its busy ratio at least
:data:`BUSY_RATIO` and every other subtask's at most half of it: the seed's slow B.4);
otherwise the whole vertex is the cause (e.g. evenly slow subtasks).

Ratios are the metrics' per-second values (Rill's ``TaskMetricsSnapshot``): over the last
second of a running task (:data:`rill.runtime.metrics.RATE_WINDOW_S`), over the whole life of a
finished one, so a cause shows a second after it started and a finished job's summary still
names what slowed it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

from rill.runtime.metrics import backpressure_level
from rill.runtime.rest.snapshot import JobSnapshot, SubtaskSnapshot, VertexSnapshot

__all__ = ["BUSY_RATIO", "RootCause", "subtask_ratios", "vertex_level", "find_root_cause"]

#: A vertex (subtask) counts as busy from this busy ratio up.
BUSY_RATIO = 0.5


def subtask_ratios(s: SubtaskSnapshot) -> Dict[str, float]:
    """``{"ratio", "idleRatio", "busyRatio"}`` of one subtask, each in [0, 1] (Flink's names),
    and Rill's ``"cpuRatio"``: the task thread's own CPU time per second (in one process the
    tasks share the GIL, so ``busyRatio - cpuRatio`` is mostly waiting for it)."""
    m = s.metrics
    return {
        "ratio": round(m.back_pressured_time_ms_per_second / 1000.0, 4),
        "idleRatio": round(m.idle_time_ms_per_second / 1000.0, 4),
        "busyRatio": round(m.busy_time_ms_per_second / 1000.0, 4),
        "cpuRatio": round(m.cpu_time_ms_per_second / 1000.0, 4),
    }


def subtask_level(s: SubtaskSnapshot) -> str:
    """``"ok"``, ``"low"`` or ``"high"`` (Flink's lower-case ``VertexBackPressureLevel``)."""
    return backpressure_level(s.metrics.back_pressured_time_ms_per_second).lower()


def vertex_level(v: VertexSnapshot) -> str:
    """The worst subtask's level (``"ok"`` for a vertex with no subtask deployed)."""
    order = {"ok": 0, "low": 1, "high": 2}
    return max((subtask_level(s) for s in v.subtasks), key=order.__getitem__, default="ok")


def _busy(s: SubtaskSnapshot) -> float:
    return s.metrics.busy_time_ms_per_second / 1000.0


@dataclass(frozen=True)
class RootCause:
    """The vertex causing backpressure.

    :ivar vertex_id: its JobVertexID; :ivar vertex_name: its name.
    :ivar subtask: the one culprit subtask's index, or None when the vertex as a whole is slow.
    :ivar busy_ratio: the vertex's highest subtask busy ratio, in [0, 1].
    :ivar back_pressured: names of the back-pressured vertices upstream of it.
    """

    vertex_id: str
    vertex_name: str
    subtask: Optional[int]
    busy_ratio: float
    back_pressured: List[str]

    def as_json(self) -> Dict[str, object]:
        """The REST shape: ``{"vertex-id", "vertex-name", "subtask", "busyRatio",
        "back-pressured-vertices"}``."""
        return {"vertex-id": self.vertex_id, "vertex-name": self.vertex_name, "subtask": self.subtask,
                "busyRatio": round(self.busy_ratio, 4), "back-pressured-vertices": list(self.back_pressured)}

    def describe(self) -> str:
        """One line for people: ``"Sink (subtask 3) is busy 0.97 and back-pressures: A, B"``."""
        where = self.vertex_name if self.subtask is None else f"{self.vertex_name} (subtask {self.subtask})"
        return f"{where} is busy {self.busy_ratio:.2f} and back-pressures: {', '.join(self.back_pressured)}"


def _culprit_subtask(v: VertexSnapshot) -> Optional[int]:
    if len(v.subtasks) < 2:
        return None
    ranked = sorted(v.subtasks, key=_busy, reverse=True)
    top, rest = ranked[0], ranked[1:]
    if _busy(top) >= BUSY_RATIO and all(_busy(s) <= _busy(top) / 2 for s in rest):
        return top.subtask
    return None


def find_root_cause(job: JobSnapshot) -> Optional[RootCause]:
    """The vertex causing the job's backpressure, or None when no vertex is back-pressured or
    no busy, non-back-pressured vertex lies downstream of one."""
    by_id = {v.id: v for v in job.vertices}
    consumers: Dict[str, List[str]] = {v.id: [] for v in job.vertices}
    for v in job.vertices:
        for up in v.inputs:
            consumers.setdefault(up, []).append(v.id)
    pressured = [v for v in job.vertices if vertex_level(v) != "ok"]
    if not pressured:
        return None
    candidates: Dict[str, List[str]] = {}  # culprit id -> back-pressured vertices it explains
    for bp in pressured:
        seen, frontier = set(), list(consumers.get(bp.id, []))
        while frontier:
            vid = frontier.pop()
            if vid in seen or vid not in by_id:
                continue
            seen.add(vid)
            v = by_id[vid]
            if vertex_level(v) != "ok":
                frontier.extend(consumers.get(vid, []))  # still back-pressured: look further down
            elif max((_busy(s) for s in v.subtasks), default=0.0) >= BUSY_RATIO:
                candidates.setdefault(vid, []).append(bp.name)
    if not candidates:
        return None
    # the culprit explaining the most back-pressured vertices; ties: the busiest
    best = max(candidates, key=lambda vid: (len(candidates[vid]), max(_busy(s) for s in by_id[vid].subtasks)))
    v = by_id[best]
    order = [x.name for x in job.vertices]
    return RootCause(v.id, v.name, _culprit_subtask(v), max(_busy(s) for s in v.subtasks),
                     sorted(set(candidates[best]), key=order.index))
