"""Producer ResultPartitions served by one NettyConnectionManager -> RemoteInputChannels in
SingleInputGates of another, over real sockets on 127.0.0.1 (two network threads in this
process; the two-process variant is test_remote_two_processes.py).

Outputs are compared exactly with a reference computed record by record; waits are bounded
polls of observable state."""

from __future__ import annotations

import datetime
import decimal
import threading
from collections import namedtuple

import pytest
from _remote_helpers import (
    GateReader,
    expected_streams,
    make_partition,
    producer_script,
    run_producer,
    wait_until,
)

from rill.common.row import Row, RowKind
from rill.network import (
    END_OF_PARTITION_EVENT,
    BufferPoolDestroyedError,
    ConnectionStatistics,
    ForwardPartitioner,
    KeyGroupStreamPartitioner,
    LocalInputChannel,
    PartitionReleasedError,
    RecordWriter,
    RemoteInputChannel,
    RemoteInputChannelStatistics,
    ResultPartitionManager,
    SingleInputGate,
    SubpartitionReaderStatistics,
)
from rill.network.netty import PartitionRequestTimeoutError, RemoteTransportError

Point = namedtuple("Point", "x y")


@pytest.fixture
def partitions():
    manager = ResultPartitionManager()
    yield manager
    manager.shutdown()


def emit(partition, subpartition, values, timestamps=None):
    buffer = partition.request_buffer_blocking()
    buffer.set_contents(list(values), timestamps)
    partition.emit_buffer(buffer, subpartition)


def test_all_to_all_exchange_exactly_once_in_order_over_one_connection(network, partitions, threads):
    num_producers, num_consumers, num_records = 2, 3, 4000
    server = network(partitions, name="producer")
    client = network(name="consumer")
    address = server.server_address
    assert address[0] == "127.0.0.1"

    def make_partitioner():
        return KeyGroupStreamPartitioner(lambda r: r[0], 128)

    writers, scripts = [], []
    for p in range(num_producers):
        partition = make_partition(partitions, f"ds#{p}", num_consumers, num_buffers=2)
        writers.append(RecordWriter(partition, make_partitioner(), records_per_buffer=7))
        scripts.append(producer_script(p, num_records))

    gates, pools = [], []
    for c in range(num_consumers):
        pool = client.create_floating_buffer_pool(f"consumer {c} gate")
        channels = [RemoteInputChannel(client, address, writers[p].partition.partition_id, c, pool)
                    for p in range(num_producers)]
        if c == 0:  # a gate may mix local and remote channels: same interface
            channels[0] = LocalInputChannel(partitions, writers[0].partition.partition_id, 0)
        gates.append(SingleInputGate(0, channels, f"consumer ({c + 1}/{num_consumers})"))
        pools.append(pool)

    readers = [GateReader(gate) for gate in gates]  # setup(): requests go out, nothing blocks
    wait_until(lambda: [s.channels for s in client.connection_statistics()] == [5], "5 channels on 1 connection")
    wait_until(lambda: len(server.reader_statistics()) == 5, "the server serves the 5 subpartitions")

    results = [None] * num_consumers
    for c in range(num_consumers):
        threads.start(lambda c=c: results.__setitem__(c, readers[c].read_to_end()), f"consumer-{c}")
    for p in range(num_producers):
        threads.start(lambda p=p: run_producer(writers[p], scripts[p]), f"producer-{p}")
    threads.join_all()

    for p in range(num_producers):
        expected = expected_streams(scripts[p], make_partitioner(), num_consumers)
        for c in range(num_consumers):
            assert results[c][p] == expected[c], f"producer {p} -> consumer {c}"
    for gate in gates:
        gate.close()
    for writer in writers:
        stats = writer.partition.buffer_pool.statistics()
        assert stats.used_buffers == 0 and writer.partition.is_released()
    for pool in pools:
        assert pool.statistics().available_buffers == pool.get_number_of_buffers()
    for gate in gates:
        for index in range(gate.get_number_of_input_channels()):
            channel = gate.get_channel(index)
            if isinstance(channel, RemoteInputChannel):
                stats = channel.statistics()
                assert stats.finished and stats.released and stats.error is None
                assert stats.exclusive_buffers_in_use == stats.floating_buffers_in_use == 0
                channel.buffer_manager.check_invariants()
    assert partitions.get_number_of_registered_partitions() == 0
    wait_until(lambda: client.connection_statistics() == (), "the idle connection is closed")


