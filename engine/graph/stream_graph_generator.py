"""Transformations → StreamGraph.

Follows Flink's ``StreamGraphGenerator`` and its translators (``transform`` with the
``alreadyTransformed`` memo, ``transformSource``/``OneInput``/``TwoInput``/``Sink``,
``transformPartition``, ``transformUnion``, ``transformSideOutput``,
``determineSlotSharingGroup``):

* physical transformations become StreamNodes with the Transformation's id; a source is named
  ``"Source: " + name``, a sink ``"Sink: " + name``;
* parallelism -1 means the generator's default; the environment's max parallelism applies to
  nodes without their own;
* partition and side-output transformations become virtual nodes, one per input id, with ids
  from a counter of their own (negative, never clashing with node ids); a union only
  forwards its inputs' ids, so it becomes edges;
* edges are added when their downstream node is created, so each node's out edges are in
  the order their consumers were translated (what Flink's hashing and chaining see).

Everything is validated here, before anything runs: parallelism and max parallelism, forward
edges between different parallelisms, unknown transformation types, and a BATCH program's
sources (all bounded). In BATCH mode nodes get the operators of
:mod:`rill.graph.batch_translation`.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional

from rill.common.execution_options import ExecutionOptions, RuntimeExecutionMode
from rill.graph.batch_translation import batch_operator_factory, executes_in_batch_mode
from rill.graph.stream_graph import (
    DEFAULT_SLOT_SHARING_GROUP,
    ONE_INPUT_TASK,
    SOURCE_TASK,
    TWO_INPUT_TASK,
    StreamGraph,
    StreamNode,
)
from rill.graph.transformations import (
    OneInputTransformation,
    PartitionTransformation,
    SideOutputTransformation,
    SinkTransformation,
    SourceTransformation,
    Transformation,
    TwoInputTransformation,
    UnionTransformation,
)
from rill.state.key_groups import UPPER_BOUND_MAX_PARALLELISM

__all__ = ["StreamGraphGenerator"]


class StreamGraphGenerator:
    """Build the StreamGraph of a list of transformations.

    :param transformations: the environment's transformations, in creation order (inputs
        are reached recursively, so listing only the sinks and operators suffices, as in
        Flink).
    :param job_name: the job's name.
    :param chaining_enabled: ``False`` disables operator chaining.
    :param default_parallelism: parallelism of transformations that have -1.
    :param default_max_parallelism: the environment's max parallelism (-1 = unset).
    :param default_buffer_timeout_ms: buffer timeout of transformations that have none.
    :param runtime_mode: ``STREAMING`` (default), ``BATCH`` or ``AUTOMATIC`` (BATCH when every
        source is bounded); the graph's ``runtime_mode`` is the one it runs in.
    :param batch_max_buffered_records: in BATCH mode, records a keyed input holds in memory per
        subtask before it spills to disk.
    :raises ValueError: on a default parallelism below 1 or a default max parallelism out of
        ``1..32768`` (other than -1).
    """

    def __init__(
        self,
        transformations: Iterable[Transformation],
        job_name: str = "Rill Streaming Job",
        chaining_enabled: bool = True,
        default_parallelism: int = 1,
        default_max_parallelism: int = -1,
        default_buffer_timeout_ms: int = 100,
        runtime_mode: RuntimeExecutionMode = RuntimeExecutionMode.STREAMING,
        batch_max_buffered_records: int = ExecutionOptions.SORTED_INPUTS_MAX_RECORDS.default,
    ):
        if not isinstance(default_parallelism, int) or default_parallelism < 1:
            raise ValueError(f"The default parallelism must be at least 1, got {default_parallelism!r}.")
        if default_max_parallelism != -1 and not 0 < default_max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
            raise ValueError(
                f"The default max parallelism must be between 1 and {UPPER_BOUND_MAX_PARALLELISM} "
                f"(or -1 for unset), got {default_max_parallelism!r}."
            )
        if default_buffer_timeout_ms < -1:
            raise ValueError(f"The buffer timeout must be >= -1, got {default_buffer_timeout_ms!r}.")
        self.transformations = list(transformations)
        self.job_name = job_name
        self.chaining_enabled = chaining_enabled
        self.default_parallelism = default_parallelism
        self.default_max_parallelism = default_max_parallelism
        self.default_buffer_timeout_ms = default_buffer_timeout_ms
        self.runtime_mode = runtime_mode
        self.batch_max_buffered_records = batch_max_buffered_records
        self._batch = False
        self._already_transformed: Dict[int, List[int]] = {}
        self._next_virtual_id = -1
        self.stream_graph: Optional[StreamGraph] = None

    def generate(self) -> StreamGraph:
        """Translate all transformations (each once).

        :raises ValueError: for an invalid parallelism / max parallelism, forward
            partitioning between different parallelisms, duplicate transformation ids, an
            unbounded source in BATCH mode.
        :raises TypeError: for an unknown transformation type.
        """
        self._batch = executes_in_batch_mode(self.runtime_mode, self.transformations)
        self.stream_graph = StreamGraph(self.job_name, self.chaining_enabled)
        self.stream_graph.runtime_mode = (RuntimeExecutionMode.BATCH if self._batch
                                          else RuntimeExecutionMode.STREAMING)
        self._already_transformed = {}
        self._next_virtual_id = -1
        for t in self.transformations:
            self._transform(t)
        return self.stream_graph

    # ------------------------------------------------------------------ dispatch
    def _transform(self, t: Transformation) -> List[int]:
        key = id(t)
        if key in self._already_transformed:
            return self._already_transformed[key]
        if isinstance(t, SourceTransformation):
            ids = self._transform_physical(t, [], "Source: " + t.name)
        elif isinstance(t, SinkTransformation):
            ids = self._transform_physical(t, [t.input], "Sink: " + t.name)
        elif isinstance(t, OneInputTransformation):
            ids = self._transform_physical(t, [t.input], t.name)
        elif isinstance(t, TwoInputTransformation):
            ids = self._transform_physical(t, [t.input1, t.input2], t.name)
        elif isinstance(t, PartitionTransformation):
            ids = self._transform_partition(t)
        elif isinstance(t, UnionTransformation):
            ids = self._transform_union(t)
        elif isinstance(t, SideOutputTransformation):
            ids = self._transform_side_output(t)
        else:
            raise TypeError(f"Unknown transformation {t!r} of type {type(t).__name__}")
        self._already_transformed[key] = ids
        return ids

    def _new_virtual_id(self) -> int:
        vid = self._next_virtual_id
        self._next_virtual_id -= 1
        return vid

    # ------------------------------------------------------------------ physical
    def _transform_physical(self, t, inputs: List[Transformation], operator_name: str) -> List[int]:
        graph = self.stream_graph
        input_ids = [self._transform(i) for i in inputs]
        if id(t) in self._already_transformed:  # reached again while translating the inputs
            return self._already_transformed[id(t)]
        if t.id in graph.nodes or graph.is_virtual(t.id):
            raise ValueError(f"Duplicate transformation id {t.id} ({t.name}): ids must be unique per job")

        parallelism = t.parallelism if t.parallelism != -1 else self.default_parallelism
        if not isinstance(parallelism, int) or isinstance(parallelism, bool) or parallelism < 1:
            raise ValueError(
                f"The parallelism of operator '{operator_name}' must be at least 1, got {parallelism!r}."
            )
        max_parallelism = t.max_parallelism if t.max_parallelism > 0 else self.default_max_parallelism
        if max_parallelism != -1:
            if not 0 < max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
                raise ValueError(
                    f"The maximum parallelism of operator '{operator_name}' must be between 1 and "
                    f"{UPPER_BOUND_MAX_PARALLELISM}, got {max_parallelism}."
                )
            if parallelism > max_parallelism:
                raise ValueError(
                    f"Vertex {operator_name}'s parallelism ({parallelism}) is higher than the max "
                    f"parallelism ({max_parallelism}). Please lower the parallelism or increase "
                    "the max parallelism."
                )
        all_input_ids = [i for ids in input_ids for i in ids]

        if isinstance(t, SourceTransformation):
            vertex_class = SOURCE_TASK
        elif isinstance(t, TwoInputTransformation):
            vertex_class = TWO_INPUT_TASK
        else:
            vertex_class = ONE_INPUT_TASK
        factory = batch_operator_factory(t, self.batch_max_buffered_records) if self._batch else t.operator_factory
        node = StreamNode(
            id=t.id,
            operator_name=operator_name,
            operator_factory=factory,
            parallelism=parallelism,
            max_parallelism=max_parallelism,
            slot_sharing_group=self._determine_slot_sharing_group(t.slot_sharing_group, all_input_ids),
            co_location_group=t.co_location_group_key,
            transformation_uid=t.uid,
            user_hash=t.user_provided_node_hash,
            buffer_timeout_ms=(t.buffer_timeout_ms if t.buffer_timeout_ms is not None
                               else self.default_buffer_timeout_ms),
            output_type=t.output_type,
            is_source=isinstance(t, SourceTransformation),
            is_sink=isinstance(t, SinkTransformation),
            source=getattr(t, "source", None),
            # BATCH generates no watermarks, so there is nothing to align
            watermark_alignment=None if self._batch else getattr(t, "watermark_alignment", None),
            operator_description=t.description,
            job_vertex_class=vertex_class,
        )
        if isinstance(t, TwoInputTransformation):
            node.state_key_selector = t.state_key_selector1
            node.state_key_selector2 = t.state_key_selector2
            node.state_key_type = t.state_key_type
        elif isinstance(t, (OneInputTransformation, SinkTransformation)):
            node.state_key_selector = t.state_key_selector
            node.state_key_type = t.state_key_type
        graph.add_node(node)
        if t.slot_sharing_group_resources is not None:
            self._register_slot_sharing_group_resources(t.slot_sharing_group, t.slot_sharing_group_resources, t.name)

        if isinstance(t, TwoInputTransformation):
            for type_number, ids in ((1, input_ids[0]), (2, input_ids[1])):
                for input_id in ids:
                    graph.add_edge(input_id, t.id, type_number)
        elif input_ids:
            for input_id in input_ids[0]:
                graph.add_edge(input_id, t.id, 0)
        return [t.id]

    def _register_slot_sharing_group_resources(self, group: str, resources, operator_name: str) -> None:
        """:raises ValueError: if the group already has other resources (two SlotSharingGroup
        objects of one name and different resources)."""
        known = self.stream_graph.slot_sharing_group_resources.setdefault(group, resources)
        if known != resources:
            raise ValueError(f"Operator '{operator_name}': slot sharing group '{group}' is given resources "
                             f"{resources}, but another operator gave it {known}; a group has one resource spec")

    def _determine_slot_sharing_group(self, specified: Optional[str], input_ids: List[int]) -> str:
        """Flink's ``determineSlotSharingGroup``: the explicit group, else the group all inputs
        share, else ``"default"``."""
        if specified is not None:
            return specified
        group: Optional[str] = None
        for input_id in input_ids:
            candidate = self.stream_graph.get_slot_sharing_group(input_id)
            if group is None:
                group = candidate
            elif group != candidate:
                return DEFAULT_SLOT_SHARING_GROUP
        return group if group is not None else DEFAULT_SLOT_SHARING_GROUP

    # ------------------------------------------------------------------ logical
    def _transform_partition(self, t: PartitionTransformation) -> List[int]:
        result = []
        for input_id in self._transform(t.input):
            vid = self._new_virtual_id()
            self.stream_graph.add_virtual_partition_node(input_id, vid, t.partitioner, t.exchange_mode)
            result.append(vid)
        return result

    def _transform_side_output(self, t: SideOutputTransformation) -> List[int]:
        result = []
        for input_id in self._transform(t.input):
            vid = self._new_virtual_id()
            self.stream_graph.add_virtual_side_output_node(input_id, vid, t.output_tag)
            result.append(vid)
        return result

    def _transform_union(self, t: UnionTransformation) -> List[int]:
        result: List[int] = []
        for i in t.inputs:
            result.extend(self._transform(i))
        return result
