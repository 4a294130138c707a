"""ResultPartition, PipelinedSubpartition(+View), ResultPartitionManager, ResultPartitionID."""

from __future__ import annotations

import dataclasses

import pytest

from rill.network import (
    END_OF_PARTITION_EVENT,
    Buffer,
    CheckpointBarrier,
    LocalBufferPool,
    PartitionNotFoundError,
    PartitionReleasedError,
    ResultPartition,
    ResultPartitionID,
    ResultPartitionManager,
    ResultPartitionType,
)
from rill.common.streamrecord import Watermark


def filled(partition: ResultPartition, values: list, timestamps=None) -> Buffer:
    buffer = partition.request_buffer_blocking()
    buffer.values = values
    buffer.timestamps = timestamps
    return buffer


class Counter:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1


def test_result_partition_id_is_a_frozen_value():
    pid = ResultPartitionID("ds-1#0", "att-3")
    assert str(pid) == "ds-1#0@att-3"
    assert pid == ResultPartitionID("ds-1#0", "att-3") and hash(pid) == hash(ResultPartitionID("ds-1#0", "att-3"))
    assert pid != ResultPartitionID("ds-1#0", "att-4")
    with pytest.raises(dataclasses.FrozenInstanceError):
        pid.producer_id = "x"  # type: ignore[misc]
    with pytest.raises(TypeError, match="two str ids"):
        ResultPartitionID("a", 1)  # type: ignore[arg-type]


def test_partition_type_properties():
    assert ResultPartitionType.PIPELINED_BOUNDED.is_pipelined() and ResultPartitionType.PIPELINED_BOUNDED.is_bounded()
    assert not ResultPartitionType.PIPELINED.is_bounded()
    assert ResultPartitionType.BLOCKING.is_blocking() and not ResultPartitionType.BLOCKING.is_pipelined()


def test_constructor_validation():
    pid = ResultPartitionID("p", "a")
    with pytest.raises(NotImplementedError, match="BLOCKING"):
        ResultPartition(pid, ResultPartitionType.BLOCKING, 1, LocalBufferPool(1))
    with pytest.raises(ValueError, match="needs a buffer_pool"):
        ResultPartition(pid, ResultPartitionType.PIPELINED_BOUNDED, 1, None)
    with pytest.raises(ValueError, match="at least one subpartition"):
        ResultPartition(pid, ResultPartitionType.PIPELINED_BOUNDED, 0, LocalBufferPool(1))
    with pytest.raises(TypeError, match="ResultPartitionType"):
        ResultPartition(pid, "PIPELINED", 1, None)  # type: ignore[arg-type]


def test_unbounded_pipelined_partition_uses_unpooled_buffers():
    partition = ResultPartition(ResultPartitionID("p", "a"), ResultPartitionType.PIPELINED, 1)
    buffer = partition.request_buffer_blocking()
    assert buffer.get_recycler() is None
    assert partition.statistics().buffer_pool is None


def test_view_reads_buffers_and_events_in_order_with_backlog(manager, make_partition):
    partition = make_partition(2)
    listener = Counter()
    view = manager.create_subpartition_view(partition.partition_id, 1, listener)
    b1, b2 = filled(partition, [1, 2]), filled(partition, [3])
    partition.emit_buffer(b1, 1)
    partition.add_event(Watermark(5), 1)
    partition.emit_buffer(b2, 1)
    partition.broadcast_event(CheckpointBarrier(1, 0))

    polled = []
    while (result := view.get_next_buffer()) is not None:
        polled.append(result)
    assert [(r.item, r.more_available, r.buffers_in_backlog) for r in polled] == [
        (b1, True, 1),
        (Watermark(5), True, 1),
        (b2, True, 0),
        (CheckpointBarrier(1, 0), False, 0),
    ]
    assert b1.values == [1, 2] and b2.values == [3]
    assert view.poll_next() is None
    # Notified once: only the first entry found the subpartition empty.
    assert listener.calls == 1
    partition.emit_buffer(filled(partition, [4]), 1)
    assert listener.calls == 2
    assert view.poll_next().values == [4]


