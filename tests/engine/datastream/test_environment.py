"""StreamExecutionEnvironment end to end: settings, built-in sources, execute / execute_async,
JobClient, metrics, execution plan and JobGraph."""

from __future__ import annotations

import json
import re

import pytest

from rill.common import Configuration, JobExecutionResult, JobStatus
from rill.common.checkpointing_options import CheckpointingMode, CheckpointingOptions
from rill.datastream import StreamExecutionEnvironment
from rill.runtime.errors import JobExecutionException

from _ds_helpers import collect, run, wait_until


# -- settings --------------------------------------------------------------------------------

def test_get_execution_environment_with_configuration(execution_mode):
    conf = Configuration()
    conf.set_integer("parallelism.default", 3)
    conf.set_integer("pipeline.max-parallelism", 64)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    assert env.get_parallelism() == 3
    assert env.get_max_parallelism() == 64
    assert env.get_configuration().get_integer("parallelism.default") == 3
    ds = env.from_sequence(1, 30).map(lambda x: x * 10)
    [vertex] = env.get_stream_graph().get_job_graph().get_vertices()
    assert (vertex.get_name(), vertex.get_parallelism(), vertex.get_max_parallelism()) == \
        ("Source: Sequence Source -> Map", 3, 64)
    assert sorted(collect(ds)) == [x * 10 for x in range(1, 31)]


def test_configuration_disables_chaining():
    conf = Configuration().set_boolean("pipeline.operator-chaining.enabled", False)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    assert env.is_chaining_enabled() is False
    env.from_collection([1]).map(str).print()
    names = [v.get_name() for v in env.get_stream_graph().get_job_graph()
             .get_vertices_sorted_topologically_from_sources()]
    assert names == ["Source: Collection Source", "Map", "Sink: Print to Std. Out"]


def test_set_and_get_parallelism(env):
    assert env.get_parallelism() == 1
    assert env.set_parallelism(4) is env
    assert env.get_parallelism() == 4
    ds = env.from_sequence(0, 9)
    assert ds.get_parallelism() == 4
    assert ds.map(lambda x: x).set_parallelism(2).get_parallelism() == 2


def test_set_max_parallelism_sets_the_key_groups(env):
    assert env.set_max_parallelism(16) is env
    assert env.get_max_parallelism() == 16
    env.set_parallelism(2)
    env.from_sequence(0, 9).key_by(lambda x: x % 3).reduce(lambda a, b: a + b).print()
    vertices = env.get_stream_graph().get_job_graph().get_vertices_sorted_topologically_from_sources()
    assert [v.get_max_parallelism() for v in vertices] == [16, 16]


def test_disable_operator_chaining_gives_identical_results(execution_mode):
    def build(chaining: bool):
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(2)
        if not chaining:
            assert env.disable_operator_chaining() is env
        ds = (env.from_sequence(1, 200)
              .map(lambda x: (x % 7, x))
              .filter(lambda t: t[1] % 3 != 0)
              .key_by(lambda t: t[0])
              .sum(1)
              .map(lambda t: t))
        return env, ds

    env_a, ds_a = build(True)
    env_b, ds_b = build(False)
    n_chained = len(env_a.get_stream_graph().get_job_graph().get_vertices())
    n_unchained = len(env_b.get_stream_graph().get_job_graph().get_vertices())
    assert (n_chained, n_unchained) == (2, 5)
    out_a, out_b = collect(ds_a), collect(ds_b)
    final_a = {k: v for k, v in sorted(out_a, key=lambda t: t[1])}
    assert len(out_a) == len(out_b) == sum(1 for x in range(1, 201) if x % 3 != 0)
    # Each key's running sums, in the order its subtask emitted them, add exactly that key's
    # inputs whatever the chaining. (The sums themselves depend on how the two source subtasks'
    # records interleave, which no mode fixes: on a cluster the same program gave other sums.)
    def increments(out):
        per_key = {}
        for key, total in out:
            per_key.setdefault(key, []).append(total)
        return {k: sorted(b - a for a, b in zip([0] + v, v)) for k, v in per_key.items()}

    inputs = {}
    for x in range(1, 201):
        if x % 3:
            inputs.setdefault(x % 7, []).append(x)
    assert increments(out_a) == increments(out_b) == inputs
    assert final_a == {k: sum(v) for k, v in inputs.items()}


