"""Credit-based flow control over a real connection, and the pre-Flink-1.5 behaviour without it.

Two producers (A, B) in one process, two consuming gates in another manager of this process:
both remote channels share one TCP connection. A's consumer stops recycling (a slow task).

* With credit-based flow control, A's channel receives exactly its credit's worth (2 exclusive
  + 8 floating buffers) and its sender stalls; B's records all arrive meanwhile.
* Without it, A's channel runs out of buffers and the network thread stops reading the shared
  connection: B receives nothing, although its producer sent everything.

No timing: each phase waits for an observable state (statistics), and "B receives nothing" is
checked while the connection is provably paused (nothing can be read until A recycles).
"""

from __future__ import annotations

import pytest
from _remote_helpers import GateReader, make_partition, wait_until

from rill.network import (
    END_OF_PARTITION_EVENT,
    BufferPoolDestroyedError,
    PartitionReleasedError,
    ForwardPartitioner,
    RecordWriter,
    RemoteInputChannel,
    ResultPartitionManager,
    SingleInputGate,
)

NUM_A, NUM_B = 100, 300


@pytest.fixture
def partitions():
    manager = ResultPartitionManager()
    yield manager
    manager.shutdown()


def produce(partition, count: int, may_be_cancelled: bool = False) -> None:
    writer = RecordWriter(partition, ForwardPartitioner(), records_per_buffer=1)
    try:
        writer.emit_batch(list(range(count)))  # one buffer per record
        writer.flush_all()
        partition.finish()
    except (BufferPoolDestroyedError, PartitionReleasedError):
        if not may_be_cancelled:
            raise
    writer.close()


def set_up(network, partitions, flow_control: bool):
    server = network(partitions, name="producers")  # follows each client's flow-control choice
    client = network(name="consumers", flow_control=flow_control)
    address = server.server_address
    part_a = make_partition(partitions, "A", 1, num_buffers=4)
    part_b = make_partition(partitions, "B", 1, num_buffers=4)
    chan_a = RemoteInputChannel(client, address, part_a.partition_id, 0, client.create_floating_buffer_pool("A"))
    chan_b = RemoteInputChannel(client, address, part_b.partition_id, 0, client.create_floating_buffer_pool("B"))
    gate_a = SingleInputGate(0, [chan_a], "A (slow)")
    gate_b = SingleInputGate(0, [chan_b], "B")
    reader_a, reader_b = GateReader(gate_a), GateReader(gate_b)
    wait_until(lambda: [s.channels for s in client.connection_statistics()] == [2], "both channels on one connection")
    return server, client, part_a, part_b, chan_a, chan_b, reader_a, reader_b


def reader_stats(server, partition):
    return [r for r in server.reader_statistics() if r.partition_id == partition.partition_id]


def assert_all_back(partitions, chan_a, chan_b, part_a, part_b):
    for channel in (chan_a, chan_b):
        stats = channel.statistics()
        assert stats.released and stats.error is None
        assert stats.exclusive_buffers_in_use == stats.floating_buffers_in_use == 0
        channel.buffer_manager.check_invariants()
    for partition in (part_a, part_b):
        assert partition.buffer_pool.statistics().used_buffers == 0
    assert partitions.get_number_of_registered_partitions() == 0


def test_a_channel_without_credit_stalls_alone_while_the_other_keeps_flowing(network, partitions, threads):
    server, client, part_a, part_b, chan_a, chan_b, reader_a, reader_b = set_up(network, partitions, True)
    threads.start(lambda: produce(part_a, NUM_A), "producer A")

    # A's consumer never polls: its buffers stay in use and its credit runs out.
    def a_stalled() -> bool:
        stats = chan_a.statistics()
        readers = reader_stats(server, part_a)
        return (stats.exclusive_buffers_in_use + stats.floating_buffers_in_use == 10
                and len(readers) == 1 and readers[0].back_pressured)

    wait_until(a_stalled, "A used its credit (2 exclusive + 8 floating) and its sender stalls")
    [a_reader] = reader_stats(server, part_a)
    assert a_reader.credit_available == 0 and a_reader.segments_sent == 10
    assert part_a.buffer_pool.statistics().requesters_blocked == 1  # producer A is back-pressured
    before = a_reader.back_pressured_time_ns
    wait_until(lambda: reader_stats(server, part_a)[0].back_pressured_time_ns > before,
               "A's back-pressured time grows")

    # B flows completely on the same connection meanwhile.
    threads.start(lambda: produce(part_b, NUM_B), "producer B")
    stream_b = reader_b.read_to_end()[0]
    assert stream_b == [("record", i, None) for i in range(NUM_B)] + [("event", END_OF_PARTITION_EVENT)]
    stats_a = chan_a.statistics()
    assert stats_a.segments_received == 10 and stats_a.credit_available == 0
    assert reader_stats(server, part_a)[0].back_pressured
    [connection] = client.connection_statistics()
    assert connection.read_paused is False and connection.read_paused_time_ns == 0

    # A's consumer catches up: everything arrives, in order, exactly once.
    stream_a = reader_a.read_to_end()[0]
    threads.join_all()
    assert stream_a == [("record", i, None) for i in range(NUM_A)] + [("event", END_OF_PARTITION_EVENT)]
    reader_a.gate.close()
    reader_b.gate.close()
    assert_all_back(partitions, chan_a, chan_b, part_a, part_b)


