"""Queryable state in embedded mode: ``await client.get_state(uid, name, key)`` and the blocking
``JobClient.get_state`` read a running job's keyed state by key, on the task that owns the key's
key group, with clear errors. Records come from an asyncio.Queue the test owns; the test waits
for the job's outputs (conditions), never sleeps."""

from __future__ import annotations

import asyncio

import pytest

from rill.common import JobStatus, Types
from rill.datastream import AsyncJobClient, KeyedProcessFunction
from rill.datastream.connectors.async_source import END_OF_INPUT, AsyncIteratorSource, queue_items
from rill.datastream.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from rill.runtime.queryable_state import (
    JobNotRunningError,
    NotKeyedOperatorError,
    UnknownOperatorUidError,
    UnknownStateNameError,
    operator_id_of_uid,
)
from rill.state.key_groups import assign_key_to_parallel_operator

pytestmark = pytest.mark.embedded_only(
    "the jobs read the test's own async iterator (AsyncIteratorSource runs embedded only); queryable state on a cluster: tests/engine/runtime/cluster/test_cluster_queryable_state.py")


class CountPerKey(KeyedProcessFunction):
    """Per key: a count (ValueState), the values seen (ListState), the count per value (MapState)."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.INT()))
        self.seen = runtime_context.get_list_state(ListStateDescriptor("seen", Types.INT()))
        self.per_value = runtime_context.get_map_state(MapStateDescriptor("per_value", Types.INT(), Types.INT()))

    def process_element(self, value, ctx):
        key, n = value
        c = (self.count.value() or 0) + 1
        self.count.update(c)
        self.seen.add(n)
        self.per_value.put(n, (self.per_value.get(n) or 0) + 1)
        yield key, c


KEYS = ["alice", "bob", "carol", "dave", "erin", "frank"]


async def _start(env, parallelism=2):
    queue: asyncio.Queue = asyncio.Queue(maxsize=100)
    source = AsyncIteratorSource(queue_items(queue), asyncio.get_running_loop())
    counted = (env.from_source(source, source_name="events")
               .key_by(lambda e: e[0])
               .process(CountPerKey()).uid("counter").set_parallelism(parallelism))
    client = await AsyncJobClient.execute_and_collect(counted, "queryable")
    return queue, client, client.collect()


async def _feed_and_wait(queue, rows, events):
    for e in events:
        await queue.put(e)
    out = []
    for _ in events:  # one output per event: once all are here, every update has happened
        out.append(await rows.__anext__())
    return out


async def test_get_state_reads_each_keys_value_list_and_map_from_its_owning_subtask(env):
    # the six keys land on both subtasks of parallelism 2 (else routing is not tested)
    assert {assign_key_to_parallel_operator(k, 128, 2) for k in KEYS} == {0, 1}
    queue, client, rows = await _start(env)
    events = [(k, i) for i in range(3) for k in KEYS[: 2 + i * 2]]  # alice, bob 3x; carol, dave 2x; ...
    await _feed_and_wait(queue, rows, events)
    expected = {k: [n for kk, n in events if kk == k] for k in KEYS}
    for k in KEYS:
        assert await client.get_state("counter", "count", k) == len(expected[k])
        assert await client.get_state("counter", "seen", k) == expected[k]
        assert await client.get_state("counter", "per_value", k) == {n: 1 for n in expected[k]}
    assert await client.get_state("counter", "count", "nobody") is None
    assert await client.get_state("counter", "seen", "nobody") is None
    # the job went on running: more input, new values
    await _feed_and_wait(queue, rows, [("alice", 7), ("alice", 7)])
    assert await client.get_state("counter", "count", "alice") == 5
    assert await client.get_state("counter", "per_value", "alice") == {0: 1, 1: 1, 2: 1, 7: 2}
    assert await client.get_job_status() is JobStatus.RUNNING
    # the blocking face, from an executor thread (it waits on the task's answer)
    loop = asyncio.get_running_loop()
    assert await loop.run_in_executor(None, client.job_client.get_state, "counter", "count", "bob") == 3
    await queue.put(END_OF_INPUT)
    assert [r async for r in rows] == []
    await client.get_job_execution_result()


async def test_errors_name_the_uid_the_state_and_the_rule(env):
    queue, client, rows = await _start(env, parallelism=1)
    await _feed_and_wait(queue, rows, [("alice", 1)])
    with pytest.raises(UnknownOperatorUidError, match=r"uid 'no-such-uid'.*\.uid\('no-such-uid'\)"):
        await client.get_state("no-such-uid", "count", "alice")
    with pytest.raises(UnknownStateNameError,
                       match=r"Operator 'KeyedProcess' has no keyed state named 'cnt'.*\['count', 'per_value', 'seen'\]"):
        await client.get_state("counter", "cnt", "alice")
    with pytest.raises(TypeError, match="uid must be a non-empty str"):
        await client.get_state("", "count", "alice")
    await queue.put(END_OF_INPUT)
    assert [r async for r in rows] == []
    await client.get_job_execution_result()
    with pytest.raises(JobNotRunningError, match=r"job .* is FINISHED: state 'count' of operator 'KeyedProcess'"):
        await client.get_state("counter", "count", "alice")


async def test_an_operator_that_is_not_keyed_is_refused(env):
    queue: asyncio.Queue = asyncio.Queue()
    source = AsyncIteratorSource(queue_items(queue), asyncio.get_running_loop())
    mapped = env.from_source(source, source_name="events").map(lambda v: v).uid("plain-map")
    client = await AsyncJobClient.execute_and_collect(mapped)
    with pytest.raises(NotKeyedOperatorError, match=r"Operator 'Map' \(uid 'plain-map'\) has no keyed state"):
        await client.get_state("plain-map", "count", 1)
    await queue.put(END_OF_INPUT)
    assert [r async for r in client.collect()] == []


def test_operator_id_of_uid_is_the_hash_the_job_graph_gives(env):
    env.from_collection([("a", 1)]).key_by(lambda e: e[0]).process(CountPerKey()).uid("counter") \
        .add_sink(lambda v: None)
    graph = env.get_stream_graph().get_job_graph()
    ids = {cfg.operator_id for v in graph.get_vertices() for cfg in v.stream_configs.values()}
    assert operator_id_of_uid("counter") in ids


class CountAndSum(KeyedProcessFunction):
    """Two puts per record into one MapState: a reader between them would see sum and count of
    different records."""

    def open(self, runtime_context):
        self.stats = runtime_context.get_map_state(MapStateDescriptor("stats", Types.STRING(), Types.LONG()))

    def process_element(self, value, ctx):
        count = (self.stats.get("count") or 0) + 1
        self.stats.put("count", count)
        self.stats.put("sum", (self.stats.get("sum") or 0) + value[1])
        if count % 1000 == 0:
            yield count


async def test_reads_while_records_flow_see_whole_updates_and_never_go_back(env):
    queue: asyncio.Queue = asyncio.Queue(maxsize=500)
    source = AsyncIteratorSource(queue_items(queue), asyncio.get_running_loop())
    out = (env.from_source(source, source_name="events").key_by(lambda e: e[0])
           .process(CountAndSum()).uid("stats"))
    client = await AsyncJobClient.execute_and_collect(out, "consistency")
    n = 20_000

    async def produce():
        for i in range(n):
            await queue.put(("k", i))  # the i-th record adds i: sum == count * (count - 1) / 2
        await queue.put(END_OF_INPUT)

    producer = asyncio.get_running_loop().create_task(produce())
    seen = []
    while not producer.done() or not seen or seen[-1] < n:
        try:
            stats = await client.get_state("stats", "stats", "k")
        except JobNotRunningError:  # the job finished after the last record
            break
        if stats is not None:
            assert stats["sum"] == stats["count"] * (stats["count"] - 1) // 2, stats
            seen.append(stats["count"])
    await producer
    assert [c async for c in client.collect()] == list(range(1000, n + 1, 1000))
    assert seen == sorted(seen) and len(set(seen)) > 1  # read while it ran, never backwards
