"""What the REST handlers read: a frozen, picklable picture of one job at one moment.

Built from a live ``JobMaster`` (:func:`snapshot_job_master`) on every request, and kept as the
archive of a finished job (as Flink's ``ExecutionGraphInfoStore`` keeps finished jobs'
``ArchivedExecutionGraph``). Plain dataclasses: no live operator or task travels in it, so a
cluster-side JobMaster could send the same picture over an actor message.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

from rill.runtime.metrics import TaskMetricsSnapshot

__all__ = ["SubtaskSnapshot", "VertexSnapshot", "ExceptionSnapshot", "JobSnapshot", "snapshot_job_master"]


@dataclass(frozen=True)
class SubtaskSnapshot:
    """One subtask (its current execution attempt).

    :ivar subtask: the subtask index (0-based).
    :ivar status: Flink's ``ExecutionState`` name (``"RUNNING"``...).
    :ivar metrics: the task's I/O metrics at snapshot time.
    :ivar taskmanager_id: the TaskExecutor running it.
    :ivar host: the host of that TaskExecutor.
    """

    subtask: int
    status: str
    metrics: TaskMetricsSnapshot
    taskmanager_id: str
    host: str = "127.0.0.1"


@dataclass(frozen=True)
class VertexSnapshot:
    """One JobVertex (a chain) and its subtasks.

    :ivar id: the JobVertexID (32 hex).
    :ivar inputs: ids of the vertices this one consumes from (JobEdges' producers).
    """

    id: str
    name: str
    parallelism: int
    max_parallelism: int
    inputs: List[str]
    subtasks: List[SubtaskSnapshot]


@dataclass(frozen=True)
class ExceptionSnapshot:
    """A task failure: ``exception_name`` (class name), ``stacktrace`` (text), ``timestamp_ms``
    (epoch ms), where it happened."""

    exception_name: str
    message: str
    stacktrace: str
    timestamp_ms: int
    task_name: str
    operator_name: Optional[str]
    taskmanager_id: str


@dataclass(frozen=True)
class JobSnapshot:
    """One job. Times are epoch ms (``end_time_ms == -1`` while running, as Flink).

    :ivar state: Flink's ``JobStatus`` name.
    :ivar plan: the JobGraph's JSON plan (Flink's ``JsonPlanGenerator`` shape).
    :ivar timestamps: status name -> epoch ms the job entered it (those Rill records).
    """

    job_id: str
    name: str
    state: str
    start_time_ms: int
    end_time_ms: int
    now_ms: int
    max_parallelism: int
    plan: Dict[str, object]
    vertices: List[VertexSnapshot]
    exceptions: List[ExceptionSnapshot] = field(default_factory=list)
    timestamps: Dict[str, int] = field(default_factory=dict)

    @property
    def duration_ms(self) -> int:
        end = self.end_time_ms if self.end_time_ms >= 0 else self.now_ms
        return max(0, end - self.start_time_ms)

    @property
    def is_terminal(self) -> bool:
        return self.state in ("FINISHED", "CANCELED", "FAILED")

    def vertex(self, vertex_id: str) -> Optional[VertexSnapshot]:
        """The vertex with that id, or None."""
        return next((v for v in self.vertices if v.id == vertex_id), None)


def snapshot_job_master(jm, location: Optional[Callable[[object], Tuple[str, str]]] = None) -> JobSnapshot:
    """Read a live ``JobMaster`` into a :class:`JobSnapshot`: the embedded one, or the one a
    cluster's JobMasterActor runs (whose tasks are ``RemoteTask`` handles with the latest
    reported metrics).

    :param location: ``task -> (taskmanager id, host)``; default: the JobMaster's one
        TaskExecutor (embedded mode) on 127.0.0.1.

    Wall-clock times come from the JobMaster's monotonic clock offset by the current
    ``time.time()`` (the JobMaster records monotonic times only). Safe from any thread: it
    reads counters and states, and ``JobMaster.observe()`` copies the rest under its lock.
    """
    now_wall_ms = int(time.time() * 1000)
    now_ns = time.monotonic_ns()

    def wall(mono_ns: Optional[int]) -> int:
        return -1 if mono_ns is None else now_wall_ms - int((now_ns - mono_ns) / 1e6)

    status, tasks, start_ns, end_ns, failure = jm.observe()
    state = status.name
    if location is None:
        embedded = (jm.task_executor.resource_id, "127.0.0.1")
        location = lambda _task: embedded  # noqa: E731
    vertices = []
    for v in jm.job_graph.get_vertices_sorted_topologically_from_sources():
        subtasks = [
            SubtaskSnapshot(t.tdd.subtask_index, t.execution_state.name, t.metrics.snapshot(), *location(t))
            for t in tasks if t.tdd.vertex is v
        ]
        subtasks.sort(key=lambda s: s.subtask)
        vertices.append(VertexSnapshot(
            id=str(v.get_id()), name=v.get_name(), parallelism=v.get_parallelism(),
            max_parallelism=v.get_effective_max_parallelism(),
            inputs=[str(e.get_source().get_producer().get_id()) for e in v.get_inputs()],
            subtasks=subtasks,
        ))
    # Flink's exception history: every failure the job restarted after, and the one it failed
    # with, newest first; a failure still being handled (FAILING) is the newest
    history = jm.get_exception_history()
    pending = failure is not None and all(e.failure is not failure for e in history)
    entries = [(failure, now_wall_ms, next((t for t in tasks
                                            if t.task_name_with_subtasks == failure.task_name_with_subtasks), None))
               ] if pending else []
    entries += [(e.failure, e.timestamp_ms, e.task) for e in reversed(history)]
    exceptions = [ExceptionSnapshot(
        exception_name=type(f.error).__name__, message=str(f.error),
        stacktrace=f.traceback_text or f"{type(f.error).__name__}: {f.error}", timestamp_ms=timestamp_ms,
        task_name=f.task_name_with_subtasks, operator_name=f.operator_name,
        taskmanager_id=location(task)[0] if task is not None else "") for f, timestamp_ms, task in entries]
    start_ms = wall(start_ns)
    timestamps = {"INITIALIZING": start_ms, "CREATED": start_ms, "RUNNING": start_ms}
    if end_ns is not None:
        timestamps[state] = wall(end_ns)
    return JobSnapshot(
        job_id=jm.job_id, name=jm.job_name, state=state, start_time_ms=start_ms,
        end_time_ms=wall(end_ns) if end_ns is not None else -1, now_ms=now_wall_ms,
        max_parallelism=max((v.max_parallelism for v in vertices), default=-1),
        plan=jm.job_graph.to_json_plan(), vertices=vertices, exceptions=exceptions, timestamps=timestamps,
    )
