"""Task deployment descriptors: everything a TaskExecutor needs to run one subtask
(Flink's ``TaskDeploymentDescriptor``, ``ResultPartitionDeploymentDescriptor``,
``InputGateDeploymentDescriptor``). Plain data; the JobVertex inside carries the chained
operators' StreamConfigs (operator factories pickle with cloudpickle for shipping)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

__all__ = [
    "ResultPartitionDeploymentDescriptor",
    "InputGateDeploymentDescriptor",
    "TaskDeploymentDescriptor",
]


@dataclass(frozen=True)
class ResultPartitionDeploymentDescriptor:
    """One produced partition.

    :param partition_id: a ``ResultPartitionID`` (partition + producer attempt).
    :param num_subpartitions: one per consumer subtask connected to this partition.
    :param partitioner: a fresh ``StreamPartitioner`` copy for this producer subtask.
    :param target_max_parallelism: key groups of the consumer (for key_by edges).
    :param target_name: name of the consuming vertex, for messages.
    """

    partition_id: Any
    num_subpartitions: int
    partitioner: Any
    target_max_parallelism: int
    target_name: str


@dataclass(frozen=True)
class InputGateDeploymentDescriptor:
    """One consumed input: the (partition id, subpartition index) of every channel, in order.

    :param gate_index: the gate's index among the task's gates.
    :param channels: ``(ResultPartitionID, subpartition index)`` per channel, in channel order.
    :param locations: where each channel's producer serves its partition, parallel to
        ``channels``: ``None`` for a producer in this process (a ``LocalInputChannel``), or the
        ``(host, port)`` of the producer TaskExecutor's network server (a
        ``RemoteInputChannel``). ``None`` for the whole list: every channel is local.
    """

    gate_index: int
    channels: List[Tuple[Any, int]]
    locations: Optional[List[Optional[Tuple[str, int]]]] = None


@dataclass
class TaskDeploymentDescriptor:
    job_id: str
    job_name: str
    vertex: Any
    subtask_index: int
    parallelism: int
    attempt_number: int
    attempt_id: str
    task_name: str
    produced_partitions: List[ResultPartitionDeploymentDescriptor]
    input_gates: List[InputGateDeploymentDescriptor]
    job_parameters: Dict[str, str] = field(default_factory=dict)
    buffer_timeout_ms: int = 100
    records_per_buffer: int = 1024
    buffers_per_channel: int = 2
    floating_buffers_per_gate: int = 8
    slot_index: int = 0
    auto_watermark_interval_ms: int = 200

    @property
    def task_name_with_subtasks(self) -> str:
        return f"{self.task_name} ({self.subtask_index + 1}/{self.parallelism})"
