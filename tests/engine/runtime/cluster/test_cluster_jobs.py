"""Jobs on a real local cluster (Thespian actor systems, TaskExecutor and task processes, the
network stack between them): results equal to the embedded mode's, failures, cancellation,
lost TaskExecutors, bad input, what a task's deployment carries, per-job network settings, and
nothing left running."""

from __future__ import annotations

import json
import re
import threading
import time

import pytest

from rill.common import Types
from rill.datastream import StreamExecutionEnvironment
from rill.datastream.functions import MapFunction
from rill.graph.states import JobStatus
from rill.operators.factory import OperatorSerializationError
from rill.runtime.errors import JobCancellationException, JobExecutionException



def word_count(env, lines):
    return (env.from_collection(lines)
            .flat_map(lambda line: [(w, 1) for w in line.split()], output_type=Types.TUPLE([Types.STRING(), Types.INT()]))
            .key_by(lambda t: t[0])
            .reduce(lambda a, b: (a[0], a[1] + b[1])))


LINES = [f"w{i % 7} w{i % 11} w{i % 13}" for i in range(3000)]


def expected_word_count():
    counts, out = {}, []
    for line in LINES:
        for w in line.split():
            counts[w] = counts.get(w, 0) + 1
            out.append((w, counts[w]))
    return out


def test_word_count_collects_the_same_records_as_embedded(cluster):
    result = sorted(word_count(cluster.environment(), LINES).execute_and_collect())
    assert result == sorted(expected_word_count())
    embedded = StreamExecutionEnvironment.get_execution_environment()
    embedded.set_parallelism(2)
    assert sorted(word_count(embedded, LINES).execute_and_collect()) == result
    cluster.wait_no_task_processes()


def test_per_key_order_survives_the_network(cluster):
    result = list(word_count(cluster.environment(), LINES).execute_and_collect())
    by_key = {}
    for w, n in result:
        by_key.setdefault(w, []).append(n)
    assert all(ns == list(range(1, len(ns) + 1)) for ns in by_key.values())


def test_execution_target_from_the_environment_variable(cluster, monkeypatch):
    monkeypatch.setenv("RILL_EXECUTION_TARGET", cluster.address)
    monkeypatch.setenv("RILL_SECURITY_CLUSTER_SECRET_FILE", str(cluster.secret_file))
    env = StreamExecutionEnvironment.get_execution_environment()
    client = env.from_collection([1, 2, 3]).map(lambda x: x * 10).execute_and_collect()
    assert sorted(client) == [10, 20, 30]


def test_job_result_and_metrics_come_back(cluster):
    env = cluster.environment()
    env.from_collection(list(range(10_000))).map(lambda x: x + 1).filter(lambda x: x % 2 == 0).print()
    result = env.execute("metrics job")
    summaries = {v.name: v for v in result.vertices} if hasattr(result, "vertices") else {}
    assert result.get_job_id()
    assert sum(v.records_in for v in summaries.values()) >= 10_000


class Boom(MapFunction):
    def map(self, value):
        if value == 777:
            raise ValueError(f"bad value {value}")
        return value


def test_a_failing_function_fails_the_job_with_the_remote_traceback(cluster):
    env = cluster.environment()
    env.from_collection(list(range(2000))).map(Boom()).name("Explode").print()
    with pytest.raises(JobExecutionException) as info:
        env.execute("failing job")
    message = str(info.value)
    assert "Explode" in message and "ValueError: bad value 777" in message
    cause = info.value.__cause__
    assert isinstance(cause, ValueError)
    notes = "\n".join(getattr(cause, "__notes__", []))
    # test-module code travels by value; its frames still name this file (rill.common.pickling)
    assert "Remote traceback" in notes and f'File "{__file__}", line ' in notes and ", in map\n" in notes
    assert "<dynamic-code>" not in notes
    cluster.wait_no_task_processes()


def test_a_function_that_cannot_be_shipped_names_its_operator(cluster):
    lock = threading.Lock()
    env = cluster.environment()
    env.from_collection([1, 2]).map(lambda x: (lock, x)[1]).name("Holds A Lock").print()
    with pytest.raises(OperatorSerializationError, match="Holds A Lock"):
        env.execute("unshippable")


