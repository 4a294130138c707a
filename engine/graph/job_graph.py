"""The JobGraph: chained operators as JobVertices connected through data sets.

Follows Flink's ``org.apache.flink.runtime.jobgraph``: ``JobGraph``, ``JobVertex``,
``JobEdge``, ``IntermediateDataSet``, ``DistributionPattern``, ``ResultPartitionType``,
``OperatorIDPair`` and the ``AbstractID`` family (``JobID``, ``JobVertexID``, ``OperatorID``,
``IntermediateDataSetID``, ``IntermediateResultPartitionID``).

The producer/consumer chain is, as in Flink::

    JobVertex ──produces──▶ IntermediateDataSet ──consumed by──▶ JobEdge ──▶ JobVertex

A JobVertex is a plan object only: it carries the per-operator :class:`StreamConfig` records a
StreamTask needs to build its OperatorChain, never a live operator.

Rill difference: Flink gives every ``IntermediateDataSet`` a random id. Rill's job graph
generator derives it from the producer's vertex id and the data set's index, so the same
program always prints the same plan; a data set created without an id is random, as in Flink.
"""

from __future__ import annotations

import enum
import html.entities
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional

from rill.state.key_groups import compute_default_max_parallelism

if TYPE_CHECKING:  # pragma: no cover
    from rill.graph.stream_config import StreamConfig
    from rill.graph.stream_graph import StreamEdge

__all__ = [
    "AbstractID",
    "JobID",
    "JobVertexID",
    "OperatorID",
    "IntermediateDataSetID",
    "IntermediateResultPartitionID",
    "OperatorIDPair",
    "DistributionPattern",
    "ResultPartitionType",
    "IntermediateDataSet",
    "JobEdge",
    "JobVertex",
    "JobGraph",
    "InvalidProgramException",
]

ID_SIZE_BYTES = 16


class InvalidProgramException(ValueError):
    """The job graph cannot be executed (Flink's ``InvalidProgramException``), e.g. a cycle."""


# --------------------------------------------------------------------------------- ids


class AbstractID:
    """A 16-byte id (Flink's ``AbstractID``). ``str()`` is 32 lowercase hex characters, the
    bytes in order, exactly as Flink's ``toString()``/``toHexString()``.

    :param value: the 16 bytes; random when omitted.
    :raises ValueError: when ``value`` is not 16 bytes long.
    """

    __slots__ = ("_bytes",)

    def __init__(self, value: Optional[bytes] = None):
        if value is None:
            value = os.urandom(ID_SIZE_BYTES)
        value = bytes(value)
        if len(value) != ID_SIZE_BYTES:
            raise ValueError(
                f"{type(self).__name__} needs {ID_SIZE_BYTES} bytes, got {len(value)}: {value.hex()}"
            )
        self._bytes = value

    @classmethod
    def from_hex_string(cls, hex_string: str):
        """Parse 32 hex characters. :raises ValueError: on anything else."""
        try:
            raw = bytes.fromhex(hex_string)
        except (ValueError, TypeError) as e:
            raise ValueError(f"Not a hex {cls.__name__}: {hex_string!r}") from e
        return cls(raw)

    def get_bytes(self) -> bytes:
        return self._bytes

    def to_hex_string(self) -> str:
        return self._bytes.hex()

    def __str__(self) -> str:
        return self._bytes.hex()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._bytes.hex()})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._bytes == self._bytes  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._bytes))

    def __lt__(self, other: "AbstractID") -> bool:
        return self._bytes < other._bytes


class JobID(AbstractID):
    """Id of a job (random unless given)."""


class JobVertexID(AbstractID):
    """Id of a JobVertex: the StreamGraphHasherV2 hash of the chain's head operator."""


class OperatorID(AbstractID):
    """Id of an operator: its StreamGraphHasherV2 hash (or the user's ``set_uid_hash``)."""


