"""The StreamGraph: one StreamNode per physical operator, StreamEdges with their partitioners.

Follows Flink's ``org.apache.flink.streaming.api.graph``: ``StreamGraph``, ``StreamNode``,
``StreamEdge``, ``JSONGenerator`` (the execution-plan JSON) and the chaining rule
``StreamingJobGraphGenerator.isChainable`` (:func:`is_chainable`, used both by the hasher and
by the job graph generator, as in Flink).

Virtual nodes: partitioning (``shuffle``, ``rebalance``, ``key_by``…) and side-output
selection do not become StreamNodes. The generator registers them as *virtual nodes* whose ids
come from their own counter (negative numbers, so they can never clash with a StreamNode id);
:meth:`StreamGraph.add_edge` resolves them to the real upstream node and puts their
partitioner / output tag on the edge, as Flink's ``addEdgeInternal`` does.

Plan objects only: a StreamNode holds an operator *factory*, never a running operator.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Set, Tuple

from rill.common.execution_options import RuntimeExecutionMode
from rill.graph.transformations import ExchangeMode
from rill.operators.base import ChainingStrategy
from rill.state.key_groups import compute_default_max_parallelism

if TYPE_CHECKING:  # pragma: no cover
    from rill.graph.job_graph import JobGraph

__all__ = [
    "DEFAULT_SLOT_SHARING_GROUP",
    "StreamNode",
    "StreamEdge",
    "StreamGraph",
    "is_chainable",
    "is_chainable_input",
    "are_operators_chainable",
    "is_forward_partitioner",
]

#: Flink's ``StreamGraphGenerator.DEFAULT_SLOT_SHARING_GROUP``.
DEFAULT_SLOT_SHARING_GROUP = "default"

SOURCE_TASK = "SourceOperatorStreamTask"
ONE_INPUT_TASK = "OneInputStreamTask"
TWO_INPUT_TASK = "TwoInputStreamTask"


def _partitioner_module():
    # Imported lazily: rill.network.partitioner is a sibling package that must not be needed
    # merely to import the graph layer.
    from rill.network import partitioner

    return partitioner


def is_forward_partitioner(partitioner: Any) -> bool:
    """Flink's ``partitioner instanceof ForwardPartitioner``."""
    return isinstance(partitioner, _partitioner_module().ForwardPartitioner)


# ------------------------------------------------------------------------------ nodes


