"""JobGraph generation: chaining, vertices, data sets, ids (rill.graph.job_graph_generator,
rill.graph.job_graph, rill.graph.stream_config)."""

from __future__ import annotations

import pytest

from _builders import Builder, acceptance
from rill.graph.job_graph import (
    DistributionPattern,
    IntermediateDataSetID,
    InvalidProgramException,
    JobGraph,
    JobID,
    JobVertex,
    JobVertexID,
    OperatorID,
    ResultPartitionType,
)
from rill.graph.stream_graph import StreamGraph, StreamNode
from rill.network.partitioner import KeyGroupStreamPartitioner
from rill.operators.base import ChainingStrategy


def _names(jg):
    return [v.get_name() for v in jg.get_vertices_sorted_topologically_from_sources()]


def test_acceptance_job_graph_has_three_vertices():
    _, sg = acceptance()
    jg = sg.get_job_graph()
    assert jg.get_number_of_vertices() == 3
    assert _names(jg) == ["Source: Collection Source", "FlatMap", "Filter -> Sink: Print to Std. Out"]
    src, fm, fs = jg.get_vertices_sorted_topologically_from_sources()
    assert [v.get_parallelism() for v in (src, fm, fs)] == [1, 4, 4]
    assert [v.invokable_class_name for v in (src, fm, fs)] == [
        "SourceOperatorStreamTask", "OneInputStreamTask", "OneInputStreamTask"]
    assert [(e.ship_strategy_name, e.distribution_pattern) for e in fm.get_inputs()] == [
        ("REBALANCE", DistributionPattern.ALL_TO_ALL)]
    assert [(e.ship_strategy_name, e.distribution_pattern) for e in fs.get_inputs()] == [
        ("SHUFFLE", DistributionPattern.ALL_TO_ALL)]
    assert fm.get_inputs()[0].get_source().get_producer() is src
    assert fs.get_inputs()[0].get_source().get_result_type() is ResultPartitionType.PIPELINED_BOUNDED
    # the vertex id is the head's operator id; the head is last
    assert fs.get_operator_ids()[-1] == OperatorID(fs.get_id().get_bytes())
    assert fs.head_node_id == 4


def test_acceptance_without_chaining_has_four_vertices():
    _, sg = acceptance(chaining=False)
    jg = sg.get_job_graph()
    assert _names(jg) == ["Source: Collection Source", "FlatMap", "Filter", "Sink: Print to Std. Out"]
    sink = jg.get_vertices_sorted_topologically_from_sources()[-1]
    (edge,) = sink.get_inputs()
    assert (edge.ship_strategy_name, edge.distribution_pattern, edge.is_forward) == (
        "FORWARD", DistributionPattern.POINTWISE, True)


def test_operator_ids_are_identical_across_builds():
    def ids():
        _, sg = acceptance()
        jg = sg.get_job_graph()
        return [(str(v.get_id()), [str(o) for o in v.get_operator_ids()])
                for v in jg.get_vertices_sorted_topologically_from_sources()]

    assert ids() == ids()
    assert ids() == [
        ("bc764cd8ddf7a0cff126f51c16239658", ["bc764cd8ddf7a0cff126f51c16239658"]),
        ("0a448493b4782967b150582570326227", ["0a448493b4782967b150582570326227"]),
        ("e70bbd798b564e0a50e10e343f1ac56b", ["604ee7bed040266218075078a35a4449",
                                              "e70bbd798b564e0a50e10e343f1ac56b"]),
    ]


def _fork():
    """A→B→D, A→C, B→E, all chainable (Flink's JobVertex#getOperatorIDs javadoc example)."""
    b = Builder()
    a = b.source("A")
    bb = b.one("B", a)
    c = b.one("C", a)
    d = b.one("D", bb)
    e = b.one("E", bb)
    sg = b.stream_graph()
    return sg, dict(A=a, B=bb, C=c, D=d, E=e)