class IntermediateDataSetID(AbstractID):
    """Id of an IntermediateDataSet / IntermediateResult."""


@dataclass(frozen=True)
class IntermediateResultPartitionID:
    """Id of one partition of an intermediate result (Flink's
    ``IntermediateResultPartitionID``): the data set id plus the producer subtask's number.
    ``str()`` is ``"<data set id>#<partition number>"`` as in Flink."""

    intermediate_data_set_id: IntermediateDataSetID
    partition_num: int

    def __str__(self) -> str:
        return f"{self.intermediate_data_set_id}#{self.partition_num}"


@dataclass(frozen=True)
class OperatorIDPair:
    """Flink's ``OperatorIDPair``: the generated id and, when ``set_uid_hash`` was used, the
    user-defined one (which then wins for state assignment)."""

    generated_operator_id: OperatorID
    user_defined_operator_id: Optional[OperatorID] = None

    def get_generated_operator_id(self) -> OperatorID:
        return self.generated_operator_id

    def get_user_defined_operator_id(self) -> Optional[OperatorID]:
        return self.user_defined_operator_id


# ---------------------------------------------------------------------- enums


class DistributionPattern(enum.Enum):
    """How producer subtasks connect to consumer subtasks (Flink's ``DistributionPattern``).
    ``POINTWISE`` iff the edge's partitioner ``is_pointwise()`` (forward, rescale)."""

    POINTWISE = "POINTWISE"
    ALL_TO_ALL = "ALL_TO_ALL"

    def __str__(self) -> str:
        return self.value


class ResultPartitionType(enum.Enum):
    """Flink's ``ResultPartitionType`` (the two a streaming job uses)."""

    PIPELINED_BOUNDED = "PIPELINED_BOUNDED"
    BLOCKING = "BLOCKING"

    def __str__(self) -> str:
        return self.value


# --------------------------------------------------------------- data sets & edges


class IntermediateDataSet:
    """The data one JobVertex produces for one downstream edge (Flink's
    ``IntermediateDataSet``).

    :param id: the data set id.
    :param producer: the producing :class:`JobVertex`.
    :param result_type: a :class:`ResultPartitionType`.
    """

    def __init__(self, id: IntermediateDataSetID, producer: "JobVertex", result_type: ResultPartitionType):
        self.id = id
        self.producer = producer
        self.result_type = result_type
        self.consumers: List["JobEdge"] = []

    def get_id(self) -> IntermediateDataSetID:
        return self.id

    def get_producer(self) -> "JobVertex":
        return self.producer

    def get_consumers(self) -> List["JobEdge"]:
        return self.consumers

    def get_result_type(self) -> ResultPartitionType:
        return self.result_type

    def add_consumer(self, edge: "JobEdge") -> None:
        self.consumers.append(edge)

    def __repr__(self) -> str:
        return f"IntermediateDataSet({self.id}, producer={self.producer.name!r})"


class JobEdge:
    """Connects an :class:`IntermediateDataSet` to a consuming :class:`JobVertex` (Flink's
    ``JobEdge``).

    :param source: the consumed data set.
    :param target: the consuming vertex.
    :param distribution_pattern: a :class:`DistributionPattern`.
    :param partitioner: the StreamPartitioner of the stream edge (Rill keeps it here so the
        runtime need not look up the StreamGraph); ``ship_strategy_name`` is ``str(partitioner)``.
    """

    def __init__(self, source: IntermediateDataSet, target: "JobVertex",
                 distribution_pattern: DistributionPattern, partitioner: Any = None):
        self.source = source
        self.target = target
        self.distribution_pattern = distribution_pattern
        self.partitioner = partitioner
        self.ship_strategy_name: Optional[str] = None if partitioner is None else str(partitioner)
        self.is_broadcast = bool(partitioner is not None and partitioner.is_broadcast())
        self.is_forward = bool(partitioner is not None and str(partitioner) == "FORWARD")

    def get_source(self) -> IntermediateDataSet:
        return self.source

    def get_source_id(self) -> IntermediateDataSetID:
        return self.source.id

    def get_target(self) -> "JobVertex":
        return self.target

    def get_distribution_pattern(self) -> DistributionPattern:
        return self.distribution_pattern

    def get_ship_strategy_name(self) -> Optional[str]:
        return self.ship_strategy_name

    def __repr__(self) -> str:
        return (f"JobEdge({self.source.producer.name!r} -> {self.target.name!r}, "
                f"{self.distribution_pattern.value}, {self.ship_strategy_name})")


