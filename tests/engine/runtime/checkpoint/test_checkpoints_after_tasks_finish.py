"""Checkpoints after tasks finish (FLIP-147), in both execution modes: a source that ends early
no longer stops checkpoints (its consumer is triggered directly, the finished task is left out
of the checkpoint), every task ends only after its final checkpoint completed, an exactly-once
FileSink commits its last files through that final checkpoint, and a job restored from a
checkpoint taken after a source finished does not run that source again.

Sources are slowed by their own per-record work (``time.sleep`` in ``map``: load, not
synchronization); every wait on a job is a wait for its result with a deadline.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from rill.common.functions import CheckpointListener, MapFunction
from rill.common.serialization import Encoder
from rill.datastream.connectors import FileSink
from rill.datastream.connectors.file_system import BucketAssigner, OutputFileConfig, RollingPolicy
from rill.runtime.checkpoint.checkpoint_stats import CheckpointStatsStatus

RESULT_TIMEOUT_S = 120
SHORT = [f"short-{i}" for i in range(3)]


def _configure(env, interval_ms=100, **settings):
    conf = env.get_configuration()
    conf.set_integer("rill.source.batch-size", 5)
    conf.set_integer("taskmanager.network.records-per-buffer", 5)
    for key, value in settings.items():
        conf.set_string(key, str(value))
    env.enable_checkpointing(interval_ms)
    return env


class Slow(MapFunction):
    def __init__(self, delay_s: float):
        self.delay_s = delay_s

    def map(self, value):
        time.sleep(self.delay_s)
        return value


class NotifyLog(MapFunction, CheckpointListener):
    """Passes records on; at each ``notify_checkpoint_complete`` (heard before the chained sink
    after it commits) writes ``<id> <visible part files>`` to ``log``."""

    def __init__(self, log: str, out_dir: str):
        self.log, self.out_dir = log, out_dir

    def map(self, value):
        return value

    def notify_checkpoint_complete(self, checkpoint_id):
        visible = sorted(p.name for p in Path(self.out_dir).glob("part-*"))
        with open(self.log, "a") as f:
            f.write(f"{checkpoint_id} {','.join(visible)}\n")


class FailOnceAfterCheckpoint(MapFunction, CheckpointListener):
    """Raises at the first record after it heard that checkpoint ``after`` completed, once per
    job (a marker file in ``marker_dir`` remembers it across attempts and processes)."""

    def __init__(self, marker_dir: str, after: int):
        self.marker_dir, self.after = marker_dir, after
        self.heard = 0

    def notify_checkpoint_complete(self, checkpoint_id):
        self.heard = max(self.heard, checkpoint_id)

    def map(self, value):
        if self.heard >= self.after and not os.listdir(self.marker_dir):
            Path(self.marker_dir, "failed").touch()
            raise RuntimeError(f"injected failure after checkpoint {self.heard}")
        return value


def _file_sink(out_dir: str, rolling=None) -> FileSink:
    """A row-format sink into ``out_dir``, rolling on every checkpoint unless ``rolling``."""
    return (FileSink.for_row_format(out_dir, Encoder.simple_string_encoder())
            .with_output_file_config(OutputFileConfig("part", ".txt"))
            .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
            .with_rolling_policy(rolling or RollingPolicy.on_checkpoint_rolling_policy())
            .build())


def _committed(out_dir) -> list:
    return sorted(line for p in Path(out_dir).glob("part-*") for line in p.read_text().splitlines())


def test_checkpoints_go_on_after_a_short_source_finished(env):
    """Three records from one source, 60 slow ones from the other, unioned: the short source
    ends at once and takes checkpoint 1 as its final one; from checkpoint 2 on it is finished,
    no longer triggered or waited for, and the long source's chain keeps checkpointing; every
    checkpoint completes, the last one is every remaining task's final checkpoint."""
    _configure(env)
    short = env.from_collection(SHORT).name("Short")
    long = env.from_collection([f"long-{i}" for i in range(60)]).name("Long").map(Slow(0.02)).name("SlowLong")
    short.union(long).map(lambda v: v).name("Union").add_sink(lambda v: None)
    client = env.execute_async("short and long")
    client.get_job_execution_result().result(RESULT_TIMEOUT_S)
    stats = client.get_checkpoint_stats()
    counts = stats.counts
    total = counts.number_of_total_checkpoints
    assert total >= 4
    assert (counts.number_of_completed_checkpoints, counts.number_of_failed_checkpoints,
            counts.number_of_in_progress_checkpoints) == (total, 0, 0)
    history = sorted(stats.history, key=lambda c: c.checkpoint_id)
    assert [c.checkpoint_id for c in history] == list(range(total - len(history) + 1, total + 1))
    assert all(c.status is CheckpointStatsStatus.COMPLETED for c in history)
    everyone = [("Source: Long -> SlowLong", 0), ("Source: Short", 0), ("Union -> Sink: Unnamed", 0)]
    without_short = [("Source: Long -> SlowLong", 0), ("Union -> Sink: Unnamed", 0)]
    for c in history:
        tasks = sorted((s.task_name, s.subtask_index) for s in c.subtask_stats)
        assert c.number_of_subtasks == c.number_of_acknowledged_subtasks == len(tasks)
        # the short source takes part in checkpoint 1 only (its final one)
        assert tasks == (everyone if c.checkpoint_id == 1 else without_short), c.checkpoint_id