# -- built-in sources --------------------------------------------------------------------------

def test_from_collection_preserves_order_at_parallelism_1(env):
    data = [5, 3, "x", (1, 2), None, 3.5] + list(range(3000, 0, -1))
    assert collect(env.from_collection(data)) == data


def test_from_collection_keeps_order_through_a_chain(env):
    assert collect(env.from_collection(list("rill")).map(str.upper)) == ["R", "I", "L", "L"]


def test_from_sequence_emits_every_number_once_at_parallelism_3(env):
    env.set_parallelism(3)
    out = collect(env.from_sequence(-5, 2500))
    assert sorted(out) == list(range(-5, 2501))


def test_from_sequence_single_number(env):
    assert collect(env.from_sequence(7, 7)) == [7]


# -- execute / execute_async -------------------------------------------------------------------

def test_execute_returns_job_execution_result(env):
    env.from_collection([1, 2, 3]).map(lambda x: x).add_sink(lambda v: None)
    result = env.execute("my job")
    assert isinstance(result, JobExecutionResult)
    assert re.fullmatch(r"[0-9a-f]{32}", result.get_job_id())
    assert result.get_job_name() == "my job"
    assert isinstance(result.get_net_runtime(), int)
    assert result.get_net_runtime() >= 0


def test_execute_default_job_name(env):
    env.from_collection([1]).add_sink(lambda v: None)
    assert run(env).get_job_name() == "Flink Streaming Job"


def test_execute_async_returns_a_job_client_and_its_result(env):
    sink_values = []
    env.from_collection(list(range(10))).add_sink(sink_values.append)
    client = env.execute_async("async job")
    assert re.fullmatch(r"[0-9a-f]{32}", client.get_job_id())
    result = client.get_job_execution_result().result(timeout=30)
    assert result.get_job_id() == client.get_job_id()
    assert client.get_job_status() is JobStatus.FINISHED
    # the sink function is a per-subtask copy: the list of the test stays empty
    assert sink_values == []


def test_metrics_count_records_exactly(env):
    sink_env = env
    sink_env.from_collection(list(range(10))) \
        .map(lambda x: x * 2) \
        .filter(lambda x: x % 4 == 0) \
        .rebalance() \
        .add_sink(lambda v: None).set_parallelism(2)
    client = sink_env.execute_async("metrics")
    client.get_job_execution_result().result(timeout=30)
    metrics = client.get_metrics()
    by_task = {}
    for m in metrics:
        by_task.setdefault(m.task_name, []).append(m)
    assert sorted(by_task) == ["Sink: Unnamed", "Source: Collection Source -> Map -> Filter"]
    [source] = by_task["Source: Collection Source -> Map -> Filter"]
    assert (source.num_records_in, source.num_records_out) == (0, 5)
    sinks = sorted(by_task["Sink: Unnamed"], key=lambda m: m.subtask_index)
    assert [m.subtask_index for m in sinks] == [0, 1]
    assert sum(m.num_records_in for m in sinks) == 5
    # rebalance: round robin, so 3 and 2 (in some order)
    assert sorted(m.num_records_in for m in sinks) == [2, 3]
    assert [m.num_records_out for m in sinks] == [0, 0]
    summaries = {s.name: (s.records_in, s.records_out) for s in client.get_vertex_summaries()}
    assert summaries == {"Source: Collection Source -> Map -> Filter": (0, 5), "Sink: Unnamed": (5, 0)}


