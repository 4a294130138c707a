"""The ExecutionGraph: the JobGraph expanded to subtasks, partitions and channels.

Follows Flink's ``org.apache.flink.runtime.executiongraph``: ``DefaultExecutionGraph``
(``attachJobGraph``), ``ExecutionJobVertex``, ``ExecutionVertex``, ``Execution``,
``IntermediateResult``, ``IntermediateResultPartition`` and ``EdgeManagerBuildUtil``
(how producer partitions connect to consumer subtasks).

Connection patterns (``EdgeManagerBuildUtil``), for ``P`` producer and ``C`` consumer
subtasks:

* ALL_TO_ALL: every partition feeds every consumer; consumer ``c`` reads subpartition ``c``
  of each partition, and a partition has ``C`` subpartitions;
* POINTWISE, ``P == C``: partition ``i`` → consumer ``i`` (one subpartition);
* POINTWISE, ``P < C``: partition ``p`` feeds consumers
  ``[(p*C + P - 1) // P, ((p+1)*C + P - 1) // P)``, one subpartition each, in order;
* POINTWISE, ``P > C``: consumer ``c`` reads partitions ``[c*P // C, (c+1)*P // C)``,
  subpartition 0 of each.

For each input of a subtask, :attr:`ExecutionVertex.consumed` lists ``(partition,
subpartition index)`` pairs: the channels of that input gate, in channel order.

Rill differences: Flink 1.13+ replaced ``ExecutionEdge`` by partition/vertex groups; Rill
keeps one :class:`ExecutionEdge` per channel because the network layer wires channels one
by one. Attempt ids are random 16-byte ids (Flink composes them from graph, vertex and
attempt number).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from rill.graph.job_graph import (
    DistributionPattern,
    IntermediateDataSet,
    IntermediateDataSetID,
    IntermediateResultPartitionID,
    JobGraph,
    JobVertex,
    JobVertexID,
    ResultPartitionType,
)
from rill.graph.states import ExecutionState, JobStatus

__all__ = [
    "JobException",
    "ExecutionGraph",
    "ExecutionJobVertex",
    "ExecutionVertex",
    "ExecutionVertexID",
    "Execution",
    "ExecutionEdge",
    "IntermediateResult",
    "IntermediateResultPartition",
    "ExecutionState",
    "JobStatus",
]


class JobException(Exception):
    """The job graph cannot be turned into an execution graph (Flink's ``JobException``)."""


@dataclass(frozen=True)
class ExecutionVertexID:
    """Flink's ``ExecutionVertexID``: job vertex id + subtask index; str ``"<id>_<index>"``."""

    job_vertex_id: JobVertexID
    subtask_index: int

    def __str__(self) -> str:
        return f"{self.job_vertex_id}_{self.subtask_index}"


class Execution:
    """One execution attempt of a subtask (Flink's ``Execution``).

    :param vertex: the subtask.
    :param attempt_number: 0 for the first attempt.
    """

    def __init__(self, vertex: "ExecutionVertex", attempt_number: int = 0):
        self.vertex = vertex
        self.attempt_id = os.urandom(16).hex()
        self.attempt_number = attempt_number
        self.state = ExecutionState.CREATED
        self.state_timestamps_ms: Dict[ExecutionState, int] = {ExecutionState.CREATED: _now_ms()}
        self.failure_cause: Optional[BaseException] = None

    def transition_state(self, target: ExecutionState, cause: Optional[BaseException] = None) -> bool:
        """Move to ``target`` unless the attempt is already terminal (as Flink, a finished,
        canceled or failed attempt never changes again).

        :returns: whether the state changed.
        """
        if self.state.is_terminal():
            return False
        self.state = target
        self.state_timestamps_ms[target] = _now_ms()
        if cause is not None:
            self.failure_cause = cause
        return True

    def __repr__(self) -> str:
        return (f"Execution({self.vertex.get_task_name_with_subtask_index()}, "
                f"attempt={self.attempt_number}, {self.state.value})")


def _now_ms() -> int:
    return int(time.time() * 1000)


class IntermediateResult:
    """The runtime form of an IntermediateDataSet: one partition per producer subtask.

    :param data_set: the JobGraph data set.
    :param producer: the producing ExecutionJobVertex.
    """

    def __init__(self, data_set: IntermediateDataSet, producer: "ExecutionJobVertex"):
        self.id: IntermediateDataSetID = data_set.id
        self.data_set = data_set
        self.producer = producer
        self.result_type: ResultPartitionType = data_set.result_type
        self.partitions: List[IntermediateResultPartition] = []

    def get_id(self) -> IntermediateDataSetID:
        return self.id

    def get_partitions(self) -> List["IntermediateResultPartition"]:
        return self.partitions

    def get_number_of_assigned_partitions(self) -> int:
        return len(self.partitions)

    def __repr__(self) -> str:
        return f"IntermediateResult({self.id}, producer={self.producer.name!r}, {len(self.partitions)} partitions)"


class IntermediateResultPartition:
    """One producer subtask's share of a result (Flink's ``IntermediateResultPartition``); at
    runtime a ResultPartition with ``number_of_subpartitions`` subpartitions.

    :param result: the result it belongs to.
    :param producer: the producing subtask.
    :param partition_number: the producer's subtask index.
    """

    def __init__(self, result: IntermediateResult, producer: "ExecutionVertex", partition_number: int):
        self.intermediate_result = result
        self.producer = producer
        self.partition_number = partition_number
        self.partition_id = IntermediateResultPartitionID(result.id, partition_number)
        #: consumer subtasks in subpartition order (subpartition i feeds consumers[i])
        self.consumers: List["ExecutionVertex"] = []

    @property
    def number_of_subpartitions(self) -> int:
        return len(self.consumers)

    def get_number_of_subpartitions(self) -> int:
        return self.number_of_subpartitions

    def get_producer(self) -> "ExecutionVertex":
        return self.producer

    def get_partition_id(self) -> IntermediateResultPartitionID:
        return self.partition_id

    def get_result_type(self) -> ResultPartitionType:
        return self.intermediate_result.result_type

    def __repr__(self) -> str:
        return f"IntermediateResultPartition({self.partition_id}, subpartitions={self.number_of_subpartitions})"


@dataclass(frozen=True, eq=False)
class ExecutionEdge:
    """One channel: subpartition ``subpartition_index`` of ``source`` read by input
    ``input_number`` of ``target``."""

    source: IntermediateResultPartition
    target: "ExecutionVertex"
    input_number: int
    subpartition_index: int


class ExecutionVertex:
    """One subtask of a JobVertex (Flink's ``ExecutionVertex``).

    :param job_vertex: the owning ExecutionJobVertex.
    :param subtask_index: 0-based.
    """

    def __init__(self, job_vertex: "ExecutionJobVertex", subtask_index: int):
        self.job_vertex = job_vertex
        self.subtask_index = subtask_index
        self.id = ExecutionVertexID(job_vertex.job_vertex.id, subtask_index)
        #: produced partitions, one per produced result, in result order
        self.produced_partitions: Dict[IntermediateResultPartitionID, IntermediateResultPartition] = {}
        #: per input (JobEdge order): [(partition, subpartition index)] = the gate's channels
        self.consumed: List[List[Tuple[IntermediateResultPartition, int]]] = [
            [] for _ in job_vertex.job_vertex.inputs
        ]
        #: per input: the ExecutionEdges, parallel to ``consumed``
        self.input_edges: List[List[ExecutionEdge]] = [[] for _ in job_vertex.job_vertex.inputs]
        self.current_execution = Execution(self, 0)

    def get_id(self) -> ExecutionVertexID:
        return self.id

    def get_parallel_subtask_index(self) -> int:
        return self.subtask_index

    def get_task_name(self) -> str:
        return self.job_vertex.name

    def get_task_name_with_subtask_index(self) -> str:
        """``"Name (i+1/p)"`` as in Flink's task names and logs."""
        return f"{self.job_vertex.name} ({self.subtask_index + 1}/{self.job_vertex.parallelism})"

    def get_execution_state(self) -> ExecutionState:
        return self.current_execution.state

    def get_current_execution(self) -> Execution:
        return self.current_execution

    def reset_for_new_execution(self) -> Execution:
        """Replace the current execution, which must be terminal, by a new attempt (attempt
        number + 1, new attempt id) in CREATED (Flink's ``resetForNewExecution``).

        :raises RuntimeError: if the current execution is not terminal.
        """
        old = self.current_execution
        if not old.state.is_terminal():
            raise RuntimeError(f"{self.get_task_name_with_subtask_index()}: cannot start a new attempt while "
                               f"attempt {old.attempt_number} is {old.state.value}")
        self.current_execution = Execution(self, old.attempt_number + 1)
        return self.current_execution

    def get_produced_partition(self, data_set_id: IntermediateDataSetID) -> IntermediateResultPartition:
        """This subtask's partition of the result ``data_set_id``.

        :raises KeyError: naming the id when this vertex does not produce it."""
        try:
            return self.produced_partitions[IntermediateResultPartitionID(data_set_id, self.subtask_index)]
        except KeyError:
            raise KeyError(f"{self.get_task_name_with_subtask_index()} produces no result {data_set_id}") from None

    def get_consumed_partitions(self, input_number: int) -> List[Tuple[IntermediateResultPartition, int]]:
        """The channels of input gate ``input_number``: ``(partition, subpartition index)``."""
        return self.consumed[input_number]

    def _add_channel(self, input_number: int, partition: IntermediateResultPartition, subpartition: int) -> None:
        self.consumed[input_number].append((partition, subpartition))
        self.input_edges[input_number].append(ExecutionEdge(partition, self, input_number, subpartition))

    def __repr__(self) -> str:
        return f"ExecutionVertex({self.get_task_name_with_subtask_index()})"


class ExecutionJobVertex:
    """A JobVertex with its subtasks and produced results (Flink's ``ExecutionJobVertex``).

    :raises JobException: when the parallelism exceeds the effective max parallelism.
    """

    def __init__(self, graph: "ExecutionGraph", job_vertex: JobVertex):
        self.graph = graph
        self.job_vertex = job_vertex
        self.name = job_vertex.name
        self.parallelism = job_vertex.parallelism
        if self.parallelism < 1:
            raise JobException(f"Vertex {job_vertex.name} has no valid parallelism ({self.parallelism}).")
        self.max_parallelism = (job_vertex.effective_max_parallelism
                                if job_vertex.effective_max_parallelism > 0 else job_vertex.max_parallelism)
        if 0 < self.max_parallelism < self.parallelism:
            raise JobException(
                f"Vertex {job_vertex.name}'s parallelism ({self.parallelism}) is higher than the max "
                f"parallelism ({self.max_parallelism}). Please lower the parallelism or increase the "
                "max parallelism."
            )
        self.produced_data_sets: List[IntermediateResult] = [
            IntermediateResult(ds, self) for ds in job_vertex.produced_data_sets
        ]
        self.inputs: List[IntermediateResult] = []
        self.task_vertices: List[ExecutionVertex] = []
        for i in range(self.parallelism):
            ev = ExecutionVertex(self, i)
            for result in self.produced_data_sets:
                p = IntermediateResultPartition(result, ev, i)
                result.partitions.append(p)
                ev.produced_partitions[p.partition_id] = p
            self.task_vertices.append(ev)

    def get_job_vertex_id(self) -> JobVertexID:
        return self.job_vertex.id

    def get_produced_data_sets(self) -> List[IntermediateResult]:
        return self.produced_data_sets

    def get_task_vertices(self) -> List[ExecutionVertex]:
        return self.task_vertices

    def connect_to_predecessors(self, results: Dict[IntermediateDataSetID, IntermediateResult]) -> None:
        """Wire every input (Flink's ``connectToPredecessors`` + ``EdgeManagerBuildUtil``).

        :raises JobException: when an input's producer was not attached before.
        """
        for input_number, edge in enumerate(self.job_vertex.inputs):
            result = results.get(edge.source.id)
            if result is None:
                raise JobException(
                    "Cannot connect this job graph to the previous graph. No previous intermediate "
                    f"result found for ID {edge.source.id} (input {input_number} of '{self.name}', "
                    f"produced by '{edge.source.producer.name}')."
                )
            self.inputs.append(result)
            if edge.distribution_pattern is DistributionPattern.ALL_TO_ALL:
                _connect_all_to_all(self.task_vertices, result, input_number)
            else:
                _connect_pointwise(self.task_vertices, result, input_number)

    def __repr__(self) -> str:
        return f"ExecutionJobVertex({self.name!r}, parallelism={self.parallelism})"


def _connect_all_to_all(consumers: Sequence[ExecutionVertex], result: IntermediateResult, input_number: int) -> None:
    for partition in result.partitions:
        partition.consumers.extend(consumers)
    for c, consumer in enumerate(consumers):
        for partition in result.partitions:
            consumer._add_channel(input_number, partition, c)


def _connect_pointwise(consumers: Sequence[ExecutionVertex], result: IntermediateResult, input_number: int) -> None:
    partitions = result.partitions
    source_count, target_count = len(partitions), len(consumers)
    if source_count == target_count:
        for partition, consumer in zip(partitions, consumers):
            partition.consumers.append(consumer)
            consumer._add_channel(input_number, partition, 0)
    elif source_count > target_count:
        for index, consumer in enumerate(consumers):
            start = index * source_count // target_count
            end = (index + 1) * source_count // target_count
            for i in range(start, end):
                partitions[i].consumers.append(consumer)
                consumer._add_channel(input_number, partitions[i], 0)
    else:
        for num, partition in enumerate(partitions):
            start = (num * target_count + source_count - 1) // source_count
            end = ((num + 1) * target_count + source_count - 1) // source_count
            for sub, i in enumerate(range(start, end)):
                partition.consumers.append(consumers[i])
                consumers[i]._add_channel(input_number, partition, sub)


class ExecutionGraph:
    """The execution graph of one job (Flink's ``DefaultExecutionGraph``).

    :param job_graph: the job graph to expand.
    :param attach: attach all of ``job_graph`` at once (in topological order); with
        ``False`` call :meth:`attach_job_graph` yourself.
    :raises InvalidProgramException: / :raises JobException: see :meth:`attach_job_graph`.
    """

    def __init__(self, job_graph: JobGraph, attach: bool = True):
        self.job_graph = job_graph
        self.job_id = job_graph.job_id
        self.job_name = job_graph.job_name
        self.state = JobStatus.CREATED
        self.tasks: Dict[JobVertexID, ExecutionJobVertex] = {}
        self.vertices_in_creation_order: List[ExecutionJobVertex] = []
        self.intermediate_results: Dict[IntermediateDataSetID, IntermediateResult] = {}
        if attach:
            self.attach_job_graph()

    @classmethod
    def build(cls, job_graph: JobGraph) -> "ExecutionGraph":
        """A graph with all of ``job_graph`` attached (same as ``ExecutionGraph(job_graph)``)."""
        return cls(job_graph)

    def attach_job_graph(self, topologically_sorted: Optional[Sequence[JobVertex]] = None) -> None:
        """Create an ExecutionJobVertex per JobVertex and connect each to its producers
        (Flink's ``attachJobGraph``).

        :param topologically_sorted: vertices with every producer before its consumers;
            default: ``job_graph.get_vertices_sorted_topologically_from_sources()``.
        :raises InvalidProgramException: when the job graph has a cycle (default order).
        :raises JobException: on a vertex attached twice, an input whose producer was not
            attached before ("Cannot connect this job graph to the previous graph. …"), or a
            parallelism above the max parallelism.
        """
        if topologically_sorted is None:
            topologically_sorted = self.job_graph.get_vertices_sorted_topologically_from_sources()
        for jv in topologically_sorted:
            if jv.id in self.tasks:
                raise JobException(
                    f"Encountered two job vertices with ID {jv.id} : previous=[{self.tasks[jv.id].name}] / "
                    f"new=[{jv.name}]"
                )
            ejv = ExecutionJobVertex(self, jv)
            ejv.connect_to_predecessors(self.intermediate_results)
            self.tasks[jv.id] = ejv
            self.vertices_in_creation_order.append(ejv)
            for result in ejv.produced_data_sets:
                if result.id in self.intermediate_results:
                    raise JobException(
                        f"Duplicate intermediate result id {result.id} produced by '{jv.name}'"
                    )
                self.intermediate_results[result.id] = result

    def get_job_vertex(self, vertex_id: JobVertexID) -> Optional[ExecutionJobVertex]:
        return self.tasks.get(vertex_id)

    def get_vertices_topologically(self) -> List[ExecutionJobVertex]:
        return list(self.vertices_in_creation_order)

    def get_all_execution_vertices(self) -> List[ExecutionVertex]:
        return [ev for ejv in self.vertices_in_creation_order for ev in ejv.task_vertices]

    def get_all_intermediate_results(self) -> Dict[IntermediateDataSetID, IntermediateResult]:
        return dict(self.intermediate_results)

    def get_total_number_of_vertices(self) -> int:
        return sum(len(ejv.task_vertices) for ejv in self.vertices_in_creation_order)

    def __repr__(self) -> str:
        return f"ExecutionGraph({self.job_name!r}, {len(self.tasks)} job vertices, {self.state.value})"
