"""``AsyncJobClient`` under pytest-asyncio (``asyncio_mode = auto``): submission, status,
metrics, result, failure, cancel and ``async for`` over collected records, with a ticker task
that proves the event loop keeps running while the client waits."""

from __future__ import annotations

import asyncio

import pytest

from _ds_helpers import EndlessSource
from rill.common import JobStatus
from rill.datastream import AsyncDataStream, AsyncFunction, AsyncJobClient
from rill.runtime.errors import JobCancellationException, JobExecutionException


class Sleep5ms(AsyncFunction):
    async def async_invoke(self, value):
        await asyncio.sleep(0.005)
        return [value + 1]


class Ticker:
    """Counts 1 ms ticks of the event loop while it runs."""

    def __init__(self):
        self.ticks = 0
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self):
        while True:
            await asyncio.sleep(0.001)
            self.ticks += 1

    def stop(self):
        self._task.cancel()


async def test_collect_async_for_gives_every_record_and_the_loop_keeps_running(env):
    ds = AsyncDataStream.ordered_wait(env.from_collection(list(range(2000))), Sleep5ms(), 10_000, 20)
    ticker = Ticker()
    client = await AsyncJobClient.execute_and_collect(ds, "async collect")
    rows = [row async for row in client.collect()]
    result = await client.get_job_execution_result()
    ticker.stop()
    assert rows == [i + 1 for i in range(2000)]
    assert result.get_job_id() == client.get_job_id()
    assert await client.get_job_status() is JobStatus.FINISHED
    assert ticker.ticks >= 20  # 2000 x 5 ms / 20 in flight >= 0.5 s of waiting, the loop ran on


async def test_status_and_metrics_of_a_running_job_then_cancel(env):
    env.from_source(EndlessSource(), source_name="Endless").add_sink(lambda v: None)
    client = await AsyncJobClient.execute(env, "endless")
    deadline = asyncio.get_running_loop().time() + 30
    while await client.get_job_status() is not JobStatus.RUNNING:
        assert asyncio.get_running_loop().time() < deadline, "the job never started running"
        await asyncio.sleep(0.01)
    metrics = await client.get_metrics()
    assert len(metrics) == 1
    await client.cancel()
    assert await client.get_job_status() is JobStatus.CANCELED
    with pytest.raises(JobCancellationException):
        await client.get_job_execution_result()


async def test_closing_the_iterator_early_cancels_the_job(env):
    ds = env.from_source(EndlessSource(), source_name="Endless")
    client = await AsyncJobClient.execute_and_collect(ds)
    first = []
    async with client.collect() as rows:
        async for row in rows:
            first.append(row)
            if len(first) == 5:
                break
    assert len(first) == 5
    assert await client.get_job_status() is JobStatus.CANCELED


class Boom(AsyncFunction):
    async def async_invoke(self, value):
        raise ValueError(f"no such key: {value}")


async def test_a_failed_job_raises_from_the_result_and_from_the_iterator(env):
    ds = AsyncDataStream.ordered_wait(env.from_collection(["k"]), Boom(), 1000)
    client = await AsyncJobClient.execute_and_collect(ds)
    with pytest.raises(JobExecutionException):
        [row async for row in client.collect()]
    with pytest.raises(JobExecutionException, match="async wait operator"):
        await client.get_job_execution_result()


async def test_collect_without_a_collect_sink_is_refused(env):
    env.from_collection([1]).add_sink(lambda v: None)
    client = await AsyncJobClient.execute(env)
    await client.get_job_execution_result()
    with pytest.raises(RuntimeError, match=r"has no collect sink: submit it with AsyncJobClient.execute_and_collect"):
        client.collect()


async def test_leaving_async_with_after_the_end_is_fine(env):
    client = await AsyncJobClient.execute_and_collect(env.from_collection([1, 2, 3]))
    async with client.collect() as rows:
        assert [row async for row in rows] == [1, 2, 3]
    assert await client.get_job_status() is JobStatus.FINISHED
