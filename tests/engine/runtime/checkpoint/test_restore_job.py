"""A job restored from a snapshot at another parallelism (issue 11, rescaling): the JobMaster
assigns the snapshot's keyed state to the new subtasks, each task reads its share on its own
thread, and the job continues the counts exactly."""

from __future__ import annotations

import pytest

from rill.common import JobStatus
from rill.common.configuration import Configuration
from rill.common.functions import KeyedProcessFunction, SinkFunction
from rill.datastream import StreamExecutionEnvironment
from rill.operators.process import KeyedProcessOperator
from rill.operators.testing import KeyedOneInputStreamOperatorTestHarness
from rill.runtime.errors import JobExecutionException
from rill.runtime.job_client import JobClient
from rill.runtime.jobmaster.job_master import JobMaster
from rill.runtime.jobmaster.scheduler import required_slots
from rill.runtime.taskmanager.task_executor import TaskExecutor
from rill.state import ValueStateDescriptor
from rill.state.checkpoint.metadata import CheckpointMetadata, InMemoryOperatorSubtaskStateHandle, OperatorState
from rill.state.key_groups import assign_key_to_parallel_operator

KEYS = [f"k{i}" for i in range(40)]
MAX_P = 128


class CountWithSubtask(KeyedProcessFunction):
    """Counts records per key and emits ``(key, count, subtask index)`` for each."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))
        self.subtask = runtime_context.get_index_of_this_subtask()

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield (ctx.get_current_key(), n, self.subtask)


class ToFile(SinkFunction):
    def __init__(self, path):
        self.path = path

    def open(self, runtime_context):
        self.file = open(f"{self.path}-{runtime_context.get_index_of_this_subtask()}", "a", buffering=1)

    def invoke(self, value, context):
        self.file.write(f"{value[0]} {value[1]} {value[2]}\n")

    def close(self):
        self.file.close()


def expected_before(key):
    return int(key[1:]) % 3 + 1


def snapshot_of_counts(operator_id, parallelism):
    """Checkpoint 5 of the counting operator at ``parallelism``: key ki counted i % 3 + 1 times."""
    handles = {}
    for i in range(parallelism):
        with KeyedOneInputStreamOperatorTestHarness(KeyedProcessOperator(CountWithSubtask()), lambda v: v,
                                                    max_parallelism=MAX_P, parallelism=parallelism,
                                                    subtask_index=i) as h:
            for key in KEYS:
                if assign_key_to_parallel_operator(key, MAX_P, parallelism) == i:
                    for _ in range(expected_before(key)):
                        h.process_element(key, 0)
            handles[i] = InMemoryOperatorSubtaskStateHandle(h.snapshot(checkpoint_id=5))
    return CheckpointMetadata(5, 0, {operator_id: OperatorState(operator_id, parallelism, MAX_P, handles,
                                                                 uid="counter", name="Count")})


def job_graph(tmp_path, parallelism, max_parallelism=MAX_P):
    env = StreamExecutionEnvironment.get_execution_environment(Configuration())
    env.set_parallelism(parallelism)
    env.set_max_parallelism(max_parallelism)
    (env.from_collection(KEYS).key_by(lambda k: k).process(CountWithSubtask()).uid("counter").name("Count")
        .add_sink(ToFile(str(tmp_path / "out"))))
    graph = env.get_stream_graph("restored", clear_transformations=True).get_job_graph()
    operator_id = next(cfg.operator_id for v in graph.get_vertices() for cfg in v.stream_configs.values()
                       if cfg.operator_name == "Count")
    return graph, str(operator_id)


def run_restored(graph, metadata, allow_non_restored_state=False):
    executor = TaskExecutor(sum(required_slots(graph).values()))
    jm = JobMaster(graph, executor, Configuration())
    jm.restore_from(metadata, allow_non_restored_state)
    jm.start()
    client = JobClient(jm)
    try:
        return client, client.get_job_execution_result().result(timeout=60)
    finally:
        executor.shutdown()


def read_output(tmp_path):
    out = {}
    for f in tmp_path.iterdir():
        if f.name.startswith("out-"):
            for line in f.read_text().splitlines():
                key, count, subtask = line.split()
                assert key not in out
                out[key] = (int(count), int(subtask))
    return out


@pytest.mark.parametrize("old_p,new_p", [(4, 3), (2, 1), (1, 4)])
def test_keyed_counts_continue_exactly_after_a_restore_at_another_parallelism(tmp_path, old_p, new_p):
    graph, operator_id = job_graph(tmp_path, new_p)
    client, _ = run_restored(graph, snapshot_of_counts(operator_id, old_p))
    assert client.get_job_status() is JobStatus.FINISHED
    out = read_output(tmp_path)
    assert {k: c for k, (c, _) in out.items()} == {k: expected_before(k) + 1 for k in KEYS}
    assert all(s == assign_key_to_parallel_operator(k, MAX_P, new_p) for k, (_, s) in out.items())


def test_a_snapshot_of_another_max_parallelism_fails_the_deployment(tmp_path):
    graph, operator_id = job_graph(tmp_path, 2, max_parallelism=256)
    with pytest.raises(JobExecutionException) as e:
        run_restored(graph, snapshot_of_counts(operator_id, 2))
    assert "failed during deployment: The maximum parallelism (128) with which the latest checkpoint" in str(e.value)
    assert not any(f.name.startswith("out-") for f in tmp_path.iterdir())


def test_state_of_a_removed_operator_fails_unless_allowed(tmp_path):
    graph, operator_id = job_graph(tmp_path, 2)
    gone = snapshot_of_counts("f" * 32, 2)
    with pytest.raises(JobExecutionException, match="Cannot map checkpoint/savepoint state for operator f{32}, "
                                                    "uid 'counter'"):
        run_restored(graph, gone)
    client, _ = run_restored(graph, gone, allow_non_restored_state=True)
    assert {k: c for k, (c, _) in read_output(tmp_path).items()} == {k: 1 for k in KEYS}


def test_a_restore_path_without_a_completed_snapshot_fails_the_deployment(tmp_path):
    graph, _ = job_graph(tmp_path, 1)
    conf = Configuration().set_string("execution.state-recovery.path", str(tmp_path / "savepoint-1"))
    jm = JobMaster(graph, TaskExecutor(1), conf)
    jm.start()
    with pytest.raises(JobExecutionException) as e:
        jm.result_future.result(timeout=30)
    assert str(e.value) == (f"Job 'restored' failed during deployment: No completed checkpoint or savepoint at "
                            f"'{tmp_path / 'savepoint-1'}': _metadata is missing")
