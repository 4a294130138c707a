"""StreamGraph → JobGraph: operator hashing, chaining, JobVertices and their connections.

Follows Flink's ``StreamingJobGraphGenerator`` (``createJobGraph``, ``setChaining``,
``createChain``, ``createChainedName``, ``createJobVertex``, ``connect``):

* every StreamNode gets its StreamGraphHasherV2 hash (:mod:`rill.graph.hashing`) and, when
  the user pinned one with ``set_uid_hash``, a user-defined id;
* for each source, by id, ``create_chain`` walks the out edges depth-first: chainable edges
  (:func:`~rill.graph.stream_graph.is_chainable`) extend the current chain, the others start
  new chains; a node's operator id is added to its chain *after* its chained successors, so a
  JobVertex lists its operator ids in post-order with the head last;
* a chain becomes one JobVertex named after its head's chained name (``"A -> B"``, forks
  ``"A -> (B, C)"``), whose id is the head's hash;
* each edge leaving a chain (the chain's transitive out edges, in order) becomes an
  IntermediateDataSet of the upstream vertex plus a JobEdge into the downstream vertex,
  POINTWISE when the partitioner is pointwise, ALL_TO_ALL otherwise.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

from rill.graph.hashing import StreamGraphHasherV2, StreamGraphUserHashHasher, murmur3_128
from rill.graph.job_graph import (
    DistributionPattern,
    IntermediateDataSetID,
    JobGraph,
    JobID,
    JobVertex,
    JobVertexID,
    OperatorID,
    OperatorIDPair,
    ResultPartitionType,
)
from rill.graph.stream_config import StreamConfig
from rill.graph.stream_graph import StreamEdge, StreamGraph, is_chainable
from rill.graph.transformations import ExchangeMode
from rill.network.partitioner import KeyGroupStreamPartitioner

__all__ = ["StreamingJobGraphGenerator", "is_chainable"]


@dataclass
class _ChainInfo:
    """Flink's ``OperatorChainInfo``: what is known about one chain while it is built."""

    start_node_id: int
    #: (generated hash, user hash or None) per chained operator, in post-order
    operator_hashes: List[Tuple[bytes, Optional[bytes]]] = field(default_factory=list)
    #: node id -> (chain index, chainable outputs, non-chainable outputs), in post-order
    members: Dict[int, Tuple[int, List[StreamEdge], List[StreamEdge]]] = field(default_factory=dict)


