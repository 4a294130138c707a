"""The graph layers of a job: Transformations → StreamGraph → JobGraph → ExecutionGraph.

Follows Flink's ``flink-streaming-java`` ``api/graph`` and ``flink-runtime``
``jobgraph``/``executiongraph`` packages:

* :mod:`rill.graph.transformations` — the logical plan the DataStream API builds;
* :mod:`rill.graph.stream_graph_generator` / :mod:`rill.graph.stream_graph` — one node per
  operator, partitioners on the edges, the execution-plan JSON;
* :mod:`rill.graph.hashing` — StreamGraphHasherV2 operator ids (identical to Flink's);
* :mod:`rill.graph.job_graph_generator` / :mod:`rill.graph.job_graph` — chaining, JobVertices,
  data sets; :mod:`rill.graph.stream_config` — per-operator task configuration;
* :mod:`rill.graph.execution_graph` — subtasks, partitions and channels;
  :mod:`rill.graph.states` — execution and job states;
* :mod:`rill.graph.plan` — all layers as text and JSON.
"""

from rill.graph.execution_graph import (
    Execution,
    ExecutionEdge,
    ExecutionGraph,
    ExecutionJobVertex,
    ExecutionVertex,
    ExecutionVertexID,
    IntermediateResult,
    IntermediateResultPartition,
    JobException,
)
from rill.graph.hashing import StreamGraphHasherV2, StreamGraphUserHashHasher
from rill.graph.job_graph import (
    DistributionPattern,
    IntermediateDataSet,
    IntermediateDataSetID,
    IntermediateResultPartitionID,
    InvalidProgramException,
    JobEdge,
    JobGraph,
    JobID,
    JobVertex,
    JobVertexID,
    OperatorID,
    OperatorIDPair,
    ResultPartitionType,
)
from rill.graph.job_graph_generator import StreamingJobGraphGenerator
from rill.graph.plan import render_plan, render_plan_json
from rill.graph.states import ExecutionState, JobStatus
from rill.graph.stream_config import StreamConfig
from rill.graph.stream_graph import StreamEdge, StreamGraph, StreamNode, is_chainable
from rill.graph.stream_graph_generator import StreamGraphGenerator

__all__ = [
    "DistributionPattern",
    "Execution",
    "ExecutionEdge",
    "ExecutionGraph",
    "ExecutionJobVertex",
    "ExecutionState",
    "ExecutionVertex",
    "ExecutionVertexID",
    "IntermediateDataSet",
    "IntermediateDataSetID",
    "IntermediateResult",
    "IntermediateResultPartition",
    "IntermediateResultPartitionID",
    "InvalidProgramException",
    "JobEdge",
    "JobException",
    "JobGraph",
    "JobID",
    "JobStatus",
    "JobVertex",
    "JobVertexID",
    "OperatorID",
    "OperatorIDPair",
    "ResultPartitionType",
    "StreamConfig",
    "StreamEdge",
    "StreamGraph",
    "StreamGraphGenerator",
    "StreamGraphHasherV2",
    "StreamGraphUserHashHasher",
    "StreamNode",
    "StreamingJobGraphGenerator",
    "is_chainable",
    "render_plan",
    "render_plan_json",
]