def test_too_few_slots_fail_the_job_at_deployment(cluster):
    env = cluster.environment(parallelism=9)
    env.from_collection(list(range(10))).map(lambda x: x).print()
    with pytest.raises(JobExecutionException, match="needs 9 slots"):
        env.execute("too wide")


def slow(x):
    time.sleep(0.01)
    return x


def test_rill_cancel_cancels_a_running_job(cluster):
    env = cluster.environment()
    env.from_collection(list(range(100_000))).map(slow).print()
    client = env.execute_async("to cancel")
    deadline = time.monotonic() + 20
    while client.get_job_status() is not JobStatus.RUNNING and time.monotonic() < deadline:
        time.sleep(0.05)
    proc = cluster.cli("cancel", client.get_job_id(), "--port", str(cluster.port))
    assert "cancelling" in proc.stdout
    with pytest.raises(JobCancellationException):
        client.get_job_execution_result().result(30)
    assert client.get_job_status() is JobStatus.CANCELED
    cluster.wait_no_task_processes()


def test_a_cancelled_keyed_job_ends_canceled_even_when_consumers_see_their_producers_go(cluster):
    """Cancelling reaches producers before some of their consumers; a consumer that then fails
    on the released partition must not turn the cancellation into a failure (Flink: CANCELLING
    only goes to CANCELED). Seen in 5 of 30 cancels of this shape before the JobMaster ignored
    failures while CANCELLING; 8 rounds here."""
    for _ in range(8):
        env = cluster.environment(parallelism=4)
        (env.from_sequence(0, 10**12).key_by(lambda v: v % 64).map(lambda v: v + 1)
            .add_sink(lambda v: None))
        client = env.execute_async("keyed cancel")
        deadline = time.monotonic() + 20
        # records in flight: every Map subtask has received some (metrics arrive every 200 ms)
        def flowing():
            ins = [m.num_records_in for m in client.get_metrics() if m.task_name.startswith("Map")]
            return len(ins) == 4 and min(ins) > 0

        while not flowing() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert flowing(), client.get_metrics()
        client.cancel()
        with pytest.raises(JobCancellationException):
            client.get_job_execution_result().result(30)
        assert client.get_job_status() is JobStatus.CANCELED
    cluster.wait_no_task_processes()


def test_other_jobs_keep_running_when_one_fails(cluster):
    good_env = cluster.environment(parallelism=1)
    good = good_env.from_collection(list(range(300))).map(slow).execute_and_collect()
    bad_env = cluster.environment(parallelism=1)
    bad_env.from_collection(list(range(2000))).map(Boom()).print()
    with pytest.raises(JobExecutionException):
        bad_env.execute("bad neighbour")
    assert sorted(good) == list(range(300))


def test_status_lists_task_executors_and_jobs(cluster):
    out = cluster.cli("cluster", "status", "--port", str(cluster.port)).stdout
    te, slots = cluster.task_executors, cluster.task_executors * cluster.slots
    assert f"{te} TaskExecutor(s), {slots} slot(s)" in out
    assert out.count("taskexecutor-") == te


def test_a_dead_task_executor_fails_the_job_with_a_clear_cause(local_cluster):
    import os
    import signal

    c = local_cluster(2, 2)
    env = c.environment(parallelism=4)
    env.from_collection(list(range(100_000))).map(slow).print()
    client = env.execute_async("victim")
    deadline = time.monotonic() + 20
    while client.get_job_status() is not JobStatus.RUNNING and time.monotonic() < deadline:
        time.sleep(0.05)
    victim, pid = sorted(c.task_executor_pids().items())[0]
    c.remember_processes_silently()
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(JobExecutionException) as info:
        client.get_job_execution_result().result(30)
    assert f"TaskExecutor {victim} (pid {pid} on 127.0.0.1) was lost: its process exited" in str(info.value)
    assert client.get_job_status() is JobStatus.FAILED
    deadline = time.monotonic() + 15  # the JobMaster frees the slots; a new TaskExecutor replaces the lost one
    while "2 TaskExecutor(s), 4 slot(s), 4 free" not in (out := c.cli("cluster", "status", "--port",
                                                                      str(c.port)).stdout) or victim in out:
        assert time.monotonic() < deadline, out
        time.sleep(0.1)


