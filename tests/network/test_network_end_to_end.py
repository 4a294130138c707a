"""Producer threads -> ResultPartitions -> local channels -> SingleInputGates in consumer threads.

Outputs are compared exactly against a reference computed record by record with a copy of the
partitioner; nothing depends on timing (waits are bounded polls of observable state).
"""

from __future__ import annotations

import threading

import pytest

from rill.network import (
    END_OF_PARTITION_EVENT,
    BufferPoolDestroyedError,
    CheckpointBarrier,
    EndOfDataEvent,
    ForwardPartitioner,
    KeyGroupStreamPartitioner,
    LocalBufferPool,
    LocalInputChannel,
    PartitionReleasedError,
    RebalancePartitioner,
    RecordWriter,
    ResultPartition,
    ResultPartitionID,
    ResultPartitionType,
    ShufflePartitioner,
    SingleInputGate,
)
from rill.common.streamrecord import Watermark


def producer_script(producer: int, num_records: int):
    """Deterministic steps: ("batch", values, timestamps) and ("event", event)."""
    steps = []
    seq = 0
    size = 1
    while seq < num_records:
        n = min(size, num_records - seq)
        values = [(f"key-{(producer * 7 + i) % 23}", producer, seq + i) for i in range(n)]
        steps.append(("batch", values, [1000 * producer + seq + i for i in range(n)]))
        seq += n
        size = size * 3 % 97 + 1  # batch sizes 1..97, varied
        if len(steps) % 5 == 0:
            steps.append(("event", Watermark(seq)))
        if len(steps) == 20:
            steps.append(("event", CheckpointBarrier(1, 42)))
    steps.append(("event", EndOfDataEvent()))
    return steps


def expected_streams(script, partitioner, num_consumers):
    """Per consumer: the exact sequence of ("record", value, ts) / ("event", e) it must read
    from this producer."""
    partitioner.setup(num_consumers)
    out = [[] for _ in range(num_consumers)]
    for step in script:
        if step[0] == "batch":
            for value, ts in zip(step[1], step[2]):
                out[partitioner.select_channel(value)].append(("record", value, ts))
        else:
            for stream in out:
                stream.append(("event", step[1]))
    for stream in out:
        stream.append(("event", END_OF_PARTITION_EVENT))
    return out


def run_producer(writer: RecordWriter, script) -> None:
    for step in script:
        if step[0] == "batch":
            writer.emit_batch(step[1], step[2])
        else:
            writer.broadcast_event(step[1])
    writer.flush_all()
    writer.partition.finish()
    writer.close()


def run_consumer(gate: SingleInputGate, received: list) -> None:
    """A task's input loop: poll; when nothing is there, sleep until the listener fires."""
    wake = threading.Event()
    gate.set_availability_listener(wake.set)
    gate.setup()
    streams = received
    while not gate.is_finished():
        boe = gate.poll_next()
        if boe is None:
            assert wake.wait(20), "no availability notification within 20 s"
            wake.clear()
            continue
        stream = streams[boe.channel_index]
        if boe.is_buffer():
            buffer = boe.buffer
            timestamps = buffer.timestamps or [None] * len(buffer.values)
            stream.extend(("record", v, t) for v, t in zip(buffer.values, timestamps))
            buffer.recycle_buffer()
        else:
            stream.append(("event", boe.event))
    gate.close()


@pytest.mark.parametrize(
    "make_partitioner",
    [
        lambda: KeyGroupStreamPartitioner(lambda r: r[0], 128),
        lambda: RebalancePartitioner(seed=11),
        lambda: ShufflePartitioner(seed=5),
    ],
    ids=["hash", "rebalance", "shuffle"],
)
def test_all_to_all_exchange_delivers_everything_exactly_once_in_order(
    manager, threads, make_partitioner
):
    num_producers, num_consumers, num_records = 2, 3, 6000
    partitions, writers, scripts = [], [], []
    for p in range(num_producers):
        # A tiny pool and tiny buffers: the writers hit backpressure many times.
        pool = LocalBufferPool(2, f"producer-{p}")
        partition = ResultPartition(
            ResultPartitionID(f"ds#{p}", "att-0"), ResultPartitionType.PIPELINED_BOUNDED, num_consumers, pool
        )
        manager.register_result_partition(partition)
        partitions.append(partition)
        writers.append(RecordWriter(partition, make_partitioner(), records_per_buffer=7))
        scripts.append(producer_script(p, num_records))

    received = [[[] for _ in range(num_producers)] for _ in range(num_consumers)]
    gates = []
    for c in range(num_consumers):
        channels = [LocalInputChannel(manager, partitions[p].partition_id, c) for p in range(num_producers)]
        gate = SingleInputGate(0, channels, f"consumer ({c + 1}/{num_consumers})")
        gates.append(gate)
        threads.start(lambda g=gate, r=received[c]: run_consumer(g, r), f"consumer-{c}")
    for p in range(num_producers):
        threads.start(lambda w=writers[p], s=scripts[p]: run_producer(w, s), f"producer-{p}")
    threads.join_all()

    for p in range(num_producers):
        expected = expected_streams(scripts[p], make_partitioner(), num_consumers)
        for c in range(num_consumers):
            assert received[c][p] == expected[c], f"producer {p} -> consumer {c}"
    total_in = sum(g.num_records_in for g in gates)
    assert total_in == num_producers * num_records == sum(w.num_records_out for w in writers)
    assert sum(g.num_buffers_in for g in gates) == sum(w.num_buffers_out for w in writers)
    for partition in partitions:
        stats = partition.buffer_pool.statistics()
        assert stats.used_buffers == 0, "every buffer came back to its pool"
        assert stats.peak_used_buffers == 2
        assert partition.is_released()  # consumed by every consumer
    assert manager.get_number_of_registered_partitions() == 0


