"""Async I/O on a real local cluster: the operator (and the user's AsyncFunction, shipped with
cloudpickle) runs in a task process with its own event-loop thread; results equal the
embedded mode's; the AsyncJobClient drives a cluster job from an event loop."""

from __future__ import annotations

import asyncio
import time

import pytest

from rill.common import JobStatus, Time
from rill.datastream import AsyncDataStream, AsyncFunction, AsyncJobClient
from rill.datastream.async_retry_predicates import empty_result_predicate
from rill.datastream.async_retry_strategies import FixedDelayRetryStrategy
from rill.datastream.connectors.async_source import AsyncIteratorSource, queue_items
from rill.operators.factory import OperatorSerializationError



class Sleep10ms(AsyncFunction):
    async def async_invoke(self, value):
        await asyncio.sleep(0.01)
        return [value * 2]


class EmptyOnceThenValue(AsyncFunction):
    def open(self, runtime_context):
        self.seen = set()

    async def async_invoke(self, value):
        if value not in self.seen:
            self.seen.add(value)
            return []
        return [value]

    def timeout(self, value):
        return [("timeout", value)]


def test_ordered_wait_on_a_cluster_keeps_the_order_and_overlaps_the_calls(cluster):
    env = cluster.environment(1)
    out = AsyncDataStream.ordered_wait(env.from_collection(list(range(3000))), Sleep10ms(), Time.seconds(30), 100)
    result, first = [], None
    for value in out.execute_and_collect():
        first = first or time.monotonic()  # from the first result on: deployment left out
        result.append(value)
    assert result == [2 * i for i in range(3000)]
    assert time.monotonic() - first < 30 / 10  # serial: 3,000 x 10 ms


def test_unordered_wait_with_retry_on_two_task_processes(cluster):
    env = cluster.environment(2)
    ds = env.from_collection(list(range(1000))).rebalance()
    strategy = FixedDelayRetryStrategy(2, 5, empty_result_predicate, None)
    out = AsyncDataStream.unordered_wait_with_retry(ds, EmptyOnceThenValue(), 30_000, strategy, 50)
    assert sorted(out.execute_and_collect()) == list(range(1000))


async def test_the_async_job_client_on_a_cluster(cluster):
    env = cluster.environment(2)
    ds = AsyncDataStream.unordered_wait(env.from_collection(list(range(500))).rebalance(), Sleep10ms(), 10_000, 50)
    client = await AsyncJobClient.execute_and_collect(ds, "async client on a cluster")
    rows = [row async for row in client.collect()]
    await client.get_job_execution_result()
    assert sorted(rows) == [2 * i for i in range(500)]
    assert await client.get_job_status() is JobStatus.FINISHED


async def test_a_service_fed_source_is_refused_by_a_cluster_naming_it(cluster):
    env = cluster.environment(1)
    source = AsyncIteratorSource(queue_items(asyncio.Queue()), asyncio.get_running_loop())
    env.from_source(source, source_name="requests").add_sink(lambda v: None)
    with pytest.raises(OperatorSerializationError, match="requests"):
        await AsyncJobClient.execute(env)