@dataclass(eq=False)
class StreamNode:
    """One physical operator of the StreamGraph (Flink's ``StreamNode``).

    :param id: the Transformation id.
    :param operator_name: ``"Source: " + name`` for sources, ``"Sink: " + name`` for sinks,
        the transformation's name otherwise.
    :param operator_factory: a ``SimpleOperatorFactory`` (``.chaining_strategy``,
        ``.operator_class``), or ``None``.
    :param parallelism: resolved parallelism (>= 1).
    :param max_parallelism: configured max parallelism; -1 = unset (see
        :meth:`get_effective_max_parallelism`).
    :param in_edges: / out_edges: StreamEdges in insertion order (out-edge order drives hash
        traversal and chaining, exactly as in Flink).
    :param state_key_selector: key selector of the (first) input of a keyed operator;
        ``state_key_selector2`` for the second input of a two-input operator;
        ``state_key_type`` the key's type information.
    :param job_vertex_class: name of the StreamTask class that runs a chain headed here.
    """

    id: int
    operator_name: str
    operator_factory: Any
    parallelism: int
    max_parallelism: int = -1
    slot_sharing_group: Optional[str] = DEFAULT_SLOT_SHARING_GROUP
    co_location_group: Optional[str] = None
    in_edges: List["StreamEdge"] = field(default_factory=list)
    out_edges: List["StreamEdge"] = field(default_factory=list)
    transformation_uid: Optional[str] = None
    user_hash: Optional[str] = None
    state_key_selector: Optional[Callable[[Any], Any]] = None
    state_key_selector2: Optional[Callable[[Any], Any]] = None
    state_key_type: Any = None
    buffer_timeout_ms: int = 100
    output_type: Any = None
    is_source: bool = False
    is_sink: bool = False
    source: Any = None
    watermark_alignment: Any = None  # WatermarkAlignmentParams of an aligned source
    operator_description: Optional[str] = None
    job_vertex_class: str = ONE_INPUT_TASK

    def __post_init__(self) -> None:
        if self.operator_description is None:
            self.operator_description = self.operator_name

    def add_in_edge(self, edge: "StreamEdge") -> None:
        """:raises ValueError: when the edge does not end here."""
        if edge.target_id != self.id:
            raise ValueError(f"Edge {edge} does not end at node {self}")
        self.in_edges.append(edge)

    def add_out_edge(self, edge: "StreamEdge") -> None:
        """:raises ValueError: when the edge does not start here."""
        if edge.source_id != self.id:
            raise ValueError(f"Edge {edge} does not start at node {self}")
        self.out_edges.append(edge)

    def get_chaining_strategy(self) -> Optional[ChainingStrategy]:
        return None if self.operator_factory is None else self.operator_factory.chaining_strategy

    def is_same_slot_sharing_group(self, other: "StreamNode") -> bool:
        return self.slot_sharing_group == other.slot_sharing_group

    def get_effective_max_parallelism(self) -> int:
        """The number of key groups: the node's max parallelism if set (the environment's
        default is already folded in at generation, as Flink does), else
        ``compute_default_max_parallelism(parallelism)``."""
        if self.max_parallelism > 0:
            return self.max_parallelism
        return compute_default_max_parallelism(self.parallelism)

    def __str__(self) -> str:
        # Flink's StreamNode.toString(): operatorName + "-" + id
        return f"{self.operator_name}-{self.id}"

    def __repr__(self) -> str:
        return f"StreamNode({self.operator_name!r}, id={self.id}, parallelism={self.parallelism})"


@dataclass(eq=False)
class StreamEdge:
    """An edge of the StreamGraph (Flink's ``StreamEdge``).

    :param type_number: 0 for one-input operators, 1/2 for the inputs of a two-input one.
    :param partitioner: a ``rill.network.partitioner`` StreamPartitioner.
    :param output_tag: the side-output tag read through this edge, or ``None``.
    :param exchange_mode: an :class:`~rill.graph.transformations.ExchangeMode` value.
    :param unique_id: distinguishes parallel edges between the same two nodes (self-union).
    :param buffer_timeout_ms: the upstream node's buffer timeout.

    ``edge_id`` is Flink's ``"<src>_<target>_<typeNumber>_<partitioner>_<uniqueId>"`` where a
    node prints as ``"<operator name>-<id>"``; ``str()`` is Flink's ``toString``.
    """

    source_id: int
    target_id: int
    type_number: int
    partitioner: Any
    output_tag: Any = None
    exchange_mode: str = ExchangeMode.UNDEFINED
    unique_id: int = 0
    buffer_timeout_ms: int = 100
    source_operator_name: str = ""
    target_operator_name: str = ""

    @property
    def edge_id(self) -> str:
        return (
            f"{self.source_operator_name}-{self.source_id}_{self.target_operator_name}-{self.target_id}"
            f"_{self.type_number}_{self.partitioner}_{self.unique_id}"
        )

    def __str__(self) -> str:
        return (
            f"({self.source_operator_name}-{self.source_id} -> {self.target_operator_name}-{self.target_id}"
            f", typeNumber={self.type_number}, outputPartitioner={self.partitioner}"
            f", exchangeMode={self.exchange_mode}, bufferTimeout={self.buffer_timeout_ms}"
            f", outputTag={self.output_tag}, uniqueId={self.unique_id})"
        )

    __repr__ = __str__


# ----------------------------------------------------------------------------- graph


