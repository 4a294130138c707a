"""InputChannel (conformance, run on every implementation) and SingleInputGate."""

from __future__ import annotations

import threading

import pytest

from rill.network import (
    END_OF_PARTITION_EVENT,
    Buffer,
    BufferAndAvailability,
    BufferPoolDestroyedError,
    CheckpointBarrier,
    EndOfDataEvent,
    InputChannel,
    InputGateStatistics,
    LocalInputChannel,
    PartitionNotFoundError,
    PartitionReleasedError,
    ResultPartitionID,
    SingleInputGate,
)
from rill.common.streamrecord import Watermark

DEADLINE_S = 20.0


def emit(partition, subpartition, values, timestamps=None):
    buffer = partition.request_buffer_blocking()
    buffer.values = list(values)
    buffer.timestamps = timestamps
    partition.emit_buffer(buffer, subpartition)
    return buffer


class Counter:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1


# ---------------------------------------------------------------------- channel conformance

def local_channel(manager, partition, subpartition):
    return LocalInputChannel(manager, partition.partition_id, subpartition)


CHANNEL_FACTORIES = {"local": local_channel}


@pytest.fixture(params=sorted(CHANNEL_FACTORIES))
def make_channel(request, manager):
    factory = CHANNEL_FACTORIES[request.param]
    return lambda partition, subpartition: factory(manager, partition, subpartition)


def test_channel_reads_in_order_with_availability(make_partition, make_channel):
    partition = make_partition(2)
    channel: InputChannel = make_channel(partition, 1)
    gate = SingleInputGate(0, [channel], "consumer")
    assert channel.channel_index == 0
    channel.request_subpartition()
    channel.request_subpartition()  # idempotent
    assert channel.get_next_buffer() is None
    b1 = emit(partition, 1, [1, 2])
    partition.add_event(Watermark(3), 1)
    partition.finish()
    assert channel.get_next_buffer() == BufferAndAvailability(b1, True)
    assert channel.get_next_buffer() == BufferAndAvailability(Watermark(3), True)
    assert channel.get_next_buffer() == BufferAndAvailability(END_OF_PARTITION_EVENT, False)
    assert channel.get_next_buffer() is None
    channel.release()
    assert channel.is_released()
    assert channel.get_next_buffer() is None
    gate.close()


def test_channel_polled_before_request_is_an_error(make_partition, make_channel):
    channel = make_channel(make_partition(1), 0)
    with pytest.raises(RuntimeError, match="before request_subpartition"):
        channel.get_next_buffer()


def test_channel_sees_producer_release_with_its_cause(make_partition, make_channel):
    partition = make_partition(1)
    channel = make_channel(partition, 0)
    channel.request_subpartition()
    emit(partition, 0, [1])
    cause = ValueError("boom in producer")
    partition.release(cause)
    with pytest.raises(PartitionReleasedError, match="boom in producer") as info:
        channel.get_next_buffer()
    assert info.value.__cause__ is cause and info.value.cause is cause
    assert partition.buffer_pool.get_number_of_used_buffers() == 0


def test_channel_release_returns_queued_buffers_to_the_producer_pool(make_partition, make_channel):
    partition = make_partition(1, num_buffers=3)
    channel = make_channel(partition, 0)
    channel.request_subpartition()
    for i in range(3):
        emit(partition, 0, [i])
    assert partition.buffer_pool.get_number_of_available_buffers() == 0
    channel.release()
    assert partition.buffer_pool.get_number_of_available_buffers() == 3


def test_channel_belongs_to_one_gate(make_partition, make_channel):
    channel = make_channel(make_partition(1), 0)
    SingleInputGate(0, [channel], "a")
    with pytest.raises(RuntimeError, match="already belongs to a gate"):
        SingleInputGate(1, [channel], "b")


def test_missing_partition_fails_setup_with_its_id(manager):
    pid = ResultPartitionID("absent", "att-1")
    gate = SingleInputGate(0, [LocalInputChannel(manager, pid, 0)], "consumer")
    with pytest.raises(PartitionNotFoundError, match="absent@att-1"):
        gate.setup()