def test_view_created_after_data_is_notified_at_once(manager, make_partition):
    partition = make_partition(1)
    partition.add_event(Watermark(1), 0)
    listener = Counter()
    view = manager.create_subpartition_view(partition.partition_id, 0, listener)
    assert listener.calls == 1
    assert view.poll_next() == Watermark(1)


def test_a_pipelined_subpartition_is_consumed_once(manager, make_partition):
    partition = make_partition(1)
    manager.create_subpartition_view(partition.partition_id, 0, Counter())
    with pytest.raises(RuntimeError, match="can only be consumed once"):
        manager.create_subpartition_view(partition.partition_id, 0, Counter())


def test_finish_appends_end_of_partition_and_refuses_more(manager, make_partition):
    partition = make_partition(2)
    views = [manager.create_subpartition_view(partition.partition_id, i, Counter()) for i in range(2)]
    partition.emit_buffer(filled(partition, ["x"]), 0)
    partition.finish()
    partition.finish()  # idempotent
    assert partition.is_finished()
    assert views[0].poll_next().values == ["x"]
    assert views[0].poll_next() == END_OF_PARTITION_EVENT
    assert views[1].poll_next() == END_OF_PARTITION_EVENT
    late = filled(partition, ["late"])
    with pytest.raises(RuntimeError, match="is finished"):
        partition.emit_buffer(late, 0)
    assert late.is_recycled()  # no leak on error
    with pytest.raises(RuntimeError, match="is finished"):
        partition.broadcast_event(Watermark(3))
    # Subpartition-level guard too.
    with pytest.raises(RuntimeError, match="EndOfPartition was added"):
        partition.get_subpartition(0).add(Watermark(3))


def test_emit_validation_recycles_the_buffer(make_partition):
    partition = make_partition(2, num_buffers=1)
    bad = filled(partition, [1])
    with pytest.raises(ValueError, match="index 2 out of range .* with 2 subpartitions"):
        partition.emit_buffer(bad, 2)
    with pytest.raises(ValueError, match="index -1 out of range"):
        partition.add_event(Watermark(1), -1)
    assert bad.is_recycled() and partition.buffer_pool.get_number_of_available_buffers() == 1
    for event in (None, Buffer([1])):
        with pytest.raises(TypeError, match="An event must be"):
            partition.broadcast_event(event)


def test_producer_release_recycles_queued_buffers_and_wakes_the_reader(manager, make_partition):
    partition = make_partition(1, num_buffers=4)
    listener = Counter()
    view = manager.create_subpartition_view(partition.partition_id, 0, listener)
    for i in range(3):
        partition.emit_buffer(filled(partition, [i]), 0)
    assert partition.buffer_pool.get_number_of_available_buffers() == 1
    cause = RuntimeError("producer failed")
    assert manager.release_partition(partition.partition_id, cause) is True
    assert listener.calls == 2  # first buffer + release
    assert view.is_released() and view.get_failure_cause() is cause
    assert view.poll_next() is None
    assert partition.is_released() and partition.buffer_pool.is_destroyed()
    assert partition.buffer_pool.get_number_of_used_buffers() == 0
    with pytest.raises(PartitionReleasedError, match="has been released: RuntimeError"):
        partition.emit_buffer(Buffer([1]), 0)
    with pytest.raises(PartitionReleasedError):
        partition.finish()
    assert manager.release_partition(partition.partition_id) is False


