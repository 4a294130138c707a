"""``OperatorChain``: the operators of one JobVertex inside one subtask, wired together
(Flink's ``OperatorChain``).

Built from the vertex's StreamConfigs: each operator is a fresh copy from its factory; chained
successors are reached through :class:`ChainingOutput` (same thread, batches passed as lists;
runs of chained maps and filters through one fused loop, see :mod:`rill.runtime.tasks.fused_chain`),
non-chained out edges through :class:`RecordWriterOutput` (the network). Operators are kept in
Flink's order (depth-first post-order: the tail first, the head last), opened in that order so
that a successor is ready before its predecessor emits, and finished head first.

Declared output types: where Flink would serialize an operator's records (an out edge to the
network, a source's output, a sink's input) and the operator declares an ``output_type`` that
changes or checks values (``Types.FLOAT()``, ``Types.INT()``...), its main output goes through a
:class:`TypeConvertingOutput`; records passed between chained user operators are not touched,
as PyFlink fuses chained Python operators without serializing between them. A side output is
converted the same way by its ``OutputTag``'s ``type_info``.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

from rill.common.type_conversion import batch_converter
from rill.operators.base import TwoInputStreamOperator, attribute_error
from rill.operators.context import StreamOperatorContext
from rill.runtime.tasks.fused_chain import chaining_output
from rill.runtime.tasks.outputs import (
    NO_OUTPUT,
    BroadcastingOutput,
    RecordWriterOutput,
    TaggedOutput,
    TypeConvertingOutput,
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
        # the declared output type, applied where Flink serializes (see _serializes)
        convert = batch_converter(cfg.output_type, f"operator {cfg.operator_name!r} (output_type "
                                                   f"{cfg.output_type!r})")

        def route(edge, out, serialized: bool) -> None:
            tag = getattr(edge, "output_tag", None)
            if tag is None:
                main.append(TypeConvertingOutput(out, convert) if convert is not None and serialized else out)
                return
            # a side output is serialized with its OutputTag's type
            tag_convert = batch_converter(tag.type_info, f"operator {cfg.operator_name!r} (side output "
                                                         f"{tag.tag_id!r}, {tag.type_info!r})")
            if tag_convert is not None and serialized:
                out = TypeConvertingOutput(out, tag_convert)
            side.setdefault(tag.tag_id, []).append(out)

        for edge in cfg.chained_outputs:
            child = self._create(edge.target_id)
            target = self._configs[edge.target_id]
            route(edge, chaining_output(child, target.operator_name), cfg.is_source or _is_sink(target))
        for edge in cfg.non_chained_outputs:
            writer = self._writer_by_edge[id(edge)]
            route(edge, RecordWriterOutput(writer, _target_name(edge, self.vertex)), True)

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


def _is_sink(cfg) -> bool:
    """Whether the operator of ``cfg`` emits nothing (a sink: in PyFlink ``print()``, collect
    and the file sinks are Java operators, so records reaching them are serialized)."""
    return not cfg.chained_outputs and not cfg.non_chained_outputs


def _target_name(edge, vertex) -> str:
    name = getattr(edge, "target_operator_name", None)
    return name if name else f"node {edge.target_id}"