# ---------------------------------------------------------------------- gate

def make_gate(manager, partitions, subpartition=0, name="consumer"):
    channels = [LocalInputChannel(manager, p.partition_id, subpartition) for p in partitions]
    return SingleInputGate(3, channels, name)


def test_gate_needs_channels_and_setup(manager, make_partition):
    with pytest.raises(ValueError, match="at least one channel"):
        SingleInputGate(0, [], "t")
    gate = make_gate(manager, [make_partition(1)])
    with pytest.raises(RuntimeError, match="before setup"):
        gate.poll_next()


def test_availability_listener_fires_on_empty_to_non_empty_only(manager, make_partition):
    p0, p1 = make_partition(1), make_partition(1)
    gate = make_gate(manager, [p0, p1])
    listener = Counter()
    gate.set_availability_listener(listener)
    gate.setup()
    assert gate.poll_next() is None and not gate.is_available()
    emit(p0, 0, [1])
    assert listener.calls == 1 and gate.is_available()
    emit(p0, 0, [2])  # channel already has data
    emit(p1, 0, [3])  # gate already has data
    assert listener.calls == 1
    polled = [gate.poll_next() for _ in range(3)]
    assert [(b.channel_index, b.buffer.values, b.more_available) for b in polled] == [
        (0, [1], True),
        (1, [3], True),
        (0, [2], False),
    ]
    assert gate.poll_next() is None
    emit(p1, 0, [4])
    assert listener.calls == 2
    for boe in polled:
        boe.buffer.recycle_buffer()


def test_listener_set_while_data_is_queued_fires_at_once(manager, make_partition):
    partition = make_partition(1)
    gate = make_gate(manager, [partition])
    gate.setup()
    emit(partition, 0, [1])
    listener = Counter()
    gate.set_availability_listener(listener)
    assert listener.calls == 1
    gate.set_availability_listener(None)
    gate.poll_next().buffer.recycle_buffer()
    emit(partition, 0, [2])
    assert listener.calls == 1


def test_channels_with_data_are_served_round_robin(manager, make_partition):
    partitions = [make_partition(1, num_buffers=8) for _ in range(3)]
    gate = make_gate(manager, partitions)
    gate.setup()
    # Channel 2 gets data first, then 0; channel 1 never.
    for i in range(3):
        emit(partitions[2], 0, [f"c2-{i}"])
    for i in range(2):
        emit(partitions[0], 0, [f"c0-{i}"])
    order = []
    while (boe := gate.poll_next()) is not None:
        order.append(boe.buffer.values[0])
        boe.buffer.recycle_buffer()
    assert order == ["c2-0", "c0-0", "c2-1", "c0-1", "c2-2"]


def test_events_end_of_data_and_end_of_partition(manager, make_partition):
    p0, p1 = make_partition(1), make_partition(1)
    gate = make_gate(manager, [p0, p1])
    gate.setup()
    emit(p0, 0, ["a"], [100])
    p0.broadcast_event(CheckpointBarrier(1, 0))
    p0.broadcast_event(EndOfDataEvent())
    p0.finish()
    seen = []
    while (boe := gate.poll_next()) is not None:
        seen.append((boe.channel_index, boe.buffer.values if boe.is_buffer() else boe.event))
        if boe.is_buffer():
            assert boe.buffer.timestamps == [100]
            boe.buffer.recycle_buffer()
    assert seen == [(0, ["a"]), (0, CheckpointBarrier(1, 0)), (0, EndOfDataEvent()), (0, END_OF_PARTITION_EVENT)]
    assert gate.is_channel_finished(0) and gate.get_channel(0).is_released()
    assert not gate.is_finished() and not gate.has_received_end_of_data()
    p1.broadcast_event(EndOfDataEvent())
    p1.finish()
    assert gate.poll_next().event == EndOfDataEvent()
    last = gate.poll_next()
    assert (last.channel_index, last.event, last.more_available) == (1, END_OF_PARTITION_EVENT, False)
    assert gate.is_finished() and gate.has_received_end_of_data()
    assert gate.poll_next() is None
    # Both pipelined partitions were consumed: released and unregistered.
    assert p0.is_released() and p1.is_released()
    assert manager.get_number_of_registered_partitions() == 0


