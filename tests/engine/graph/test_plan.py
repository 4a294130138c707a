"""Printable plans (rill.graph.plan) and the package's public surface."""

from __future__ import annotations

import json

from _builders import acceptance
import rill.graph
from rill.graph.execution_graph import ExecutionGraph
from rill.graph.job_graph import JobID
from rill.graph.plan import render_plan, render_plan_json

EXPECTED_TEXT = """\
== Transformations ==
  [1] SourceTransformation 'Collection Source' parallelism=1 inputs=[]
  [2] OneInputTransformation 'FlatMap' parallelism=4 inputs=[1]
  [3] PartitionTransformation 'Partition' parallelism=4 inputs=[2] partitioner=SHUFFLE
  [4] OneInputTransformation 'Filter' parallelism=4 inputs=[3]
  [5] SinkTransformation 'Print to Std. Out' parallelism=4 inputs=[4]

== StreamGraph 'job' (4 nodes, chaining enabled; partition and side-output transformations are edges, so node ids may skip) ==
  node 1 [source] 'Source: Collection Source' parallelism=1 slot_sharing_group='default' chaining=HEAD
  node 2 [operator] 'FlatMap' parallelism=4 slot_sharing_group='default' chaining=ALWAYS
  node 4 [operator] 'Filter' parallelism=4 slot_sharing_group='default' chaining=ALWAYS
  node 5 [sink] 'Sink: Print to Std. Out' parallelism=4 slot_sharing_group='default' chaining=ALWAYS
  edge 1 -> 2 REBALANCE
  edge 2 -> 4 SHUFFLE
  edge 4 -> 5 FORWARD

== JobGraph 'job' (3 vertices) ==
  vertex bc764cd8ddf7a0cff126f51c16239658 'Source: Collection Source' parallelism=1 max_parallelism=128 task=SourceOperatorStreamTask
    operator bc764cd8ddf7a0cff126f51c16239658 'Source: Collection Source'
  vertex 0a448493b4782967b150582570326227 'FlatMap' parallelism=4 max_parallelism=128 task=OneInputStreamTask
    operator 0a448493b4782967b150582570326227 'FlatMap'
    input 0: from bc764cd8ddf7a0cff126f51c16239658 'Source: Collection Source' REBALANCE ALL_TO_ALL data_set={ds0} PIPELINED_BOUNDED
  vertex e70bbd798b564e0a50e10e343f1ac56b 'Filter -> Sink: Print to Std. Out' parallelism=4 max_parallelism=128 task=OneInputStreamTask
    operator 604ee7bed040266218075078a35a4449 'Sink: Print to Std. Out'
    operator e70bbd798b564e0a50e10e343f1ac56b 'Filter'
    input 0: from 0a448493b4782967b150582570326227 'FlatMap' SHUFFLE ALL_TO_ALL data_set={ds1} PIPELINED_BOUNDED
"""


def _build():
    b, sg = acceptance()
    jg = sg.get_job_graph(job_id=JobID(bytes(16)))
    return b, sg, jg, ExecutionGraph.build(jg)


def test_text_plan_shows_all_layers():
    b, sg, jg, eg = _build()
    ds0, ds1 = (str(v.get_produced_data_sets()[0].get_id())
                for v in jg.get_vertices_sorted_topologically_from_sources()[:2])
    text = render_plan(sg, jg, eg, b.transformations)
    head, _, execution = text.partition("\n== ExecutionGraph")
    assert head + "\n" == EXPECTED_TEXT.format(ds0=ds0, ds1=ds1) + "\n"
    lines = execution.splitlines()
    assert lines[0] == " (9 subtasks, CREATED) =="
    assert lines[1:4] == [
        "  Source: Collection Source (1/1) [CREATED]",
        f"    produces {ds0}#0 subpartitions=4 -> subtasks [0, 1, 2, 3]",
        "  FlatMap (1/4) [CREATED]",
    ]
    assert lines[-1] == (f"    input 0 channels: {ds1}#0[3], {ds1}#1[3], {ds1}#2[3], {ds1}#3[3]")


def test_text_plan_without_optional_layers():
    _, sg, _, _ = _build()
    text = render_plan(sg)
    assert text.startswith("== StreamGraph 'job' (4 nodes, chaining enabled;")
    assert "JobGraph" not in text and "Transformations" not in text


def test_json_plan_combines_flinks_two_formats():
    _, sg, jg, eg = _build()
    d = render_plan_json(sg, jg, eg)
    assert d["stream_graph"] == sg.get_stream_graph_as_json()
    rest = jg.to_json_plan()
    assert {k: v for k, v in d["job_graph"].items() if k != "nodes"} == {k: v for k, v in rest.items() if k != "nodes"}
    # Flink's REST plan nodes, each extended with the vertex's operators in Flink's order
    assert [{k: v for k, v in n.items() if k != "operators"} for n in d["job_graph"]["nodes"]] == rest["nodes"]
    chain = next(n for n in d["job_graph"]["nodes"] if n["id"] == "e70bbd798b564e0a50e10e343f1ac56b")
    assert chain["operators"] == [
        {"id": "604ee7bed040266218075078a35a4449", "name": "Sink: Print to Std. Out"},
        {"id": "e70bbd798b564e0a50e10e343f1ac56b", "name": "Filter"}]
    assert [v["name"] for v in d["execution_graph"]["vertices"]] == [
        "Source: Collection Source", "FlatMap", "Filter -> Sink: Print to Std. Out"]
    sub = d["execution_graph"]["vertices"][2]["subtasks"][1]
    assert sub["name"] == "Filter -> Sink: Print to Std. Out (2/4)"
    assert [c["subpartition"] for c in sub["inputs"][0]] == [1, 1, 1, 1]
    assert json.loads(json.dumps(d))["job_graph"]["jid"] == "0" * 32


def test_public_surface():
    for name in rill.graph.__all__:
        assert hasattr(rill.graph, name), name
    assert {"StreamGraphGenerator", "StreamGraph", "StreamingJobGraphGenerator", "JobGraph",
            "ExecutionGraph", "StreamGraphHasherV2", "render_plan", "ExecutionState",
            "JobStatus", "StreamConfig"} <= set(rill.graph.__all__)
