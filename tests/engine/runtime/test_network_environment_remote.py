"""NetworkEnvironment with remote locations, as cluster mode deploys it: two "TaskExecutor
processes" (each a ResultPartitionManager, a started NettyConnectionManager on its own port and
a NetworkEnvironment with its own NetworkBufferPool) exchange records over real sockets on
127.0.0.1. Gates come from TaskDeploymentDescriptors whose InputGateDeploymentDescriptors carry
the producers' addresses, and are read without a Task. Waits are bounded polls."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Callable

import pytest

from rill.network import (
    END_OF_PARTITION_EVENT,
    EndOfDataEvent,
    InsufficientNetworkBuffersError,
    KeyGroupStreamPartitioner,
    LocalInputChannel,
    NettyConfig,
    NettyConnectionManager,
    NetworkBufferPool,
    RemoteInputChannel,
    ResultPartitionID,
    ResultPartitionManager,
)
from rill.runtime.deployment import (
    InputGateDeploymentDescriptor,
    ResultPartitionDeploymentDescriptor,
    TaskDeploymentDescriptor,
)
from rill.common.network_options import NetworkOptions
from rill.common.streamrecord import Watermark
from rill.runtime.taskmanager.network_environment import NetworkEnvironment

DEADLINE_S = 30.0
MAX_PARALLELISM = 128


def wait_until(predicate: Callable[[], bool], what: str, timeout_s: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting until {what}")
        time.sleep(0.001)


@dataclass
class Process:
    """What one TaskExecutor process holds of the network."""

    name: str
    partitions: ResultPartitionManager
    connections: NettyConnectionManager
    pool: NetworkBufferPool
    env: NetworkEnvironment

    @property
    def address(self) -> tuple:
        return self.connections.server_address

    def is_full(self) -> bool:
        return self.pool.get_number_of_available_memory_segments() == self.pool.get_total_number_of_memory_segments()


@pytest.fixture
def processes():
    secret = os.urandom(32)
    made: list[Process] = []

    def make(name: str, total_segments: int = 256) -> Process:
        partitions = ResultPartitionManager()
        connections = NettyConnectionManager(
            NettyConfig(secret=secret, retry_initial_backoff_s=0.002, retry_max_backoff_s=0.05), partitions,
            name=name)
        connections.start()
        pool = NetworkBufferPool(total_segments)
        process = Process(name, partitions, connections,
                          pool, NetworkEnvironment(partitions, connection_manager=connections, network_buffer_pool=pool))
        made.append(process)
        return process

    yield make
    for process in made:
        process.connections.shutdown()
        process.partitions.shutdown()
    assert [p.connections.network_thread_errors() for p in made] == [[] for _ in made]


def tdd(name: str, subtask: int, parallelism: int, produced=(), gates=(), **settings) -> TaskDeploymentDescriptor:
    return TaskDeploymentDescriptor(
        job_id="job", job_name="remote", vertex=None, subtask_index=subtask, parallelism=parallelism,
        attempt_number=0, attempt_id=f"{name}-{subtask}", task_name=name, produced_partitions=list(produced),
        input_gates=list(gates), network_options=NetworkOptions(records_per_buffer=7), **settings)


def partitioner():
    return KeyGroupStreamPartitioner(lambda record: record[0], MAX_PARALLELISM)


def produced(name: str, num_consumers: int, target: str = "Consumer") -> ResultPartitionDeploymentDescriptor:
    return ResultPartitionDeploymentDescriptor(ResultPartitionID(name, "attempt-0"), num_consumers, partitioner(),
                                               MAX_PARALLELISM, target)


def script(producer: int, num_records: int):
    """("batch", values, timestamps) and ("event", e) steps, ending with EndOfData."""
    steps, seq, size = [], 0, 1
    while seq < num_records:
        n = min(size, num_records - seq)
        steps.append(("batch", [(f"k{(producer * 5 + seq + i) % 17}", producer, seq + i) for i in range(n)],
                      [producer * 100_000 + seq + i for i in range(n)]))
        seq += n
        size = size * 3 % 41 + 1
        if len(steps) % 4 == 0:
            steps.append(("event", Watermark(seq)))
    steps.append(("event", EndOfDataEvent()))
    return steps


def expected(steps, num_consumers: int):
    route = partitioner()
    route.setup(num_consumers)
    out = [[] for _ in range(num_consumers)]
    for step in steps:
        if step[0] == "batch":
            for value, ts in zip(step[1], step[2]):
                out[route.select_channel(value)].append(("record", value, ts))
        else:
            for stream in out:
                stream.append(("event", step[1]))
    for stream in out:
        stream.append(("event", END_OF_PARTITION_EVENT))
    return out


def produce(writer, steps) -> None:
    for step in steps:
        if step[0] == "batch":
            writer.emit_batch(step[1], step[2])
        else:
            writer.broadcast_event(step[1])
    writer.flush_all()
    writer.partition.finish()
    writer.close()


class Reader:
    """Reads a gate on the caller's thread like a task's input loop (poll; wait for the
    availability listener when there is nothing), per channel."""

    def __init__(self, gate) -> None:
        self.gate = gate
        self.wake = threading.Event()
        self.streams = [[] for _ in range(gate.get_number_of_input_channels())]
        gate.set_availability_listener(self.wake.set)
        gate.setup()

    def poll(self):
        deadline = time.monotonic() + DEADLINE_S
        while True:
            self.wake.clear()
            boe = self.gate.poll_next()
            if boe is not None:
                return boe
            if not self.wake.wait(max(0.0, deadline - time.monotonic())):
                raise AssertionError(f"no input within {DEADLINE_S}s from {self.gate!r}")

    def take(self, boe, recycle: bool = True) -> None:
        stream = self.streams[boe.channel_index]
        if boe.is_buffer():
            timestamps = boe.buffer.timestamps or [None] * len(boe.buffer.values)
            stream.extend(("record", v, t) for v, t in zip(boe.buffer.values, timestamps))
            if recycle:
                boe.buffer.recycle_buffer()
        else:
            stream.append(("event", boe.event))

    def read_to_end(self):
        while not self.gate.is_finished():
            self.take(self.poll())
        return self.streams


def start(target, *args) -> threading.Thread:
    errors = []

    def run():
        try:
            target(*args)
        except BaseException as error:  # noqa: BLE001 - checked by the test through join
            errors.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.errors = errors  # type: ignore[attr-defined]
    thread.start()
    return thread


def test_remote_and_local_channels_deliver_every_record_once_in_order(processes):
    num_producers, num_consumers, num_records = 2, 3, 3000
    a, b = processes("tm-a"), processes("tm-b")
    assert a.address != b.address  # two servers, two ports: every remote channel crosses a socket

    # Process A runs the two remote producers; process B one local producer and the consumers.
    producer_tdds = [tdd("Producer", p, num_producers, produced=[produced(f"remote-{p}", num_consumers)])
                     for p in range(num_producers)]
    local_tdd = tdd("Local", 0, 1, produced=[produced("local-0", num_consumers)])
    writers, steps = [], []
    for p, producer in enumerate(producer_tdds):
        writers.extend(a.env.create_record_writers(producer, a.env.create_result_partitions(producer)))
        steps.append(script(p, num_records))
    writers.extend(b.env.create_record_writers(local_tdd, b.env.create_result_partitions(local_tdd)))
    steps.append(script(num_producers, num_records))
    b_used_by_local = b.pool.get_number_of_used_memory_segments()
    assert b_used_by_local == num_consumers * 2 + 8  # the local producer's pool at its maximum

    consumer_tdds = [
        tdd("Consumer", c, num_consumers, gates=[InputGateDeploymentDescriptor(
            0,
            [(ResultPartitionID(f"remote-{p}", "attempt-0"), c) for p in range(num_producers)]
            + [(ResultPartitionID("local-0", "attempt-0"), c)],
            locations=[a.address] * num_producers + [None])])
        for c in range(num_consumers)]
    gates = [gate for consumer in consumer_tdds for gate in b.env.create_input_gates(consumer)]
    for gate in gates:
        kinds = [type(gate.get_channel(i)) for i in range(gate.get_number_of_input_channels())]
        assert [issubclass(k, RemoteInputChannel) for k in kinds] == [True, True, False]
        assert kinds[2] is LocalInputChannel
    # Each gate: 2 remote channels x 2 exclusive buffers + 8 floating buffers.
    assert b.pool.get_number_of_used_memory_segments() == b_used_by_local + num_consumers * (2 * 2 + 8)

    readers = [Reader(gate) for gate in gates]
    producers = [start(produce, w, s) for w, s in zip(writers, steps)]
    first = readers[0]
    boe = first.poll()
    while not (boe.is_buffer() and boe.channel_index < num_producers):
        first.take(boe)
        boe = first.poll()
    assert b.env.input_pool_usage(gates) > 0  # a remote buffer is held
    first.take(boe)  # recycles it

    consumers = [start(reader.read_to_end) for reader in readers]  # as tasks: all at once
    for thread in producers + consumers:
        thread.join(DEADLINE_S)
        assert not thread.is_alive() and thread.errors == []
    results = [reader.streams for reader in readers]

    streams = [expected(s, num_consumers) for s in steps]
    for c, result in enumerate(results):
        assert result == [streams[p][c] for p in range(num_producers + 1)], f"consumer {c}"

    # Metrics: bytes in are what the remote channels received; local channels count none.
    received = sum(gate.get_channel(i).bytes_received for gate in gates for i in range(num_producers))
    assert received > 0 and b.env.num_bytes_in(gates) == received
    assert b.env.input_pool_usage(gates) == 0.0  # every remote channel released after EndOfPartition

    # Every buffer is back: the consumers' gates (channels released at EndOfPartition), the
    # local partition (consumed), the remote producers' partitions (consumed through the server).
    wait_until(b.is_full, "process B's budget is full again")
    wait_until(a.is_full, "process A's budget is full again")
    assert a.partitions.get_number_of_registered_partitions() == 0
    assert b.pool.statistics().holders == () and a.pool.statistics().holders == ()


def test_bytes_out_count_what_the_server_sent(processes):
    a, b = processes("tm-a"), processes("tm-b")
    producer = tdd("Producer", 0, 1, produced=[produced("remote-0", 1)])
    partitions = a.env.create_result_partitions(producer)
    [writer] = a.env.create_record_writers(producer, partitions)
    consumer = tdd("Consumer", 0, 1, gates=[InputGateDeploymentDescriptor(
        0, [(ResultPartitionID("remote-0", "attempt-0"), 0)], locations=[a.address])])
    [gate] = b.env.create_input_gates(consumer)
    reader = Reader(gate)
    producer_thread = start(produce, writer, script(0, 500))
    reader.read_to_end()
    producer_thread.join(DEADLINE_S)
    assert not producer_thread.is_alive() and producer_thread.errors == []
    received = gate.get_channel(0).bytes_received
    assert received > 0
    assert a.env.num_bytes_out(partitions) == received


def test_closing_a_gate_early_returns_every_segment_and_releases_the_producer(processes):
    a, b = processes("tm-a"), processes("tm-b")
    producer = tdd("Producer", 0, 1, produced=[produced("remote-0", 2)])
    partitions = a.env.create_result_partitions(producer)
    [writer] = a.env.create_record_writers(producer, partitions)
    consumer = tdd("Consumer", 0, 1, gates=[InputGateDeploymentDescriptor(
        0, [(ResultPartitionID("remote-0", "attempt-0"), 0), (ResultPartitionID("remote-0", "attempt-0"), 1)],
        locations=[a.address, a.address])])
    [gate] = b.env.create_input_gates(consumer)
    assert b.pool.get_number_of_used_memory_segments() == 2 * 2 + 8
    reader = Reader(gate)
    writer.emit_batch([("k1", 0, i) for i in range(50)], None)
    writer.flush_all()
    reader.take(reader.poll())
    gate.close()  # the task is cancelled: channels released before EndOfPartition
    assert b.is_full()
    partitions[0].release()  # the producer is cancelled too
    wait_until(a.is_full, "the producer's pool is back")
    writer.close()


def test_remote_locations_without_a_connection_manager_fail_clearly(processes):
    a = processes("tm-a")
    partitions = ResultPartitionManager()
    pool = NetworkBufferPool(64)
    env = NetworkEnvironment(partitions, network_buffer_pool=pool)  # embedded: no transport
    consumer = tdd("Consumer", 1, 2, produced=[produced("out", 1)], gates=[InputGateDeploymentDescriptor(
        0, [(ResultPartitionID("remote-0", "attempt-0"), 1)], locations=[a.address])])
    host, port = a.address
    with pytest.raises(RuntimeError, match=rf"Channel 0 of input gate 0 of 'Consumer \(2/2\)' reads subpartition 1 "
                                           rf"of partition .* from {host}:{port}, but this TaskExecutor has no "
                                           r"network connection manager"):
        env.create_result_partitions(consumer)
    with pytest.raises(RuntimeError, match="no network connection manager"):
        env.create_input_gates(consumer)
    assert partitions.get_number_of_registered_partitions() == 0
    assert pool.get_number_of_used_memory_segments() == 0


def test_locations_must_match_the_channels(processes):
    b = processes("tm-b")
    consumer = tdd("Consumer", 0, 1, gates=[InputGateDeploymentDescriptor(
        0, [(ResultPartitionID("remote-0", "attempt-0"), 0)], locations=[None, ("127.0.0.1", 1)])])
    with pytest.raises(ValueError, match="has 1 channels but 2 locations"):
        b.env.create_input_gates(consumer)
    assert b.is_full()


def test_a_task_whose_remote_channels_do_not_fit_fails_before_creating_anything(processes):
    a = processes("tm-a")
    b = processes("tm-b", total_segments=10)
    consumer = tdd("Window", 0, 1, produced=[produced("window-out", 2, "Sink")],
                   gates=[InputGateDeploymentDescriptor(
                       0, [(ResultPartitionID(f"remote-{p}", "attempt-0"), 0) for p in range(3)],
                       locations=[a.address] * 3)])
    # needs 2 + 1 = 3 for its partition and 3 x 2 exclusive + 1 floating = 7 for its gate
    assert NetworkEnvironment.partition_buffers(consumer, consumer.produced_partitions[0]) == (3, 12)
    assert NetworkEnvironment.gate_buffers(consumer, consumer.input_gates[0]) == (7, 14)
    blocker = b.pool.request_segments(1, name="another task")
    with pytest.raises(InsufficientNetworkBuffersError) as info:
        b.env.create_result_partitions(consumer)
    assert str(info.value) == (
        "Insufficient number of network buffers: required 10, but only 9 available. The total number of "
        "network buffers is currently set to 10 of 32768 bytes each. You can increase this number by setting "
        "the configuration key 'taskmanager.memory.network.max'. (Task 'Window (1/1)' needs at least 3 buffers "
        "for its 1 result partition(s) and 7 for the remote channels of its input gates.)")
    assert b.partitions.get_number_of_registered_partitions() == 0
    blocker.recycle()

    # With exactly the minimum the partition leaves the gate its share: 3 + 7 of 10.
    [partition] = b.env.create_result_partitions(consumer)
    assert partition.buffer_pool.get_number_of_buffers() == 3
    [gate] = b.env.create_input_gates(consumer)
    assert b.pool.get_number_of_available_memory_segments() == 0
    gate.close()
    partition.release()
    assert b.is_full()


def test_gates_that_cannot_be_created_release_the_tasks_partitions(processes):
    a, b = processes("tm-a"), processes("tm-b", total_segments=40)
    consumer = tdd("Map", 0, 1, produced=[produced("map-out", 2, "Sink")],
                   gates=[InputGateDeploymentDescriptor(
                       0, [(ResultPartitionID("remote-0", "attempt-0"), 0)], locations=[a.address])])
    [partition] = b.env.create_result_partitions(consumer)
    assert b.partitions.get_number_of_registered_partitions() == 1
    thief = b.pool.request_segments(0, 1000, "a concurrent deployment")  # takes everything left
    with pytest.raises(InsufficientNetworkBuffersError, match="required 3, but only 0 available"):
        b.env.create_input_gates(consumer)
    # The Task's constructor never completes: its partitions must not stay registered.
    assert b.partitions.get_number_of_registered_partitions() == 0
    assert partition.is_released()
    thief.recycle()
    assert b.is_full()