def test_without_checkpoints_after_tasks_finish_none_is_triggered_once_a_task_finished(env, tmp_path):
    """``checkpoints-after-tasks-finish: false``: the short source ends at once without waiting;
    every checkpoint that completes has all three tasks (none is triggered once it finished), and
    the FileSink commits at the end of input (no final checkpoint comes)."""
    out = tmp_path / "out"
    out.mkdir()
    _configure(env, **{"execution.checkpointing.checkpoints-after-tasks-finish": "false"})
    long_records = [f"long-{i:03d}" for i in range(40)]
    short = env.from_collection(SHORT).name("Short")
    long = env.from_collection(long_records).name("Long").map(Slow(0.02)).name("SlowLong")
    short.union(long).map(lambda v: v).name("Union").sink_to(_file_sink(str(out), RollingPolicy.default_rolling_policy()))
    client = env.execute_async("no checkpoints after tasks finish")
    client.get_job_execution_result().result(RESULT_TIMEOUT_S)
    stats = client.get_checkpoint_stats()
    # the short source finished within ms of its start, the job ran ~0.8 s at 100 ms intervals:
    # at most the first trigger found it running (with the option on, every interval triggers)
    assert stats.counts.number_of_total_checkpoints <= 1
    for c in stats.history:
        if c.status is CheckpointStatsStatus.COMPLETED:
            assert sorted(s.task_name for s in c.subtask_stats) == [
                "Source: Long -> SlowLong", "Source: Short", "Union -> Sink: Unnamed"]
    assert _committed(out) == sorted(SHORT + long_records)


def test_file_sink_commits_its_last_files_through_the_final_checkpoint(env, tmp_path):
    """The default rolling policy keeps the one part in progress across checkpoints; the end of
    input closes it to pending without committing it, and the final checkpoint's notification
    commits it. NotifyLog's notification of each checkpoint runs before the chained sink's:
    at every one, the final checkpoint's included, nothing is visible yet."""
    out, log = tmp_path / "out", tmp_path / "notifications"
    out.mkdir()
    _configure(env)
    records = [f"r{i:03d}" for i in range(40)]
    (env.from_collection(records).map(Slow(0.01)).name("Slow").map(NotifyLog(str(log), str(out))).name("Log")
     .sink_to(_file_sink(str(out), RollingPolicy.default_rolling_policy())))
    client = env.execute_async("file sink final checkpoint")
    client.get_job_execution_result().result(RESULT_TIMEOUT_S)
    stats = client.get_checkpoint_stats()
    final = stats.latest_completed.checkpoint_id
    assert stats.counts.number_of_failed_checkpoints == 0 and final == stats.counts.number_of_total_checkpoints
    assert final >= 2
    # every checkpoint was heard, in order, the final one last, with nothing committed before it
    assert log.read_text().splitlines() == [f"{cid} " for cid in range(1, final + 1)]
    assert _committed(out) == records and len(list(out.glob("part-*"))) == 1
    assert not any(p.name.startswith(".") for p in out.iterdir())  # nothing left pending


