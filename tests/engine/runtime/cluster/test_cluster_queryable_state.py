"""Queryable state on a real local cluster: ``get_state`` goes client → Dispatcher → JobMaster
actor → the StreamTask actor (process) owning the key's key group, which reads the state in a
mail; the value comes back cloudpickled. The test waits for the state to reach its final
values (a condition), never sleeps a fixed time."""

from __future__ import annotations

import asyncio
import time
from typing import List

import pytest

from rill.common import Configuration, JobStatus, Types
from rill.common.configuration import ConfigOptions
from rill.datastream import AsyncJobClient, KeyedProcessFunction, StreamExecutionEnvironment
from rill.datastream.connectors import Boundedness
from rill.datastream.connectors.source import Source, SourceReader, SourceSplit
from rill.datastream.state import ListStateDescriptor, ValueStateDescriptor
from rill.runtime.queryable_state import JobNotRunningError, UnknownOperatorUidError, UnknownStateNameError
from rill.state.key_groups import assign_key_to_parallel_operator

KEYS = ["alice", "bob", "carol", "dave"]
EVENTS = [(k, i) for i in range(5) for k in KEYS[: 1 + i % 4]]


class _Split(SourceSplit):
    def split_id(self) -> str:
        return "events"


class _EventsThenIdle(SourceReader):
    def read(self, split):
        yield list(EVENTS)
        while True:  # unbounded: nothing more, the job keeps running
            yield []


class EventsThenIdle(Source):
    """EVENTS once, then nothing, forever (one split)."""

    def get_boundedness(self) -> Boundedness:
        return Boundedness.CONTINUOUS_UNBOUNDED

    def create_splits(self, parallelism: int) -> List[SourceSplit]:
        return [_Split()]

    def create_reader(self) -> SourceReader:
        return _EventsThenIdle()


class Count(KeyedProcessFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.INT()))
        self.seen = runtime_context.get_list_state(ListStateDescriptor("seen", Types.INT()))

    def process_element(self, value, ctx):
        self.count.update((self.count.value() or 0) + 1)
        self.seen.add(value[1])
        yield value


def _wait_for(predicate, timeout_s=60.0):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


def test_get_state_on_a_cluster_reads_the_owning_task_process(local_cluster):
    assert {assign_key_to_parallel_operator(k, 128, 2) for k in KEYS} == {0, 1}
    cluster = local_cluster(task_executors=1, slots=3)
    conf = Configuration()
    conf.set(ConfigOptions.EXECUTION_TARGET, cluster.address)
    conf.set(ConfigOptions.SECURITY_CLUSTER_SECRET_FILE, str(cluster.secret_file))
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(1)
    (env.from_source(EventsThenIdle(), source_name="events")
        .key_by(lambda e: e[0]).process(Count()).uid("counter").set_parallelism(2)
        .add_sink(lambda v: None))
    client = env.execute_async("queryable on a cluster")
    try:
        _wait_for(lambda: client.get_job_status() is JobStatus.RUNNING)
        expected = {k: [n for kk, n in EVENTS if kk == k] for k in KEYS}

        def all_counted():
            try:
                return all(client.get_state("counter", "count", k) == len(expected[k]) for k in KEYS)
            except JobNotRunningError:  # a task not RUNNING yet
                return False
        _wait_for(all_counted)
        for k in KEYS:
            assert client.get_state("counter", "seen", k) == expected[k]
        assert client.get_state("counter", "count", "nobody") is None
        with pytest.raises(UnknownOperatorUidError, match="uid 'nope'"):
            client.get_state("nope", "count", "alice")
        with pytest.raises(UnknownStateNameError, match=r"no keyed state named 'cnt'.*\['count', 'seen'\]"):
            client.get_state("counter", "cnt", "alice")
    finally:
        client.cancel().result(60)
    with pytest.raises(JobNotRunningError, match="not running on this cluster"):
        client.get_state("counter", "count", "alice")


async def test_the_async_client_asks_a_cluster_without_blocking_the_loop(local_cluster):
    cluster = local_cluster(task_executors=1, slots=2)
    conf = Configuration()
    conf.set(ConfigOptions.EXECUTION_TARGET, cluster.address)
    conf.set(ConfigOptions.SECURITY_CLUSTER_SECRET_FILE, str(cluster.secret_file))
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(1)
    env.from_source(EventsThenIdle(), source_name="events").key_by(lambda e: e[0]) \
        .process(Count()).uid("counter").add_sink(lambda v: None)
    client = await AsyncJobClient.execute(env, "async queryable")
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if await client.get_state("counter", "count", "alice") == 5:
                    break
            except JobNotRunningError:
                pass
            assert time.monotonic() < deadline, "alice never reached 5"
            await asyncio.sleep(0.02)  # a polling interval, not a synchronization
        assert await client.get_state("counter", "seen", "alice") == [0, 1, 2, 3, 4]
    finally:
        await client.cancel()
