"""StreamGraph generation (rill.graph.stream_graph_generator, rill.graph.stream_graph)."""

from __future__ import annotations

import json

import pytest

from _builders import Builder, acceptance
from rill.graph.stream_graph import StreamGraph, is_chainable
from rill.graph.stream_graph_generator import StreamGraphGenerator
from rill.graph.transformations import ExchangeMode, Transformation
from rill.network.partitioner import (
    ForwardPartitioner,
    KeyGroupStreamPartitioner,
    RebalancePartitioner,
    ShufflePartitioner,
)
from rill.operators.base import ChainingStrategy
from rill.operators.output_tag import OutputTag


def _edges(sg: StreamGraph):
    return [(e.source_id, e.target_id, str(e.partitioner)) for n in sg.get_stream_nodes() for e in n.out_edges]


def test_acceptance_topology_stream_graph():
    _, sg = acceptance()
    assert [(n.id, n.operator_name, n.parallelism) for n in sg.get_stream_nodes()] == [
        (1, "Source: Collection Source", 1),
        (2, "FlatMap", 4),
        (4, "Filter", 4),
        (5, "Sink: Print to Std. Out", 4),
    ]
    assert _edges(sg) == [(1, 2, "REBALANCE"), (2, 4, "SHUFFLE"), (4, 5, "FORWARD")]
    assert sg.get_source_ids() == [1]
    assert sg.get_sink_ids() == [5]
    assert sg.get_stream_node(1).source.name == "Collection Source"
    assert sg.get_stream_node(1).is_source and sg.get_stream_node(5).is_sink
    assert [n.job_vertex_class for n in sg.get_stream_nodes()] == [
        "SourceOperatorStreamTask", "OneInputStreamTask", "OneInputStreamTask", "OneInputStreamTask"]


def test_acceptance_topology_execution_plan_json():
    _, sg = acceptance()
    assert json.loads(sg.get_streaming_plan_as_json()) == {
        "nodes": [
            {"id": 1, "type": "Source: Collection Source", "pact": "Data Source",
             "contents": "Source: Collection Source", "parallelism": 1},
            {"id": 2, "type": "FlatMap", "pact": "Operator", "contents": "FlatMap", "parallelism": 4,
             "predecessors": [{"id": 1, "ship_strategy": "REBALANCE", "side": "second"}]},
            {"id": 4, "type": "Filter", "pact": "Operator", "contents": "Filter", "parallelism": 4,
             "predecessors": [{"id": 2, "ship_strategy": "SHUFFLE", "side": "second"}]},
            {"id": 5, "type": "Sink: Print to Std. Out", "pact": "Data Sink",
             "contents": "Sink: Print to Std. Out", "parallelism": 4,
             "predecessors": [{"id": 4, "ship_strategy": "FORWARD", "side": "second"}]},
        ]
    }


def test_execution_plan_lists_sinks_last_and_uses_descriptions():
    b = Builder()
    src = b.source()
    b.sink(src, name="Early")  # id 2, a sink: listed after the operator with id 3
    m = b.one("Map", src)
    m.description = "maps things"
    b.sink(m)
    plan = b.stream_graph().get_stream_graph_as_json()
    assert [n["id"] for n in plan["nodes"]] == [1, 3, 2, 4]
    assert plan["nodes"][1]["contents"] == "maps things"
    assert plan["nodes"][1]["type"] == "Map"


def test_default_partitioner_is_forward_for_equal_and_rebalance_for_different_parallelism():
    b = Builder()
    src = b.source(parallelism=2)
    a = b.one("A", src, parallelism=2)
    b.one("B", a, parallelism=3)
    sg = b.stream_graph()
    edges = sg.get_stream_node(src.id).out_edges + sg.get_stream_node(a.id).out_edges
    assert isinstance(edges[0].partitioner, ForwardPartitioner)
    assert isinstance(edges[1].partitioner, RebalancePartitioner)


def test_parallelism_minus_one_takes_the_default():
    b = Builder()
    m = b.one("Map", b.source())
    assert b.stream_graph(parallelism=3).get_stream_node(m.id).parallelism == 3


