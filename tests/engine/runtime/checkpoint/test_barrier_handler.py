"""The barrier handlers over real input gates and local channels (Flink's
``CheckpointBarrierHandler`` tests): what a task reads while it aligns, when it checkpoints,
and when it gives a checkpoint up. The task is a recorder of the two calls a handler makes."""

from __future__ import annotations

import pytest

from rill.network import (
    CancelCheckpointMarker,
    CheckpointBarrier,
    LocalBufferPool,
    LocalInputChannel,
    ResultPartition,
    ResultPartitionID,
    ResultPartitionManager,
    ResultPartitionType,
    SingleInputGate,
)
from rill.network.events import EndOfPartitionEvent
from rill.runtime.checkpoint.barrier_handler import BarrierTracker, SingleCheckpointBarrierHandler
from rill.runtime.checkpoint.checkpoint_failure_reason import CheckpointFailureReason


class RecordingTask:
    def __init__(self):
        self.calls = []

    def trigger_checkpoint_on_barrier(self, metadata, options, alignment_duration_ms):
        assert alignment_duration_ms >= 0
        self.calls.append(("checkpoint", metadata.checkpoint_id))

    def abort_checkpoint_on_barrier(self, checkpoint_id, cause):
        self.calls.append(("abort", checkpoint_id, cause.reason))


@pytest.fixture
def network():
    manager = ResultPartitionManager()
    partitions = []
    for i in range(2):
        p = ResultPartition(ResultPartitionID(f"p{i}", "a0"), ResultPartitionType.PIPELINED_BOUNDED, 1,
                            LocalBufferPool(8, f"p{i}"), f"p{i}")
        manager.register_result_partition(p)
        partitions.append(p)
    gate = SingleInputGate(0, [LocalInputChannel(manager, p.partition_id, 0) for p in partitions], "task")
    gate.setup()
    yield partitions, gate
    gate.close()
    manager.shutdown()


def send(partition, *items):
    for item in items:
        if isinstance(item, list):
            buffer = partition.request_buffer_blocking()
            buffer.values = item
            partition.emit_buffer(buffer, 0)
        elif item == "end":
            partition.finish()
        else:
            partition.add_event(item, 0)


def drain(gate, handler, seen):
    """Read what the gate gives now, as the task does: records to ``seen``, events to the handler."""
    while (boe := gate.poll_next()) is not None:
        if boe.buffer is not None:
            seen.extend(boe.buffer.values)
            boe.buffer.recycle_buffer()
        elif isinstance(boe.event, CheckpointBarrier):
            handler.process_barrier(boe.event, gate, boe.channel_index)
        elif isinstance(boe.event, CancelCheckpointMarker):
            handler.process_cancellation_barrier(boe.event, gate, boe.channel_index)
        elif isinstance(boe.event, EndOfPartitionEvent):
            handler.process_end_of_partition(gate, boe.channel_index)


def test_aligned_blocks_a_channel_from_its_barrier_until_every_channel_delivered_it(network):
    (p0, p1), gate = network
    task, seen = RecordingTask(), []
    handler = SingleCheckpointBarrierHandler(task, [gate])
    send(p0, [1], CheckpointBarrier(1, 0), [2])
    send(p1, [10])
    drain(gate, handler, seen)
    assert sorted(seen) == [1, 10] and task.calls == [] and gate.is_blocked(0)
    send(p1, [11], CheckpointBarrier(1, 0), [12])
    drain(gate, handler, seen)
    assert task.calls == [("checkpoint", 1)]
    assert seen.index(11) < seen.index(2) and sorted(seen) == [1, 2, 10, 11, 12]
    assert not gate.is_blocked(0) and not gate.is_blocked(1)


def test_an_ended_channel_counts_as_aligned(network):
    (p0, p1), gate = network
    task, seen = RecordingTask(), []
    handler = SingleCheckpointBarrierHandler(task, [gate])
    send(p0, CheckpointBarrier(3, 0), [2])
    drain(gate, handler, seen)
    assert task.calls == [] and seen == []
    send(p1, [10], "end")
    drain(gate, handler, seen)
    assert task.calls == [("checkpoint", 3)] and seen == [10, 2]


def test_a_newer_barrier_abandons_the_alignment_in_progress(network):
    (p0, p1), gate = network
    task, seen = RecordingTask(), []
    handler = SingleCheckpointBarrierHandler(task, [gate])
    send(p0, CheckpointBarrier(1, 0), [2], CheckpointBarrier(2, 0))
    send(p1, [10], CheckpointBarrier(2, 0), [11])
    drain(gate, handler, seen)
    assert task.calls == [("abort", 1, CheckpointFailureReason.CHECKPOINT_DECLINED_SUBSUMED), ("checkpoint", 2)]
    assert sorted(seen) == [2, 10, 11]


def test_a_cancellation_marker_gives_the_checkpoint_up_and_resumes(network):
    (p0, p1), gate = network
    task, seen = RecordingTask(), []
    handler = SingleCheckpointBarrierHandler(task, [gate])
    send(p0, CheckpointBarrier(1, 0), [2])
    send(p1, CancelCheckpointMarker(1), [10], CheckpointBarrier(1, 0))
    drain(gate, handler, seen)
    assert task.calls == [("abort", 1, CheckpointFailureReason.CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER)]
    assert sorted(seen) == [2, 10] and not gate.is_blocked(0) and not gate.is_blocked(1)


def test_an_aborted_checkpoint_stops_the_alignment(network):
    (p0, p1), gate = network
    task, seen = RecordingTask(), []
    handler = SingleCheckpointBarrierHandler(task, [gate])
    send(p0, CheckpointBarrier(1, 0), [2])
    drain(gate, handler, seen)
    assert seen == [] and gate.is_blocked(0)
    handler.on_checkpoint_aborted(1)
    send(p1, CheckpointBarrier(1, 0))  # a late barrier of the aborted checkpoint blocks nothing
    drain(gate, handler, seen)
    assert seen == [2] and task.calls == [] and not gate.is_blocked(1)


def test_at_least_once_blocks_nothing_and_checkpoints_on_the_last_barrier(network):
    (p0, p1), gate = network
    task, seen = RecordingTask(), []
    handler = BarrierTracker(task, [gate])
    send(p0, [1], CheckpointBarrier(1, 0), [2])
    send(p1, [10])
    drain(gate, handler, seen)
    assert sorted(seen) == [1, 2, 10] and task.calls == []
    send(p1, CheckpointBarrier(1, 0), [11])
    drain(gate, handler, seen)
    assert task.calls == [("checkpoint", 1)] and sorted(seen) == [1, 2, 10, 11]


def test_at_least_once_counts_an_ended_channel_and_skips_older_checkpoints(network):
    (p0, p1), gate = network
    task, seen = RecordingTask(), []
    handler = BarrierTracker(task, [gate])
    send(p0, CheckpointBarrier(1, 0), CheckpointBarrier(2, 0))
    send(p1, CheckpointBarrier(2, 0))
    drain(gate, handler, seen)
    assert task.calls == [("checkpoint", 2)]
    send(p1, CheckpointBarrier(1, 0), "end")  # older: ignored
    send(p0, CheckpointBarrier(3, 0))
    drain(gate, handler, seen)
    assert task.calls == [("checkpoint", 2), ("checkpoint", 3)]
