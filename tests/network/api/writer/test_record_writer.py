"""RecordWriter: buffering per channel, flushing, events in order, counters."""

from __future__ import annotations

import pytest

from rill.network import (
    END_OF_PARTITION_EVENT,
    BroadcastPartitioner,
    Buffer,
    CheckpointBarrier,
    ForwardPartitioner,
    KeyGroupStreamPartitioner,
    KeySelectionError,
    RebalancePartitioner,
    RecordWriter,
)
from rill.common.streamrecord import Watermark


class Reader:
    """Drains the views of a partition, recycling buffers, as (kind, payload) tuples."""

    def __init__(self, manager, partition):
        self.views = [
            manager.create_subpartition_view(partition.partition_id, i, lambda: None)
            for i in range(partition.get_number_of_subpartitions())
        ]

    def drain(self, channel):
        out = []
        while (item := self.views[channel].poll_next()) is not None:
            if isinstance(item, Buffer):
                out.append(("buffer", item.values, item.timestamps))
                item.recycle_buffer()
            else:
                out.append(("event", item))
        return out


def test_sends_exactly_full_buffers_and_keeps_the_rest_pending(manager, make_partition):
    partition = make_partition(1)
    writer = RecordWriter(partition, ForwardPartitioner(), records_per_buffer=4)
    reader = Reader(manager, partition)
    writer.emit_batch([0, 1, 2])
    assert reader.drain(0) == [] and writer.get_number_of_pending_records() == 3
    writer.emit_batch(list(range(3, 13)))  # 13 records: 3 full buffers, 1 pending
    assert reader.drain(0) == [
        ("buffer", [0, 1, 2, 3], None),
        ("buffer", [4, 5, 6, 7], None),
        ("buffer", [8, 9, 10, 11], None),
    ]
    assert writer.get_number_of_pending_records() == 1
    writer.flush_all()
    assert reader.drain(0) == [("buffer", [12], None)]
    writer.flush_all()  # nothing pending: sends nothing
    assert reader.drain(0) == []
    assert (writer.num_records_out, writer.num_buffers_out) == (13, 4)
    assert partition.buffer_pool.get_number_of_used_buffers() == 0


def test_batch_of_exactly_one_buffer_and_large_batches(manager, make_partition):
    partition = make_partition(1)
    writer = RecordWriter(partition, ForwardPartitioner(), records_per_buffer=3)
    reader = Reader(manager, partition)
    writer.emit_batch([1, 2, 3])
    writer.emit_batch(list(range(10, 17)), list(range(110, 117)))
    assert reader.drain(0) == [
        ("buffer", [1, 2, 3], None),
        ("buffer", [10, 11, 12], [110, 111, 112]),
        ("buffer", [13, 14, 15], [113, 114, 115]),
    ]
    writer.flush_all()
    assert reader.drain(0) == [("buffer", [16], [116])]


def test_flush_sends_only_channels_with_pending_records(manager, make_partition):
    partition = make_partition(4)
    writer = RecordWriter(partition, RebalancePartitioner(seed=0), records_per_buffer=100)
    reader = Reader(manager, partition)
    first = (writer.partitioner._next_channel + 1) % 4
    writer.emit_batch(["a", "b"])
    writer.flush_all()
    got = {c: reader.drain(c) for c in range(4)}
    assert got[first] == [("buffer", ["a"], None)]
    assert got[(first + 1) % 4] == [("buffer", ["b"], None)]
    assert sum(len(v) for v in got.values()) == 2


def test_flush_always_sends_at_the_end_of_every_emit_call(manager, make_partition):
    partition = make_partition(1)
    writer = RecordWriter(partition, ForwardPartitioner(), records_per_buffer=1024, flush_always=True)
    reader = Reader(manager, partition)
    writer.emit("x", 5)
    assert reader.drain(0) == [("buffer", ["x"], [5])]
    writer.emit_batch([1, 2, 3])
    assert reader.drain(0) == [("buffer", [1, 2, 3], None)]
    assert writer.get_number_of_pending_records() == 0


def test_events_follow_the_records_emitted_before_them(manager, make_partition):
    partition = make_partition(2)
    writer = RecordWriter(partition, RebalancePartitioner(seed=3), records_per_buffer=100)
    reader = Reader(manager, partition)
    first = (writer.partitioner._next_channel + 1) % 2
    writer.emit_batch([1, 2, 3], [10, 20, 30])
    writer.emit_watermark(Watermark(30))
    writer.emit_batch([4])
    writer.broadcast_event(CheckpointBarrier(1, 99))
    writer.flush_all()
    partition.finish()
    assert reader.drain(first) == [
        ("buffer", [1, 3], [10, 30]),
        ("event", Watermark(30)),
        ("event", CheckpointBarrier(1, 99)),
        ("event", END_OF_PARTITION_EVENT),
    ]
    # Round robin continues across batches: record 4 is the 4th, so it goes to the other channel.
    assert reader.drain(1 - first) == [
        ("buffer", [2], [20]),
        ("event", Watermark(30)),
        ("buffer", [4], None),
        ("event", CheckpointBarrier(1, 99)),
        ("event", END_OF_PARTITION_EVENT),
    ]