def test_operator_ids_are_post_order_with_the_head_last_for_a_fork():
    sg, t = _fork()
    jg = sg.get_job_graph()
    (v,) = jg.get_vertices()
    from rill.graph.hashing import generate_node_hashes

    h = generate_node_hashes(sg)
    assert v.get_operator_ids() == [OperatorID(h[t[k].id]) for k in "DEBCA"]
    assert v.get_name() == "Source: A -> (B -> (D, E), C)"
    assert v.get_operator_pretty_name() == "Source: A\n:- B\n:  :- D\n:  +- E\n+- C\n"
    assert v.get_id() == JobVertexID(h[t["A"].id])


def test_stream_configs_describe_the_chain():
    sg, t = _fork()
    (v,) = sg.get_job_graph().get_vertices()
    cfg = {name: v.stream_configs[tr.id] for name, tr in t.items()}
    assert [cfg[k].chain_index for k in "ABCDE"] == [0, 1, 1, 2, 2]
    assert [cfg[k].is_chain_start for k in "ABCDE"] == [True, False, False, False, False]
    assert [cfg[k].is_chain_end for k in "ABCDE"] == [False, False, True, True, True]
    assert [e.target_id for e in cfg["A"].chained_outputs] == [t["B"].id, t["C"].id]
    assert [e.target_id for e in cfg["B"].chained_outputs] == [t["D"].id, t["E"].id]
    assert all(c.non_chained_outputs == [] for c in cfg.values())
    assert {c.vertex_id for c in cfg.values()} == {str(v.get_id())}
    assert cfg["A"].is_source and cfg["A"].source.name == "A"
    assert cfg["B"].source is None
    assert cfg["A"].operator_id == str(v.get_id())
    assert all(c.max_parallelism == 128 and c.parallelism == 1 for c in cfg.values())
    assert cfg["C"].operator_factory is sg.get_stream_node(t["C"].id).operator_factory


def test_transitive_out_edges_match_produced_data_sets_and_in_edges_match_inputs():
    b = Builder()
    src = b.source(parallelism=2)
    m = b.one("Map", src, parallelism=2)
    s1 = b.sink(b.shuffle(m), name="one", parallelism=3)
    s2 = b.sink(b.rebalance(src), name="two", parallelism=3)
    jg = b.stream_graph().get_job_graph()
    head = jg.find_vertex_by_id(jg.get_vertices_sorted_topologically_from_sources()[0].get_id())
    assert head.get_name() == "Source: Collection Source -> Map"
    assert [(e.source_id, e.target_id) for e in head.transitive_out_edges] == [(m.id, s1.id), (src.id, s2.id)]
    assert [ds.get_consumers()[0].get_target().get_name() for ds in head.get_produced_data_sets()] == [
        "Sink: one", "Sink: two"]
    cfg = head.stream_configs
    assert [e.target_id for e in cfg[src.id].non_chained_outputs] == [s2.id]
    assert [e.target_id for e in cfg[m.id].non_chained_outputs] == [s1.id]
    for v in jg.get_vertices():
        assert len(v.in_edges) == len(v.get_inputs())
        for se, je in zip(v.in_edges, v.get_inputs()):
            assert str(se.partitioner) == je.ship_strategy_name


def test_union_target_is_not_chained_and_inputs_follow_vertex_creation_order():
    b = Builder()
    s1, s2 = b.source("one"), b.source("two")
    m = b.one("Map", b.union(s1, s2))
    b.sink(m)
    jg = b.stream_graph().get_job_graph()
    assert _names(jg) == ["Source: one", "Source: two", "Map -> Sink: Print to Std. Out"]
    target = jg.get_vertices_sorted_topologically_from_sources()[-1]
    assert [e.get_source().get_producer().get_name() for e in target.get_inputs()] == ["Source: one", "Source: two"]
    assert [e.distribution_pattern for e in target.get_inputs()] == [DistributionPattern.POINTWISE] * 2
    # Flink adds vertices as chains complete: the downstream chain first
    assert [v.get_name() for v in jg.get_vertices()] == [
        "Map -> Sink: Print to Std. Out", "Source: one", "Source: two"]


