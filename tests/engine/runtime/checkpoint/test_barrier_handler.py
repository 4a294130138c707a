"""The barrier handlers over real input gates and local channels (Flink's
``CheckpointBarrierHandler`` tests): what a task reads while it aligns, when it checkpoints,
and when it gives a checkpoint up. The task is a recorder of the two calls a handler makes; for unaligned
checkpoints it also hands the handler's channel state writer the buffers it reads, as the task
does."""

from __future__ import annotations

import time

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
from rill.network.api.serialization.value_codec import unpack_records
from rill.network.events import EndOfPartitionEvent
from rill.runtime.checkpoint.barrier_handler import BarrierTracker, SingleCheckpointBarrierHandler
from rill.runtime.checkpoint.checkpoint_failure_reason import CheckpointFailureReason
from rill.runtime.checkpoint.checkpoint_options import AlignmentType, CheckpointOptions
from rill.state.checkpoint.metadata import SnapshotType
from rill.state.checkpoint.storage import MemoryCheckpointStorageLocation


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


# -- unaligned (FLIP-76) and the aligned-checkpoint timeout --------------------------------------

class UnalignedRecordingTask(RecordingTask):
    """Also records the options of each checkpoint and when its channel state writer ends."""

    def __init__(self):
        super().__init__()
        self.options = {}
        self.writers = {}

    def trigger_checkpoint_on_barrier(self, metadata, options, alignment_duration_ms, channel_state=None):
        super().trigger_checkpoint_on_barrier(metadata, options, alignment_duration_ms)
        cid = metadata.checkpoint_id
        self.options[cid] = options
        if channel_state is not None:
            self.writers[cid] = channel_state
            channel_state.on_done(lambda ms: self.calls.append(("complete", cid)),
                                  lambda: self.calls.append(("dropped", cid)))


def _options(alignment, timeout_ms=0):
    return CheckpointOptions(SnapshotType.CHECKPOINT, MemoryCheckpointStorageLocation(), alignment,
                             aligned_checkpoint_timeout_ms=timeout_ms)


def drain_persisting(gate, handler, seen):
    """``drain``, and as the task does, each buffer goes to the unaligned checkpoint's writer."""
    while (boe := gate.poll_next()) is not None:
        if boe.buffer is not None:
            writer = handler.channel_state_writer
            if writer is not None and writer.active:
                writer.add_input_buffer(gate.gate_index, boe.channel_index, boe.buffer.values, boe.buffer.timestamps)
            seen.extend(boe.buffer.values)
            boe.buffer.recycle_buffer()
        elif isinstance(boe.event, CheckpointBarrier):
            handler.process_barrier(boe.event, gate, boe.channel_index)
        elif isinstance(boe.event, CancelCheckpointMarker):
            handler.process_cancellation_barrier(boe.event, gate, boe.channel_index)


def _stored_input(writer):
    return [(g, c, unpack_records(p)[0]) for g, c, p in writer.encode().input_channels]


def test_unaligned_checkpoints_at_the_first_barrier_which_overtakes_the_queued_data(network):
    (p0, p1), gate = network
    task, seen = UnalignedRecordingTask(), []
    handler = SingleCheckpointBarrierHandler(task, [gate])
    send(p1, [10])
    send(p0, [1], [2])
    overtaken = p0.broadcast_priority_event(CheckpointBarrier(1, 0, _options(AlignmentType.UNALIGNED)))
    assert [values for values, _, _ in overtaken[0]] == [[1], [2]]  # the producer stores these
    assert gate.poll_next().event.checkpoint_id == 1  # first, ahead of both channels' data
    handler.process_barrier(CheckpointBarrier(1, 0, _options(AlignmentType.UNALIGNED)), gate, 0)
    assert task.calls == [("checkpoint", 1)] and not gate.is_blocked(0)
    drain_persisting(gate, handler, seen)
    send(p1, [11], CheckpointBarrier(1, 0, _options(AlignmentType.UNALIGNED)), [12])
    drain_persisting(gate, handler, seen)
    assert task.calls == [("checkpoint", 1), ("complete", 1)] and sorted(seen) == [1, 2, 10, 11, 12]
    # channel 1 sent 10 and 11 before its barrier, processed after the snapshot: stored, once
    assert _stored_input(task.writers[1]) == [(0, 1, [10]), (0, 1, [11])]
    assert handler.channel_state_writer is None and not handler.is_aligning


def test_an_aligned_checkpoint_switches_to_unaligned_at_its_timeout(network):
    (p0, p1), gate = network
    task, seen, timers = UnalignedRecordingTask(), [], []
    handler = SingleCheckpointBarrierHandler(task, [gate], lambda deadline, cb: timers.append((deadline, cb)))
    now_ms = int(time.time() * 1000)
    barrier = CheckpointBarrier(1, now_ms, _options(AlignmentType.ALIGNED, 60_000))
    send(p0, [1], barrier, [2])
    send(p1, [10])
    drain_persisting(gate, handler, seen)
    assert sorted(seen) == [1, 10] and gate.is_blocked(0) and task.calls == []
    assert [deadline for deadline, _ in timers] == [now_ms + 60_000]
    timers[0][1]()  # what the task's timer service runs at the deadline
    assert task.calls == [("checkpoint", 1)] and task.options[1].alignment is AlignmentType.UNALIGNED
    assert not gate.is_blocked(0)
    send(p1, [11], barrier)
    drain_persisting(gate, handler, seen)
    assert task.calls == [("checkpoint", 1), ("complete", 1)] and sorted(seen) == [1, 2, 10, 11]
    assert _stored_input(task.writers[1]) == [(0, 1, [11])]  # 2 followed its barrier: not stored


def test_a_barrier_later_than_the_timeout_starts_unaligned_and_one_within_it_aligned(network):
    (p0, p1), gate = network
    task, seen = UnalignedRecordingTask(), []
    handler = SingleCheckpointBarrierHandler(task, [gate])
    now_ms = int(time.time() * 1000)
    send(p0, CheckpointBarrier(1, now_ms - 1000, _options(AlignmentType.ALIGNED, 50)))
    drain_persisting(gate, handler, seen)
    assert task.calls == [("checkpoint", 1)] and task.options[1].alignment is AlignmentType.UNALIGNED
    send(p1, CheckpointBarrier(1, now_ms - 1000, _options(AlignmentType.ALIGNED, 50)))
    send(p0, CheckpointBarrier(2, now_ms, _options(AlignmentType.ALIGNED, 60_000)))
    drain_persisting(gate, handler, seen)
    assert task.calls == [("checkpoint", 1), ("complete", 1)] and gate.is_blocked(0)
    send(p1, CheckpointBarrier(2, now_ms, _options(AlignmentType.ALIGNED, 60_000)))
    drain_persisting(gate, handler, seen)
    assert task.calls[2:] == [("checkpoint", 2)] and 2 not in task.writers


def test_a_cancellation_drops_the_in_flight_data_of_an_unaligned_checkpoint(network):
    (p0, p1), gate = network
    task, seen = UnalignedRecordingTask(), []
    handler = SingleCheckpointBarrierHandler(task, [gate])
    send(p0, CheckpointBarrier(1, 0, _options(AlignmentType.UNALIGNED)))
    send(p1, [10], CancelCheckpointMarker(1))
    drain_persisting(gate, handler, seen)
    assert task.calls == [("checkpoint", 1), ("dropped", 1),
                          ("abort", 1, CheckpointFailureReason.CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER)]
    assert task.writers[1].encode().is_empty() and handler.channel_state_writer is None
