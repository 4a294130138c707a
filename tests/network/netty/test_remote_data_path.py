"""Regression tests of the remote data path's copy-saving machinery (bench/network.py measured
it): the connection's ``recv_into`` read buffer (compaction and growth), single-copy
reassembly into a reused buffer, and the combined take-and-give-back of a spanning payload's
receiving buffers. Real sockets on 127.0.0.1, as the other transport tests."""

from __future__ import annotations

import os
import random

import pytest
from _remote_helpers import GateReader, make_partition
from hypothesis import given, settings
from hypothesis import strategies as st

from rill.network import (
    END_OF_PARTITION_EVENT,
    AdaptiveSpanningRecordDeserializer,
    FloatingBufferPool,
    RemoteInputChannel,
    ResultPartitionManager,
    SingleInputGate,
    SpanningRecordSerializer,
)
from rill.network.credit import EXCLUSIVE
from rill.network.partition.consumer.buffer_manager import BufferManager


@pytest.fixture
def partitions():
    manager = ResultPartitionManager()
    yield manager
    manager.shutdown()


def emit(partition, values):
    buffer = partition.request_buffer_blocking()
    buffer.set_contents(list(values), None)
    partition.emit_buffer(buffer, 0)


@pytest.mark.parametrize("chunk", [1024, 5000], ids=["1KiB-reads", "5000B-reads"])
def test_frames_larger_than_a_read_and_split_across_reads_arrive_intact(network, partitions, chunk):
    """Reads much smaller than frames make the read buffer grow (a frame of up to a segment
    plus headers must fit) and compact (the incomplete frame moves to the front) many times."""
    server = network(partitions, segment_size_bytes=20_000)
    client = network(receive_chunk_bytes=chunk)
    partition = make_partition(partitions, "reads", 1, num_buffers=3)
    channel = RemoteInputChannel(client, server.server_address, partition.partition_id, 0,
                                 client.create_floating_buffer_pool())
    reader = GateReader(SingleInputGate(0, [channel], "sink"))
    rng = random.Random(5)
    batches = [[(i, rng.randbytes(rng.choice([1, 700, 19_990, 45_000]))) for i in range(rng.randint(1, 4))]
               for _ in range(40)]
    for batch in batches:
        emit(partition, batch)
        reader.read_until(lambda: len(reader.streams[0]) >= sum(map(len, batches[:batches.index(batch) + 1])))
    partition.finish()
    [stream] = reader.read_to_end()
    assert stream == [("record", v, None) for batch in batches for v in batch] + [("event", END_OF_PARTITION_EVENT)]
    connection = channel.connection_statistics()
    assert connection.bytes_received > sum(len(v[1]) for batch in batches for v in batch)
    reader.gate.close()


def test_a_reused_reassembly_buffer_never_leaks_old_bytes_into_a_payload():
    serializer = SpanningRecordSerializer(segment_size_bytes=1000)
    deserializer = AdaptiveSpanningRecordDeserializer()
    rng = random.Random(11)
    sizes = [5000, 5000, 12_000, 3000, 1500, 800, 7000, 7000, 2500]  # larger, smaller, single segment
    reused = 0
    for size in sizes:
        values = [os.urandom(size)]
        payload, _ = serializer.serialize_buffer(values, None)
        segments = serializer.split(payload)
        spare = deserializer._spare
        for index, segment in enumerate(segments):
            complete = deserializer.add_segment(segment, index == len(segments) - 1)
        reused += spare is not None and complete is spare
        assert bytes(complete) == bytes(payload)
        assert deserializer.decode_buffer(complete, False)[0] == values
        deserializer.give_back(complete)
        if rng.random() < 0.3:
            deserializer.give_back(b"bytes are ignored")
    assert reused >= 4
    deserializer.clear()
    assert deserializer._spare is None and not deserializer.has_partial_payload()


def test_taking_and_giving_back_a_segments_buffer_at_once_equals_the_two_steps():
    """``on_segment_copied`` must leave the ledger, the pool and the callbacks exactly as
    ``on_buffer_received`` followed by ``recycle`` does."""
    rng = random.Random(3)
    for _ in range(200):
        exclusive, floating, backlog = rng.randint(1, 3), rng.randint(0, 4), rng.randint(0, 6)
        segments = rng.randint(1, 5)
        managers, calls = [], []
        for combined in (False, True):
            pool = FloatingBufferPool(floating)
            log = []
            manager = BufferManager(exclusive, pool, True, 1, lambda log=log: log.append("credit"))
            manager.take_unannounced_credit()
            for _ in range(segments):
                if manager.ledger.announced_credit == 0:
                    manager.take_unannounced_credit()
                    if manager.ledger.announced_credit == 0:
                        break
                if combined:
                    manager.on_segment_copied(backlog)
                else:
                    kind = manager.on_buffer_received(backlog)
                    manager.recycle(kind)
                manager.check_invariants()
            managers.append((manager.ledger, pool))
            calls.append(log)
        (plain, plain_pool), (fast, fast_pool) = managers
        assert repr(plain) == repr(fast)
        assert plain_pool.get_number_of_available_buffers() == fast_pool.get_number_of_available_buffers()
        assert bool(calls[0]) == bool(calls[1])


