"""Printable plans: the four graph layers as text and as JSON.

The JSON form combines Flink's two plan formats: the execution plan of the StreamGraph
(``JSONGenerator``, what ``env.get_execution_plan()`` prints and the Flink plan visualizer
reads) under ``"stream_graph"``, and the JobGraph plan of Flink's REST ``/jobs/:id/plan``
under ``"job_graph"``; the ExecutionGraph, when given, adds ``"execution_graph"``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from rill.graph.execution_graph import ExecutionGraph
from rill.graph.job_graph import JobGraph
from rill.graph.stream_graph import StreamGraph
from rill.graph.transformations import Transformation

__all__ = ["render_plan", "render_plan_json"]


def _transformation_line(t: Transformation) -> str:
    inputs = ", ".join(str(i.id) for i in t.get_inputs())
    extra = []
    if getattr(t, "partitioner", None) is not None:
        extra.append(f"partitioner={t.partitioner}")
    if getattr(t, "output_tag", None) is not None:
        extra.append(f"output_tag={t.output_tag}")
    if t.uid is not None:
        extra.append(f"uid={t.uid!r}")
    if t.slot_sharing_group is not None:
        extra.append(f"slot_sharing_group={t.slot_sharing_group!r}")
    tail = (" " + " ".join(extra)) if extra else ""
    return (f"  [{t.id}] {type(t).__name__} '{t.name}' parallelism={t.parallelism}"
            f" inputs=[{inputs}]{tail}")


def _all_transformations(transformations: Sequence[Transformation]) -> List[Transformation]:
    """The given transformations and everything they read from, by id."""
    seen: Dict[int, Transformation] = {}
    stack = list(transformations)
    while stack:
        t = stack.pop()
        if id(t) in seen:
            continue
        seen[id(t)] = t
        stack.extend(t.get_inputs())
    return sorted(seen.values(), key=lambda t: t.id)


def render_plan(
    stream_graph: StreamGraph,
    job_graph: Optional[JobGraph] = None,
    execution_graph: Optional[ExecutionGraph] = None,
    transformations: Optional[Sequence[Transformation]] = None,
) -> str:
    """All layers as readable text: Transformations, StreamGraph (nodes, edges with
    partitioners), JobGraph (vertices with ids, parallelism, operator ids, inputs with ship
    strategy and distribution pattern) and ExecutionGraph (subtasks, partitions, channels).
    Layers passed as ``None`` are left out."""
    lines: List[str] = []
    if transformations is not None:
        lines.append("== Transformations ==")
        lines.extend(_transformation_line(t) for t in _all_transformations(transformations))
        lines.append("")

    nodes = stream_graph.get_stream_nodes()
    lines.append(f"== StreamGraph '{stream_graph.job_name}' ({len(nodes)} nodes, chaining "
                 f"{'enabled' if stream_graph.chaining_enabled else 'disabled'}; partition and "
                 f"side-output transformations are edges, so node ids may skip) ==")
    for n in nodes:
        kind = "source" if n.is_source else ("sink" if n.is_sink else "operator")
        strategy = n.get_chaining_strategy()
        details = [f"parallelism={n.parallelism}"]
        if n.max_parallelism > 0:
            details.append(f"max_parallelism={n.max_parallelism}")
        details.append(f"slot_sharing_group={n.slot_sharing_group!r}")
        if strategy is not None:
            details.append(f"chaining={strategy.value}")
        if n.transformation_uid is not None:
            details.append(f"uid={n.transformation_uid!r}")
        if n.state_key_selector is not None or n.state_key_selector2 is not None:
            details.append("keyed")
        lines.append(f"  node {n.id} [{kind}] '{n.operator_name}' " + " ".join(details))
    for n in stream_graph.get_stream_nodes():
        for e in n.out_edges:
            tag = f" side_output={e.output_tag}" if e.output_tag is not None else ""
            extra = f" type_number={e.type_number}" if e.type_number else ""
            if str(e.exchange_mode) != "UNDEFINED":
                extra += f" exchange={e.exchange_mode}"
            lines.append(f"  edge {e.source_id} -> {e.target_id} {e.partitioner}{extra}{tag}")

    if job_graph is not None:
        lines.append("")
        lines.append(f"== JobGraph '{job_graph.job_name}' ({job_graph.get_number_of_vertices()} vertices) ==")
        for v in job_graph.get_vertices_sorted_topologically_from_sources():
            lines.append(f"  vertex {v.id} '{v.name}' parallelism={v.parallelism} "
                         f"max_parallelism={v.effective_max_parallelism} task={v.invokable_class_name}")
            names = _operator_names(v)
            for pair in v.operator_id_pairs:
                user = (f" (user {pair.user_defined_operator_id})"
                        if pair.user_defined_operator_id is not None else "")
                name = names.get(str(pair.generated_operator_id), "?")
                lines.append(f"    operator {pair.generated_operator_id} '{name}'{user}")
            for num, e in enumerate(v.inputs):
                lines.append(f"    input {num}: from {e.source.producer.id} '{e.source.producer.name}' "
                             f"{e.ship_strategy_name} {e.distribution_pattern.value} "
                             f"data_set={e.source.id} {e.source.result_type.value}")

    if execution_graph is not None:
        lines.append("")
        lines.append(f"== ExecutionGraph ({execution_graph.get_total_number_of_vertices()} subtasks, "
                     f"{execution_graph.state.value}) ==")
        for ejv in execution_graph.get_vertices_topologically():
            for ev in ejv.task_vertices:
                lines.append(f"  {ev.get_task_name_with_subtask_index()} "
                             f"[{ev.current_execution.state.value}]")
                for p in ev.produced_partitions.values():
                    consumers = ", ".join(str(c.subtask_index) for c in p.consumers)
                    lines.append(f"    produces {p.partition_id} subpartitions={p.number_of_subpartitions}"
                                 f" -> subtasks [{consumers}]")
                for num, channels in enumerate(ev.consumed):
                    chans = ", ".join(f"{p.partition_id}[{s}]" for p, s in channels)
                    lines.append(f"    input {num} channels: {chans}")
    return "\n".join(lines) + "\n"


def _operator_names(vertex) -> Dict[str, str]:
    return {str(cfg.operator_id): cfg.operator_name for cfg in vertex.stream_configs.values()}


def render_plan_json(
    stream_graph: StreamGraph,
    job_graph: Optional[JobGraph] = None,
    execution_graph: Optional[ExecutionGraph] = None,
    transformations: Optional[Sequence[Transformation]] = None,
) -> Dict[str, Any]:
    """The JSON form, as a JSON-ready dict (``json.dumps`` it):
    ``{"transformations": [...], "stream_graph": <Flink execution plan>, "job_graph": <Flink
    REST plan, each node also listing "operators" (id, name) in Flink's order>,
    "execution_graph": {"state", "vertices": [...]}}`` (absent layers left out)."""
    out: Dict[str, Any] = {}
    if transformations is not None:
        out["transformations"] = [
            {"id": t.id, "type": type(t).__name__, "name": t.name, "parallelism": t.parallelism,
             "inputs": [i.id for i in t.get_inputs()]}
            for t in _all_transformations(transformations)
        ]
    out["stream_graph"] = stream_graph.get_stream_graph_as_json()
    if job_graph is not None:
        out["job_graph"] = job_graph.to_json_plan()
        by_id = {str(v.get_id()): v for v in job_graph.get_vertices()}
        for node in out["job_graph"]["nodes"]:
            v = by_id[node["id"]]
            names = _operator_names(v)
            node["operators"] = [{"id": str(i), "name": names.get(str(i), "?")} for i in v.get_operator_ids()]
    if execution_graph is not None:
        vertices = []
        for ejv in execution_graph.get_vertices_topologically():
            vertices.append({
                "id": str(ejv.job_vertex.id),
                "name": ejv.name,
                "parallelism": ejv.parallelism,
                "subtasks": [
                    {
                        "subtask": ev.subtask_index,
                        "name": ev.get_task_name_with_subtask_index(),
                        "state": ev.current_execution.state.value,
                        "attempt_id": ev.current_execution.attempt_id,
                        "produced_partitions": [
                            {"id": str(p.partition_id), "subpartitions": p.number_of_subpartitions}
                            for p in ev.produced_partitions.values()
                        ],
                        "inputs": [
                            [{"partition": str(p.partition_id), "subpartition": s} for p, s in channels]
                            for channels in ev.consumed
                        ],
                    }
                    for ev in ejv.task_vertices
                ],
            })
        out["execution_graph"] = {"state": execution_graph.state.value, "vertices": vertices}
    return out