@pytest.mark.parametrize("compression", [False, True], ids=["plain", "lz4"])
def test_records_larger_than_a_segment_span_several_frames(network, partitions, compression):
    server = network(partitions, compression=compression, segment_size_bytes=4096)
    client = network()
    partition = make_partition(partitions, "big", 1, num_buffers=2)
    channel = RemoteInputChannel(client, server.server_address, partition.partition_id, 0,
                                 client.create_floating_buffer_pool())
    reader = GateReader(SingleInputGate(0, [channel], "sink"))
    big = [("a" * 70_000, bytes(range(256)) * 300), list(range(5000)), "é" * 40_000]
    emit(partition, 0, [big[0]], [1])
    emit(partition, 0, big[1:], [2, 3])
    emit(partition, 0, ["small"], None)
    partition.finish()
    [stream] = reader.read_to_end()
    assert stream == [("record", big[0], 1), ("record", big[1], 2), ("record", big[2], 3),
                      ("record", "small", None), ("event", END_OF_PARTITION_EVENT)]
    stats = channel.statistics()
    assert stats.buffers_received == 3
    if compression:  # repetitive payloads shrink to a few segments
        assert 3 <= stats.segments_received < 20
    else:  # ~70 KB + 30 KB + ... in segments of at most 4 KiB
        assert stats.segments_received > (70_000 + 76_800 + 40_000) // 4096
    reader.gate.close()


def test_python_types_round_trip_over_the_wire(network, partitions):
    server = network(partitions)
    client = network()
    partition = make_partition(partitions, "types", 1)
    channel = RemoteInputChannel(client, server.server_address, partition.partition_id, 0,
                                 client.create_floating_buffer_pool())
    reader = GateReader(SingleInputGate(0, [channel], "sink"))
    row = Row(id=1, name="a")
    row.set_row_kind(RowKind.UPDATE_AFTER)
    values = [
        (1, "a"), [1, (2, [3])], {"k": (1, 2), (3, 4): [5]}, 2**100, -(2**70), 1.5, True, None, b"\x00\xff",
        datetime.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=datetime.timezone(datetime.timedelta(hours=2))),
        datetime.date(2024, 2, 29), decimal.Decimal("-1.2300"), row, Row(1, "b"), {1, 2}, Point(1, 2),
    ]
    emit(partition, 0, values)
    emit(partition, 0, [(i, str(i)) for i in range(100)])  # the columnar fast path
    partition.finish()
    [stream] = reader.read_to_end()
    received = [entry[1] for entry in stream if entry[0] == "record"]
    assert received == values + [(i, str(i)) for i in range(100)]
    assert [type(v) for v in received[:len(values)]] == [type(v) for v in values]
    assert received[12].get_row_kind() is RowKind.UPDATE_AFTER and received[12].as_dict() == {"id": 1, "name": "a"}
    reader.gate.close()


def test_closing_the_consumer_gate_cancels_the_producer_and_returns_every_buffer(network, partitions, threads):
    server = network(partitions)
    client = network()
    partition = make_partition(partitions, "cancel", 1, num_buffers=2)
    writer = RecordWriter(partition, ForwardPartitioner(), records_per_buffer=1)
    pool = client.create_floating_buffer_pool()
    channel = RemoteInputChannel(client, server.server_address, partition.partition_id, 0, pool)
    reader = GateReader(SingleInputGate(0, [channel], "sink"))
    errors = []

    def produce() -> None:
        try:
            for i in range(10_000):
                writer.emit_batch([i])
        except BufferPoolDestroyedError as error:
            errors.append(error)

    threads.start(produce, "producer")
    first = reader.poll()
    held = first.buffer  # the task still holds a buffer when it is cancelled
    wait_until(lambda: partition.buffer_pool.statistics().requesters_blocked == 1, "the writer is back-pressured")

    def in_use() -> int:
        stats = channel.statistics()
        return stats.exclusive_buffers_in_use + stats.floating_buffers_in_use

    # Every receiving buffer (2 exclusive + 8 floating) holds data, the sender has no credit.
    wait_until(lambda: in_use() == 10 and [r.back_pressured for r in server.reader_statistics()] == [True],
               "the sender has data but no credit")
    assert channel.statistics().credit_available == 0 and pool.statistics().available_buffers == 0
    reader.gate.close()
    threads.join_all()
    assert len(errors) == 1, "the producer was stopped by the consumer's cancellation"
    assert partition.is_released() and partitions.get_number_of_registered_partitions() == 0
    assert partition.buffer_pool.statistics().used_buffers == 0
    held_floating = held.get_recycler() is channel.buffer_manager.floating_recycler
    assert pool.statistics().assigned_buffers == (1 if held_floating else 0)  # only the held buffer
    held.recycle_buffer()
    stats = channel.statistics()
    assert stats.exclusive_buffers_in_use == stats.floating_buffers_in_use == 0 == stats.exclusive_buffers
    assert pool.statistics().available_buffers == pool.get_number_of_buffers()
    channel.buffer_manager.check_invariants()