class StreamingJobGraphGenerator:
    """Translate a :class:`StreamGraph` into a :class:`JobGraph`.

    :param stream_graph: the graph to translate.
    :param job_id: id of the job; random when omitted.
    """

    def __init__(self, stream_graph: StreamGraph, job_id: Optional[JobID] = None):
        self.stream_graph = stream_graph
        self.job_graph = JobGraph(stream_graph.job_name, job_id)
        self.job_graph.slot_sharing_group_resources = dict(stream_graph.slot_sharing_group_resources)
        # Flink's JobType: the mode the StreamGraph was generated in
        self.job_graph.job_type = stream_graph.runtime_mode.name
        self.hashes: Dict[int, bytes] = {}
        self.user_hashes: Dict[int, Optional[bytes]] = {}
        self.job_vertices: Dict[int, JobVertex] = {}
        self.built_vertices: Set[int] = set()
        self.chained_names: Dict[int, str] = {}
        self.chainable_outputs: Dict[int, List[StreamEdge]] = {}

    def create_job_graph(self) -> JobGraph:
        """Hash, chain and connect.

        :raises ValueError: on a duplicate uid, an invalid user hash, or StreamNodes that no
            source reaches (they could never receive data).
        """
        graph = self.stream_graph
        self.hashes = StreamGraphHasherV2().traverse_stream_graph_and_generate_hashes(graph)
        self.user_hashes = StreamGraphUserHashHasher().traverse_stream_graph_and_generate_hashes(graph)
        unreachable = [n for n in graph.get_stream_nodes() if n.id not in self.hashes]
        if unreachable:
            names = ", ".join(f"'{n}'" for n in unreachable)
            raise ValueError(f"StreamNodes {names} are not reachable from any source.")
        for source_id in graph.get_source_ids():
            self._create_chain(source_id, 0, _ChainInfo(source_id))
        return self.job_graph

    # ------------------------------------------------------------------ chaining
    def _create_chain(self, current_id: int, chain_index: int, info: _ChainInfo) -> List[StreamEdge]:
        start_id = info.start_node_id
        if start_id in self.built_vertices:
            return []
        graph = self.stream_graph
        node = graph.get_stream_node(current_id)
        transitive_out_edges: List[StreamEdge] = []
        chainable: List[StreamEdge] = []
        non_chainable: List[StreamEdge] = []
        for out_edge in node.out_edges:
            (chainable if is_chainable(out_edge, graph) else non_chainable).append(out_edge)
        for edge in chainable:
            transitive_out_edges.extend(self._create_chain(edge.target_id, chain_index + 1, info))
        for edge in non_chainable:
            transitive_out_edges.append(edge)
            self._create_chain(edge.target_id, 0, _ChainInfo(edge.target_id))

        self.chainable_outputs[current_id] = chainable
        self.chained_names[current_id] = self._create_chained_name(current_id, chainable)
        info.operator_hashes.append((self.hashes[current_id], self.user_hashes.get(current_id)))
        info.members[current_id] = (chain_index, chainable, non_chainable)

        if current_id == start_id:
            self._create_job_vertex(start_id, info, transitive_out_edges)
            for edge in transitive_out_edges:
                self._connect(start_id, edge)
        return transitive_out_edges

    def _create_chained_name(self, node_id: int, chainable: List[StreamEdge]) -> str:
        name = self.stream_graph.get_stream_node(node_id).operator_name
        if len(chainable) > 1:
            return f"{name} -> (" + ", ".join(self.chained_names[e.target_id] for e in chainable) + ")"
        if len(chainable) == 1:
            return f"{name} -> {self.chained_names[chainable[0].target_id]}"
        return name

    def _pretty_name(self, node_id: int) -> str:
        """Flink's tree-mode vertex description (``operatorPrettyName``)::

            Source: Collection Source
            +- Map
               :- Sink: Print to Std. Out
               +- Sink: Print to Std. Out
        """
        lines: List[str] = []

        def visit(nid: int, last_children: List[bool]) -> None:
            prefix = ""
            if last_children:
                prefix = "".join("   " if last else ":  " for last in last_children[:-1])
                prefix += "+- " if last_children[-1] else ":- "
            lines.append(prefix + self.stream_graph.get_stream_node(nid).operator_description)
            outs = self.chainable_outputs.get(nid, [])
            for i, e in enumerate(outs):
                visit(e.target_id, last_children + [i == len(outs) - 1])

        visit(node_id, [])
        return "".join(line + "\n" for line in lines)

    # ------------------------------------------------------------------ vertices
    def _create_job_vertex(self, start_id: int, info: _ChainInfo,
                           transitive_out_edges: List[StreamEdge]) -> JobVertex:
        graph = self.stream_graph
        head = graph.get_stream_node(start_id)
        pairs = [
            OperatorIDPair(OperatorID(primary), None if user is None else OperatorID(user))
            for primary, user in info.operator_hashes
        ]
        vertex = JobVertex(self.chained_names[start_id], JobVertexID(self.hashes[start_id]), pairs)
        vertex.invokable_class_name = head.job_vertex_class
        vertex.set_parallelism(head.parallelism)
        vertex.set_max_parallelism(head.max_parallelism)
        vertex.effective_max_parallelism = head.get_effective_max_parallelism()
        vertex.slot_sharing_group = head.slot_sharing_group
        vertex.co_location_group = head.co_location_group
        vertex.head_node_id = start_id
        vertex.transitive_out_edges = list(transitive_out_edges)
        vertex.operator_pretty_name = self._pretty_name(start_id)
        vertex_hex = str(vertex.id)
        for node_id, (chain_index, chainable, non_chainable) in info.members.items():
            node = graph.get_stream_node(node_id)
            user = self.user_hashes.get(node_id)
            vertex.stream_configs[node_id] = StreamConfig(
                vertex_id=vertex_hex,
                operator_id=self.hashes[node_id].hex(),
                user_operator_id=None if user is None else user.hex(),
                operator_name=node.operator_name,
                node_id=node_id,
                chain_index=chain_index,
                is_chain_start=node_id == start_id,
                is_chain_end=not chainable,
                operator_factory=node.operator_factory,
                chained_outputs=list(chainable),
                non_chained_outputs=list(non_chainable),
                state_key_selector=node.state_key_selector,
                state_key_selector2=node.state_key_selector2,
                state_key_type=node.state_key_type,
                parallelism=vertex.parallelism,
                max_parallelism=vertex.effective_max_parallelism,
                buffer_timeout_ms=node.buffer_timeout_ms,
                output_type=node.output_type,
                is_source=node.is_source,
                source=node.source,
                watermark_alignment=node.watermark_alignment,
                uid=node.transformation_uid,
            )
        self.job_vertices[start_id] = vertex
        self.built_vertices.add(start_id)
        self.job_graph.add_vertex(vertex)
        return vertex

    def _connect(self, head_id: int, edge: StreamEdge) -> None:
        head_vertex = self.job_vertices[head_id]
        downstream = self.job_vertices[edge.target_id]
        self._configure_key_groups(edge, downstream)
        result_type = (ResultPartitionType.BLOCKING if edge.exchange_mode == ExchangeMode.BATCH
                       else ResultPartitionType.PIPELINED_BOUNDED)
        pattern = (DistributionPattern.POINTWISE if edge.partitioner.is_pointwise()
                   else DistributionPattern.ALL_TO_ALL)
        index = len(head_vertex.produced_data_sets)
        data_set_id = IntermediateDataSetID(
            murmur3_128(head_vertex.id.get_bytes() + struct.pack("<i", index))
        )
        downstream.connect_new_data_set_as_input(head_vertex, pattern, result_type,
                                                 edge.partitioner, data_set_id)
        downstream.in_edges.append(edge)

    @staticmethod
    def _configure_key_groups(edge: StreamEdge, downstream: JobVertex) -> None:
        """A HASH edge must spread keys over the *consumer's* key groups (Flink's
        ``ConfigurableStreamPartitioner.configure(numberOfKeyGroups)``, which Flink applies
        when it creates the RecordWriter). Rill's KeyGroupStreamPartitioner fixes its max
        parallelism at construction, so the edge gets a partitioner built for the consumer's
        effective max parallelism when the two differ."""
        p = edge.partitioner
        target = downstream.effective_max_parallelism
        if isinstance(p, KeyGroupStreamPartitioner) and p.max_parallelism != target:
            edge.partitioner = KeyGroupStreamPartitioner(p.key_selector, target, p.key_cache_size, p.key_token)