@settings(max_examples=300, deadline=None)
@given(
    exclusive=st.lists(st.integers(1, 3), min_size=1, max_size=3),
    floating=st.integers(0, 5),
    ops=st.lists(st.tuples(st.sampled_from(["segment", "segment", "segment", "last", "recycle", "announce",
                                            "release"]),
                           st.integers(0, 2), st.integers(0, 40)), max_size=80),
)
def test_the_written_out_segment_path_equals_the_stepwise_one_across_channels(exclusive, floating, ops):
    """``on_segment_copied`` (flow control on: the ledger's and the pool's steps written out in
    one method) leaves every ledger of the gate, the pool, its queue of waiting channels and
    the sequence of credit notifications exactly as the stepwise reference does, for several
    channels sharing one pool, varying backlogs, buffers held by the task, announcements and
    releases."""
    worlds = []
    for written_out in (False, True):
        pool = FloatingBufferPool(floating)
        log: list = []
        managers = [BufferManager(e, pool, True, 1, lambda i=i, log=log: log.append(i)) for i, e in enumerate(exclusive)]
        worlds.append((written_out, pool, managers, [[] for _ in managers], log))

    def state(world):
        _, pool, managers, held, log = world
        index = {id(m): i for i, m in enumerate(managers)}
        return ([repr(m.ledger) for m in managers], pool.get_number_of_available_buffers(),
                pool.statistics().peak_assigned_buffers, [index[id(m)] for m in pool._waiting],
                held, list(log))

    for op, channel, backlog in ops:
        for written_out, pool, managers, held, log in worlds:
            manager = managers[channel % len(managers)]
            kinds = held[channel % len(managers)]
            if op in ("segment", "last"):
                if manager.ledger.announced_credit == 0:
                    manager.take_unannounced_credit()  # the AddCredit reached the sender
                if manager.ledger.announced_credit == 0:
                    continue
                if op == "last":
                    kinds.append(manager.on_buffer_received(backlog))
                elif written_out:
                    manager.on_segment_copied(backlog)
                else:
                    manager._on_segment_copied_stepwise(backlog)
            elif op == "recycle":
                if kinds:
                    manager.recycle(kinds.pop(0))
            elif op == "announce":
                manager.take_unannounced_credit()
            else:
                manager.release()
            manager.check_invariants()
        assert state(worlds[0]) == state(worlds[1])


def test_a_segment_arriving_for_a_released_channel_is_dropped():
    manager = BufferManager(2, FloatingBufferPool(1), True, 1, lambda: None)
    manager.release()
    assert manager.on_segment_copied(0) is False
    fresh = BufferManager(1, FloatingBufferPool(0), True, 1, lambda: None)
    assert fresh.on_segment_copied(0) is EXCLUSIVE
    assert fresh.ledger.in_use == 0 and fresh.ledger.available == 1


def test_the_read_buffer_grows_for_a_huge_frame_and_shrinks_back(network, partitions):
    server = network(partitions, segment_size_bytes=4 * 1024 * 1024)
    client = network(receive_chunk_bytes=16 * 1024)
    partition = make_partition(partitions, "huge", 1, num_buffers=2)
    channel = RemoteInputChannel(client, server.server_address, partition.partition_id, 0,
                                 client.create_floating_buffer_pool())
    reader = GateReader(SingleInputGate(0, [channel], "sink"))
    huge = os.urandom(3 * 1024 * 1024)  # one 3 MiB segment: far beyond 16 chunks of 16 KiB
    emit(partition, [huge])
    reader.read_until(lambda: len(reader.streams[0]) == 1)
    emit(partition, [b"small"])
    reader.read_until(lambda: len(reader.streams[0]) == 2)
    assert reader.streams[0] == [("record", huge, None), ("record", b"small", None)]
    [connection] = [c for c in client._clients.values()]
    assert len(connection._rbuf) <= 2 * 16 * 1024  # the 3 MiB buffer was let go
    partition.finish()
    reader.read_to_end()
    reader.gate.close()