def test_counters_and_statistics(manager, make_partition):
    partition = make_partition(1)
    gate = make_gate(manager, [partition], name="Map (1/1)")
    gate.setup()
    emit(partition, 0, [1, 2, 3])
    emit(partition, 0, [4])
    partition.add_event(Watermark(1), 0)
    assert gate.statistics().channels_with_data == 1
    while (boe := gate.poll_next()) is not None:
        if boe.is_buffer():
            boe.buffer.recycle_buffer()
    assert (gate.num_buffers_in, gate.num_records_in) == (2, 4)
    assert gate.statistics() == InputGateStatistics(
        gate_index=3,
        owning_task_name="Map (1/1)",
        num_channels=1,
        channels_with_data=0,
        finished_channels=0,
        num_buffers_in=2,
        num_records_in=4,
        closed=False,
    )


def test_close_releases_channels_and_returns_buffers(manager, make_partition):
    partitions = [make_partition(1, num_buffers=2) for _ in range(2)]
    gate = make_gate(manager, partitions)
    listener = Counter()
    gate.set_availability_listener(listener)
    gate.setup()
    for p in partitions:
        emit(p, 0, [1])
        emit(p, 0, [2])
    held = gate.poll_next().buffer
    gate.close()
    gate.close()  # idempotent
    assert gate.poll_next() is None and gate.statistics().closed
    assert all(gate.get_channel(i).is_released() for i in range(2))
    # Queued buffers went back; the one the task holds comes back when it recycles it.
    assert [p.buffer_pool.get_number_of_used_buffers() for p in partitions] == [1, 0]
    held.recycle_buffer()
    assert [p.buffer_pool.get_number_of_used_buffers() for p in partitions] == [0, 0]
    # Every consumer released: the partitions are released, so producers stop.
    assert all(p.is_released() for p in partitions)
    with pytest.raises(BufferPoolDestroyedError):
        partitions[0].request_buffer_blocking()
    with pytest.raises(PartitionReleasedError):
        partitions[0].emit_buffer(Buffer([3]), 0)


def test_close_returns_only_once_every_channel_is_released_when_two_threads_close(manager, make_partition,
                                                                                  threads):
    # A task cancelled from outside closes its gates (StreamTask.cancel) while its own thread
    # closes them too before it reports CANCELED: neither close may return before every channel
    # is released, or the task reports while it still holds buffers (Flink closes a gate under
    # its lock). The first close is held inside channel 0's release: releasing it consumes the
    # first partition, whose pool is destroyed and fires a pending availability listener.
    first, second = make_partition(1, num_buffers=1, name="first"), make_partition(1, num_buffers=1, name="second")
    held = first.request_buffer_blocking()  # exhausted: the listener waits for a free buffer or destroy
    in_release, go_on = threading.Event(), threading.Event()
    assert first.buffer_pool.add_availability_listener(lambda: (in_release.set(), go_on.wait(DEADLINE_S)))
    gate = make_gate(manager, [first, second])
    gate.setup()
    try:
        threads.start(gate.close, "cancelling thread")
        assert in_release.wait(DEADLINE_S)
        task_thread = threads.start(gate.close, "task thread")
        task_thread.join(0.2)
        assert task_thread.is_alive()  # waits for the first close to finish
        assert (gate.get_channel(1).is_released(), second.is_released()) == (False, False)
    finally:
        go_on.set()
    threads.join_all()
    assert [gate.get_channel(i).is_released() for i in range(2)] == [True, True]
    assert (first.is_released(), second.is_released()) == (True, True)
    held.recycle_buffer()
    assert [p.buffer_pool.get_number_of_used_buffers() for p in (first, second)] == [0, 0]
