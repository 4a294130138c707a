"""The exactly-once FileSink through the operator test harness and real files: hidden
in-progress and pending files, commit on notify_checkpoint_complete, nothing on abort, a crash
between snapshot and notify followed by a restore (pending committed once, the failed attempt's
files deleted, in-progress files truncated to the checkpoint), rescaling 2 -> 1, and the end of
input with and without checkpointing and a final checkpoint (FLIP-147)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from rill.common.serialization import Encoder
from rill.datastream.connectors.file_system import BucketAssigner, FileSink, OutputFileConfig, RollingPolicy
from rill.operators.file_sink import COMMITTER_STATE_NAME, WRITER_STATE_NAME, FileSinkOperator
from rill.operators.testing import OneInputStreamOperatorTestHarness
from rill.state import redistribute
from rill.state.checkpoint.operator_subtask_state import OperatorSubtaskState


def _sink(tmp_path, rolling=None):
    """A row-format sink into ``tmp_path``, rolling on every checkpoint unless ``rolling``."""
    return (FileSink.for_row_format(str(tmp_path), Encoder.simple_string_encoder())
            .with_output_file_config(OutputFileConfig("part", ".txt"))
            .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
            .with_rolling_policy(rolling or RollingPolicy.on_checkpoint_rolling_policy())
            .build())


def _harness(sink, checkpointing=True, parallelism=1, subtask=0, restored=None, attempt=0, final_checkpoint=None):
    """``final_checkpoint``: whether the runtime takes one after the end of input (default: with
    checkpointing, as the runtime with ``checkpoints-after-tasks-finish`` on)."""
    h = OneInputStreamOperatorTestHarness(FileSinkOperator(sink), parallelism=parallelism, subtask_index=subtask,
                                          attempt_number=attempt)
    h.context.checkpointing_enabled = checkpointing
    final = checkpointing if final_checkpoint is None else final_checkpoint
    h.context.final_checkpoint_expected = lambda: final
    h.initialize_state(restored)
    h.open()
    return h


def _visible(tmp_path):
    """What a reader of the output sees: ``part-*`` files (a glob skips hidden files)."""
    return sorted(p.name for p in Path(tmp_path).glob("part-*"))


def _hidden(tmp_path):
    return sorted(p.name for p in Path(tmp_path).iterdir() if p.name.startswith("."))


def _lines(tmp_path):
    """Every committed line, files in part-counter order per subtask."""
    def order(name):
        m = re.fullmatch(r"part-[0-9a-f]+-(\d+)-(\d+)\.txt", name)
        return int(m[1]), int(m[2])
    return [line for name in sorted(_visible(tmp_path), key=order)
            for line in (Path(tmp_path) / name).read_text().splitlines()]


def _finish(h, checkpoint_id):
    """End of input, then the final checkpoint completes (FLIP-147)."""
    h.finish()
    h.snapshot(checkpoint_id)
    h.operator.notify_checkpoint_complete(checkpoint_id)
    h.close()


def _crash(h):
    """The task fails: close without finish (no commit)."""
    h._close_without_finish()


def test_commit_on_complete_nothing_on_abort(tmp_path):
    sink = _sink(tmp_path)
    h = _harness(sink)
    h.process_batch(["a1", "a2"])
    assert _visible(tmp_path) == [] and len(_hidden(tmp_path)) == 1
    h.snapshot(1)
    [pending] = _hidden(tmp_path)
    assert re.fullmatch(rf"\.part-{sink.run_id}-0-0\.txt\.inprogress\.[0-9a-f-]{{36}}", pending)
    assert _visible(tmp_path) == []
    h.operator.notify_checkpoint_complete(1)
    assert _visible(tmp_path) == [f"part-{sink.run_id}-0-0.txt"] and _hidden(tmp_path) == []
    h.process_batch(["b"])
    h.snapshot(2)
    h.operator.notify_checkpoint_aborted(2)
    assert _lines(tmp_path) == ["a1", "a2"]  # left pending
    h.process_batch(["c"])
    h.snapshot(3)
    h.operator.notify_checkpoint_complete(3)  # commits checkpoint 2's file too
    assert _lines(tmp_path) == ["a1", "a2", "b", "c"] and _hidden(tmp_path) == []
    h.close()  # end of input with checkpointing: nothing left to commit, nothing committed twice
    assert _lines(tmp_path) == ["a1", "a2", "b", "c"]


@pytest.mark.parametrize("rolls", [True, False])
def test_files_are_closed_or_persisted_before_the_barrier(tmp_path, rolls):
    """Flink's SinkWriterOperator closes (or persists) its parts in prepareSnapshotPreBarrier:
    the blocking I/O is done before the barrier, and snapshot_state records what it left."""
    sink = _sink(tmp_path, None if rolls else RollingPolicy.default_rolling_policy(part_size=1 << 20))
    h = _harness(sink)
    h.process_batch(["a1", "a2"])
    [part] = _hidden(tmp_path)
    assert os.path.getsize(tmp_path / part) == 0  # still in the writer's buffer
    h.operator.prepare_snapshot_pre_barrier(1)
    assert os.path.getsize(tmp_path / part) == len("a1\na2\n")  # closed (rolled) or persisted
    snap = h.operator.snapshot_state(1, 0)
    [(subtask, counter, in_progress)] = snap[WRITER_STATE_NAME][1]
    [committables] = [snap[COMMITTER_STATE_NAME][1]]
    if rolls:
        assert (counter, in_progress) == (1, ())
        assert committables == [(0, 1, part, f"part-{sink.run_id}-0-0.txt")]
    else:
        assert (counter, in_progress) == (1, (("", part, f"part-{sink.run_id}-0-0.txt", 6),))
        assert committables == []
    h.operator.notify_checkpoint_complete(1)
    assert _lines(tmp_path) == (["a1", "a2"] if rolls else [])
    h.close()


@pytest.mark.parametrize("notified_before_crash", [False, True])
def test_crash_between_snapshot_and_notify_then_restore(tmp_path, notified_before_crash):
    sink = _sink(tmp_path)
    h = _harness(sink)
    h.process_batch(["a1", "a2"])
    h.snapshot(1)
    h.process_batch(["a3"])
    snap = h.snapshot(2)
    if notified_before_crash:
        h.operator.notify_checkpoint_complete(2)
    h.process_batch(["lost1", "lost2"])  # after checkpoint 2: replayed by the source after restore
    _crash(h)
    assert ("a1" in _lines(tmp_path)) is notified_before_crash
    h2 = _harness(sink, restored=snap)  # the pending files of 1 and 2 are committed, once
    assert _lines(tmp_path) == ["a1", "a2", "a3"]
    assert _hidden(tmp_path) == []  # the failed attempt's in-progress file is gone
    h2.process_batch(["lost1", "lost2", "d"])
    _finish(h2, 3)
    assert _lines(tmp_path) == ["a1", "a2", "a3", "lost1", "lost2", "d"]
    assert len(set(_visible(tmp_path))) == len(_visible(tmp_path)) == 3


def test_restore_twice_from_the_same_checkpoint_is_idempotent(tmp_path):
    sink = _sink(tmp_path)
    h = _harness(sink)
    h.process_batch(["a"])
    snap = h.snapshot(1)
    _crash(h)
    h2 = _harness(sink, restored=snap)
    h2.process_batch(["x"])
    _crash(h2)
    h3 = _harness(sink, restored=snap)
    assert _lines(tmp_path) == ["a"] and _hidden(tmp_path) == []
    h3.process_batch(["b"])
    _finish(h3, 2)
    assert _lines(tmp_path) == ["a", "b"]


def test_in_progress_file_kept_across_a_checkpoint_is_truncated_on_restore(tmp_path):
    sink = _sink(tmp_path, RollingPolicy.default_rolling_policy(part_size=1 << 20))
    h = _harness(sink)
    h.process_batch(["a1", "a2"])
    snap = h.snapshot(1)  # small part: stays in progress, its length (6 bytes) recorded
    [(owner, counter, [(bucket, path, final, length)])] = snap.operator_state[WRITER_STATE_NAME][1]
    assert (owner, counter, bucket, length) == (0, 1, "", 6)
    assert snap.operator_state[COMMITTER_STATE_NAME] == ("UNION", ())
    h.operator.notify_checkpoint_complete(1)
    assert _visible(tmp_path) == []  # still in progress
    h.process_batch(["after"])  # written into the same file after the checkpoint
    _crash(h)
    h2 = _harness(sink, restored=snap)
    assert _lines(tmp_path) == ["a1", "a2"] and _hidden(tmp_path) == []
    h2.process_batch(["after", "b"])
    _finish(h2, 2)
    assert _lines(tmp_path) == ["a1", "a2", "after", "b"]


@pytest.mark.parametrize("part_size, parts, committed", [
    (4, 3, ["aaaa", "bbbb", "cccc"]),  # a new part before every record; all > 4 bytes at the checkpoint
    (7, 2, ["aaaa", "bbbb"]),  # rolled before "cccc" (10 > 7); its 5-byte part stays in progress
])
def test_parts_rolled_by_size_wait_for_the_checkpoint(tmp_path, part_size, parts, committed):
    sink = _sink(tmp_path, RollingPolicy.default_rolling_policy(part_size=part_size))
    h = _harness(sink)
    h.process_batch(["aaaa", "bbbb", "cccc"])  # 5 bytes each
    assert _visible(tmp_path) == [] and len(_hidden(tmp_path)) == parts
    h.snapshot(1)
    h.operator.notify_checkpoint_complete(1)
    assert _lines(tmp_path) == committed
    _finish(h, 2)
    assert _lines(tmp_path) == ["aaaa", "bbbb", "cccc"]


def test_rescale_two_subtasks_into_one(tmp_path):
    sink = _sink(tmp_path)
    hs = [_harness(sink, parallelism=2, subtask=i) for i in range(2)]
    hs[0].process_batch(["s0-a"])
    hs[1].process_batch(["s1-a", "s1-b"])
    snaps = [h.snapshot(1) for h in hs]
    hs[1].process_batch(["s1-lost"])
    for h in hs:
        _crash(h)
    [share] = redistribute([s.operator_state for s in snaps], 1)
    h = _harness(sink, restored=OperatorSubtaskState(1, share))
    assert sorted(_lines(tmp_path)) == ["s0-a", "s1-a", "s1-b"] and _hidden(tmp_path) == []
    h.process_batch(["new"])
    _finish(h, 2)
    assert sorted(_lines(tmp_path)) == ["new", "s0-a", "s1-a", "s1-b"]


def test_restore_of_a_lost_pending_file_names_it(tmp_path):
    sink = _sink(tmp_path)
    h = _harness(sink)
    h.process_batch(["a"])
    snap = h.snapshot(1)
    _crash(h)
    [pending] = _hidden(tmp_path)
    os.remove(tmp_path / pending)
    with pytest.raises(FileNotFoundError, match=rf"cannot commit pending file '.*{re.escape(pending)}': it is gone"):
        _harness(sink, restored=snap)


def test_without_checkpointing_the_end_of_input_commits(tmp_path):
    sink = _sink(tmp_path)
    h = _harness(sink, checkpointing=False)
    h.process_batch(["a", "b"])
    assert _visible(tmp_path) == []
    h.close()
    assert _lines(tmp_path) == ["a", "b"] and _hidden(tmp_path) == []


def test_with_a_final_checkpoint_the_end_of_input_commits_nothing(tmp_path):
    """FLIP-147: the end of input closes the last part to pending; the final checkpoint (2)
    takes it and its notification commits it, with what checkpoint 1 left pending."""
    sink = _sink(tmp_path, RollingPolicy.default_rolling_policy())
    h = _harness(sink)
    h.process_batch(["a", "b"])
    h.snapshot(1)
    h.process_batch(["c"])
    h.end_input()
    h.finish()
    assert _visible(tmp_path) == [] and len(_hidden(tmp_path)) == 1  # one part, persisted at 1, closed now
    snap = h.snapshot(2)
    assert [(cid, final) for _, cid, _, final in snap.operator_state[COMMITTER_STATE_NAME][1]] == [
        (2, f"part-{sink.run_id}-0-0.txt")]
    assert snap.operator_state[WRITER_STATE_NAME][1][0][2] == ()  # nothing in progress
    h.operator.notify_checkpoint_complete(1)  # the part was still open at 1: nothing to commit
    assert _visible(tmp_path) == []
    h.operator.notify_checkpoint_complete(2)
    assert _lines(tmp_path) == ["a", "b", "c"] and _hidden(tmp_path) == []
    h.close()
    assert _lines(tmp_path) == ["a", "b", "c"]


def test_with_checkpointing_but_no_final_checkpoint_the_end_of_input_commits(tmp_path):
    """Checkpointing on but no final checkpoint coming (a stop with a savepoint, or
    checkpoints-after-tasks-finish off): the end of input commits what checkpoint 1 left
    pending and what came after it."""
    sink = _sink(tmp_path)
    h = _harness(sink, final_checkpoint=False)
    h.process_batch(["a", "b"])
    h.snapshot(1)
    h.process_batch(["c"])
    assert _visible(tmp_path) == []
    h.end_input()
    h.finish()
    assert _lines(tmp_path) == ["a", "b", "c"] and _hidden(tmp_path) == []
    h.operator.notify_checkpoint_complete(1)  # late: its files were committed already
    h.close()
    assert _lines(tmp_path) == ["a", "b", "c"] and _hidden(tmp_path) == []


def test_cleanup_leaves_other_sinks_and_unknown_files_alone(tmp_path):
    other = _sink(tmp_path)
    h_other = _harness(other)
    h_other.process_batch(["other"])
    (tmp_path / ".user-file.inprogress.x").write_text("mine")
    sink = _sink(tmp_path)
    h = _harness(sink, restored=OperatorSubtaskState(1, {}))
    assert len(_hidden(tmp_path)) == 2  # the other sink's in-progress file and the user's file
    h.close()
    h_other.close()


def test_bulk_format_needs_on_checkpoint_rolling():
    with pytest.raises(ValueError, match="a bulk format needs a rolling policy that rolls on every checkpoint"):
        FileSink.for_bulk_format("/tmp/x", object()).with_rolling_policy(RollingPolicy.default_rolling_policy()).build()


def test_bucket_directories_restore_and_cleanup(tmp_path):
    sink = (FileSink.for_row_format(str(tmp_path), Encoder.simple_string_encoder())
            .with_bucket_assigner(BucketAssigner.date_time_bucket_assigner("yyyy"))
            .with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy())
            .build())
    h = _harness(sink)
    h.process_batch(["a"])
    snap = h.snapshot(1)
    [(_, _, path, final)] = snap.operator_state[COMMITTER_STATE_NAME][1]
    bucket = os.path.dirname(final)
    assert re.fullmatch(r"\d{4}", bucket) and os.path.dirname(path) == bucket  # relative to the base path
    h.process_batch(["lost"])
    _crash(h)
    h2 = _harness(sink, restored=snap)
    files = sorted(str(p.relative_to(tmp_path)) for p in Path(tmp_path).rglob("*") if p.is_file())
    assert files == [final] and (tmp_path / final).read_text() == "a\n"
    _crash(h2)


def test_a_new_attempt_without_a_checkpoint_deletes_the_failed_attempts_files(tmp_path):
    sink = _sink(tmp_path)
    h = _harness(sink)
    h.process_batch(["a"])
    h.snapshot(1)  # never completed: no restore from it
    h.process_batch(["b"])
    _crash(h)
    assert len(_hidden(tmp_path)) == 2
    h2 = _harness(sink, attempt=1)
    assert _hidden(tmp_path) == [] and _visible(tmp_path) == []
    h2.process_batch(["a", "b"])
    _finish(h2, 2)
    assert _lines(tmp_path) == ["a", "b"]
