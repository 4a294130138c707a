"""Sources that replay: SourceOperator snapshots its splits with their positions in
"SourceReaderState", the SourceCoordinator its enumerator's unassigned splits; a fresh operator
and coordinator restored from them emit exactly what the failed ones had not emitted before the
checkpoint. Driven with the operator test harness and a real SourceCoordinator (no runtime)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from rill.common.connector.source import (
    PickleSerializer,
    Source,
    SourceReader,
    SourceSplit,
    SplitEnumerator,
    read_version_and_deserialize,
    write_version_and_serialize,
)
from rill.datastream.connectors import CollectionSource, FileSource, NumberSequenceSource, StreamFormat
from rill.datastream.connectors.async_source import AsyncIteratorSource
from rill.operators.source_operator import SPLITS_STATE_NAME, InputStatus, SourceOperator
from rill.operators.testing import OneInputStreamOperatorTestHarness
from rill.runtime.source_coordinator import SourceCoordinator
from rill.state import redistribute
from rill.state.checkpoint.operator_subtask_state import OperatorSubtaskState


def _harness(source, coordinator, parallelism=1, subtask=0, batch=7, restored=None):
    h = OneInputStreamOperatorTestHarness(SourceOperator(source), parallelism=parallelism, subtask_index=subtask)
    h.context.operator_coordinator = coordinator
    h.context.records_per_batch = batch
    h.initialize_state(restored)
    h.open()
    return h


def _emit(h, batches=None) -> bool:
    """Emit up to ``batches`` batches (all if None); True at the end of input."""
    n = 0
    while batches is None or n < batches:
        status = h.operator.emit_next()
        if status is InputStatus.END_OF_INPUT:
            return True
        assert status is InputStatus.MORE_AVAILABLE
        n += 1
    return False


def _checkpoint(coordinator, harnesses, checkpoint_id):
    """As the checkpoint coordinator: the source coordinator first, then every source subtask."""
    data = coordinator.snapshot_state(checkpoint_id)
    return data, [h.snapshot(checkpoint_id, 1000 + checkpoint_id) for h in harnesses]


def _crash_and_restore(source, parallelism, checkpoint_id, coordinator_data, snapshots, batch=7):
    coordinator = SourceCoordinator(source, parallelism)
    coordinator.reset_to_checkpoint(checkpoint_id, coordinator_data)
    return coordinator, [_harness(source, coordinator, parallelism, i, batch, restored=s)
                         for i, s in enumerate(snapshots)]


@pytest.mark.parametrize("batches_before", [0, 1, 5, 14, 15, 30])
def test_number_sequence_resumes_exactly(batches_before):
    source = NumberSequenceSource(0, 99)
    coordinator = SourceCoordinator(source, 1)
    h = _harness(source, coordinator)
    _emit(h, batches_before)
    data, [snap] = _checkpoint(coordinator, [h], 1)
    before = h.extract_output_values()
    _emit(h)  # progress after the checkpoint, lost with the crash
    assert h.extract_output_values() == list(range(100))
    coordinator2, [h2] = _crash_and_restore(source, 1, 1, data, [snap])
    assert _emit(h2)
    assert before + h2.extract_output_values() == list(range(100))


def test_collection_source_resumes_mid_split_and_state_records_the_position():
    source = CollectionSource([f"e{i}" for i in range(20)])
    coordinator = SourceCoordinator(source, 1)
    h = _harness(source, coordinator, batch=3)
    _emit(h, 2)
    _, [snap] = _checkpoint(coordinator, [h], 1)
    mode, [(split_bytes, emitted)] = snap.operator_state[SPLITS_STATE_NAME]
    assert (mode, emitted) == ("SPLIT_DISTRIBUTE", 6)
    split = read_version_and_deserialize(PickleSerializer(), split_bytes)
    assert (split.start, split.end) == (0, 20)
    data = coordinator.snapshot_state(2)  # the split was assigned before: the enumerator has none left
    coordinator2, [h2] = _crash_and_restore(source, 1, 2, data, [snap], batch=3)
    assert _emit(h2)
    assert h2.extract_output_values() == [f"e{i}" for i in range(6, 20)]


def _write_files(tmp_path, files=3, lines=40):
    expected = {}
    for f in range(files):
        rows = [f"f{f}-{i:03d}" for i in range(lines)]
        (tmp_path / f"in{f}.txt").write_text("\n".join(rows) + "\n")
        expected[f] = rows
    return expected


@pytest.mark.parametrize("batches_before", [(0, 0), (1, 0), (2, 3), (3, 7), (9, 1), (40, 40)])
def test_file_source_at_parallelism_2_emits_every_line_once_in_order_per_file(tmp_path, batches_before):
    expected = _write_files(tmp_path)
    source = FileSource([str(tmp_path)], StreamFormat.text_line_format(), split_size_bytes=100)
    coordinator = SourceCoordinator(source, 2)
    hs = [_harness(source, coordinator, 2, i, batch=4) for i in range(2)]
    # interleave the two subtasks, as two task threads would
    for step in range(max(batches_before)):
        for h, n in zip(hs, batches_before):
            if step < n:
                _emit(h, 1)
    data, snaps = _checkpoint(coordinator, hs, 5)
    before = [h.extract_output_values() for h in hs]
    for h in hs:
        _emit(h)
    coordinator2, hs2 = _crash_and_restore(source, 2, 5, data, snaps, batch=4)
    for _ in range(200):  # both restored subtasks take turns until both end
        done = [_emit(h, 1) or h.operator._finished for h in hs2]
        if all(done):
            break
    assert all(h.operator._finished for h in hs2)
    emitted = before[0] + before[1] + hs2[0].extract_output_values() + hs2[1].extract_output_values()
    assert sorted(emitted) == sorted(v for rows in expected.values() for v in rows)  # once each
    for i in range(2):  # in order per file within each subtask's stream
        out = before[i] + hs2[i].extract_output_values()
        for f, rows in expected.items():
            mine = [v for v in out if v.startswith(f"f{f}-")]
            assert mine == sorted(mine)


def test_split_assigned_after_the_coordinator_snapshot_waits_for_the_reader_snapshot():
    source = NumberSequenceSource(0, 9)
    coordinator = SourceCoordinator(source, 1)
    h = _harness(source, coordinator, batch=4)
    data = coordinator.snapshot_state(1)  # before the reader asked for its split
    assert h.operator.emit_next() is InputStatus.NOTHING_AVAILABLE  # holds the split stamped 1
    assert h.extract_output_values() == []
    snap = h.snapshot(1)
    assert snap.operator_state[SPLITS_STATE_NAME] == ("SPLIT_DISTRIBUTE", ())  # it is the enumerator's
    assert _emit(h)
    assert h.extract_output_values() == list(range(10))
    coordinator2, [h2] = _crash_and_restore(source, 1, 1, data, [snap], batch=4)
    assert _emit(h2)
    assert h2.extract_output_values() == list(range(10))  # from the enumerator's state, once


@pytest.mark.parametrize("release", ["aborted", "complete"])
def test_held_split_is_released_by_a_notification(release):
    source = NumberSequenceSource(0, 2)
    coordinator = SourceCoordinator(source, 1)
    h = _harness(source, coordinator)
    coordinator.snapshot_state(3)
    assert h.operator.emit_next() is InputStatus.NOTHING_AVAILABLE
    getattr(h.operator, f"notify_checkpoint_{release}")(3)
    assert _emit(h)
    assert h.extract_output_values() == [0, 1, 2]


def test_coordinator_refuses_a_checkpoint_id_that_does_not_advance():
    coordinator = SourceCoordinator(NumberSequenceSource(0, 2), 1)
    coordinator.snapshot_state(2)
    with pytest.raises(ValueError, match="checkpoint 2 is not after checkpoint 2"):
        coordinator.snapshot_state(2)


def test_reset_without_data_starts_a_new_enumerator():
    source = NumberSequenceSource(0, 5)
    coordinator = SourceCoordinator(source, 2)
    assert coordinator.request_split(0) is not None
    coordinator.reset_to_checkpoint(0, None)
    assert len([coordinator.request_split(i % 2) for i in range(2)]) == 2
    assert coordinator.request_split(0) is None


@dataclass(frozen=True)
class _Split(SourceSplit):
    n: int

    def split_id(self) -> str:
        return str(self.n)


class _OwnEnumerator(SplitEnumerator):
    def handle_split_request(self, subtask_index):
        return None


class _SkippingReader(SourceReader):
    def read(self, split):
        yield [f"{split.n}-{i}" for i in range(3)]
        yield []  # nothing available for a moment
        yield [f"{split.n}-{i}" for i in range(3, 5)]


class _OwnSource(Source):
    def create_enumerator(self, parallelism):
        return _OwnEnumerator()

    def create_reader(self):
        return _SkippingReader()


def test_enumerator_without_snapshot_names_what_is_missing():
    coordinator = SourceCoordinator(_OwnSource(), 1)
    with pytest.raises(NotImplementedError, match="_OwnEnumerator does not implement SplitEnumerator.snapshot_state"):
        coordinator.snapshot_state(1)


def test_default_restore_enumerator_refuses_foreign_state():
    with pytest.raises(TypeError, match="_OwnSource.restore_enumerator: the default restores a list"):
        _OwnSource().restore_enumerator(1, {"x": 1})


@pytest.mark.parametrize("skip, expected", [
    (0, [["7-0", "7-1", "7-2"], [], ["7-3", "7-4"]]),
    (2, [["7-2"], [], ["7-3", "7-4"]]),
    (3, [[], ["7-3", "7-4"]]),
    (4, [[], ["7-4"]]),
    (5, [[]]),
])
def test_default_read_from_drops_the_emitted_records(skip, expected):
    assert list(_SkippingReader().read_from(_Split(7), skip)) == expected


def test_versioned_serialization_layout_and_errors():
    data = write_version_and_serialize(PickleSerializer(), ("a", 1))
    assert data[:4] == (1).to_bytes(4, "big") and int.from_bytes(data[4:8], "big") == len(data) - 8
    assert read_version_and_deserialize(PickleSerializer(), data) == ("a", 1)
    with pytest.raises(ValueError, match="header says"):
        read_version_and_deserialize(PickleSerializer(), data[:-1])
    with pytest.raises(ValueError, match="reads version 1, got bytes of version 2"):
        read_version_and_deserialize(PickleSerializer(), (2).to_bytes(4, "big") + data[4:])


def test_replayable_sources_say_so(tmp_path):
    import asyncio

    async def items():
        yield 1

    loop = asyncio.new_event_loop()
    try:
        assert AsyncIteratorSource(items(), loop).supports_replay is False
    finally:
        loop.close()
    (tmp_path / "a.txt").write_text("x\n")
    assert NumberSequenceSource(0, 1).supports_replay is True
    assert CollectionSource([1]).supports_replay is True
    assert FileSource([str(tmp_path)], StreamFormat.text_line_format()).supports_replay is True


def test_rescale_two_readers_into_one(tmp_path):
    expected = _write_files(tmp_path, files=2, lines=30)
    source = FileSource([str(tmp_path)], StreamFormat.text_line_format(), split_size_bytes=64)
    coordinator = SourceCoordinator(source, 2)
    hs = [_harness(source, coordinator, 2, i, batch=4) for i in range(2)]
    _emit(hs[0], 3)
    _emit(hs[1], 1)
    data, snaps = _checkpoint(coordinator, hs, 1)
    before = hs[0].extract_output_values() + hs[1].extract_output_values()
    [share] = redistribute([s.operator_state for s in snaps], 1)
    assert len(share[SPLITS_STATE_NAME][1]) == 2  # both readers' current splits, with positions
    coordinator2 = SourceCoordinator(source, 1)
    coordinator2.reset_to_checkpoint(1, data)
    h = _harness(source, coordinator2, 1, 0, batch=4, restored=OperatorSubtaskState(1, share))
    assert _emit(h)
    emitted = before + h.extract_output_values()
    assert sorted(emitted) == sorted(v for rows in expected.values() for v in rows)
