"""Failover (issue 11, Recovery): a task failure restarts every task of the job when the
restart strategy allows it (RUNNING -> RESTARTING -> RUNNING, new attempts), fails the job as
before when it does not, and fails it with the last cause once the attempts are used up; in
both execution modes.

Before checkpoints exist a restart is from scratch: the sink writes one file per attempt and
subtask, so the last attempt's output is exact and the first attempt's is a prefix of it."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest

from rill.common import JobStatus
from rill.common.functions import MapFunction
from rill.runtime.errors import JobExecutionException

from _failure_injection import FailAt, FilePerAttempt

N = 200
TIMEOUT_S = 120


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


@pytest.mark.embedded_only("reads the JobMaster's exception history and the REST view of it")
def test_each_failure_is_in_the_exception_history_newest_first(env, tmp_path):
    from rill.runtime.rest.messages import job_exceptions
    from rill.runtime.rest.snapshot import snapshot_job_master

    job(env, tmp_path, "fixed-delay", times=2, **{
        "restart-strategy.fixed-delay.attempts": "3", "restart-strategy.fixed-delay.delay": "0 ms"})
    client = env.execute_async("two failures")
    client.get_job_execution_result().result(timeout=TIMEOUT_S)
    jm = client._jm
    assert jm.failure_handler.number_of_restarts == 2
    history = jm.get_exception_history()
    assert [(str(e.failure.error), e.restarted) for e in history] == [
        (f"injected failure 1 at record {N // 2}", True), (f"injected failure 2 at record {N // 2}", True)]
    rest = job_exceptions(snapshot_job_master(jm))
    assert [e["exceptionName"] for e in rest["exceptionHistory"]["entries"]] == ["RuntimeError", "RuntimeError"]
    assert f"injected failure 2 at record {N // 2}" in rest["root-exception"]
    assert [t.tdd.attempt_number for t in jm.tasks] == [2] * len(jm.tasks)


class HoldFirstAttempt(MapFunction):
    """Attempt 0 writes its process id to ``release + ".pid"`` and stops at record ``at`` until
    ``release`` exists (the test kills that process, or its TaskExecutor, meanwhile); later
    attempts run through."""

    def __init__(self, release: str, at: int):
        self.release, self.at = release, at

    def open(self, runtime_context):
        self.attempt = runtime_context.get_attempt_number()

    def map(self, value):
        if value == self.at and self.attempt == 0:
            Path(self.release + ".tmp").write_text(str(os.getpid()))
            os.replace(self.release + ".tmp", self.release + ".pid")
            deadline = time.monotonic() + 60
            while not os.path.exists(self.release) and time.monotonic() < deadline:
                time.sleep(0.01)
        return value


def held_job(cluster, tmp_path):
    out, release = tmp_path / "out", tmp_path / "release"
    out.mkdir()
    env = cluster.environment(parallelism=2, **{
        "restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "1",
        "restart-strategy.fixed-delay.delay": "0 ms"})
    (env.from_collection(list(range(N))).map(HoldFirstAttempt(str(release), N - 1))
        .key_by(lambda x: x % 4).map(lambda x: x).add_sink(FilePerAttempt(str(out))))
    client = env.execute_async("held")
    pid_file = tmp_path / "release.pid"
    wait_for(pid_file.exists, "the first attempt to hold")
    return client, out, release, int(pid_file.read_text())


def wait_for(condition, what, timeout_s=60):
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_a_killed_task_process_is_recovered(local_cluster, tmp_path):
    c = local_cluster(2, 2)
    client, out, release, holder = held_job(c, tmp_path)
    assert holder in c.task_processes()  # a task process of the cluster: the held task's own
    os.kill(holder, signal.SIGKILL)
    release.touch()
    client.get_job_execution_result().result(timeout=TIMEOUT_S)
    assert outputs(out)[1] == list(range(N))
    c.wait_no_task_processes()


_STATE_CHANGE = re.compile(r"^\S+ \S+ (?P<pid>\d+) \w+ rill\.runtime\.taskmanager\.task (?P<task>.+)#(?P<attempt>\d+) "
                           r"\([0-9a-f]+\) switched from CREATED to DEPLOYING\. \[job (?P<job>[0-9a-f]+)\]$")


def task_pids(log_file: Path, job_id: str) -> dict:
    """attempt number -> {task name with subtask: pid of the process that ran it}, from the
    state changes every task logs into the cluster's log."""
    out: dict = {}
    for line in log_file.read_text(errors="replace").splitlines():
        m = _STATE_CHANGE.match(line)
        if m is not None and m["job"] == job_id:
            out.setdefault(int(m["attempt"]), {})[m["task"]] = int(m["pid"])
    return out


