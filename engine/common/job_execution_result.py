"""Results and status of a job (PyFlink's ``JobExecutionResult``, ``JobStatus``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

__all__ = ["JobExecutionResult", "VertexSummary"]


@dataclass(frozen=True)
class VertexSummary:
    """Per-vertex figures of a finished job: records in/out summed over subtasks; the longest
    subtask's duration (ms); busy, idle, back-pressured and CPU time (ms) averaged over the
    subtasks (see :mod:`rill.runtime.metrics` for what they mean under the GIL)."""

    vertex_id: str
    name: str
    parallelism: int
    records_in: int
    records_out: int
    duration_ms: float
    busy_time_ms: float
    idle_time_ms: float
    back_pressured_time_ms: float
    cpu_time_ms: float = 0.0


@dataclass(frozen=True)
class JobExecutionResult:
    """What ``env.execute()`` returns.

    :param job_id: 32 hex characters.
    :param net_runtime_ms: time from the first task's start to the last task's end (Flink's
        net runtime), in ms.
    """

    job_id: str
    job_name: str
    net_runtime_ms: int
    accumulators: Dict[str, Any] = field(default_factory=dict)
    vertices: List[VertexSummary] = field(default_factory=list)

    def get_job_id(self) -> str:
        return self.job_id

    def get_job_name(self) -> str:
        return self.job_name

    def get_net_runtime(self) -> int:
        """Net runtime in ms."""
        return self.net_runtime_ms

    def get_accumulator_result(self, name: str) -> Optional[Any]:
        return self.accumulators.get(name)

    def get_all_accumulator_results(self) -> Dict[str, Any]:
        return dict(self.accumulators)

    def is_job_execution_result(self) -> bool:
        return True
