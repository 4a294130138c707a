"""Priority events (the barrier of an unaligned checkpoint, FLIP-76) in the network stack:
a subpartition puts one ahead of its queue and reports what it overtook, a record writer adds
its pending records, a gate polls the channel that has one first, and a timeoutable barrier is
reported when taken or converted to a priority event while still queued."""

from __future__ import annotations

import pytest

from rill.network import (
    CheckpointBarrier,
    LocalBufferPool,
    LocalInputChannel,
    RecordWriter,
    ResultPartition,
    ResultPartitionID,
    ResultPartitionManager,
    ResultPartitionType,
    SingleInputGate,
)
from rill.network.partitioner import GlobalPartitioner


def _partition(name, subpartitions=1, buffers=8):
    return ResultPartition(ResultPartitionID(name, "a0"), ResultPartitionType.PIPELINED_BOUNDED, subpartitions,
                           LocalBufferPool(buffers, name), name)


def _emit(partition, values, subpartition=0):
    partition.emit_buffer(partition.request_buffer_blocking().set_contents(values), subpartition)


def test_a_priority_event_overtakes_the_queue_and_reports_what_it_overtook():
    p = _partition("p")
    view = p.create_subpartition_view(0, lambda: None)
    _emit(p, [1, 2])
    p.add_event("watermark", 0)
    _emit(p, [3])
    overtaken = p.broadcast_priority_event(CheckpointBarrier(1, 0))
    assert [[values for values, _, _ in entries] for entries in overtaken] == [[[1, 2], [3]]]
    polled = [view.get_next_buffer() for _ in range(4)]
    assert polled[0].item == CheckpointBarrier(1, 0) and polled[0].is_priority
    assert [r.is_priority for r in polled[1:]] == [False, False, False]
    assert [r.item.values for r in (polled[1], polled[3])] == [[1, 2], [3]] and polled[2].item == "watermark"


def test_a_record_writer_adds_the_pending_records_and_keeps_them_pending():
    p = _partition("p", subpartitions=2)
    views = [p.create_subpartition_view(i, lambda: None) for i in range(2)]
    writer = RecordWriter(p, GlobalPartitioner(), records_per_buffer=2)  # every record to channel 0
    writer.emit_batch([10, 11, 12])  # channel 0: [10, 11] sent, 12 pending
    overtaken = writer.broadcast_priority_event(CheckpointBarrier(1, 0))
    assert [[values for values, _, _ in entries] for entries in overtaken] == [[[10, 11], [12]], []]
    assert writer.get_number_of_pending_records() == 1
    assert views[0].poll_next() == CheckpointBarrier(1, 0) and views[1].poll_next() == CheckpointBarrier(1, 0)
    writer.flush_all()
    assert views[0].poll_next().values == [10, 11] and views[0].poll_next().values == [12]


def test_the_gate_polls_the_channel_with_a_priority_event_first():
    manager = ResultPartitionManager()
    partitions = [_partition(f"p{i}") for i in range(2)]
    for p in partitions:
        manager.register_result_partition(p)
    gate = SingleInputGate(0, [LocalInputChannel(manager, p.partition_id, 0) for p in partitions], "task")
    gate.setup()
    try:
        _emit(partitions[0], [1])
        _emit(partitions[1], [10])
        partitions[1].broadcast_priority_event(CheckpointBarrier(1, 0))
        first = gate.poll_next()
        assert (first.channel_index, first.event) == (1, CheckpointBarrier(1, 0))
        assert gate.get_channel(1).take_inflight_buffers() == []  # local: the producer stores them
        rest = []
        while (boe := gate.poll_next()) is not None:
            rest.append((boe.channel_index, boe.buffer.values))
            boe.buffer.recycle_buffer()
        assert sorted(rest) == [(0, [1]), (1, [10])]
    finally:
        gate.close()
        manager.shutdown()


def test_a_timeoutable_barrier_is_reported_when_taken():
    p = _partition("p", subpartitions=2)
    views = [p.create_subpartition_view(i, lambda: None) for i in range(2)]
    taken = []
    _emit(p, [1], 1)
    barrier = CheckpointBarrier(1, 0)
    p.broadcast_timeoutable_event(barrier, taken.append)
    assert views[0].poll_next() == barrier and taken == [0]
    assert views[1].poll_next().values == [1] and taken == [0]
    assert views[1].poll_next() == barrier and taken == [0, 1]


def test_a_still_queued_timeoutable_barrier_is_converted_to_a_priority_event():
    p = _partition("p", subpartitions=2)
    views = [p.create_subpartition_view(i, lambda: None) for i in range(2)]
    taken = []
    _emit(p, [1], 1)
    _emit(p, [2], 1)
    barrier, replacement = CheckpointBarrier(1, 0), CheckpointBarrier(1, 0, "unaligned")
    p.broadcast_timeoutable_event(barrier, taken.append)
    _emit(p, [3], 1)
    assert views[0].poll_next() == barrier and taken == [0]
    overtaken = p.convert_to_priority_event(barrier, replacement)
    assert overtaken[0] is None and [values for values, _, _ in overtaken[1]] == [[1], [2]]
    first = views[1].get_next_buffer()
    assert first.item is replacement and first.is_priority
    assert [views[1].poll_next().values for _ in range(3)] == [[1], [2], [3]]
    assert taken == [0]  # the converted one is not reported as taken
    assert views[1].poll_next() is None


def test_a_priority_event_cannot_follow_the_end_of_a_partition():
    p = _partition("p")
    p.create_subpartition_view(0, lambda: None)
    p.get_subpartition(0).finish()
    with pytest.raises(RuntimeError, match="is finished"):
        p.get_subpartition(0).add_priority_event(CheckpointBarrier(1, 0))