def make_forward_exchange(manager, num_buffers):
    pool = LocalBufferPool(num_buffers, "bp")
    partition = ResultPartition(ResultPartitionID("fw", "att-0"), ResultPartitionType.PIPELINED_BOUNDED, 1, pool)
    manager.register_result_partition(partition)
    writer = RecordWriter(partition, ForwardPartitioner(), records_per_buffer=1)
    gate = SingleInputGate(0, [LocalInputChannel(manager, partition.partition_id, 0)], "slow consumer")
    gate.setup()
    return pool, partition, writer, gate


def test_a_consumer_that_stops_recycling_blocks_the_writer_until_it_recycles(manager, threads, wait_until):
    pool, partition, writer, gate = make_forward_exchange(manager, num_buffers=2)
    emitted = []

    def produce() -> None:
        for i in range(6):
            writer.emit_batch([i])  # one full buffer per record
            emitted.append(i)
        partition.finish()

    threads.start(produce, "producer")
    # Two buffers fit in the pool; the third request blocks the writer.
    wait_until(lambda: pool.statistics().requesters_blocked == 1, "the writer blocks on the pool")
    assert emitted == [0, 1]
    before = writer.back_pressured_time_ns
    wait_until(lambda: writer.back_pressured_time_ns > before, "back-pressured time grows while blocked")

    # The consumer reads both buffers but keeps them: still blocked.
    held = [gate.poll_next().buffer for _ in range(2)]
    assert [b.values for b in held] == [[0], [1]]
    assert gate.poll_next() is None
    assert pool.statistics().requesters_blocked == 1 and emitted == [0, 1]

    held[0].recycle_buffer()  # one slot back: exactly one more buffer goes out
    wait_until(lambda: emitted == [0, 1, 2] and pool.statistics().requesters_blocked == 1, "one more record")
    held[1].recycle_buffer()
    wait_until(lambda: emitted == [0, 1, 2, 3] and pool.statistics().requesters_blocked == 1, "another one")

    # Now consume normally until the end.
    values = []
    while not gate.is_finished():
        boe = gate.poll_next()
        if boe is None:
            wait_until(gate.is_available, "more input")
            continue
        if boe.is_buffer():
            values.extend(boe.buffer.values)
            boe.buffer.recycle_buffer()
    threads.join_all()
    assert values == [2, 3, 4, 5]
    stats = pool.statistics()
    assert stats.used_buffers == 0 and stats.peak_used_buffers == 2
    assert stats.back_pressured_time_ns > before > 0


def test_releasing_the_partition_cancels_a_blocked_writer_and_its_consumer(manager, threads, wait_until):
    pool, partition, writer, gate = make_forward_exchange(manager, num_buffers=1)
    writer_errors: list[BaseException] = []
    consumer_errors: list[BaseException] = []
    consumer_waiting = threading.Event()

    def produce() -> None:
        try:
            for i in range(10):
                writer.emit_batch([i])
        except BufferPoolDestroyedError as error:
            writer_errors.append(error)

    def consume() -> None:
        wake = threading.Event()
        gate.set_availability_listener(wake.set)
        first = gate.poll_next()  # holds the only buffer and never recycles it
        assert first is not None and first.buffer.values == [0]
        try:
            while True:
                if gate.poll_next() is None:
                    wake.clear()
                    consumer_waiting.set()
                    assert wake.wait(20), "the release must wake the consumer"
        except PartitionReleasedError as error:
            consumer_errors.append(error)

    threads.start(produce, "producer")
    wait_until(lambda: pool.statistics().used_buffers == 1, "first buffer sent")
    threads.start(consume, "consumer")
    wait_until(lambda: pool.statistics().requesters_blocked == 1 and consumer_waiting.is_set(), "both wait")

    cause = RuntimeError("TaskManager lost")
    manager.release_partition(partition.partition_id, cause)
    threads.join_all()
    assert len(writer_errors) == 1 and "destroyed while waiting" in str(writer_errors[0])
    assert len(consumer_errors) == 1 and consumer_errors[0].cause is cause


def test_closing_every_consumer_gate_stops_a_blocked_producer(manager, threads, wait_until):
    pool, partition, writer, gate = make_forward_exchange(manager, num_buffers=1)
    errors: list[BaseException] = []

    def produce() -> None:
        try:
            for i in range(10):
                writer.emit_batch([i])
        except BufferPoolDestroyedError as error:
            errors.append(error)

    threads.start(produce, "producer")
    wait_until(lambda: pool.statistics().requesters_blocked == 1, "the writer blocks")
    gate.close()  # the consumer task is cancelled: its channel releases the subpartition
    threads.join_all()
    assert len(errors) == 1
    assert partition.is_released() and manager.get_number_of_registered_partitions() == 0
    assert pool.statistics().used_buffers == 0
