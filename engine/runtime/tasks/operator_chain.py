"""``OperatorChain``: the operators of one JobVertex inside one subtask, wired together
(Flink's ``OperatorChain``).

Built from the vertex's StreamConfigs: each operator is a fresh copy from its factory; chained
successors are reached through :class:`ChainingOutput` (same thread, batches passed as lists),
non-chained out edges through :class:`RecordWriterOutput` (the network). Operators are kept in
Flink's order (depth-first post-order: the tail first, the head last), opened in that order so
that a successor is ready before its predecessor emits, and finished head first.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

from rill.operators.base import TwoInputStreamOperator, attribute_error
from rill.operators.context import StreamOperatorContext
from rill.runtime.tasks.outputs import (
    NO_OUTPUT,
    BroadcastingOutput,
    ChainingOutput,
    RecordWriterOutput,
    TaggedOutput,
)

__all__ = ["OperatorChain"]


class OperatorChain:
    """
    :param vertex: the JobVertex (``stream_configs``, ``head_node_id``, ``transitive_out_edges``).
    :param record_writers: one RecordWriter per transitive out edge, same order.
    :param context_factory: ``(stream_config) -> StreamOperatorContext`` supplied by the task
        (it knows subtask index, services and keyed backends).
    """

    def __init__(self, vertex, record_writers: List[Any],
                 context_factory: Callable[[Any], StreamOperatorContext]):
        self.vertex = vertex
        self._configs = vertex.stream_configs
        self._writer_by_edge = {id(e): w for e, w in zip(vertex.transitive_out_edges, record_writers)}
        self._context_factory = context_factory
        self.record_writers = list(record_writers)
        # (config, operator) in Flink's order: tail first, head last
        self.all_operators: List[Tuple[Any, Any]] = []
        self.head_operator = self._create(vertex.head_node_id)
        self.head_config = self._configs[vertex.head_node_id]

    def _create(self, node_id: int):
        cfg = self._configs[node_id]
        operator = cfg.operator_factory.create_operator(cfg.operator_name)
        main: List[Any] = []
        side: Dict[str, List[Any]] = {}

        def route(edge, out) -> None:
            tag = getattr(edge, "output_tag", None)
            if tag is None:
                main.append(out)
            else:
                side.setdefault(tag.tag_id, []).append(out)

        for edge in cfg.chained_outputs:
            child = self._create(edge.target_id)
            route(edge, ChainingOutput(child, self._configs[edge.target_id].operator_name))
        for edge in cfg.non_chained_outputs:
            writer = self._writer_by_edge[id(edge)]
            route(edge, RecordWriterOutput(writer, _target_name(edge, self.vertex)))

        def combine(outs: List[Any]):
            if not outs:
                return NO_OUTPUT
            return outs[0] if len(outs) == 1 else BroadcastingOutput(outs)

        output = TaggedOutput(combine(main), {k: combine(v) for k, v in side.items()})
        context = self._context_factory(cfg)
        operator.setup(context, output)
        self.all_operators.append((cfg, operator))
        return operator

    # -- life cycle (task thread) ----------------------------------------------------------
    def _each(self, configs_ops, method: str) -> None:
        for cfg, op in configs_ops:
            try:
                getattr(op, method)()
            except BaseException as e:
                attribute_error(e, cfg.operator_name)
                raise

    def initialize_state_and_open(self) -> None:
        self._each(self.all_operators, "initialize_state")
        self._each(self.all_operators, "open")

    def end_input_and_finish(self) -> None:
        """End of input: ``end_input`` then ``finish`` per operator, head first, so what an
        operator flushes in ``finish`` reaches successors before they finish."""
        for cfg, op in reversed(self.all_operators):
            # a two-input head was told about each of its inputs' ends by the task
            methods = ("finish",) if isinstance(op, TwoInputStreamOperator) else ("end_input", "finish")
            for method in methods:
                try:
                    getattr(op, method)()
                except BaseException as e:
                    attribute_error(e, cfg.operator_name)
                    raise

    def close(self) -> List[BaseException]:
        """Close every operator, head first, even if some fail; returns the errors."""
        errors: List[BaseException] = []
        for cfg, op in reversed(self.all_operators):
            try:
                op.close()
            except BaseException as e:  # keep closing the others
                attribute_error(e, cfg.operator_name)
                errors.append(e)
        return errors

    def operator_names(self) -> List[str]:
        return [cfg.operator_name for cfg, _ in reversed(self.all_operators)]


def _target_name(edge, vertex) -> str:
    name = getattr(edge, "target_operator_name", None)
    return name if name else f"node {edge.target_id}"