def test_start_new_chain_and_disable_chaining():
    def names(strategy):
        b = Builder()
        f = b.one("Filter", b.one("Map", b.source()))
        f.set_chaining_strategy(strategy)
        b.sink(f)
        return _names(b.stream_graph().get_job_graph())

    assert names(ChainingStrategy.HEAD) == ["Source: Collection Source -> Map", "Filter -> Sink: Print to Std. Out"]
    assert names(ChainingStrategy.NEVER) == ["Source: Collection Source -> Map", "Filter", "Sink: Print to Std. Out"]


def test_distribution_patterns_and_broadcast_flags():
    for part, pattern, broadcast in (("rescale", DistributionPattern.POINTWISE, False),
                                     ("broadcast", DistributionPattern.ALL_TO_ALL, True),
                                     ("global_", DistributionPattern.ALL_TO_ALL, False)):
        b = Builder()
        b.sink(getattr(b, part)(b.source(parallelism=2)), parallelism=4)
        (edge,) = b.stream_graph().get_job_graph().get_vertices_sorted_topologically_from_sources()[1].get_inputs()
        assert (edge.distribution_pattern, edge.is_broadcast) == (pattern, broadcast), part


def test_max_parallelism_flink_value_and_effective_value():
    b = Builder()
    src = b.source(parallelism=1)
    m = b.one("Map", b.rebalance(src), parallelism=3)
    m.set_max_parallelism(64)
    b.sink(b.rebalance(m), parallelism=300)
    vs = b.stream_graph().get_job_graph().get_vertices_sorted_topologically_from_sources()
    assert [v.get_max_parallelism() for v in vs] == [-1, 64, -1]
    assert [v.effective_max_parallelism for v in vs] == [128, 64, 512]
    assert [v.get_effective_max_parallelism() for v in vs] == [128, 64, 512]
    by_hand = JobVertex("by hand")
    by_hand.set_parallelism(200)
    assert by_hand.get_effective_max_parallelism() == 512
    by_hand.set_max_parallelism(300)
    assert by_hand.get_effective_max_parallelism() == 300


def test_hash_edges_are_configured_for_the_consumers_key_groups():
    def key(x):
        return x

    b = Builder()
    keyed = b.key_by(b.source(parallelism=2), key, max_parallelism=128)
    r = b.one("Reduce", keyed, parallelism=2, keyed_by=key)
    r.set_max_parallelism(16)
    jg = b.stream_graph().get_job_graph()
    v = jg.get_vertices_sorted_topologically_from_sources()[1]
    (edge,) = v.get_inputs()
    assert isinstance(edge.partitioner, KeyGroupStreamPartitioner)
    assert edge.partitioner.max_parallelism == 16
    assert v.in_edges[0].partitioner is edge.partitioner
    assert v.stream_configs[r.id].state_key_selector is key
    assert v.stream_configs[r.id].is_keyed()


def test_uid_hash_becomes_the_user_defined_operator_id():
    b = Builder()
    m = b.one("Map", b.source())
    m.set_uid_hash("0123456789abcdef0123456789abcdef")
    b.sink(m)
    (v,) = b.stream_graph().get_job_graph().get_vertices()
    pairs = v.get_operator_id_pairs()
    assert [p.user_defined_operator_id for p in pairs] == [
        None, OperatorID(bytes.fromhex("0123456789abcdef0123456789abcdef")), None]
    assert v.stream_configs[m.id].user_operator_id == "0123456789abcdef0123456789abcdef"


def test_data_set_ids_are_deterministic():
    def ids():
        _, sg = acceptance()
        return [str(ds.get_id()) for v in sg.get_job_graph().get_vertices() for ds in v.get_produced_data_sets()]

    assert ids() == ids()
    assert len(set(ids())) == 2


