"""Savepoints after tasks finished (FLIP-147), in both execution modes: a bounded source ("Short",
3 records) ends at once while a second, slow source keeps the job running; a savepoint
(``JobClient.trigger_savepoint``, ``stop_with_savepoint`` and ``rill stop`` on the cluster) is
taken with the short source finished, records it fully finished in the metadata, and a job
resumed from it does not run that source again: every record is counted exactly once.

The long source is slowed by its own per-record work (``time.sleep`` in ``map``: load, not
synchronization); every wait is on a condition (a completed checkpoint without the short
source, the job's result) with a deadline.
"""

from __future__ import annotations

import time
from pathlib import Path

from rill.datastream import StreamExecutionEnvironment
from rill.graph.states import JobStatus
from rill.runtime.checkpoint.checkpoint_stats import CheckpointStatsStatus
from rill.state.checkpoint.filesystem import resolve_checkpoint_pointer
from rill.state.checkpoint.metadata import SnapshotType
from test_savepoints import CountAtEnd, Slow

TIMEOUT_S = 120
SHORT = 3
LONG = 1500
SHORT_TASK = "Source: Short"


def _job(env, out: Path, delay_s: float, interval_ms: int = 100, **settings):
    conf = env.get_configuration()
    conf.set_integer("rill.source.batch-size", 10)
    conf.set_integer("taskmanager.network.records-per-buffer", 10)
    for key, value in settings.items():
        conf.set_string(key, str(value))
    if interval_ms:
        env.enable_checkpointing(interval_ms)
    short = env.from_collection([f"short-{i}" for i in range(SHORT)]).uid("short").name("Short")
    long = (env.from_collection([f"long-{i}" for i in range(LONG)]).uid("long").name("Long")
            .map(Slow(delay_s)).uid("slow").name("Slow"))
    (short.union(long).key_by(lambda v: v.split("-")[0]).process(CountAtEnd(str(out))).uid("count").name("Count")
     .add_sink(lambda v: None))
    return env


def _counts(out: Path):
    return sorted(out.read_text().splitlines()) if out.exists() else []


FULL = [f"long,{LONG}", f"short,{SHORT}"]