def test_forward_between_different_parallelisms_fails_at_generation():
    b = Builder()
    src = b.source(parallelism=1)
    b.one("Map", b.forward(src), parallelism=4)
    with pytest.raises(ValueError) as e:
        b.stream_graph()
    assert str(e.value) == (
        "Forward partitioning does not allow change of parallelism. Upstream operation: "
        "Source: Collection Source-1 parallelism: 1, downstream operation: Map-3 parallelism: 4 "
        "You must use another partitioning strategy, such as broadcast, rebalance, shuffle or global."
    )


def test_max_parallelism_below_parallelism_fails():
    b = Builder()
    m = b.one("Map", b.source(), parallelism=4)
    m.set_max_parallelism(2)
    with pytest.raises(ValueError) as e:
        b.stream_graph()
    assert str(e.value) == (
        "Vertex Map's parallelism (4) is higher than the max parallelism (2). Please lower the "
        "parallelism or increase the max parallelism."
    )


def test_environment_max_parallelism_below_parallelism_fails():
    b = Builder()
    b.one("Map", b.source(parallelism=1), parallelism=8)
    with pytest.raises(ValueError, match=r"Vertex Map's parallelism \(8\) is higher than the max parallelism \(4\)"):
        b.stream_graph(max_parallelism=4)


def test_parallelism_below_one_fails_naming_the_operator():
    b = Builder()
    m = b.one("Map", b.source())
    m.parallelism = 0  # bypasses Transformation.set_parallelism's own check
    with pytest.raises(ValueError, match="The parallelism of operator 'Map' must be at least 1, got 0"):
        b.stream_graph()
    with pytest.raises(ValueError, match="default parallelism must be at least 1"):
        StreamGraphGenerator([], default_parallelism=0)
    with pytest.raises(ValueError, match="default max parallelism"):
        StreamGraphGenerator([], default_max_parallelism=0)


def test_effective_max_parallelism_own_then_environment_then_default():
    b = Builder()
    src = b.source(parallelism=2)
    own = b.one("Own", src, parallelism=2)
    own.set_max_parallelism(16)
    other = b.one("Other", src, parallelism=200)
    sg = b.stream_graph()
    assert sg.get_effective_max_parallelism(own.id) == 16
    assert sg.get_stream_node(other.id).max_parallelism == -1
    assert sg.get_effective_max_parallelism(other.id) == 512  # roundUpToPowerOfTwo(300)
    assert sg.get_effective_max_parallelism(src.id) == 128

    sg_env = b.stream_graph(max_parallelism=1024)
    assert sg_env.get_stream_node(own.id).max_parallelism == 16
    assert sg_env.get_stream_node(other.id).max_parallelism == 1024
    assert sg_env.get_effective_max_parallelism(other.id) == 1024


def test_keyed_node_gets_its_key_selector():
    def key(x):
        return x[0]

    b = Builder()
    keyed = b.key_by(b.source(), key)
    r = b.one("Reduce", keyed, keyed_by=key)
    r_t = r
    r_t.state_key_type = "STRING"
    sg = b.stream_graph()
    node = sg.get_stream_node(r.id)
    assert node.state_key_selector is key
    assert node.state_key_type == "STRING"
    edge = node.in_edges[0]
    assert isinstance(edge.partitioner, KeyGroupStreamPartitioner)
    assert str(edge.partitioner) == "HASH"


def test_slot_sharing_group_explicit_inherited_or_default():
    b = Builder()
    s1 = b.source("s1")
    s1.slot_sharing_group = "g1"
    s2 = b.source("s2")
    s2.slot_sharing_group = "g2"
    inherits = b.one("Inherits", s1)
    explicit = b.one("Explicit", s1)
    explicit.slot_sharing_group = "mine"
    mixed = b.one("Mixed", b.union(s1, s2))
    plain = b.one("Plain", b.source("s3"))
    shuffled = b.one("AfterShuffle", b.shuffle(s2))
    sg = b.stream_graph()
    groups = {t.name: sg.get_stream_node(t.id).slot_sharing_group
              for t in (inherits, explicit, mixed, plain, shuffled)}
    assert groups == {"Inherits": "g1", "Explicit": "mine", "Mixed": "default", "Plain": "default",
                      "AfterShuffle": "g2"}


