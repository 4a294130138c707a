"""Savepoints and stop-with-savepoint (FLIP-34) end to end, in both execution modes: the
savepoint is a directory under the target with the job's state, outlives the job and its
checkpoints' retention; a job stopped without drain resumes from its savepoint to exactly the
output of an uninterrupted run (at other parallelisms too); ``drain`` fires the event-time
timers first.

The source is slowed by its own per-record work (``time.sleep`` in ``map``: load, not
synchronization); every wait is on a condition (a completed checkpoint, the job's result) with a
deadline.

The CLI's ``rill savepoint JOB_ID [TARGET_DIR]`` and ``rill stop JOB_ID [--drain]
[--savepoint-path DIR]`` (Flink's ``flink savepoint`` / ``flink stop``) run against the shared
cluster and print Flink's ``Savepoint completed. Path: ...`` line.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from rill.common.functions import KeyedProcessFunction, MapFunction
from rill.common.streamrecord import MAX_TIMESTAMP
from rill.datastream.async_client import AsyncJobClient
from rill.datastream import StreamExecutionEnvironment
from rill.graph.states import JobStatus
from rill.runtime.checkpoint.checkpoint_stats import CheckpointStatsStatus
from rill.state import ValueStateDescriptor
from rill.state.checkpoint.filesystem import resolve_checkpoint_pointer
from rill.state.checkpoint.metadata import SnapshotType

KEYS = 7
N = 1500
TIMEOUT_S = 120


class Slow(MapFunction):
    """Sleeps ``delay_s`` per record; with ``release``, only until that file exists (so a job
    outlives a slow client's start-up for certain, then ends at once once released)."""

    def __init__(self, delay_s: float, release: str = ""):
        self.delay_s = delay_s
        self.release = release

    def map(self, value):
        if self.delay_s and not (self.release and os.path.exists(self.release)):
            time.sleep(self.delay_s)
        return value


class CountAtEnd(KeyedProcessFunction):
    """Counts per key; appends ``key,count`` to ``out`` when the end-of-time timer fires (the
    end of input's or a drain's ``MAX_WATERMARK``)."""

    def __init__(self, out: str):
        self.out = out

    def open(self, ctx):
        self.count = ctx.get_state(ValueStateDescriptor("count"))

    def process_element(self, value, ctx):
        n = self.count.value()
        if n is None:
            n = 0
            ctx.timer_service().register_event_time_timer(MAX_TIMESTAMP)
        self.count.update(n + 1)
        return iter(())

    def on_timer(self, timestamp, ctx):
        with open(self.out, "a") as f:
            f.write(f"{ctx.get_current_key()},{self.count.value()}\n")
        return iter(())


def _job(env, out: Path, delay_s: float, parallelism: int = 2, interval_ms: int = 100, release: str = "",
         **settings):
    conf = env.get_configuration()
    conf.set_integer("rill.source.batch-size", 10)
    conf.set_integer("taskmanager.network.records-per-buffer", 10)
    for key, value in settings.items():
        conf.set_string(key, str(value))
    if interval_ms:
        env.enable_checkpointing(interval_ms)
    (env.from_collection(list(range(N))).uid("numbers").map(Slow(delay_s, release)).uid("slow").name("Slow")
     .key_by(lambda i: i % KEYS).process(CountAtEnd(str(out))).uid("count").name("Count")
     .set_parallelism(parallelism)
     .add_sink(lambda v: None).set_parallelism(parallelism))
    return env


def _counts(out: Path):
    lines = out.read_text().split("\n")[:-1] if out.exists() else []
    return sorted(tuple(int(x) for x in line.split(",")) for line in lines)


FULL = sorted((k, len(range(k, N, KEYS))) for k in range(KEYS))


def _wait_for_a_completed_checkpoint(client) -> None:
    """Every task runs once a checkpoint completed (a savepoint needs them all running)."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        stats = client.get_checkpoint_stats()
        if stats is not None and any(c.status is CheckpointStatsStatus.COMPLETED for c in stats.history):
            return
        assert not client.is_done(), "the job ended before its first checkpoint"
        time.sleep(0.02)
    raise AssertionError("no checkpoint completed")


def test_a_savepoint_of_a_running_job_outlives_it_and_its_checkpoints(env, tmp_path):
    out = tmp_path / "out.csv"
    _job(env, out, 0.002, **{"execution.checkpointing.dir": str(tmp_path / "chk")})
    client = env.execute_async("savepoint")
    _wait_for_a_completed_checkpoint(client)
    path = client.trigger_savepoint(str(tmp_path / "savepoints")).result(TIMEOUT_S)
    assert Path(path).parent == tmp_path / "savepoints"
    assert Path(path).name.startswith(f"savepoint-{client.get_job_id()[:6]}-")
    client.get_job_execution_result().result(TIMEOUT_S)
    assert client.get_job_status() is JobStatus.FINISHED
    assert _counts(out) == FULL  # the job ran on to its end
    metadata = resolve_checkpoint_pointer(path)  # still there: retention never discards a savepoint
    assert metadata.snapshot_type is SnapshotType.SAVEPOINT
    saved = _saved_counts(path)
    assert sorted(saved) == list(range(KEYS)) and 0 < sum(saved.values()) < N


def _saved_counts(path: str):
    metadata = resolve_checkpoint_pointer(path)
    count = next(op for op in metadata.operator_states.values() if op.name == "Count")
    saved = {}
    for handle in count.subtask_states.values():
        for per_state in handle.read().keyed_state[0].key_groups.values():
            saved.update((key, value) for key, _ns, value in per_state.get("count", ()))
    return saved


def _stop_halfway(env, out: Path, tmp_path: Path) -> str:
    _job(env, out, 0.002)
    client = env.execute_async("stop")
    _wait_for_a_completed_checkpoint(client)
    path = client.stop_with_savepoint(False, str(tmp_path / "savepoints")).result(TIMEOUT_S)
    assert client.get_job_status() is JobStatus.FINISHED
    return path


def test_stop_without_drain_ends_the_job_without_ending_its_input(env, tmp_path):
    out = tmp_path / "out.csv"
    path = _stop_halfway(env, out, tmp_path)
    assert not out.exists(), "without drain no MAX_WATERMARK: the end-of-time timers did not fire"
    saved = _saved_counts(path)
    assert sorted(saved) == list(range(KEYS)) and 0 < sum(saved.values()) < N


@pytest.mark.parametrize("parallelism", [1, 3])
def test_stop_without_drain_then_resume_gives_the_output_of_an_uninterrupted_run(env, tmp_path, parallelism):
    out = tmp_path / "out.csv"
    path = _stop_halfway(env, out, tmp_path)
    resumed = _job(StreamExecutionEnvironment.get_execution_environment(), out, 0, parallelism, interval_ms=0,
                   **{"execution.state-recovery.path": path})
    resumed.execute("resumed")
    assert _counts(out) == FULL


def test_stop_with_drain_fires_the_event_time_timers_before_the_savepoint(env, tmp_path):
    out = tmp_path / "out.csv"
    _job(env, out, 0.002)
    client = env.execute_async("drain")
    _wait_for_a_completed_checkpoint(client)
    path = client.stop_with_savepoint(True, str(tmp_path / "savepoints")).result(TIMEOUT_S)
    assert client.get_job_status() is JobStatus.FINISHED
    counts = _counts(out)
    assert [k for k, _ in counts] == list(range(KEYS))
    assert 0 < sum(c for _, c in counts) < N, "stopped halfway"
    assert resolve_checkpoint_pointer(path).snapshot_type is SnapshotType.SAVEPOINT


async def test_the_async_client_takes_a_savepoint_and_stops_with_one(env, tmp_path):
    out = tmp_path / "out.csv"
    _job(env, out, 0.002)
    client = await AsyncJobClient.execute(env, "async savepoints")
    await asyncio.get_running_loop().run_in_executor(None, _wait_for_a_completed_checkpoint, client.job_client)
    taken = await client.trigger_savepoint(str(tmp_path / "sp"))
    stopped = await client.stop_with_savepoint(True, str(tmp_path / "stop"))
    assert Path(taken).parent == tmp_path / "sp" and Path(stopped).parent == tmp_path / "stop"
    assert await client.get_job_status() is JobStatus.FINISHED
    assert sum(_saved_counts(taken).values()) <= sum(_saved_counts(stopped).values()) == sum(c for _, c in _counts(out))


def test_without_a_target_directory_the_savepoint_fails_and_the_job_runs_on(env, tmp_path):
    out = tmp_path / "out.csv"
    _job(env, out, 0.001)
    client = env.execute_async("no directory")
    _wait_for_a_completed_checkpoint(client)
    with pytest.raises(Exception, match="No savepoint directory"):
        client.stop_with_savepoint(False).result(TIMEOUT_S)
    client.get_job_execution_result().result(TIMEOUT_S)
    assert _counts(out) == FULL


def test_a_job_without_checkpointing_refuses_savepoints(env, tmp_path):
    out = tmp_path / "out.csv"
    _job(env, out, 0.001, interval_ms=0)
    client = env.execute_async("no checkpointing")
    with pytest.raises(Exception, match="Savepoints of a job without checkpointing are not built yet"):
        client.trigger_savepoint(str(tmp_path)).result(TIMEOUT_S)
    client.get_job_execution_result().result(TIMEOUT_S)
    assert _counts(out) == FULL


# -- the CLI (cluster) ---------------------------------------------------------------------------
def _running_job(shared_cluster, tmp_path, delay_s=0.02):
    """A job that runs (up to N x ``delay_s`` = 30 s, longer than a ``rill`` command takes to
    start on a loaded machine) until ``_release``."""
    env = shared_cluster.environment(1)
    out = tmp_path / "out.csv"
    client = _job(env, out, delay_s, release=str(tmp_path / "release")).execute_async("cli savepoint")
    _wait_for_a_completed_checkpoint(client)
    return client, out


def _release(tmp_path) -> None:
    (tmp_path / "release").touch()


def _path(stdout: str) -> str:
    prefix = "Savepoint completed. Path: "
    assert stdout.startswith(prefix) and stdout.endswith("\n"), stdout
    return stdout[len(prefix):-1]


def test_rill_savepoint_prints_the_path_and_the_job_runs_on(shared_cluster, tmp_path):
    client, out = _running_job(shared_cluster, tmp_path)
    proc = shared_cluster.cli("savepoint", client.get_job_id(), str(tmp_path / "sp"), "--port",
                              str(shared_cluster.port))
    _release(tmp_path)
    path = _path(proc.stdout)
    assert Path(path).parent == tmp_path / "sp"
    assert resolve_checkpoint_pointer(path).snapshot_type is SnapshotType.SAVEPOINT
    client.get_job_execution_result().result(TIMEOUT_S)
    assert _counts(out) == FULL


def test_rill_stop_with_drain_ends_the_job_finished(shared_cluster, tmp_path):
    client, out = _running_job(shared_cluster, tmp_path)
    proc = shared_cluster.cli("stop", "--drain", "--savepoint-path", str(tmp_path / "sp"), client.get_job_id(),
                              "--port", str(shared_cluster.port))
    assert Path(_path(proc.stdout)).parent == tmp_path / "sp"
    client.get_job_execution_result().result(TIMEOUT_S)
    assert client.get_job_status() is JobStatus.FINISHED
    assert 0 < sum(c for _, c in _counts(out)) < sum(c for _, c in FULL)  # drained halfway


def test_rill_stop_without_a_directory_fails_and_the_job_runs_on(shared_cluster, tmp_path):
    client, out = _running_job(shared_cluster, tmp_path)
    proc = shared_cluster.cli("stop", client.get_job_id(), "--port", str(shared_cluster.port), check=False)
    _release(tmp_path)
    assert proc.returncode == 1
    assert "Stop-with-savepoint failed" in proc.stderr and "No savepoint directory" in proc.stderr
    client.get_job_execution_result().result(TIMEOUT_S)
    assert _counts(out) == FULL