def test_task_executors_joining_from_other_actor_systems(local_cluster):
    """Multi-host through Thespian's convention, on one machine: a leader with no TaskExecutor
    and two member systems on their own ports, each contributing one."""
    c = local_cluster(0, 1)
    ports = [c.join(slots=1), c.join(slots=1)]
    out = c.cli("cluster", "status", "--port", str(c.port)).stdout
    assert "2 TaskExecutor(s), 2 slot(s), 2 free" in out
    for port in ports:
        assert f"taskexecutor-127.0.0.1-{port}" in out
    assert sorted(word_count(c.environment(), LINES).execute_and_collect()) == sorted(expected_word_count())
    c.wait_no_task_processes()


def test_a_record_larger_than_the_maximum_fails_the_job_naming_the_channel(cluster):
    env = cluster.environment(parallelism=2, **{"taskmanager.network.max-payload-size": str(64 * 1024)})
    (env.from_collection(["small", "x" * 200_000, "small"])
        .key_by(lambda s: len(s)).map(lambda s: len(s)).name("Measure").print())
    with pytest.raises(JobExecutionException) as info:
        env.execute("oversized")
    message = str(info.value)
    assert "Measure" in message
    assert "PayloadTooLargeError" in message and "65536" in message
    cluster.wait_no_task_processes()


def test_a_task_process_that_dies_fails_the_job(cluster):
    import os
    import signal

    env = cluster.environment(parallelism=1)
    env.from_collection(list(range(100_000))).map(slow).name("Doomed").print()
    client = env.execute_async("killed task")
    deadline = time.monotonic() + 20
    while client.get_job_status() is not JobStatus.RUNNING and time.monotonic() < deadline:
        time.sleep(0.05)
    victims = cluster.task_processes()
    assert victims
    os.kill(sorted(victims)[0], signal.SIGKILL)
    with pytest.raises(JobExecutionException) as info:
        client.get_job_execution_result().result(30)
    assert "exited" in str(info.value) or "closed" in str(info.value)
    cluster.wait_no_task_processes()


def deploy_messages(cluster, job_id: str) -> dict:
    """``task name (i/p)`` → ``{"total", "subtask", "task", "job"}`` bytes of the DeployTask the
    JobMaster sent it (from the JobMaster's log line)."""
    log = open(cluster.info()["log_file"]).read()
    pattern = (rf"JobMaster {job_id}: DeployTask (.+?): (\d+) bytes \(subtask (\d+), task information (\d+), "
               rf"job information (\d+)\)")
    return {name: dict(zip(("total", "subtask", "task", "job"), map(int, sizes)))
            for name, *sizes in re.findall(pattern, log)}


def test_a_downstream_task_is_not_sent_the_sources_collection(local_cluster):
    cluster = local_cluster(2, 2, extra_env={"RILL_CLUSTER_LOG_LEVEL": "DEBUG"})  # DeployTask lines are DEBUG
    lines = [f"line {i:07d} " + "abcdefghij " * 3 for i in range(100_000)]  # 4.6 MB of text
    text_bytes = sum(len(s) for s in lines)
    env = cluster.environment()
    word_count(env, lines).add_sink(lambda v: None).name("Drop")
    client = env.execute_async("large collection")
    client.get_job_execution_result().result(60)
    sent = deploy_messages(cluster, client.get_job_id())
    source = {k: v for k, v in sent.items() if k.startswith("Source")}
    downstream = {k: v for k, v in sent.items() if not k.startswith("Source")}
    assert sorted(downstream) == ["FlatMap (1/2)", "FlatMap (2/2)", "Reduce -> Sink: Drop (1/2)",
                                  "Reduce -> Sink: Drop (2/2)"]
    assert len(source) == 1 and all(v["task"] > text_bytes for v in source.values())  # it carries its lines
    # every other task gets its own operators only: a few kB, whatever the collection's size
    assert all(v["total"] < 20_000 for v in downstream.values()), json.dumps(downstream)
    cluster.wait_no_task_processes()