class StreamGraph:
    """The StreamGraph of a job (Flink's ``StreamGraph``).

    :param job_name: the job's name.
    :param chaining_enabled: ``False`` disables all operator chaining.
    """

    def __init__(self, job_name: str = "Rill Streaming Job", chaining_enabled: bool = True):
        self.job_name = job_name
        self.chaining_enabled = chaining_enabled
        #: the mode the job runs in (BATCH or STREAMING, never AUTOMATIC: the generator decides)
        self.runtime_mode = RuntimeExecutionMode.STREAMING
        self.nodes: Dict[int, StreamNode] = {}
        #: slot sharing group name -> ResourceSpec, for groups given resources (Flink's
        #: StreamGraph.slotSharingGroupResources)
        self.slot_sharing_group_resources: Dict[str, Any] = {}
        self.sources: Set[int] = set()
        self.sinks: Set[int] = set()
        #: virtual id -> (original id, partitioner, exchange mode)
        self.virtual_partition_nodes: Dict[int, Tuple[int, Any, str]] = {}
        #: virtual id -> (original id, output tag)
        self.virtual_side_output_nodes: Dict[int, Tuple[int, Any]] = {}

    # -- nodes ---------------------------------------------------------------------------
    def add_node(self, node: StreamNode) -> StreamNode:
        """Add a physical node; registers it as a source/sink per its flags.

        :raises ValueError: on a duplicate id.
        """
        if node.id in self.nodes:
            raise ValueError(f"Duplicate vertexID {node.id} ({node.operator_name})")
        self.nodes[node.id] = node
        if node.is_source:
            self.sources.add(node.id)
        if node.is_sink:
            self.sinks.add(node.id)
        return node

    def add_virtual_partition_node(self, original_id: int, virtual_id: int, partitioner: Any,
                                   exchange_mode: str = ExchangeMode.UNDEFINED) -> None:
        """Flink's ``addVirtualPartitionNode``. :raises ValueError: if ``virtual_id`` is taken."""
        self._check_virtual_id(virtual_id)
        self.virtual_partition_nodes[virtual_id] = (original_id, partitioner, exchange_mode)

    def add_virtual_side_output_node(self, original_id: int, virtual_id: int, output_tag: Any) -> None:
        """Flink's ``addVirtualSideOutputNode``. :raises ValueError: if ``virtual_id`` is taken."""
        self._check_virtual_id(virtual_id)
        self.virtual_side_output_nodes[virtual_id] = (original_id, output_tag)

    def _check_virtual_id(self, virtual_id: int) -> None:
        if (virtual_id in self.nodes or virtual_id in self.virtual_partition_nodes
                or virtual_id in self.virtual_side_output_nodes):
            raise ValueError(f"Already has virtual node with id {virtual_id}")

    def is_virtual(self, node_id: int) -> bool:
        return node_id in self.virtual_partition_nodes or node_id in self.virtual_side_output_nodes

    def get_stream_node(self, node_id: int) -> StreamNode:
        """:raises KeyError: naming the id when there is no such (physical) node."""
        try:
            return self.nodes[node_id]
        except KeyError:
            raise KeyError(f"No StreamNode with id {node_id}") from None

    def get_stream_nodes(self) -> List[StreamNode]:
        """All physical nodes, by id."""
        return [self.nodes[i] for i in sorted(self.nodes)]

    def get_vertex_ids(self) -> List[int]:
        return sorted(self.nodes)

    def get_source_ids(self) -> List[int]:
        return sorted(self.sources)

    def get_sink_ids(self) -> List[int]:
        return sorted(self.sinks)

    def get_source_vertex(self, edge: StreamEdge) -> StreamNode:
        return self.nodes[edge.source_id]

    def get_target_vertex(self, edge: StreamEdge) -> StreamNode:
        return self.nodes[edge.target_id]

    def get_stream_edges(self, source_id: int, target_id: Optional[int] = None) -> List[StreamEdge]:
        """Out edges of ``source_id`` (to ``target_id`` only, when given)."""
        out = self.get_stream_node(source_id).out_edges
        return [e for e in out if target_id is None or e.target_id == target_id]

    def get_slot_sharing_group(self, node_id: int) -> Optional[str]:
        """The slot sharing group of a node, resolving virtual nodes (Flink's
        ``getSlotSharingGroup``)."""
        if node_id in self.virtual_side_output_nodes:
            return self.get_slot_sharing_group(self.virtual_side_output_nodes[node_id][0])
        if node_id in self.virtual_partition_nodes:
            return self.get_slot_sharing_group(self.virtual_partition_nodes[node_id][0])
        return self.get_stream_node(node_id).slot_sharing_group

    def get_effective_max_parallelism(self, node_id: int) -> int:
        """See :meth:`StreamNode.get_effective_max_parallelism`."""
        return self.get_stream_node(node_id).get_effective_max_parallelism()

    # -- edges ---------------------------------------------------------------------------
    def add_edge(self, upstream_id: int, downstream_id: int, type_number: int,
                 partitioner: Any = None, output_tag: Any = None,
                 exchange_mode: Optional[str] = None) -> StreamEdge:
        """Connect two nodes, resolving virtual upstream nodes (Flink's ``addEdgeInternal``).

        No partitioner means FORWARD when both parallelisms are equal, REBALANCE otherwise.

        :raises ValueError: for FORWARD between different parallelisms, in Flink's words
            ("Forward partitioning does not allow change of parallelism. …").
        """
        if upstream_id in self.virtual_side_output_nodes:
            original, tag = self.virtual_side_output_nodes[upstream_id]
            return self.add_edge(original, downstream_id, type_number, partitioner,
                                 output_tag if output_tag is not None else tag, exchange_mode)
        if upstream_id in self.virtual_partition_nodes:
            original, virtual_partitioner, virtual_mode = self.virtual_partition_nodes[upstream_id]
            return self.add_edge(original, downstream_id, type_number,
                                 partitioner if partitioner is not None else virtual_partitioner,
                                 output_tag, virtual_mode)
        return self._create_actual_edge(upstream_id, downstream_id, type_number, partitioner,
                                        output_tag, exchange_mode)

    def _create_actual_edge(self, upstream_id, downstream_id, type_number, partitioner,
                            output_tag, exchange_mode) -> StreamEdge:
        up = self.get_stream_node(upstream_id)
        down = self.get_stream_node(downstream_id)
        pm = _partitioner_module()
        if partitioner is None:
            if up.parallelism == down.parallelism:
                partitioner = pm.ForwardPartitioner()
            else:
                partitioner = pm.RebalancePartitioner()
        elif isinstance(partitioner, pm.ForwardPartitioner) and up.parallelism != down.parallelism:
            raise ValueError(
                "Forward partitioning does not allow change of parallelism. Upstream operation: "
                f"{up} parallelism: {up.parallelism}, downstream operation: {down} parallelism: "
                f"{down.parallelism} You must use another partitioning strategy, such as "
                "broadcast, rebalance, shuffle or global."
            )
        else:
            # the same partitioner object may sit on several edges (union, fan-out);
            # each edge gets its own copy, as each RecordWriter owns its channel selector
            partitioner = partitioner.copy()
        if exchange_mode is None:
            exchange_mode = ExchangeMode.UNDEFINED
        unique_id = len(self.get_stream_edges(upstream_id, downstream_id))
        edge = StreamEdge(
            source_id=up.id,
            target_id=down.id,
            type_number=type_number,
            partitioner=partitioner,
            output_tag=output_tag,
            exchange_mode=exchange_mode,
            unique_id=unique_id,
            buffer_timeout_ms=up.buffer_timeout_ms,
            source_operator_name=up.operator_name,
            target_operator_name=down.operator_name,
        )
        up.add_out_edge(edge)
        down.add_in_edge(edge)
        return edge

    # -- translation ---------------------------------------------------------------------
    def get_job_graph(self, job_id=None) -> "JobGraph":
        """Chain and translate (Flink's ``getJobGraph``); see
        :class:`~rill.graph.job_graph_generator.StreamingJobGraphGenerator`."""
        from rill.graph.job_graph_generator import StreamingJobGraphGenerator

        return StreamingJobGraphGenerator(self, job_id=job_id).create_job_graph()

    def get_stream_graph_as_json(self) -> Dict[str, Any]:
        """Flink's ``JSONGenerator`` execution plan, as a JSON-ready dict (see
        :meth:`get_streaming_plan_as_json` for the string): nodes by id with sinks last;
        each node ``{"id", "type", "pact", "contents", "parallelism"}`` plus
        ``"predecessors": [{"id", "ship_strategy", "side"}]`` for non-sources. ``side`` is
        always ``"second"``: Flink adds the entry before testing for the first one."""
        ids = sorted(self.nodes, key=lambda i: (1 if i in self.sinks else 0, i))
        nodes = []
        for i in ids:
            n = self.nodes[i]
            pact = "Data Source" if i in self.sources else ("Data Sink" if i in self.sinks else "Operator")
            entry: Dict[str, Any] = {
                "id": i,
                "type": n.operator_name,
                "pact": pact,
                "contents": n.operator_description,
                "parallelism": n.parallelism,
            }
            if i not in self.sources:
                entry["predecessors"] = [
                    {"id": e.source_id, "ship_strategy": str(e.partitioner), "side": "second"}
                    for e in n.in_edges
                ]
            nodes.append(entry)
        return {"nodes": nodes}

    def get_streaming_plan_as_json(self) -> str:
        """:meth:`get_stream_graph_as_json` as a pretty JSON string (Flink's
        ``getStreamingPlanAsJSON``)."""
        return json.dumps(self.get_stream_graph_as_json(), indent=2)

    def __repr__(self) -> str:
        return f"StreamGraph({self.job_name!r}, {len(self.nodes)} nodes)"