def test_restore_after_a_source_finished_does_not_run_it_again(env, tmp_path):
    """The short source finished with checkpoint 1; a failure after checkpoint 3 restores the
    job from a checkpoint in which it is fully finished: it is deployed finished and its three
    records are committed once; the long source resumes from its position (exact output)."""
    out, markers = tmp_path / "out", tmp_path / "markers"
    out.mkdir()
    markers.mkdir()
    _configure(env, **{"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": 1,
                       "restart-strategy.fixed-delay.delay": "10 ms"})
    long_records = [f"long-{i:03d}" for i in range(80)]
    short = env.from_collection(SHORT).name("Short")
    long = (env.from_collection(long_records).name("Long").map(Slow(0.01)).name("SlowLong")
            .map(FailOnceAfterCheckpoint(str(markers), 3)).name("Fail"))
    short.union(long).map(lambda v: v).name("Union").sink_to(_file_sink(str(out)))
    client = env.execute_async("restore finished source")
    client.get_job_execution_result().result(RESULT_TIMEOUT_S)
    assert os.listdir(markers) == ["failed"]  # the failure happened, once
    assert _committed(out) == sorted(SHORT + long_records)


# -- externalized checkpoint retention -----------------------------------------------------------
RETENTIONS = ("NO_EXTERNALIZED_CHECKPOINTS", "DELETE_ON_CANCELLATION", "RETAIN_ON_CANCELLATION")


def _retention_job(env, directory, retention, records, fail_marker_dir=None):
    _configure(env, **{"execution.checkpointing.dir": str(directory),
                       "execution.checkpointing.externalized-checkpoint-retention": retention,
                       "restart-strategy.type": "none"})
    stream = env.from_collection(records).map(Slow(0.01)).name("Slow")
    if fail_marker_dir is not None:
        stream = stream.map(FailOnceAfterCheckpoint(str(fail_marker_dir), 1)).name("Fail")
    stream.add_sink(lambda v: None)
    return env.execute_async(f"retention {retention}")


def _checkpoint_dirs(directory, client):
    job_dir = Path(directory) / client.get_job_id()
    return sorted(p.name for p in job_dir.iterdir() if p.name.startswith("chk-")) if job_dir.is_dir() else []


def _wait_for_completed_checkpoint(client) -> None:
    deadline = time.monotonic() + RESULT_TIMEOUT_S
    while time.monotonic() < deadline:
        stats = client.get_checkpoint_stats()
        if stats is not None and stats.latest_completed is not None:
            return
        assert not client.is_done(), "the job ended before its first checkpoint"
        time.sleep(0.02)
    raise AssertionError("no checkpoint completed in time")


def _expect(directory, client, kept: bool) -> None:
    latest = client.get_checkpoint_stats().latest_completed.checkpoint_id
    assert _checkpoint_dirs(directory, client) == ([f"chk-{latest}"] if kept else [])


@pytest.mark.parametrize("retention", RETENTIONS)
def test_retention_on_cancel(env, tmp_path, retention):
    """Cancelled: only RETAIN_ON_CANCELLATION keeps the latest checkpoint's directory."""
    directory = tmp_path / "checkpoints"
    client = _retention_job(env, directory, retention, list(range(10_000)))
    _wait_for_completed_checkpoint(client)
    client.cancel().result(RESULT_TIMEOUT_S)
    assert client.wait(RESULT_TIMEOUT_S).name == "CANCELED"
    _expect(directory, client, kept=retention == "RETAIN_ON_CANCELLATION")


@pytest.mark.parametrize("retention", RETENTIONS)
def test_retention_on_terminal_failure(env, tmp_path, retention):
    """Failed for good (no restart): both externalized settings keep the latest checkpoint's
    directory, NO_EXTERNALIZED_CHECKPOINTS deletes it (Flink's CHECKPOINT_NEVER_RETAINED)."""
    directory, markers = tmp_path / "checkpoints", tmp_path / "markers"
    markers.mkdir()
    client = _retention_job(env, directory, retention, list(range(10_000)), markers)
    assert client.wait(RESULT_TIMEOUT_S).name == "FAILED"
    assert os.listdir(markers) == ["failed"]
    _expect(directory, client, kept=retention != "NO_EXTERNALIZED_CHECKPOINTS")


@pytest.mark.parametrize("retention", RETENTIONS)
def test_retention_on_finish(env, tmp_path, retention):
    """Finished: the checkpoints are discarded unless retained (RETAIN_ON_CANCELLATION keeps
    the final one)."""
    directory = tmp_path / "checkpoints"
    client = _retention_job(env, directory, retention, list(range(20)))
    assert client.wait(RESULT_TIMEOUT_S).name == "FINISHED"
    _expect(directory, client, kept=retention == "RETAIN_ON_CANCELLATION")