def test_union_becomes_edges_only():
    b = Builder()
    s1, s2 = b.source("a"), b.source("b")
    u = b.union(s1, s2)
    m = b.one("Map", u)
    sg = b.stream_graph()
    assert sorted(sg.nodes) == [s1.id, s2.id, m.id]
    assert u.id not in sg.nodes
    assert [e.source_id for e in sg.get_stream_node(m.id).in_edges] == [s1.id, s2.id]
    assert all(e.type_number == 0 for e in sg.get_stream_node(m.id).in_edges)


def test_union_of_partitioned_streams_keeps_each_partitioner():
    b = Builder()
    s1, s2 = b.source("a", parallelism=2), b.source("b", parallelism=2)
    m = b.one("Map", b.union(b.shuffle(s1), s2), parallelism=2)
    sg = b.stream_graph()
    assert [str(e.partitioner) for e in sg.get_stream_node(m.id).in_edges] == ["SHUFFLE", "FORWARD"]


def test_self_union_gives_distinct_edges():
    b = Builder()
    s = b.source()
    m = b.one("Map", b.union(s, s))
    sg = b.stream_graph()
    e0, e1 = sg.get_stream_node(m.id).in_edges
    assert (e0.unique_id, e1.unique_id) == (0, 1)
    assert e0.edge_id == "Source: Collection Source-1_Map-3_0_FORWARD_0"
    assert e1.edge_id == "Source: Collection Source-1_Map-3_0_FORWARD_1"
    assert str(e0) == (
        "(Source: Collection Source-1 -> Map-3, typeNumber=0, outputPartitioner=FORWARD, "
        "exchangeMode=UNDEFINED, bufferTimeout=100, outputTag=None, uniqueId=0)"
    )
    # two in-edges of the same input: never chained (Flink: unions go through the network)
    assert not is_chainable(e0, sg)


def test_side_output_is_a_virtual_node_that_puts_its_tag_on_the_edge():
    tag = OutputTag("late")
    b = Builder()
    p = b.one("Process", b.source())
    side = b.side_output(p, tag)
    late_sink = b.sink(side, name="Late")
    main_sink = b.sink(p, name="Main")
    sg = b.stream_graph()
    assert side.id not in sg.nodes
    assert list(sg.virtual_side_output_nodes.values()) == [(p.id, tag)]
    assert all(v < 0 for v in sg.virtual_side_output_nodes)
    out = sg.get_stream_node(p.id).out_edges
    assert [(e.target_id, e.output_tag) for e in out] == [(late_sink.id, tag), (main_sink.id, None)]


def test_partition_virtual_nodes_and_exchange_mode():
    b = Builder()
    src = b.source(parallelism=2)
    part = b.partition(src, ForwardPartitioner(), ExchangeMode.BATCH)
    m = b.one("Map", part, parallelism=2)
    sg = b.stream_graph()
    (vid, (orig, partitioner, mode)), = sg.virtual_partition_nodes.items()
    assert vid < 0 and orig == src.id and mode == ExchangeMode.BATCH
    edge = sg.get_stream_node(m.id).in_edges[0]
    assert edge.exchange_mode == ExchangeMode.BATCH
    assert not is_chainable(edge, sg)  # a BATCH exchange is never chained


def test_partition_of_a_side_output():
    tag = OutputTag("side")
    b = Builder()
    p = b.one("Process", b.source(parallelism=2), parallelism=2)
    s = b.sink(b.shuffle(b.side_output(p, tag)), parallelism=3)
    sg = b.stream_graph()
    edge = sg.get_stream_node(s.id).in_edges[0]
    assert (edge.source_id, str(edge.partitioner), edge.output_tag) == (p.id, "SHUFFLE", tag)


def test_each_transformation_is_translated_once_and_out_edges_follow_creation_order():
    b = Builder()
    src = b.source()
    m = b.one("Map", src)
    s1 = b.sink(m, name="one")
    s2 = b.sink(m, name="two")
    sg = StreamGraphGenerator([m, s1, m, s2, s1], default_parallelism=1).generate()
    assert sorted(sg.nodes) == [src.id, m.id, s1.id, s2.id]
    assert [e.target_id for e in sg.get_stream_node(m.id).out_edges] == [s1.id, s2.id]