def test_consumer_release_drops_its_data_and_last_one_releases_the_partition(manager, make_partition):
    partition = make_partition(2, num_buffers=4)
    views = [manager.create_subpartition_view(partition.partition_id, i, Counter()) for i in range(2)]
    partition.emit_buffer(filled(partition, [1]), 0)
    partition.emit_buffer(filled(partition, [2]), 1)
    views[0].release()
    views[0].release()  # idempotent
    assert partition.buffer_pool.get_number_of_used_buffers() == 1
    # A buffer for a consumer that is gone is recycled and dropped.
    dropped = filled(partition, [3])
    partition.emit_buffer(dropped, 0)
    assert dropped.is_recycled()
    assert not partition.is_released() and manager.get_number_of_registered_partitions() == 1
    views[1].release()
    assert partition.is_released()
    assert manager.get_number_of_registered_partitions() == 0
    assert partition.buffer_pool.get_number_of_used_buffers() == 0


def test_manager_errors_name_the_partition(manager, make_partition):
    missing = ResultPartitionID("nope", "att-9")
    with pytest.raises(PartitionNotFoundError, match=r"Partition nope@att-9 not found\.") as info:
        manager.create_subpartition_view(missing, 0, Counter())
    assert info.value.partition_id == missing
    partition = make_partition(1)
    with pytest.raises(ValueError, match="already registered"):
        manager.register_result_partition(partition)
    with pytest.raises(ValueError, match="out of range"):
        manager.create_subpartition_view(partition.partition_id, 3, Counter())
    assert manager.get_registered_partition_ids() == [partition.partition_id]
    assert manager.get_partition(partition.partition_id) is partition


def test_manager_shutdown_releases_everything():
    manager = ResultPartitionManager()
    partition = ResultPartition(
        ResultPartitionID("p", "a"), ResultPartitionType.PIPELINED_BOUNDED, 1, LocalBufferPool(2)
    )
    manager.register_result_partition(partition)
    manager.shutdown()
    assert partition.is_released()
    with pytest.raises(RuntimeError, match="shut down"):
        manager.register_result_partition(partition)


def test_statistics_per_subpartition(manager, make_partition):
    partition = make_partition(3, num_buffers=8)
    partition.emit_buffer(filled(partition, [1, 2, 3]), 0)
    partition.emit_buffer(filled(partition, [4]), 0)
    partition.emit_buffer(filled(partition, [5, 6]), 2)
    partition.broadcast_event(Watermark(9))
    stats = partition.statistics()
    assert stats.buffers_out == (2, 0, 1)
    assert stats.records_out == (4, 0, 2)
    assert stats.backlog == (2, 0, 1)
    assert (stats.finished, stats.released) == (False, False)
    assert stats.buffer_pool.used_buffers == 3
    view = manager.create_subpartition_view(partition.partition_id, 0, Counter())
    view.poll_next()
    assert partition.statistics().backlog == (1, 0, 1)


def test_a_remotely_read_subpartition_serializes_buffers_on_the_adding_thread(manager, make_partition):
    from rill.network import SpanningRecordSerializer
    from rill.network.api.serialization.value_codec import unpack_records

    partition = make_partition(1)
    early = filled(partition, [("before", 0)])
    partition.emit_buffer(early, 0)  # queued before the reader: the sender serializes it
    view = manager.create_subpartition_view(partition.partition_id, 0, Counter())
    view.set_remote_serializer(SpanningRecordSerializer())
    late = filled(partition, [("after", 1), ("after", 2)], [10, 20])
    partition.emit_buffer(late, 0)
    unserializable = filled(partition, [lambda: None])
    partition.emit_buffer(unserializable, 0)

    assert early.serialized is None and early.values == [("before", 0)]
    payload, compressed, records = late.serialized
    assert (compressed, records) == (False, 2)
    assert unpack_records(payload) == ([("after", 1), ("after", 2)], [10, 20])
    assert late.values == [] and late.timestamps is None  # the records are freed by the producer
    assert isinstance(unserializable.serialized, ValueError)  # kept for the sender to report
    assert "Cannot serialize a value of type builtins.function" in str(unserializable.serialized)
    assert len(unserializable.values) == 1
    assert partition.statistics().records_out == (4,)
    assert [view.poll_next() for _ in range(3)] == [early, late, unserializable]
    for buffer in (early, late, unserializable):
        buffer.recycle_buffer()
        assert buffer.serialized is None
