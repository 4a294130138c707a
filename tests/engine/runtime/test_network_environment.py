"""The network buffer budget on the embedded runtime: configured through Configuration, every
segment back after a job finishes, fails or is cancelled, a job whose buffers do not fit failing
at deployment with Flink's message, and the network metrics of local exchanges."""

from __future__ import annotations

import time

import pytest

from rill.common.configuration import ConfigOptions, Configuration
from rill.datastream import StreamExecutionEnvironment
from rill.graph.states import JobStatus
from rill.network import InsufficientNetworkBuffersError, ResultPartitionID, ResultPartitionManager
from rill.network.buffer.network_buffer_pool import NETWORK_MEMORY_MAX_KEY
from rill.network.partitioner import ForwardPartitioner
from rill.runtime.deployment import ResultPartitionDeploymentDescriptor, TaskDeploymentDescriptor
from rill.runtime.errors import JobCancellationException, JobExecutionException
from rill.runtime.metrics import FLINK_METRIC_NAMES
from rill.runtime.taskmanager.network_environment import (
    NetworkEnvironment,
    create_network_buffer_pool,
    parse_memory_size,
)
from rill.runtime.taskmanager.task_executor import TaskExecutor

DEADLINE_S = 20.0


def wait_until(predicate, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {DEADLINE_S}s waiting until {what}")
        time.sleep(0.002)


def budget_of(client):
    return client._jm.task_executor.network.network_buffer_pool


def is_full(pool) -> bool:
    return pool.get_number_of_available_memory_segments() == pool.get_total_number_of_memory_segments()


# ---------------------------------------------------------------------- configuration


def test_the_options_use_flinks_keys_and_fit_the_budget_error():
    assert ConfigOptions.NETWORK_MEMORY_MAX.key == NETWORK_MEMORY_MAX_KEY == "taskmanager.memory.network.max"
    assert ConfigOptions.NETWORK_MEMORY_MAX.default == 64 * 1024 * 1024
    assert ConfigOptions.MEMORY_SEGMENT_SIZE.key == "taskmanager.memory.segment-size"
    assert ConfigOptions.MEMORY_SEGMENT_SIZE.default == 32 * 1024


@pytest.mark.parametrize("text, size", [
    (67108864, 67108864), ("67108864", 67108864), ("64mb", 64 << 20), ("64 m", 64 << 20), ("32kb", 32768),
    ("1g", 1 << 30), ("2 GiB", 2 << 30), ("100b", 100), ("0", 0),
])
def test_memory_sizes_parse_as_flinks(text, size):
    assert parse_memory_size(text) == size


@pytest.mark.parametrize("text", ["-1", "64 zb", "lots", -5, True, "1.5mb"])
def test_bad_memory_sizes_are_refused(text):
    with pytest.raises(ValueError, match="memory size|>= 0"):
        parse_memory_size(text, "taskmanager.memory.network.max")


def test_the_budget_comes_from_the_configuration():
    default = create_network_buffer_pool(Configuration())
    assert (default.get_total_number_of_memory_segments(), default.get_memory_segment_size()) == (2048, 32768)
    conf = Configuration().set_string("taskmanager.memory.network.max", "1mb").set_string(
        "taskmanager.memory.segment-size", "16kb")
    pool = create_network_buffer_pool(conf)
    assert (pool.get_total_number_of_memory_segments(), pool.get_memory_segment_size()) == (64, 16384)
    with pytest.raises(ValueError, match="taskmanager.memory.segment-size"):
        create_network_buffer_pool(Configuration().set_integer("taskmanager.memory.segment-size", 0))
    executor = TaskExecutor(1, configuration=Configuration().set_integer("taskmanager.memory.network.max", 65536))
    assert executor.network.network_buffer_pool.get_total_number_of_memory_segments() == 2
    assert NetworkEnvironment(ResultPartitionManager(), configuration=conf).network_buffer_pool.statistics().total_segments == 64


def test_partition_pools_take_flinks_maximum_when_the_budget_allows():
    env = NetworkEnvironment(ResultPartitionManager(), configuration=Configuration())
    tdd = TaskDeploymentDescriptor(
        job_id="j", job_name="j", vertex=None, subtask_index=0, parallelism=1, attempt_number=0, attempt_id="a",
        task_name="Map", input_gates=[], produced_partitions=[
            ResultPartitionDeploymentDescriptor(ResultPartitionID(f"p{i}", "a"), n, ForwardPartitioner(), 128, "Sink")
            for i, n in enumerate((1, 4))])
    assert [env.partition_buffers(tdd, pdd) for pdd in tdd.produced_partitions] == [(2, 10), (5, 16)]
    partitions = env.create_result_partitions(tdd)
    assert [p.buffer_pool.get_number_of_buffers() for p in partitions] == [10, 16]
    assert env.network_buffer_pool.get_number_of_used_memory_segments() == 26
    assert env.num_bytes_out(partitions) == 0
    for p in partitions:
        p.release()
    assert is_full(env.network_buffer_pool)


# ---------------------------------------------------------------------- embedded jobs


def _divide(x):
    return 10 // x


def _slow(x):
    time.sleep(0.001)
    return x


def test_every_segment_is_back_after_a_job_finishes():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(3)
    env.from_sequence(1, 5000).key_by(lambda x: x % 7).map(lambda x: x + 1).rebalance().add_sink(lambda v: None)
    client = env.execute_async("finishes")
    client.get_job_execution_result().result(timeout=DEADLINE_S)
    pool = budget_of(client)
    wait_until(lambda: is_full(pool), "the budget is full again")
    stats = pool.statistics()
    assert stats.holders == ()
    assert stats.peak_used_segments > 0  # the job's partitions did take segments
    metrics = client.get_metrics()
    assert metrics and all((m.num_bytes_in, m.num_bytes_out) == (0, 0) for m in metrics)  # local: not serialized
    assert all(m.input_pool_usage == 0.0 for m in metrics)  # local channels have no receiving buffers
    assert sum(m.num_buffers_in for m in metrics) > 0
    flink = metrics[0].as_flink_dict()
    assert set(flink) == set(FLINK_METRIC_NAMES.values()) and flink["numBytesIn"] == 0


@pytest.mark.parametrize("parallelism", [1, 3])
def test_every_segment_is_back_after_a_job_fails(parallelism):
    for _ in range(5):  # the failing task races with the others finishing
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(parallelism)
        env.from_collection([1, 0, 2] * 50).rebalance().map(_divide).name("Divide").add_sink(lambda v: None)
        client = env.execute_async("fails")
        with pytest.raises(JobExecutionException):
            client.get_job_execution_result().result(timeout=DEADLINE_S)
        pool = budget_of(client)
        wait_until(lambda: is_full(pool), f"the budget is full again: {pool.statistics().holders}")


def test_every_segment_is_back_after_a_job_is_cancelled():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.from_sequence(1, 10_000_000).rebalance().map(_slow).rebalance().add_sink(lambda v: None)
    client = env.execute_async("cancelled")
    pool = budget_of(client)
    wait_until(lambda: sum(m.num_records_in for m in client.get_metrics()) > 50, "records flow")
    assert pool.get_number_of_used_memory_segments() > 0
    client.cancel().result(timeout=DEADLINE_S)
    with pytest.raises(JobCancellationException):
        client.get_job_execution_result().result(timeout=DEADLINE_S)
    assert client.get_job_status() is JobStatus.CANCELED
    wait_until(lambda: is_full(pool), f"the budget is full again: {pool.statistics().holders}")


def test_a_job_whose_buffers_do_not_fit_fails_at_deployment_naming_the_option():
    # 4 segments: the source (1 -> 2 subpartitions, needs 3) fits, the maps (needs 2 each) do not.
    conf = Configuration().set_string("taskmanager.memory.network.max", "128kb")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    env.from_collection([1, 2, 3]).set_parallelism(1).rebalance().map(lambda x: x).name("Map") \
        .rebalance().add_sink(lambda v: None).set_parallelism(1)
    client = env.execute_async("too small")
    with pytest.raises(JobExecutionException) as info:
        client.get_job_execution_result().result(timeout=DEADLINE_S)
    message = str(info.value)
    assert "failed during deployment" in message
    assert ("Insufficient number of network buffers: required 2, but only 0 available. The total number of "
            "network buffers is currently set to 4 of 32768 bytes each. You can increase this number by setting "
            "the configuration key 'taskmanager.memory.network.max'.") in message
    assert "Task 'Map (1/2)'" in message
    assert isinstance(info.value.__cause__, InsufficientNetworkBuffersError)
    assert client.get_job_status() is JobStatus.FAILED
    pool = budget_of(client)
    wait_until(lambda: is_full(pool), "the deployed tasks gave their segments back")