def test_a_partition_registered_late_is_requested_again_with_backoff(network, partitions):
    server = network(partitions)
    client = network()
    from rill.network import ResultPartitionID

    pid = ResultPartitionID("late", "attempt-0")
    channel = RemoteInputChannel(client, server.server_address, pid, 0, client.create_floating_buffer_pool())
    reader = GateReader(SingleInputGate(0, [channel], "sink"))
    # Challenge + at least one "partition not found" answer.
    wait_until(lambda: any(s.frames_received >= 2 for s in client.connection_statistics()), "a refused request")
    partition = make_partition(partitions, "late", 1)
    emit(partition, 0, [1, 2, 3])
    partition.finish()
    assert reader.read_to_end() == [[("record", 1, None), ("record", 2, None), ("record", 3, None),
                                     ("event", END_OF_PARTITION_EVENT)]]
    reader.gate.close()


def test_a_partition_that_never_appears_fails_naming_partition_and_address(network, partitions):
    server = network(partitions)
    client = network(partition_request_timeout_s=0.2)
    from rill.network import ResultPartitionID

    pid = ResultPartitionID("missing", "attempt-7")
    channel = RemoteInputChannel(client, server.server_address, pid, 2, client.create_floating_buffer_pool())
    reader = GateReader(SingleInputGate(4, [channel], "Sink (1/1)"))
    with pytest.raises(PartitionRequestTimeoutError) as info:
        reader.poll()
    message = str(info.value)
    host, port = server.server_address
    assert "missing@attempt-7" in message and f"{host}:{port}" in message
    assert "subpartition 2" in message and "gate 4 of 'Sink (1/1)'" in message
    assert "partition request timeout" in message
    reader.gate.close()


def test_the_producer_releasing_its_partition_fails_the_channel_with_the_cause(network, partitions):
    server = network(partitions)
    client = network()
    partition = make_partition(partitions, "failing", 1)
    channel = RemoteInputChannel(client, server.server_address, partition.partition_id, 0,
                                 client.create_floating_buffer_pool())
    reader = GateReader(SingleInputGate(0, [channel], "sink"))
    emit(partition, 0, [1])
    reader.take(reader.poll())
    partitions.release_partition(partition.partition_id, ValueError("boom in the producer"))
    with pytest.raises(PartitionReleasedError, match="boom in the producer") as info:
        while True:
            reader.take(reader.poll())
    assert info.value.partition_id == partition.partition_id and info.value.subpartition_index == 0
    reader.gate.close()


def test_a_payload_over_the_maximum_fails_naming_the_channel(network, partitions):
    server = network(partitions, max_payload_size_bytes=10_000)
    client = network()
    partition = make_partition(partitions, "huge", 1)
    channel = RemoteInputChannel(client, server.server_address, partition.partition_id, 0,
                                 client.create_floating_buffer_pool())
    reader = GateReader(SingleInputGate(0, [channel], "Sink (1/1)"))
    emit(partition, 0, ["ok"])
    emit(partition, 0, ["x" * 20_000])
    reader.take(reader.poll())
    with pytest.raises(RemoteTransportError) as info:
        reader.poll()
    message = str(info.value)
    assert "exceeds the maximum payload size of 10000 bytes" in message
    assert "remote input channel 0 of gate 0 of 'Sink (1/1)'" in message and "huge@attempt-0" in message
    reader.gate.close()


