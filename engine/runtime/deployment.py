"""Task deployment descriptors: everything a TaskExecutor needs to run one subtask
(Flink's ``TaskDeploymentDescriptor``, ``ResultPartitionDeploymentDescriptor``,
``InputGateDeploymentDescriptor``, ``JobInformation``, ``TaskInformation``). Plain data.

In the embedded mode a descriptor's ``vertex`` is the JobVertex itself (nothing is copied).
A cluster task gets a :class:`TaskInformation` there instead: the chained operators'
StreamConfigs and the chain's edges, with no reference to the JobGraph -- a JobVertex reaches
every other vertex through its ``inputs`` and ``produced_data_sets``, so pickling one pickles
the whole job, a source's collection included. As in Flink, the parts every subtask of a job
(:class:`JobInformation`) or of a vertex (:class:`TaskInformation`) shares are serialized once
and shipped next to the small per-subtask rest (:func:`subtask_descriptor`); the task puts them
together again with :func:`assemble_descriptor`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from rill.common.network_options import NetworkOptions
from rill.runtime.taskmanager.channel_timeline import ChannelTimelineSettings

__all__ = [
    "ResultPartitionDeploymentDescriptor",
    "InputGateDeploymentDescriptor",
    "TaskDeploymentDescriptor",
    "JobInformation",
    "TaskInformation",
    "subtask_descriptor",
    "assemble_descriptor",
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
    """One subtask's deployment (Flink's ``TaskDeploymentDescriptor``).

    :param vertex: what the task reads of its vertex (``invokable_class_name``,
        ``head_node_id``, ``stream_configs``, ``transitive_out_edges``, ``in_edges``): the
        JobVertex in the embedded mode, a :class:`TaskInformation` on the cluster, ``None`` in
        the per-subtask part shipped to a cluster task (:func:`subtask_descriptor`).
    :param buffer_timeout_ms: output flush interval of this vertex (ms; 0: after every record,
        -1: when full): its operator's own setting, else the job's
        ``network_options.buffer_timeout_ms``.
    :param network_options: the job's ``NetworkOptions`` (buffers per channel and gate, records
        per buffer), one frozen object shared by every descriptor of the job.
    :param slot_index: the slot (of the TaskExecutor the JobMaster deploys to) it runs in.
    :param auto_watermark_interval_ms: periodic watermark interval (ms; 0: none).
    :param source_batch_size: records a source emits per mailbox action
        (``rill.source.batch-size``).
    :param channel_timeline: record the task's channel timeline (``rill.network.timeline.*``),
        or ``None``.
    :param checkpointing_enabled: whether the job takes checkpoints (what operators see as
        ``StreamOperatorContext.checkpointing_enabled``).
    :param unaligned_checkpoints: whether its checkpoints may be unaligned (FLIP-76): the task
        then waits for output buffers in its mailbox, where a trigger runs at once.
    :param final_checkpoint: whether the task, once its input ended and its operators finished,
        waits for a checkpoint to complete before it ends (FLIP-147: checkpointing on and
        ``execution.checkpointing.checkpoints-after-tasks-finish``).
    :param task_restore: the state to restore the subtask's operators from (a
        ``rill.runtime.checkpoint.job_manager_task_restore.JobManagerTaskRestore``: the
        checkpoint id and per generated operator id a handle the task reads), or ``None`` to
        start empty (Flink's ``JobManagerTaskRestore`` in the descriptor).
    :param state_backend_settings: the job's ``state.backend.*`` keys (which keyed state backend
        the task builds, see ``rill.runtime.tasks.state_backend_loader``).

    The other fields name the job, the subtask and its attempt, and list its produced
    partitions and consumed gates.
    """

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
    network_options: NetworkOptions = NetworkOptions()
    slot_index: int = 0
    auto_watermark_interval_ms: int = 200
    source_batch_size: int = 1024
    channel_timeline: Optional[ChannelTimelineSettings] = None
    task_restore: Any = None
    checkpointing_enabled: bool = False
    unaligned_checkpoints: bool = False
    final_checkpoint: bool = False
    state_backend_settings: Dict[str, str] = field(default_factory=dict)

    @property
    def task_name_with_subtasks(self) -> str:
        return f"{self.task_name} ({self.subtask_index + 1}/{self.parallelism})"


@dataclass(frozen=True)
class JobInformation:
    """What every task of a job shares (Flink's ``JobInformation``): serialized once per job
    by the cluster's JobMaster.

    :param job_id: the job's id (hex).
    :param job_name: the job's name.
    :param job_configuration: the program's merged ``Configuration`` (the keys the client set:
        its config file, ``RILL_*`` variables and the program's own). A cluster task merges it
        over its own process's configuration, so per-job settings win (network memory, segment
        size).
    :param job_parameters: the job's global parameters (``str`` → ``str``).
    :param working_directory: the submitting client's working directory (absolute), or None;
        a cluster task process resolves relative paths against it (Rill's addition, see
        ``rill.runtime.cluster.shipping.enter_working_directory``).
    """

    job_id: str
    job_name: str
    job_configuration: Any
    job_parameters: Dict[str, str] = field(default_factory=dict)
    working_directory: Optional[str] = None


@dataclass
class TaskInformation:
    """What every subtask of one vertex shares (Flink's ``TaskInformation``: vertex id, name,
    number of subtasks, max parallelism, invokable class and task configuration), detached
    from the JobGraph: serialized once per vertex, it holds this vertex's operators and edges
    and nothing of the other vertices. It answers what a task reads of a JobVertex under the
    same names, so it stands in for one in :attr:`TaskDeploymentDescriptor.vertex`.

    :param vertex_id: the ``JobVertexID``.
    :param task_name: the chained name, e.g. ``"Reduce -> Sink: Print to Std. Out"``.
    :param parallelism: number of subtasks.
    :param max_parallelism: number of key groups (the vertex's effective max parallelism).
    :param invokable_class_name: ``"SourceOperatorStreamTask"``, ``"OneInputStreamTask"`` or
        ``"TwoInputStreamTask"``.
    :param head_node_id: StreamNode id of the chain's head operator.
    :param stream_configs: StreamNode id → ``StreamConfig``, one per chained operator (the
        task configuration: operator factories, chained and network outputs, key selectors).
    :param transitive_out_edges: the StreamEdges leaving the chain; the i-th writes the i-th
        produced partition. The same objects as the StreamConfigs' ``non_chained_outputs``
        (the OperatorChain pairs them by identity), so the two are always pickled together.
    :param in_edges: the physical StreamEdges entering the chain; the i-th arrives through
        input gate i.
    """

    vertex_id: Any
    task_name: str
    parallelism: int
    max_parallelism: int
    invokable_class_name: str
    head_node_id: int
    stream_configs: Dict[int, Any]
    transitive_out_edges: List[Any]
    in_edges: List[Any]

    @classmethod
    def from_job_vertex(cls, vertex) -> "TaskInformation":
        """The task information of a JobVertex (its objects, not copies: pickle it to detach)."""
        return cls(
            vertex_id=vertex.get_id(),
            task_name=vertex.get_name(),
            parallelism=vertex.get_parallelism(),
            max_parallelism=vertex.get_effective_max_parallelism(),
            invokable_class_name=vertex.invokable_class_name,
            head_node_id=vertex.head_node_id,
            stream_configs=dict(vertex.stream_configs),
            transitive_out_edges=list(vertex.transitive_out_edges),
            in_edges=list(vertex.in_edges),
        )

    def get_id(self):
        """The ``JobVertexID`` (as ``JobVertex.get_id``)."""
        return self.vertex_id

    def get_name(self) -> str:
        """The chained name (as ``JobVertex.get_name``)."""
        return self.task_name

    def get_parallelism(self) -> int:
        """Number of subtasks (as ``JobVertex.get_parallelism``)."""
        return self.parallelism


def subtask_descriptor(tdd: TaskDeploymentDescriptor) -> TaskDeploymentDescriptor:
    """The per-subtask part of ``tdd`` (Flink ships it next to the serialized job and task
    information): ``vertex`` and ``job_parameters`` cleared, the rest (subtask index, attempt,
    partitions, gates with their locations, buffer settings) kept."""
    return dataclasses.replace(tdd, vertex=None, job_parameters={})


def assemble_descriptor(subtask: TaskDeploymentDescriptor, task_information: TaskInformation,
                        job_information: JobInformation) -> TaskDeploymentDescriptor:
    """The whole descriptor again, in the task's process, from :func:`subtask_descriptor`'s
    part and the shared ones.

    :raises ValueError: if the parts belong to different jobs or vertices' tasks.
    """
    if subtask.job_id != job_information.job_id:
        raise ValueError(f"Descriptor of job {subtask.job_id} with the job information of {job_information.job_id}")
    if subtask.task_name != task_information.task_name:
        raise ValueError(f"Descriptor of task '{subtask.task_name}' with the task information of "
                         f"'{task_information.task_name}'")
    return dataclasses.replace(subtask, vertex=task_information, job_parameters=dict(job_information.job_parameters))