def test_switching_between_timestamped_and_plain_records_sends_the_pending_ones(manager, make_partition):
    partition = make_partition(1)
    writer = RecordWriter(partition, ForwardPartitioner(), records_per_buffer=10)
    reader = Reader(manager, partition)
    writer.emit_batch([1, 2])
    writer.emit_batch([3], [30])
    writer.emit_batch([4], [40])
    writer.emit_batch([5])
    writer.flush_all()
    assert reader.drain(0) == [
        ("buffer", [1, 2], None),
        ("buffer", [3, 4], [30, 40]),
        ("buffer", [5], None),
    ]


def test_writer_copies_the_callers_lists(manager, make_partition):
    partition = make_partition(2)
    writer = RecordWriter(partition, BroadcastPartitioner(), records_per_buffer=2)
    reader = Reader(manager, partition)
    batch, stamps = [1, 2], [7, 8]
    writer.emit_batch(batch, stamps)
    batch.append(3)
    stamps[0] = -1
    out0, out1 = reader.drain(0), reader.drain(1)
    assert out0 == out1 == [("buffer", [1, 2], [7, 8])]
    assert writer.num_records_out == 2 and writer.num_buffers_out == 2


def test_bad_input_is_rejected_before_anything_is_accepted(manager, make_partition):
    partition = make_partition(2)
    writer = RecordWriter(partition, KeyGroupStreamPartitioner(lambda r: r[0], 128), records_per_buffer=1)
    reader = Reader(manager, partition)
    with pytest.raises(ValueError, match="2 timestamps for 1 values"):
        writer.emit_batch([("a", 1)], [1, 2])
    with pytest.raises(KeySelectionError, match=r"record \(\['bad'\], 2\).*type list"):
        writer.emit_batch([("ok", 1), (["bad"], 2)])
    assert writer.num_records_out == 0 and writer.get_number_of_pending_records() == 0
    assert reader.drain(0) == [] and reader.drain(1) == []


def test_constructor_validation(make_partition):
    with pytest.raises(ValueError, match="records_per_buffer"):
        RecordWriter(make_partition(1), ForwardPartitioner(), records_per_buffer=0)
    with pytest.raises(ValueError, match="FORWARD .* 3 channels"):
        RecordWriter(make_partition(3), ForwardPartitioner())


def test_close_drops_pending_records_and_refuses_more(manager, make_partition):
    partition = make_partition(1)
    writer = RecordWriter(partition, ForwardPartitioner(), records_per_buffer=10)
    reader = Reader(manager, partition)
    writer.emit_batch([1, 2])
    writer.close()
    writer.close()
    assert writer.get_number_of_pending_records() == 0
    writer.flush_all()
    assert reader.drain(0) == []
    with pytest.raises(RuntimeError, match="is closed"):
        writer.emit_batch([3])
    with pytest.raises(RuntimeError, match="is closed"):
        writer.broadcast_event(Watermark(1))


def test_writer_reports_pool_availability_and_backpressure(make_partition):
    partition = make_partition(1, num_buffers=1)
    writer = RecordWriter(partition, ForwardPartitioner(), records_per_buffer=1)
    assert writer.is_available() and writer.back_pressured_time_ns == 0
    writer.emit_batch([1])
    assert not writer.is_available()


def test_a_hash_exchange_with_a_key_token_hands_over_its_keys(manager, make_partition):
    """Every buffer of a keyed exchange is a KeyedBatch whose keys are the partitioner's, also
    across buffer boundaries and flushes; without a token buffers are plain lists."""
    from rill.network.partitioner.keyed_batch import KeyedBatch
    from rill.state.key_groups import assign_to_key_group

    selected = []

    def key_of(v):
        selected.append(v)
        return v // 10

    partition = make_partition(2, num_buffers=32)
    writer = RecordWriter(partition, KeyGroupStreamPartitioner(key_of, 128, key_token="kb"), records_per_buffer=3)
    reader = Reader(manager, partition)
    values = list(range(0, 200, 7))
    writer.emit_batch(values[:5], list(range(5)))
    writer.emit_batch(values[5:], list(range(5, len(values))))
    writer.flush_all()
    assert selected == values  # one key selector call per record
    got = []
    for channel in (0, 1):
        for kind, batch, timestamps in reader.drain(channel):
            assert kind == "buffer" and type(batch) is KeyedBatch and batch.key_token == "kb"
            assert batch.keys == [v // 10 for v in batch] and len(batch) <= 3
            assert batch.key_groups == [assign_to_key_group(v // 10, 128) for v in batch]
            assert timestamps == [values.index(v) for v in batch]
            got.extend(batch)
    assert sorted(got) == values

    plain = make_partition(2, num_buffers=32)
    writer = RecordWriter(plain, KeyGroupStreamPartitioner(key_of, 128), records_per_buffer=3)
    reader = Reader(manager, plain)
    writer.emit_batch(values)
    writer.flush_all()
    assert {type(batch) for channel in (0, 1) for _, batch, _ in reader.drain(channel)} == {list}

    # consumers in other processes (the cluster mode): the keys are not carried
    remote = make_partition(2, num_buffers=32)
    writer = RecordWriter(remote, KeyGroupStreamPartitioner(key_of, 128, key_token="kb"), records_per_buffer=3,
                          carry_keys=False)
    reader = Reader(manager, remote)
    writer.emit_batch(values)
    writer.flush_all()
    drained = [batch for channel in (0, 1) for _, batch, _ in reader.drain(channel)]
    assert {type(batch) for batch in drained} == {list} and sorted(v for b in drained for v in b) == values