def test_json_plan_has_the_shape_of_flinks_rest_plan():
    _, sg = acceptance()
    jg = sg.get_job_graph(job_id=JobID(bytes(16)))
    assert jg.to_json_plan() == {
        "jid": "00000000000000000000000000000000",
        "name": "job",
        "type": "STREAMING",
        "nodes": [
            {"id": "e70bbd798b564e0a50e10e343f1ac56b", "parallelism": 4, "operator": "", "operator_strategy": "",
             "description": "Filter<br/>+- Sink: Print to Std. Out<br/>",
             "inputs": [{"num": 0, "id": "0a448493b4782967b150582570326227", "ship_strategy": "SHUFFLE",
                         "exchange": "pipelined_bounded"}],
             "optimizer_properties": {}},
            {"id": "0a448493b4782967b150582570326227", "parallelism": 4, "operator": "", "operator_strategy": "",
             "description": "FlatMap<br/>",
             "inputs": [{"num": 0, "id": "bc764cd8ddf7a0cff126f51c16239658", "ship_strategy": "REBALANCE",
                         "exchange": "pipelined_bounded"}],
             "optimizer_properties": {}},
            {"id": "bc764cd8ddf7a0cff126f51c16239658", "parallelism": 1, "operator": "", "operator_strategy": "",
             "description": "Source: Collection Source<br/>", "optimizer_properties": {}},
        ],
    }


def test_json_plan_escapes_html_like_flink():
    jg = JobGraph("j")
    v = JobVertex("a<b>", JobVertexID(bytes(16)))
    v.operator_pretty_name = 'x & "é"\n'
    v.set_parallelism(1)
    jg.add_vertex(v)
    assert jg.to_json_plan()["nodes"][0]["description"] == "x &amp; &quot;&eacute;&quot;<br/>"


def _vertex(name, n):
    v = JobVertex(name, JobVertexID(bytes([n]) * 16))
    v.set_parallelism(1)
    return v


def test_topological_sort_and_cycle_detection():
    jg = JobGraph("cyclic")
    a, b, c = _vertex("A", 1), _vertex("B", 2), _vertex("C", 3)
    for v in (c, b, a):
        jg.add_vertex(v)
    b.connect_new_data_set_as_input(a, DistributionPattern.POINTWISE, ResultPartitionType.PIPELINED_BOUNDED)
    c.connect_new_data_set_as_input(b, DistributionPattern.POINTWISE, ResultPartitionType.PIPELINED_BOUNDED)
    assert [v.get_name() for v in jg.get_vertices_sorted_topologically_from_sources()] == ["A", "B", "C"]

    b.connect_new_data_set_as_input(c, DistributionPattern.ALL_TO_ALL, ResultPartitionType.PIPELINED_BOUNDED)
    with pytest.raises(InvalidProgramException) as e:
        jg.get_vertices_sorted_topologically_from_sources()
    assert str(e.value).startswith("The job graph is cyclic: vertices 'C' (")
    assert "'B' (" in str(e.value)


def test_job_graph_rejects_duplicate_vertex_ids():
    jg = JobGraph("j")
    jg.add_vertex(_vertex("A", 1))
    with pytest.raises(ValueError, match="already contains a vertex with id 0101.*'A'.*'B'"):
        jg.add_vertex(_vertex("B", 1))


def test_ids_print_like_flink():
    raw = bytes(range(16))
    assert str(JobVertexID(raw)) == "000102030405060708090a0b0c0d0e0f"
    assert JobVertexID(raw).to_hex_string() == str(JobVertexID(raw))
    assert JobVertexID.from_hex_string("000102030405060708090a0b0c0d0e0f") == JobVertexID(raw)
    assert JobVertexID(raw) != OperatorID(raw)
    assert len(str(IntermediateDataSetID())) == 32
    with pytest.raises(ValueError, match="needs 16 bytes"):
        OperatorID(b"short")
    with pytest.raises(ValueError, match="Not a hex"):
        JobID.from_hex_string("zz")


def test_unreachable_nodes_are_reported():
    sg = StreamGraph("orphans")
    sg.add_node(StreamNode(id=1, operator_name="Lonely", operator_factory=None, parallelism=1))
    with pytest.raises(ValueError, match="StreamNodes 'Lonely-1' are not reachable from any source"):
        sg.get_job_graph()