def test_per_job_network_memory_and_segment_size_reach_the_cluster_tasks(cluster):
    # 4 segments of 16 KiB for each task process: the FlatMap tasks (a remote input, a keyed
    # output) need 6 -- the cluster's own default (64 MiB of 32 KiB segments) would run it
    env = cluster.environment(**{"taskmanager.memory.network.max": "64kb",
                                  "taskmanager.memory.segment-size": "16kb"})
    word_count(env, LINES).print()
    with pytest.raises(JobExecutionException) as info:
        env.execute("small network memory")
    message = str(info.value)
    assert ("The total number of network buffers is currently set to 4 of 16384 bytes each. You can "
            "increase this number by setting the configuration key 'taskmanager.memory.network.max'.") in message
    cluster.wait_no_task_processes()


def test_a_per_job_segment_size_cuts_buffers_into_smaller_frames(cluster):
    # 1 KiB segments: a network buffer of (word, count) records (~7 bytes each) crosses as
    # several frames, one credit each
    env = cluster.environment(**{"taskmanager.memory.segment-size": "1kb"})
    assert sorted(word_count(env, LINES).execute_and_collect()) == sorted(expected_word_count())
    cluster.wait_no_task_processes()


def _collector_thresholds(_):
    import gc  # noqa: PLC0415 - runs in the task process
    return gc.get_threshold()


@pytest.mark.parametrize("setting, expected", [
    (None, (10000, 10, 10)),  # the default for task processes
    ("2000,5", (2000, 5, 10)),  # as gc.set_threshold(2000, 5): generation 2 keeps CPython's 10
    ("default", (700, 10, 10)),  # CPython's own
])
def test_task_processes_set_the_jobs_garbage_collector_thresholds(cluster, setting, expected):
    options = {} if setting is None else {"taskmanager.python.gc-thresholds": setting}
    env = cluster.environment(parallelism=1, **options)
    with env.from_collection([0]).map(_collector_thresholds).execute_and_collect() as results:
        assert list(results) == [expected]
    cluster.wait_no_task_processes()


@pytest.mark.parametrize("value", ["10000,x", str(2**31)])  # the second: more than gc.set_threshold takes
def test_invalid_garbage_collector_thresholds_fail_the_job_before_deployment(cluster, value):
    env = cluster.environment(**{"taskmanager.python.gc-thresholds": value})
    word_count(env, LINES).print()
    with pytest.raises(JobExecutionException, match=r"invalid configuration: taskmanager.python.gc-thresholds must be "
                                                    rf"'default' or one to three comma-separated ints in .* got '{value}'"):
        env.execute("bad thresholds")
    cluster.wait_no_task_processes()


def test_an_invalid_per_job_network_setting_fails_the_job_at_once(cluster):
    env = cluster.environment(**{"taskmanager.memory.segment-size": "32"})
    word_count(env, LINES).print()
    with pytest.raises(JobExecutionException, match="invalid network configuration: NettyConfig.segment_size_bytes"):
        env.execute("segments too small")


def test_regression_a_job_cancelled_during_deployment_leaves_no_task_process(cluster):
    """A job cancelled while its task processes were still starting ended CANCELED at once, and
    the JobMaster released only the tasks whose process had reported ready: the others started
    afterwards, reported to a JobMaster that was gone and ran on for good. 5 rounds."""
    task_executors = list(cluster.task_executor_pids().values())
    for _ in range(5):
        env = cluster.environment(parallelism=4)
        env.from_sequence(0, 10**9).map(lambda v: v + 1).add_sink(lambda v: None)
        client = env.execute_async("cancelled during deployment")
        deadline = time.monotonic() + 30
        # the first task process has forked: the others are starting, none has reported ready
        while not cluster.task_processes(task_executors) and time.monotonic() < deadline:
            time.sleep(0.001)
        client.cancel()
        with pytest.raises(JobCancellationException):
            client.get_job_execution_result().result(30)
        assert client.get_job_status() is JobStatus.CANCELED
        cluster.wait_no_task_processes()