def test_the_receiver_enforces_its_own_maximum_payload_size(network, partitions):
    server = network(partitions, segment_size_bytes=1024)
    client = network(max_payload_size_bytes=5000)
    partition = make_partition(partitions, "huge-in", 1)
    channel = RemoteInputChannel(client, server.server_address, partition.partition_id, 0,
                                 client.create_floating_buffer_pool())
    reader = GateReader(SingleInputGate(0, [channel], "sink"))
    emit(partition, 0, ["y" * 8000])
    with pytest.raises(RemoteTransportError, match=r"received payload of \d+ bytes exceeds the maximum payload "
                                                   r"size of 5000 bytes on remote input channel 0"):
        reader.poll()
    reader.gate.close()


def test_statistics_are_frozen_records_that_agree_on_both_sides(network, partitions):
    server = network(partitions)
    client = network()
    partition = make_partition(partitions, "stats", 1, num_buffers=8)
    channel = RemoteInputChannel(client, server.server_address, partition.partition_id, 0,
                                 client.create_floating_buffer_pool())
    reader = GateReader(SingleInputGate(0, [channel], "sink"))
    for i in range(5):
        emit(partition, 0, [i] * 10)
    reader.read_until(lambda: len(reader.streams[0]) == 50)
    wait_until(lambda: channel.statistics().credit_available == 2 + channel.statistics().floating_buffers,
               "all credit returned to the sender")
    [reader_stats] = server.reader_statistics()
    channel_stats = channel.statistics()
    assert isinstance(reader_stats, SubpartitionReaderStatistics)
    assert isinstance(channel_stats, RemoteInputChannelStatistics)
    with pytest.raises(AttributeError):
        channel_stats.buffers_received = 0  # frozen
    assert reader_stats.buffers_sent == channel_stats.buffers_received == 5
    assert reader_stats.records_sent == channel_stats.records_received == 50
    assert reader_stats.bytes_sent == channel_stats.bytes_received
    assert reader_stats.credit_available == channel_stats.credit_available
    assert reader_stats.back_pressured is False and reader_stats.backlog == 0
    # Counters are read while the network threads run: wait until both ends settled.
    wait_until(lambda: client.connection_statistics()[0].bytes_received
               == server.connection_statistics()[0].bytes_sent, "both ends counted the same bytes")
    [server_conn] = [s for s in server.connection_statistics()]
    [client_conn] = [s for s in client.connection_statistics()]
    assert isinstance(client_conn, ConnectionStatistics)
    assert client_conn.role == "client" and server_conn.role == "server"
    assert client_conn.authenticated and server_conn.authenticated and client_conn.flow_control
    assert client_conn.remote_address == server.server_address == server_conn.local_address
    assert client_conn.buffers_received == server_conn.buffers_sent == 5
    assert client_conn.bytes_received == server_conn.bytes_sent
    assert client_conn.channels == server_conn.channels == 1
    partition.finish()
    reader.read_to_end()
    reader.gate.close()


def test_many_channels_of_one_gate_share_the_floating_pool(network, partitions, threads):
    server = network(partitions)
    client = network(floating_buffers_per_gate=3)
    num = 4
    partition = make_partition(partitions, "wide", num, num_buffers=16)
    writer = RecordWriter(partition, ForwardPartitioner() if num == 1 else
                          KeyGroupStreamPartitioner(lambda r: r, 16), records_per_buffer=5)
    pool = client.create_floating_buffer_pool("wide gate")
    channels = [RemoteInputChannel(client, server.server_address, partition.partition_id, i, pool)
                for i in range(num)]
    reader = GateReader(SingleInputGate(0, channels, "sink"))
    lock = threading.Lock()
    peak = []

    def watch() -> None:
        with lock:
            peak.append(pool.statistics().assigned_buffers)

    reader.gate.set_availability_listener(lambda: (watch(), reader.wake.set()))
    threads.start(lambda: (writer.emit_batch(list(range(3000))), writer.flush_all(), partition.finish()),
                  "producer")
    streams = reader.read_to_end()
    threads.join_all()
    assert sorted(v for s in streams for kind, v, *_ in s if kind == "record") == list(range(3000))
    assert max(peak) <= 3 and pool.statistics().peak_assigned_buffers <= 3
    reader.gate.close()
    assert pool.statistics().available_buffers == 3