def test_job_status_running_then_finished(env):
    import time as _time

    def slow(x):
        _time.sleep(0.002)
        return x

    env.from_sequence(1, 150).map(slow).add_sink(lambda v: None)
    client = env.execute_async("status")
    assert client.get_job_status() in (JobStatus.CREATED, JobStatus.RUNNING)
    # CREATED until the job's first report (a cluster client), then RUNNING for >= 0.3 s
    assert wait_until(lambda: client.get_job_status() is JobStatus.RUNNING or client.is_done(), 30.0)
    seen_running = client.get_job_status() is JobStatus.RUNNING
    client.get_job_execution_result().result(timeout=30)
    assert seen_running
    assert client.get_job_status() is JobStatus.FINISHED
    assert client.is_done()


# -- plans -------------------------------------------------------------------------------------

def test_get_execution_plan_is_flinks_json(env):
    env.set_parallelism(2)
    (env.from_collection(["a b", "c"])
        .flat_map(str.split).name("Splitter")
        .map(lambda w: (w, 1))
        .key_by(lambda t: t[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .print())
    plan = json.loads(env.get_execution_plan())
    assert plan == {"nodes": [
        {"id": 1, "type": "Source: Collection Source", "pact": "Data Source",
         "contents": "Source: Collection Source", "parallelism": 1},
        {"id": 2, "type": "Splitter", "pact": "Operator", "contents": "Splitter", "parallelism": 2,
         "predecessors": [{"id": 1, "ship_strategy": "REBALANCE", "side": "second"}]},
        {"id": 3, "type": "Map", "pact": "Operator", "contents": "Map", "parallelism": 2,
         "predecessors": [{"id": 2, "ship_strategy": "FORWARD", "side": "second"}]},
        {"id": 5, "type": "Reduce", "pact": "Operator", "contents": "Reduce", "parallelism": 2,
         "predecessors": [{"id": 3, "ship_strategy": "HASH", "side": "second"}]},
        {"id": 6, "type": "Sink: Print to Std. Out", "pact": "Data Sink",
         "contents": "Sink: Print to Std. Out", "parallelism": 2,
         "predecessors": [{"id": 5, "ship_strategy": "FORWARD", "side": "second"}]},
    ]}


def test_get_execution_plan_does_not_consume_the_program(env, printed):
    env.from_collection([1, 2]).print()
    env.get_execution_plan()
    run(env)
    assert printed() == "1\n2\n"


def test_job_graph_vertices_sorted_topologically(env):
    env.set_parallelism(2)
    (env.from_collection([1, 2, 3])
        .map(lambda x: x).uid("the-map")
        .filter(lambda x: True)
        .key_by(lambda x: x)
        .map(lambda x: x).set_uid_hash("0123456789abcdef0123456789abcdef")
        .add_sink(lambda v: None).set_parallelism(3))
    vertices = env.get_stream_graph().get_job_graph().get_vertices_sorted_topologically_from_sources()
    assert [v.get_name() for v in vertices] == [
        "Source: Collection Source", "Map -> Filter", "Map", "Sink: Unnamed"]
    assert [v.get_parallelism() for v in vertices] == [1, 2, 2, 3]
    ids = [str(v.get_id()) for v in vertices]
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids) and len(set(ids)) == 4
    assert [len(v.get_operator_ids()) for v in vertices] == [1, 2, 1, 1]
    # a vertex is identified by its head operator (the last of its operator ids)
    assert [str(v.get_operator_ids()[-1]) for v in vertices] == ids
    [pair] = vertices[2].get_operator_id_pairs()
    assert str(pair.get_user_defined_operator_id()) == "0123456789abcdef0123456789abcdef"


def test_uid_pins_the_operator_id_whatever_comes_before():
    def map_vertex_id(upstream_maps: int) -> str:
        env = StreamExecutionEnvironment.get_execution_environment()
        ds = env.from_collection([1])
        for _ in range(upstream_maps):
            ds = ds.map(lambda x: x).disable_chaining()
        ds.map(lambda x: x).uid("stable").disable_chaining().add_sink(lambda v: None)
        [v] = [v for v in env.get_stream_graph().get_job_graph().get_vertices()
               if v.get_name() == "Map" and v.get_inputs() and v.get_inputs()[0].get_source()
               .get_producer().get_name() == ("Source: Collection Source" if upstream_maps == 0 else "Map")
               and _is_last_map(env, v)]
        return str(v.get_id())

    def _is_last_map(env, v):
        return any(e.get_target().get_name() == "Sink: Unnamed" for ds in v.get_produced_data_sets()
                   for e in ds.get_consumers())

    assert map_vertex_id(0) == map_vertex_id(2)


def test_no_operators_error(env):
    with pytest.raises(RuntimeError, match="No operators defined in streaming topology"):
        env.execute()


@pytest.mark.parametrize("call", [
    lambda env: env.add_jars("x.jar"),
    lambda env: env.add_python_file("x.py"),
])
def test_pyflink_settings_not_built_yet_raise_a_clear_error(call):
    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(NotImplementedError, match=r"StreamExecutionEnvironment\.\w+ is not implemented in Rill yet: "):
        call(env)


def test_a_job_with_checkpointing_configured_runs(env):
    # the settings travel with the job's Configuration (pickled to a cluster's JobMaster)
    env.enable_checkpointing(1000)
    env.get_checkpoint_config().set_checkpoint_timeout(60_000)
    assert collect(env.from_collection([1, 2, 3]).map(lambda x: x * 10)) == [10, 20, 30]


def test_invalid_checkpointing_settings_fail_at_submission(env):
    env.get_configuration().set_string("execution.checkpointing.timeout", "5 ms")
    env.from_collection([1]).print()
    with pytest.raises(ValueError) as e:
        env.execute_async("bad checkpoint timeout")
    assert str(e.value) == ("Invalid value for 'execution.checkpointing.timeout': Checkpoint timeout must be "
                            "larger than or equal to 10 ms, got 5 ms")


def test_the_job_master_parses_the_checkpointing_options_once():
    # embedded only: a cluster's JobMaster lives in another process; it gets the same pickled
    # Configuration (test_checkpointing_options checks the round trip)
    env = StreamExecutionEnvironment.get_execution_environment()
    env.enable_checkpointing(1500, CheckpointingMode.AT_LEAST_ONCE)
    env.get_configuration().set_string("state.checkpoints.dir", "/tmp/rill-ckpt")
    env.from_collection([1]).print()
    client = env.execute_async("checkpointing options")
    client.get_job_execution_result().result(timeout=30)
    assert client._jm.checkpointing_options == CheckpointingOptions(
        interval_ms=1500, mode=CheckpointingMode.AT_LEAST_ONCE, checkpoint_dir="/tmp/rill-ckpt")


def test_invalid_restart_strategy_fails_at_submission(env):
    env.get_configuration().set_string("restart-strategy.type", "fixed-delay")
    env.get_configuration().set_string("restart-strategy.fixed-delay.attempts", "-2")
    env.from_collection([1]).print()
    with pytest.raises(ValueError) as e:
        env.execute_async("bad restart strategy")
    assert str(e.value) == ("Invalid restart-strategy.fixed-delay.* configuration: Maximum number of restart "
                            "attempts must be at least 0, got -2")


def test_invalid_network_options_fail_the_deployment(env):
    env.get_configuration().set_string("taskmanager.network.records-per-buffer", "0")
    env.from_collection([1]).print()
    # the JobMaster parses them (in the cluster's process in the cluster mode)
    with pytest.raises(JobExecutionException) as e:
        run(env, "bad network options")
    assert str(e.value).endswith("failed during deployment: Invalid value 0 for "
                                 "'taskmanager.network.records-per-buffer': a buffer holds at least one record")