# -------------------------------------------------------------------------- vertex


class JobVertex:
    """One chain of operators, deployed as ``parallelism`` subtasks (Flink's ``JobVertex``).

    :param name: the chained name, e.g. ``"Filter -> Sink: Print to Std. Out"``.
    :param id: the head operator's hash.
    :param operator_id_pairs: the chain's operator ids in Flink's order: depth-first
        post-order over the chained outputs, the head LAST (for a chain A→B→D, A→C, B→E the
        ids are ``[D, E, B, C, A]``).

    Attributes filled by the job graph generator: ``invokable_class_name``
    (``"SourceOperatorStreamTask"``, ``"OneInputStreamTask"``, ``"TwoInputStreamTask"``),
    ``slot_sharing_group``, ``co_location_group``, ``head_node_id``, ``stream_configs``
    (StreamNode id → :class:`StreamConfig`, one per chained operator),
    ``transitive_out_edges`` (StreamEdges leaving the chain; the i-th produces
    ``produced_data_sets[i]``), ``in_edges`` (physical StreamEdges entering the chain; the
    i-th arrives through ``inputs[i]``), ``effective_max_parallelism`` (the number of key
    groups: own max parallelism if set, else the default computed from the parallelism) and
    ``operator_pretty_name`` (Flink's tree description).
    """

    def __init__(self, name: str, id: Optional[JobVertexID] = None,
                 operator_id_pairs: Optional[Iterable[OperatorIDPair]] = None):
        self.id = id if id is not None else JobVertexID()
        self.name = name
        self.operator_id_pairs: List[OperatorIDPair] = list(operator_id_pairs or [])
        self.parallelism = -1
        self.max_parallelism = -1
        self.effective_max_parallelism = -1
        self.inputs: List[JobEdge] = []
        self.produced_data_sets: List[IntermediateDataSet] = []
        self.invokable_class_name: Optional[str] = None
        self.slot_sharing_group: Optional[str] = None
        self.co_location_group: Optional[str] = None
        self.head_node_id: Optional[int] = None
        self.stream_configs: Dict[int, "StreamConfig"] = {}
        self.transitive_out_edges: List["StreamEdge"] = []
        self.in_edges: List["StreamEdge"] = []
        self.operator_pretty_name: Optional[str] = None

    # -- identity ----------------------------------------------------------------------
    def get_id(self) -> JobVertexID:
        return self.id

    def get_name(self) -> str:
        return self.name

    def get_operator_ids(self) -> List[OperatorID]:
        """Generated operator ids, head last (see the class docstring)."""
        return [p.generated_operator_id for p in self.operator_id_pairs]

    def get_operator_id_pairs(self) -> List[OperatorIDPair]:
        return list(self.operator_id_pairs)

    def get_operator_pretty_name(self) -> Optional[str]:
        return self.operator_pretty_name

    # -- parallelism -------------------------------------------------------------------
    def get_parallelism(self) -> int:
        return self.parallelism

    def set_parallelism(self, parallelism: int) -> None:
        """:raises ValueError: unless ``parallelism >= 1``."""
        if parallelism < 1:
            raise ValueError(f"The parallelism of vertex '{self.name}' must be at least 1, got {parallelism}.")
        self.parallelism = parallelism

    def get_max_parallelism(self) -> int:
        """As Flink: the configured max parallelism, -1 when none was set."""
        return self.max_parallelism

    def set_max_parallelism(self, max_parallelism: int) -> None:
        self.max_parallelism = max_parallelism

    def get_effective_max_parallelism(self) -> int:
        """The number of key groups of this vertex: its max parallelism if set, else
        ``compute_default_max_parallelism(parallelism)`` (what Flink's scheduler derives)."""
        if self.effective_max_parallelism > 0:
            return self.effective_max_parallelism
        if self.max_parallelism > 0:
            return self.max_parallelism
        return compute_default_max_parallelism(max(self.parallelism, 1))

    # -- connections -------------------------------------------------------------------
    def get_inputs(self) -> List[JobEdge]:
        return self.inputs

    def get_number_of_inputs(self) -> int:
        return len(self.inputs)

    def get_produced_data_sets(self) -> List[IntermediateDataSet]:
        return self.produced_data_sets

    def get_number_of_produced_intermediate_data_sets(self) -> int:
        return len(self.produced_data_sets)

    def is_input_vertex(self) -> bool:
        return not self.inputs

    def has_no_connected_inputs(self) -> bool:
        return not self.inputs

    def create_and_add_result_data_set(
        self, result_type: ResultPartitionType, data_set_id: Optional[IntermediateDataSetID] = None
    ) -> IntermediateDataSet:
        """A new data set produced by this vertex (random id unless given)."""
        ds = IntermediateDataSet(data_set_id or IntermediateDataSetID(), self, result_type)
        self.produced_data_sets.append(ds)
        return ds

    def connect_new_data_set_as_input(
        self,
        input_vertex: "JobVertex",
        distribution_pattern: DistributionPattern,
        result_type: ResultPartitionType,
        partitioner: Any = None,
        data_set_id: Optional[IntermediateDataSetID] = None,
    ) -> JobEdge:
        """Flink's ``connectNewDataSetAsInput``: ``input_vertex`` produces a new data set that
        this vertex consumes through a new JobEdge (appended to :meth:`get_inputs`)."""
        ds = input_vertex.create_and_add_result_data_set(result_type, data_set_id)
        edge = JobEdge(ds, self, distribution_pattern, partitioner)
        self.inputs.append(edge)
        ds.add_consumer(edge)
        return edge

    def __str__(self) -> str:
        return f"{self.name} ({self.invokable_class_name})"

    def __repr__(self) -> str:
        return f"JobVertex({self.name!r}, id={self.id}, parallelism={self.parallelism})"