def _wait_until_the_short_source_finished(client) -> None:
    """A checkpoint completed without the short source: it finished (FLIP-147) and the long
    one still runs."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        stats = client.get_checkpoint_stats()
        if stats is not None and any(c.status is CheckpointStatsStatus.COMPLETED
                                     and SHORT_TASK not in {s.task_name for s in c.subtask_stats}
                                     for c in stats.history):
            return
        assert not client.is_done(), "the job ended before the short source was left out of a checkpoint"
        time.sleep(0.02)
    raise AssertionError("no checkpoint completed after the short source finished")


def _assert_short_fully_finished(path: str) -> None:
    metadata = resolve_checkpoint_pointer(path)
    assert metadata.snapshot_type is SnapshotType.SAVEPOINT
    by_uid = {op.uid: op for op in metadata.operator_states.values()}
    assert by_uid["short"].fully_finished and not by_uid["short"].subtask_states
    assert not by_uid["long"].fully_finished and not by_uid["count"].fully_finished
    saved = {}
    for handle in by_uid["count"].subtask_states.values():
        for per_state in handle.read().keyed_state[0].key_groups.values():
            saved.update((key, value) for key, _ns, value in per_state.get("count", ()))
    assert saved["short"] == SHORT and 0 < saved["long"] < LONG  # taken halfway through the long input


def _resume(out: Path, path: str) -> None:
    resumed = _job(StreamExecutionEnvironment.get_execution_environment(), out, 0, interval_ms=0,
                   **{"execution.state-recovery.path": path})
    resumed.set_parallelism(1)
    resumed.execute("resumed")


def test_stop_with_savepoint_after_a_source_finished_then_resume_counts_every_record_once(env, tmp_path):
    """Stopped without drain once the short source finished: no timer fired (no output); the
    savepoint holds the short source fully finished; the resumed job does not run it again, so
    ``short`` stays at 3 (not 6) and ``long`` ends at exactly 1500."""
    out = tmp_path / "out.csv"
    client = _job(env, out, 0.003).execute_async("stop after a source finished")
    _wait_until_the_short_source_finished(client)
    path = client.stop_with_savepoint(False, str(tmp_path / "savepoints")).result(TIMEOUT_S)
    assert client.get_job_status() is JobStatus.FINISHED
    assert _counts(out) == []
    _assert_short_fully_finished(path)
    _resume(out, path)
    assert _counts(out) == FULL


def test_a_savepoint_after_a_source_finished_and_the_job_runs_on(env, tmp_path):
    """``trigger_savepoint`` with the short source finished completes and the job runs on to its
    exact end; a job resumed from the savepoint (into another output) ends with the same
    counts."""
    out, resumed_out = tmp_path / "out.csv", tmp_path / "resumed.csv"
    client = _job(env, out, 0.003).execute_async("savepoint after a source finished")
    _wait_until_the_short_source_finished(client)
    path = client.trigger_savepoint(str(tmp_path / "savepoints")).result(TIMEOUT_S)
    client.get_job_execution_result().result(TIMEOUT_S)
    assert client.get_job_status() is JobStatus.FINISHED
    assert _counts(out) == FULL
    _assert_short_fully_finished(path)
    _resume(resumed_out, path)
    assert _counts(resumed_out) == FULL


def test_without_checkpoints_after_tasks_finish_the_savepoint_is_refused_naming_the_task(env, tmp_path):
    """``checkpoints-after-tasks-finish: false``: as before FLIP-147, a savepoint once a task
    finished fails with NOT_ALL_REQUIRED_TASKS_RUNNING naming it; the job runs on."""
    out = tmp_path / "out.csv"
    client = _job(env, out, 0.002, **{"execution.checkpointing.checkpoints-after-tasks-finish": "false"}
                  ).execute_async("no savepoint after a source finished")
    deadline = time.monotonic() + TIMEOUT_S
    while True:  # the short source ends within ms; retry while it has not yet
        try:
            client.trigger_savepoint(str(tmp_path / "savepoints")).result(TIMEOUT_S)
        except Exception as e:  # noqa: BLE001 - the refusal is what the test waits for
            message = str(e)
            if "checkpoints-after-tasks-finish is off" in message:
                break
        assert time.monotonic() < deadline and not client.is_done(), "no savepoint was refused"
        time.sleep(0.02)
    assert (f"Not all required tasks are currently running. ({SHORT_TASK} (1/1) finished and "
            "execution.checkpointing.checkpoints-after-tasks-finish is off)") in message
    client.get_job_execution_result().result(TIMEOUT_S)
    assert _counts(out) == FULL


def test_rill_stop_after_a_source_finished_on_the_cluster(shared_cluster, tmp_path):
    """The CLI's ``rill stop --savepoint-path DIR JOB_ID`` on the shared cluster with the short
    source finished prints the savepoint; resuming from it counts every record once."""
    out = tmp_path / "out.csv"
    env = shared_cluster.environment(1)
    # 30 s of long input: the `rill stop` process starts well before its end, on a loaded box too
    client = _job(env, out, 0.02).execute_async("rill stop after a source finished")
    _wait_until_the_short_source_finished(client)
    proc = shared_cluster.cli("stop", "--savepoint-path", str(tmp_path / "sp"), client.get_job_id(),
                              "--port", str(shared_cluster.port))
    prefix = "Savepoint completed. Path: "
    assert proc.stdout.startswith(prefix), proc.stdout
    path = proc.stdout[len(prefix):].strip()
    client.get_job_execution_result().result(TIMEOUT_S)
    assert client.get_job_status() is JobStatus.FINISHED and _counts(out) == []
    _assert_short_fully_finished(path)
    _resume(out, path)
    assert _counts(out) == FULL