# -------------------------------------------------------------------------- chaining


def are_operators_chainable(up: StreamNode, down: StreamNode) -> bool:
    """Flink's ``areOperatorsChainable``: both nodes have operators; upstream not ``NEVER``;
    downstream ``ALWAYS``, or ``HEAD_WITH_SOURCES`` directly after a source."""
    up_strategy = up.get_chaining_strategy()
    down_strategy = down.get_chaining_strategy()
    if up_strategy is None or down_strategy is None:
        return False
    chainable = up_strategy is not ChainingStrategy.NEVER
    if down_strategy in (ChainingStrategy.NEVER, ChainingStrategy.HEAD):
        chainable = False
    elif down_strategy is ChainingStrategy.HEAD_WITH_SOURCES:
        chainable = chainable and up.is_source
    return chainable


def is_chainable_input(edge: StreamEdge, graph: StreamGraph) -> bool:
    """Flink's ``isChainableInput``: all conditions of :func:`is_chainable` but the single
    input, plus "no other input edge of the same type number" (no union into a chain)."""
    up = graph.get_source_vertex(edge)
    down = graph.get_target_vertex(edge)
    if not (
        graph.chaining_enabled
        and up.is_same_slot_sharing_group(down)
        and are_operators_chainable(up, down)
        and is_forward_partitioner(edge.partitioner)
        and edge.exchange_mode != ExchangeMode.BATCH
        and up.parallelism == down.parallelism
    ):
        return False
    return all(e is edge or e.type_number != edge.type_number for e in down.in_edges)


def is_chainable(edge: StreamEdge, graph: StreamGraph) -> bool:
    """Whether ``edge``'s target joins its source's chain (Flink's
    ``StreamingJobGraphGenerator.isChainable``): the downstream node has exactly one input
    edge, both are in the same slot sharing group, their chaining strategies allow it
    (:func:`are_operators_chainable`), the partitioner is FORWARD, the exchange is not BATCH,
    the parallelisms are equal and chaining is enabled."""
    return len(graph.get_target_vertex(edge).in_edges) == 1 and is_chainable_input(edge, graph)
