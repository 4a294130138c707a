"""Operator settings (name, uid, set_uid_hash, parallelism, max parallelism, slot sharing
group, chaining) as they show in the JobGraph, and as jobs that still run correctly."""

from __future__ import annotations

import pytest

from _ds_helpers import collect, run
from rill.datastream import StreamExecutionEnvironment


def _vertex_names(env):
    return [v.get_name() for v in env.get_stream_graph().get_job_graph()
            .get_vertices_sorted_topologically_from_sources()]


def _pipeline(env, configure_map=lambda ds: ds, configure_filter=lambda ds: ds, configure_sink=lambda s: s):
    ds = configure_map(env.from_collection(list(range(10))).map(lambda x: x + 1))
    ds = configure_filter(ds.filter(lambda x: x % 2 == 0))
    configure_sink(ds.print())
    return ds


def test_default_chain(env):
    _pipeline(env)
    assert _vertex_names(env) == ["Source: Collection Source -> Map -> Filter -> Sink: Print to Std. Out"]


def test_name(env):
    _pipeline(env, configure_map=lambda ds: ds.name("Increment"),
              configure_sink=lambda s: s.name("Out"))
    assert _vertex_names(env) == ["Source: Collection Source -> Increment -> Filter -> Sink: Out"]


def test_start_new_chain(env):
    _pipeline(env, configure_filter=lambda ds: ds.start_new_chain())
    assert _vertex_names(env) == ["Source: Collection Source -> Map", "Filter -> Sink: Print to Std. Out"]


def test_disable_chaining(env):
    _pipeline(env, configure_filter=lambda ds: ds.disable_chaining())
    assert _vertex_names(env) == ["Source: Collection Source -> Map", "Filter", "Sink: Print to Std. Out"]


def test_sink_disable_chaining_and_start_new_chain(env):
    _pipeline(env, configure_sink=lambda s: s.disable_chaining())
    assert _vertex_names(env) == ["Source: Collection Source -> Map -> Filter", "Sink: Print to Std. Out"]
    env2 = StreamExecutionEnvironment.get_execution_environment()
    _pipeline(env2, configure_sink=lambda s: s.start_new_chain())
    assert _vertex_names(env2) == ["Source: Collection Source -> Map -> Filter", "Sink: Print to Std. Out"]


def test_slot_sharing_group_breaks_the_chain_and_is_inherited(env):
    ds = _pipeline(env, configure_map=lambda ds: ds.slot_sharing_group("other"))
    vertices = env.get_stream_graph().get_job_graph().get_vertices_sorted_topologically_from_sources()
    assert [(v.get_name(), v.slot_sharing_group) for v in vertices] == [
        ("Source: Collection Source", "default"),
        ("Map -> Filter -> Sink: Print to Std. Out", "other"),
    ]
    del ds


def test_job_with_two_slot_sharing_groups_runs(env, printed):
    env.set_parallelism(2)
    (env.from_collection([1, 2, 3, 4]).map(lambda x: x * 10).slot_sharing_group("g1").set_parallelism(1)
        .key_by(lambda x: x // 10 % 2).reduce(lambda a, b: a + b).slot_sharing_group("g2")
        .global_().add_sink(print).set_parallelism(1))
    vertices = env.get_stream_graph().get_job_graph().get_vertices_sorted_topologically_from_sources()
    assert [(v.get_name(), v.slot_sharing_group, v.get_parallelism()) for v in vertices] == [
        ("Source: Collection Source", "default", 1), ("Map", "g1", 1), ("Reduce", "g2", 2),
        ("Sink: Unnamed", "g2", 1)]
    run(env)
    # running sums per key: key 1 gets 10, 30; key 0 gets 20, 40
    assert sorted(printed().split(), key=int) == ["10", "20", "40", "60"]


def test_set_parallelism_breaks_the_chain(env):
    _pipeline(env, configure_map=lambda ds: ds.set_parallelism(2))
    vertices = env.get_stream_graph().get_job_graph().get_vertices_sorted_topologically_from_sources()
    assert [(v.get_name(), v.get_parallelism()) for v in vertices] == [
        ("Source: Collection Source", 1), ("Map", 2), ("Filter -> Sink: Print to Std. Out", 1)]
    assert [e.get_ship_strategy_name() for v in vertices[1:] for e in v.get_inputs()] == ["REBALANCE", "REBALANCE"]


def test_set_parallelism_results(env):
    ds = (env.from_collection(list(range(100))).map(lambda x: x + 1).set_parallelism(3)
          .filter(lambda x: x % 2 == 0).set_parallelism(2))
    assert sorted(collect(ds)) == list(range(2, 101, 2))


def test_set_max_parallelism_on_an_operator(env):
    env.set_parallelism(2)
    env.from_collection([1]).key_by(lambda x: x).map(lambda x: x).set_max_parallelism(5).add_sink(lambda v: None)
    vertices = env.get_stream_graph().get_job_graph().get_vertices_sorted_topologically_from_sources()
    assert [(v.get_name(), v.get_max_parallelism()) for v in vertices] == [
        ("Source: Collection Source", 1), ("Map -> Sink: Unnamed", 5)]


def test_uid_sets_the_operator_id_and_set_uid_hash_the_user_id(env):
    def ids(uid=None, uid_hash=None):
        e = StreamExecutionEnvironment.get_execution_environment()
        m = e.from_collection([1]).map(lambda x: x).disable_chaining()
        if uid:
            m.uid(uid)
        if uid_hash:
            m.set_uid_hash(uid_hash)
        m.add_sink(lambda v: None)
        [v] = [v for v in e.get_stream_graph().get_job_graph().get_vertices() if v.get_name() == "Map"]
        [pair] = v.get_operator_id_pairs()
        return str(pair.get_generated_operator_id()), pair.get_user_defined_operator_id()

    plain, plain_user = ids()
    with_uid, _ = ids(uid="my-map")
    assert plain != with_uid
    assert ids(uid="my-map")[0] == with_uid
    assert plain_user is None
    generated, user = ids(uid_hash="ABCDEF0123456789abcdef0123456789")
    assert generated == plain
    assert str(user) == "abcdef0123456789abcdef0123456789"


def test_uid_and_name_on_sinks(env):
    env.from_collection([1]).add_sink(lambda v: None).name("S").uid("sink-uid").set_parallelism(1)
    assert _vertex_names(env) == ["Source: Collection Source -> Sink: S"]


def test_settings_on_a_keyed_stream_are_refused(env):
    keyed = env.from_collection([1]).key_by(lambda x: x)
    with pytest.raises(TypeError, match="KeyedStream"):
        keyed.set_parallelism(2)
    with pytest.raises(TypeError, match="KeyedStream"):
        keyed.uid("x")


def test_settings_on_a_partitioned_stream_are_refused(env):
    with pytest.raises(TypeError, match="partition"):
        env.from_collection([1]).rebalance().set_parallelism(2)