# ---------------------------------------------------------------------------- graph


class JobGraph:
    """The JobGraph (Flink's ``JobGraph``): vertices in insertion order.

    :param job_name: shown in plans.
    :param job_id: random when omitted (as Flink).
    """

    job_type = "STREAMING"

    def __init__(self, job_name: str, job_id: Optional[JobID] = None):
        self.job_id = job_id if job_id is not None else JobID()
        self.job_name = job_name
        self._vertices: Dict[JobVertexID, JobVertex] = {}
        #: slot sharing group name -> ResourceSpec (Flink sets it on the JobGraph's
        #: SlotSharingGroups); Rill's slots are uniform, so it is carried, not used for sizing
        self.slot_sharing_group_resources: Dict[str, Any] = {}

    def get_job_id(self) -> JobID:
        return self.job_id

    def get_name(self) -> str:
        return self.job_name

    def add_vertex(self, vertex: JobVertex) -> None:
        """:raises ValueError: when a vertex with the same id is already there."""
        if vertex.id in self._vertices:
            other = self._vertices[vertex.id]
            raise ValueError(
                f"The JobGraph already contains a vertex with id {vertex.id}: "
                f"'{other.name}' (adding '{vertex.name}')."
            )
        self._vertices[vertex.id] = vertex

    def get_vertices(self) -> List[JobVertex]:
        return list(self._vertices.values())

    def get_number_of_vertices(self) -> int:
        return len(self._vertices)

    def find_vertex_by_id(self, vertex_id: JobVertexID) -> Optional[JobVertex]:
        return self._vertices.get(vertex_id)

    def get_vertices_sorted_topologically_from_sources(self) -> List[JobVertex]:
        """Vertices ordered so every producer comes before its consumers (Flink's algorithm:
        vertices without inputs first, in insertion order, then depth-first forward from them).

        :raises InvalidProgramException: when the graph has a cycle; the message names the
            vertices that can never be reached.
        """
        if not self._vertices:
            return []
        remaining: Dict[JobVertex, None] = dict.fromkeys(self._vertices.values())
        ordered: List[JobVertex] = []
        for v in list(remaining):
            if v.has_no_connected_inputs():
                ordered.append(v)
                del remaining[v]
        pos = 0
        while remaining:
            if pos >= len(ordered):
                names = ", ".join(f"'{v.name}' ({v.id})" for v in remaining)
                raise InvalidProgramException(
                    f"The job graph is cyclic: vertices {names} are on a cycle or depend on one."
                )
            self._add_nodes_without_new_predecessors(ordered[pos], ordered, remaining)
            pos += 1
        return ordered

    @classmethod
    def _add_nodes_without_new_predecessors(cls, start: JobVertex, target: List[JobVertex],
                                            remaining: Dict[JobVertex, None]) -> None:
        for ds in start.produced_data_sets:
            for edge in ds.consumers:
                v = edge.target
                if v not in remaining:
                    continue
                if any(e is not edge and e.source.producer in remaining for e in v.inputs):
                    continue
                target.append(v)
                del remaining[v]
                cls._add_nodes_without_new_predecessors(v, target, remaining)

    def to_json_plan(self) -> Dict[str, Any]:
        """The plan in the shape of Flink's REST ``/jobs/:id/plan`` (``JsonPlanGenerator``):
        ``{"jid", "name", "type", "nodes": [{"id", "parallelism", "operator",
        "operator_strategy", "description", "inputs": [...], "optimizer_properties"}]}``;
        vertices in insertion order, ``inputs`` only for vertices that have some."""
        nodes = []
        for v in self._vertices.values():
            description = v.operator_pretty_name if v.operator_pretty_name is not None else v.name
            description = _escape_html4(description).replace("\n", "<br/>").replace("\\", "&#92;")
            node: Dict[str, Any] = {
                "id": str(v.id),
                "parallelism": v.parallelism,
                "operator": "",
                "operator_strategy": "",
                "description": description,
            }
            if not v.is_input_vertex():
                node["inputs"] = [
                    {
                        "num": num,
                        "id": str(e.source.producer.id),
                        "ship_strategy": e.ship_strategy_name,
                        "exchange": e.source.result_type.value.lower(),
                    }
                    for num, e in enumerate(v.inputs)
                ]
            node["optimizer_properties"] = {}
            nodes.append(node)
        return {"jid": str(self.job_id), "name": self.job_name, "type": self.job_type, "nodes": nodes}

    def __repr__(self) -> str:
        return f"JobGraph({self.job_name!r}, {len(self._vertices)} vertices)"


def _escape_html4(text: str) -> str:
    """Apache commons' ``StringEscapeUtils.escapeHtml4``: ``& < > "`` and the HTML 4 named
    entities (non-ASCII characters such as ``é`` → ``&eacute;``)."""
    out = []
    for ch in text:
        if ch == "&":
            out.append("&amp;")
        elif ch == "<":
            out.append("&lt;")
        elif ch == ">":
            out.append("&gt;")
        elif ch == '"':
            out.append("&quot;")
        elif ord(ch) > 127 and ord(ch) in html.entities.codepoint2name:
            out.append(f"&{html.entities.codepoint2name[ord(ch)]};")
        else:
            out.append(ch)
    return "".join(out)