def test_explicit_partitioner_is_copied_per_edge():
    b = Builder()
    s1, s2 = b.source("a", parallelism=2), b.source("b", parallelism=2)
    shuffled = b.shuffle(b.union(s1, s2))
    m = b.one("Map", shuffled, parallelism=3)
    sg = b.stream_graph()
    p1, p2 = (e.partitioner for e in sg.get_stream_node(m.id).in_edges)
    assert isinstance(p1, ShufflePartitioner) and p1 is not p2
    assert p1 is not shuffled.partitioner


def test_two_input_operator_edges_and_task_class():
    def k1(x):
        return x

    def k2(x):
        return -x

    b = Builder()
    a, c = b.source("a"), b.source("c")
    co = b.two("CoMap", a, c)
    co.state_key_selector1, co.state_key_selector2 = k1, k2
    sg = b.stream_graph()
    node = sg.get_stream_node(co.id)
    assert [(e.source_id, e.type_number) for e in node.in_edges] == [(a.id, 1), (c.id, 2)]
    assert node.job_vertex_class == "TwoInputStreamTask"
    assert (node.state_key_selector, node.state_key_selector2) == (k1, k2)


def test_buffer_timeout_default_or_explicit_and_on_edges():
    b = Builder()
    src = b.source()
    src.buffer_timeout_ms = 0
    m = b.one("Map", src)
    sg = StreamGraphGenerator(b.transformations, default_parallelism=1, default_buffer_timeout_ms=50).generate()
    assert sg.get_stream_node(src.id).buffer_timeout_ms == 0
    assert sg.get_stream_node(m.id).buffer_timeout_ms == 50
    assert sg.get_stream_node(m.id).in_edges[0].buffer_timeout_ms == 0


def test_uid_and_uid_hash_reach_the_node():
    b = Builder()
    m = b.one("Map", b.source())
    m.set_uid("u")
    m.set_uid_hash("ff" * 16)
    node = b.stream_graph().get_stream_node(m.id)
    assert (node.transformation_uid, node.user_hash) == ("u", "ff" * 16)


def test_unknown_transformation_type_is_rejected():
    class Odd(Transformation):
        pass

    with pytest.raises(TypeError, match="Unknown transformation .*Odd"):
        StreamGraphGenerator([Odd(1, "odd")]).generate()


def test_duplicate_transformation_id_is_rejected():
    b = Builder()
    src = b.source()
    b.one("A", src, id=7)
    b.one("B", src, id=7)
    with pytest.raises(ValueError, match="Duplicate transformation id 7"):
        b.stream_graph()


def test_is_chainable_conditions():
    def graph(**kw):
        b = Builder()
        src = b.source(parallelism=kw.get("p_up", 1), chaining=kw.get("up_strategy"))
        inp = b.rebalance(src) if kw.get("rebalance") else src
        m = b.one("Map", inp, parallelism=kw.get("p_down", 1), chaining=kw.get("down_strategy"))
        if kw.get("group"):
            m.slot_sharing_group = "other"
        sg = b.stream_graph(chaining=kw.get("chaining", True))
        return is_chainable(sg.get_stream_node(m.id).in_edges[0], sg)

    assert graph()
    assert not graph(chaining=False)
    assert not graph(group=True)
    assert not graph(rebalance=True)
    assert not graph(p_down=2, rebalance=True)
    assert not graph(up_strategy=ChainingStrategy.NEVER)
    assert not graph(down_strategy=ChainingStrategy.NEVER)
    assert not graph(down_strategy=ChainingStrategy.HEAD)
    assert graph(up_strategy=ChainingStrategy.ALWAYS)
    # HEAD_WITH_SOURCES chains only directly after a source (Flink's areOperatorsChainable)
    assert graph(down_strategy=ChainingStrategy.HEAD_WITH_SOURCES)
    b = Builder()
    m = b.one("Map", b.source())
    h = b.one("H", m, chaining=ChainingStrategy.HEAD_WITH_SOURCES)
    sg = b.stream_graph()
    assert not is_chainable(sg.get_stream_node(h.id).in_edges[0], sg)


def test_get_stream_node_unknown_id():
    with pytest.raises(KeyError, match="No StreamNode with id 42"):
        StreamGraph("j").get_stream_node(42)