def test_a_restart_reuses_the_processes_of_the_tasks_that_survived(local_cluster, tmp_path):
    """Flink keeps its TaskManagers across attempts; Rill keeps the task processes: after the
    held task's process is killed, every other task of attempt 1 runs in a process of attempt
    0 (on the same TaskExecutor, since the slots stay), and only the killed one is replaced, by
    a process its TaskExecutor had ready in its pool (taskmanager.python.task-process-pool.size,
    1 by default); the pools are full again after the job, and hold nothing else."""
    c = local_cluster(2, 2)
    tes = list(c.task_executor_pids().values())
    client, out, release, holder = held_job(c, tmp_path)
    # the replacement is taken from the pool of the held task's TaskExecutor (refilled since)
    hosting = [te for te in tes if holder in c.task_processes([te])]
    wait_for(lambda: len(c.pooled_processes(hosting[0])) == c.pool_size, "the pool to be refilled")
    pooled = c.pooled_processes(hosting[0])
    os.kill(holder, signal.SIGKILL)
    release.touch()
    client.get_job_execution_result().result(timeout=TIMEOUT_S)
    assert outputs(out)[1] == list(range(N))
    pids = task_pids(c.log_file, client.get_job_id())
    assert sorted(pids) == [0, 1] and sorted(pids[0]) == sorted(pids[1])
    assert holder in pids[0].values() and holder not in pids[1].values()
    new = set(pids[1].values()) - set(pids[0].values())
    assert len(new) == 1, f"attempt 0: {pids[0]}, attempt 1: {pids[1]}"
    assert new <= pooled, f"the new process {new} was not one of the pooled {pooled}"
    assert len(set(pids[1].values())) == len(pids[1])  # still a process per task
    c.wait_no_task_processes(task_executor_pids=tes)
    wait_for(lambda: all(len(c.pooled_processes(te)) == c.pool_size for te in tes), "the pools to be full")


def test_a_killed_task_executor_is_recovered(local_cluster, tmp_path):
    """The held task is released only once the job has seen the loss (RESTARTING, or attempt 1
    already writing). Killing a TaskExecutor does not kill its task processes: they notice on
    their next parent-watch tick (200 ms, ``stream_task_actor.METRICS_INTERVAL``), and the
    ResourceManager reports the loss when it gets ``ChildActorExited``. Released at once (as
    this test did), the held task could finish attempt 0 inside that window on a loaded
    machine: the job then ended FINISHED on attempt 0, no attempt-1 file, ``KeyError: 1``
    (reproduced by stopping the ResourceManager with SIGSTOP around the kill). It was never a
    second restart: a TaskExecutor's loss fails the job's attempt once."""
    c = local_cluster(2, 2)
    client, out, release, holder = held_job(c, tmp_path)
    hosting = [pid for pid in c.task_executor_pids().values() if holder in c.task_processes([pid])]
    assert len(hosting) == 1
    c.remember_processes_silently()
    os.kill(hosting[0], signal.SIGKILL)
    # polled reports (100 ms) can miss a short RESTARTING: attempt 1's sink files show it too
    wait_for(lambda: client.get_job_status() is not JobStatus.RUNNING
             or any(f.name.startswith("attempt-1-") for f in out.iterdir()), "the job to see the lost TaskExecutor")
    release.touch()
    client.get_job_execution_result().result(timeout=TIMEOUT_S)
    assert client.get_job_status() is JobStatus.FINISHED
    written = outputs(out)
    assert written[1] == list(range(N))
    assert set(written) == {0, 1}  # exactly one restart for the one loss


def statuses_until_done(client, timeout_s=TIMEOUT_S):
    """The distinct statuses a client sees, in order (polled; each phase of the tests lasts
    at least 300 ms, reports on the cluster come every 100 ms)."""
    seen = [client.get_job_status()]
    deadline = time.monotonic() + timeout_s
    while not client.is_done():
        assert time.monotonic() < deadline, f"job did not end; statuses {seen}"
        status = client.get_job_status()
        if status is not seen[-1]:
            seen.append(status)
        time.sleep(0.005)
    if client.get_job_status() is not seen[-1]:
        seen.append(client.get_job_status())
    return [s for s in seen if s is not JobStatus.CREATED]


def slow(x):
    time.sleep(0.002)
    return x


def test_the_job_goes_running_restarting_running_finished(env, tmp_path):
    markers, out = tmp_path / "markers", tmp_path / "out"
    markers.mkdir()
    out.mkdir()
    conf = env.get_configuration()
    for key, value in {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "1",
                       "restart-strategy.fixed-delay.delay": "400 ms"}.items():
        conf.set_string(key, value)
    env.from_collection(list(range(N))).map(slow).map(FailAt(str(markers), N // 2, 1)).add_sink(
        FilePerAttempt(str(out)))
    client = env.execute_async("observed restart")
    assert statuses_until_done(client) == [JobStatus.RUNNING, JobStatus.RESTARTING, JobStatus.RUNNING,
                                           JobStatus.FINISHED]
    assert outputs(out)[1] == list(range(N))


def test_a_job_cancelled_while_it_waits_to_restart_ends_canceled(env, tmp_path):
    markers, out = job(env, tmp_path, "fixed-delay", times=1, **{
        "restart-strategy.fixed-delay.attempts": "1", "restart-strategy.fixed-delay.delay": "60 s"})
    client = env.execute_async("cancelled in backoff")
    deadline = time.monotonic() + TIMEOUT_S
    while client.get_job_status() is not JobStatus.RESTARTING:
        assert time.monotonic() < deadline and not client.is_done(), client.get_job_status()
        time.sleep(0.01)
    client.cancel()
    assert client.wait(TIMEOUT_S) is JobStatus.CANCELED
    assert set(outputs(out)) <= {0}  # no second attempt
