"""Failover (issue 11, Recovery): a task failure restarts every task of the job when the
restart strategy allows it (RUNNING -> RESTARTING -> RUNNING, new attempts), fails the job as
before when it does not, and fails it with the last cause once the attempts are used up; in
both execution modes.

Before checkpoints exist a restart is from scratch: the sink writes one file per attempt and
subtask, so the last attempt's output is exact and the first attempt's is a prefix of it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rill.common import JobStatus
from rill.common.functions import MapFunction, SinkFunction
from rill.runtime.errors import JobExecutionException

N = 200
TIMEOUT_S = 120


class FailAt(MapFunction):
    """Raises at record ``at`` while fewer than ``times`` marker files exist in ``marker_dir``
    (each failure leaves one), so attempt ``times`` runs through."""

    def __init__(self, marker_dir: str, at: int, times: int):
        self.marker_dir, self.at, self.times = marker_dir, at, times

    def map(self, value):
        if value == self.at:
            done = len(os.listdir(self.marker_dir))
            if done < self.times:
                Path(self.marker_dir, f"failed-{done}").touch()
                raise RuntimeError(f"injected failure {done + 1} at record {value}")
        return value


class FilePerAttempt(SinkFunction):
    """Appends each record to ``<dir>/attempt-<a>-subtask-<i>.txt``, flushed per record."""

    def __init__(self, out_dir: str):
        self.out_dir = out_dir

    def open(self, runtime_context):
        name = (f"attempt-{runtime_context.get_attempt_number()}-"
                f"subtask-{runtime_context.get_index_of_this_subtask()}.txt")
        self.file = open(os.path.join(self.out_dir, name), "a", buffering=1)

    def invoke(self, value, context):
        self.file.write(f"{value}\n")

    def close(self):
        self.file.close()


def outputs(out_dir: Path):
    """attempt -> sorted records written by that attempt's subtasks."""
    out = {}
    for f in out_dir.iterdir():
        attempt = int(f.name.split("-")[1])
        out.setdefault(attempt, []).extend(int(line) for line in f.read_text().split())
    return {a: sorted(v) for a, v in out.items()}


def job(env, tmp_path, strategy, times, at=N // 2, **options):
    markers, out = tmp_path / "markers", tmp_path / "out"
    markers.mkdir()
    out.mkdir()
    conf = env.get_configuration()
    conf.set_string("restart-strategy.type", strategy)
    for key, value in options.items():
        conf.set_string(key, value)
    env.set_parallelism(2)
    (env.from_collection(list(range(N))).map(FailAt(str(markers), at, times))
        .key_by(lambda x: x % 4).map(lambda x: x).add_sink(FilePerAttempt(str(out))))
    return markers, out


def test_a_task_failure_restarts_the_job_and_the_last_attempt_writes_everything(env, tmp_path):
    markers, out = job(env, tmp_path, "fixed-delay", times=1, **{
        "restart-strategy.fixed-delay.attempts": "1", "restart-strategy.fixed-delay.delay": "10 ms"})
    client = env.execute_async("restarts once")
    client.get_job_execution_result().result(timeout=TIMEOUT_S)
    assert client.get_job_status() is JobStatus.FINISHED
    assert len(os.listdir(markers)) == 1
    written = outputs(out)
    assert written[1] == list(range(N))                       # the restarted attempt: exact
    assert set(written) <= {0, 1}
    assert set(written.get(0, [])) <= set(range(N)) and N // 2 not in written.get(0, [])


def test_without_restarts_the_job_fails_with_the_cause(env, tmp_path):
    markers, out = job(env, tmp_path, "none", times=1)
    client = env.execute_async("no restart")
    with pytest.raises(JobExecutionException) as e:
        client.get_job_execution_result().result(timeout=TIMEOUT_S)
    assert str(e.value.__cause__) == f"injected failure 1 at record {N // 2}"
    assert client.get_job_status() is JobStatus.FAILED
    assert set(outputs(out)) <= {0}


def test_attempts_used_up_fail_the_job_with_the_last_cause(env, tmp_path):
    markers, out = job(env, tmp_path, "fixed-delay", times=5, **{
        "restart-strategy.fixed-delay.attempts": "2", "restart-strategy.fixed-delay.delay": "0 ms"})
    client = env.execute_async("too many failures")
    with pytest.raises(JobExecutionException) as e:
        client.get_job_execution_result().result(timeout=TIMEOUT_S)
    # two restarts allowed: the third failure (of attempt 2) fails the job
    assert str(e.value.__cause__) == f"injected failure 3 at record {N // 2}"
    assert len(os.listdir(markers)) == 3
    assert set(outputs(out)) <= {0, 1, 2}
