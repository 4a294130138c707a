"""A source fed by the test's own event loop (pytest-asyncio): records from an asyncio.Queue
until END_OF_INPUT, back-pressure into a bounded queue, an iterator's error failing the job,
and a cancel reaching the async generator on the service's loop."""

from __future__ import annotations

import asyncio

import pytest

from rill.common import JobStatus
from rill.datastream import AsyncJobClient
from rill.datastream.connectors.async_source import END_OF_INPUT, AsyncIteratorSource, queue_items
from rill.runtime.errors import JobExecutionException


@pytest.mark.embedded_only("AsyncIteratorSource reads the service's own iterator in this process (its refusal on a cluster: test_cluster_async_io)")
async def test_records_from_the_services_queue_until_end_of_input(env):
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue(maxsize=8)  # bounded: put() waits while the job is behind
    source = AsyncIteratorSource(queue_items(queue), loop, max_buffered=16)
    stream = env.from_source(source, source_name="requests").map(lambda x: x * 2)
    client = await AsyncJobClient.execute_and_collect(stream, "fed by the service")

    async def produce():
        for i in range(3000):
            await queue.put(i)
        await queue.put(END_OF_INPUT)

    producer = loop.create_task(produce())
    rows = [row async for row in client.collect()]
    await producer
    assert rows == [2 * i for i in range(3000)]
    assert await client.get_job_status() is JobStatus.FINISHED


@pytest.mark.embedded_only("AsyncIteratorSource reads the service's own iterator in this process (its refusal on a cluster: test_cluster_async_io)")
async def test_an_error_of_the_iterator_fails_the_job(env):
    async def items():
        yield 1
        raise ConnectionError("upstream service went away")

    source = AsyncIteratorSource(items(), asyncio.get_running_loop())
    client = await AsyncJobClient.execute_and_collect(env.from_source(source, source_name="feed"))
    with pytest.raises(JobExecutionException) as info:
        [row async for row in client.collect()]
    assert isinstance(info.value.__cause__, ConnectionError)


@pytest.mark.embedded_only("AsyncIteratorSource reads the service's own iterator in this process (its refusal on a cluster: test_cluster_async_io)")
async def test_cancel_reaches_the_async_generator(env):
    closed = asyncio.Event()

    async def endless():
        try:
            i = 0
            while True:
                await asyncio.sleep(0.001)
                yield i
                i += 1
        finally:
            closed.set()

    source = AsyncIteratorSource(endless(), asyncio.get_running_loop(), max_buffered=4)
    env.from_source(source, source_name="endless").add_sink(lambda v: None)
    client = await AsyncJobClient.execute(env, "endless feed")
    while await client.get_job_status() is not JobStatus.RUNNING:
        await asyncio.sleep(0.01)
    await client.cancel()
    await asyncio.wait_for(closed.wait(), 30)
    assert await client.get_job_status() is JobStatus.CANCELED


def test_a_source_reads_its_iterator_once_and_checks_its_arguments():
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(TypeError, match="expects an async iterator, got \\[1\\]"):
            AsyncIteratorSource([1], loop)
        with pytest.raises(ValueError, match="max_buffered must be a positive int, got 0"):
            AsyncIteratorSource(queue_items(asyncio.Queue()), loop, max_buffered=0)
        source = AsyncIteratorSource(queue_items(asyncio.Queue()), loop)
        source.create_reader()
        with pytest.raises(RuntimeError, match="reads its async iterator once"):
            source.create_reader()
    finally:
        loop.close()