def test_without_flow_control_a_stalled_channel_blocks_the_shared_connection(network, partitions, threads):
    server, client, part_a, part_b, chan_a, chan_b, reader_a, reader_b = set_up(network, partitions, False)
    threads.start(lambda: produce(part_a, NUM_A), "producer A")

    def connection_blocked() -> bool:
        stats = client.connection_statistics()
        return len(stats) == 1 and stats[0].read_paused and chan_a.statistics().blocking_connection

    wait_until(connection_blocked, "A, out of buffers, blocks the connection")
    stats_a = chan_a.statistics()
    assert stats_a.segments_received == 10  # 2 exclusive + 8 floating, taken greedily
    assert stats_a.credit_available == 0 and server.connection_statistics()[0].flow_control is False

    # B's producer sends everything: it leaves the server, but cannot be read.
    threads.start(lambda: produce(part_b, NUM_B), "producer B")
    wait_until(lambda: not reader_stats(server, part_b) and part_b.is_released()
               and server.connection_statistics()[0].outbound_bytes_queued == 0,
               "the server wrote all of B, EndOfPartition included")
    assert client.connection_statistics()[0].read_paused  # nothing is read while A blocks
    assert chan_b.statistics().buffers_received == 0 and chan_b.statistics().events_received == 0
    assert reader_b.gate.poll_next() is None
    assert client.connection_statistics()[0].read_paused_time_ns > 0

    # A's consumer catches up: the connection resumes and both complete, in order (B is read
    # concurrently: without flow control, a B that stopped reading would block A in turn).
    threads.start(reader_b.read_to_end, "consumer B")
    stream_a = reader_a.read_to_end()[0]
    threads.join_all()
    stream_b = reader_b.streams[0]
    assert stream_a == [("record", i, None) for i in range(NUM_A)] + [("event", END_OF_PARTITION_EVENT)]
    assert stream_b == [("record", i, None) for i in range(NUM_B)] + [("event", END_OF_PARTITION_EVENT)]
    reader_a.gate.close()
    reader_b.gate.close()
    assert_all_back(partitions, chan_a, chan_b, part_a, part_b)


def test_cancelling_the_channel_that_blocks_the_connection_unblocks_the_others(network, partitions, threads):
    server, client, part_a, part_b, chan_a, chan_b, reader_a, reader_b = set_up(network, partitions, False)
    threads.start(lambda: produce(part_a, NUM_A, may_be_cancelled=True), "producer A")
    wait_until(lambda: chan_a.statistics().blocking_connection, "A blocks the connection")
    threads.start(lambda: produce(part_b, NUM_B), "producer B")
    reader_a.gate.close()  # the slow task is cancelled
    stream_b = reader_b.read_to_end()[0]
    assert stream_b == [("record", i, None) for i in range(NUM_B)] + [("event", END_OF_PARTITION_EVENT)]
    threads.join_all()
    reader_b.gate.close()
    stats = chan_a.statistics()
    assert stats.exclusive_buffers_in_use == stats.floating_buffers_in_use == 0
    assert part_a.buffer_pool.statistics().used_buffers == 0 and part_a.is_released()


@pytest.mark.parametrize("max_buffers_per_frame", [1, 4])
def test_a_sender_puts_as_many_segments_in_a_frame_as_its_credit_allows(network, partitions, threads,
                                                                       max_buffers_per_frame):
    # 64-byte segments: one buffer of 300 records spans many of them
    server = network(partitions, name="producer", segment_size_bytes=64, max_buffers_per_frame=max_buffers_per_frame)
    client = network(name="consumer")
    partition = make_partition(partitions, "P", 1, num_buffers=4)
    channel = RemoteInputChannel(client, server.server_address, partition.partition_id, 0,
                                 client.create_floating_buffer_pool())
    reader = GateReader(SingleInputGate(0, [channel], "consumer"))

    def produce_one_buffer() -> None:
        writer = RecordWriter(partition, ForwardPartitioner(), records_per_buffer=300)
        writer.emit_batch([f"record {i}" for i in range(300)])
        writer.flush_all()
        partition.finish()
        writer.close()

    threads.start(produce_one_buffer, "producer")
    stream = reader.read_to_end()[0]
    threads.join_all()
    assert stream == [("record", f"record {i}", None) for i in range(300)] + [("event", END_OF_PARTITION_EVENT)]
    stats = channel.statistics()
    connection = channel.connection_statistics()  # the server may have closed it already
    data_frames = connection.frames_received - 2  # the Challenge and the EndOfPartition
    assert stats.buffers_received == 1 and stats.segments_received == connection.buffers_received
    assert stats.segments_received >= 30
    if max_buffers_per_frame == 1:
        assert data_frames == stats.segments_received
    else:  # at most 4 per frame, and never more than the 10 credits (2 + 8) allow
        assert -(-stats.segments_received // 4) <= data_frames < stats.segments_received
    reader.gate.close()
    assert partition.buffer_pool.statistics().used_buffers == 0
    stats = channel.statistics()
    assert stats.exclusive_buffers_in_use == stats.floating_buffers_in_use == 0
