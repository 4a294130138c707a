"""A fault suite on real local clusters: under a running job, each kind of cluster process is
killed (SIGKILL) in turn -- JobMaster, Dispatcher, ResourceManager, TaskExecutor, a task
process, the Thespian admin. Each time the job ends FAILED with a cause naming what died, and
the next job runs on the same cluster with all its slots (after the admin, the whole cluster
is gone and ``status`` says so); the fixture then checks that ``rill cluster stop`` leaves
nothing running. Heartbeats are short here (200 ms / 3 s) to keep the tests fast."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest

from rill.common import Types
from rill.graph.states import JobStatus
from rill.runtime.errors import JobExecutionException

HEARTBEATS = {"RILL_HEARTBEAT_INTERVAL": "200", "RILL_HEARTBEAT_TIMEOUT": "3000"}
LINES = [f"w{i % 7} w{i % 11}" for i in range(500)]


def slow(x):
    time.sleep(0.01)
    return x



def wait_for(condition, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out after {timeout_s} s waiting for {what}"
        time.sleep(0.05)
    return value


def start_victim_job(cluster):
    """A job on all 4 slots that runs until it is killed."""
    env = cluster.environment(parallelism=4)
    env.from_collection(list(range(100_000))).map(slow).print()
    client = env.execute_async("victim")
    wait_for(lambda: client.get_job_status() is JobStatus.RUNNING, 30, "the job to run")
    wait_for(lambda: len(cluster.task_processes()) >= 4, 30, "the task processes")
    return client


def _stat(pid: int):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def parent(pid: int) -> int:
    return int(_stat(pid)[1])


def _alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z"


def _descendants(pid: int) -> set:
    children = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and (stat := _stat(int(d.name))) is not None:
            children.setdefault(int(stat[1]), []).append(int(d.name))
    out, frontier = set(), [pid]
    while frontier:
        for c in children.get(frontier.pop(), []):
            if c not in out:
                out.add(c)
                frontier.append(c)
    return out


def roles(cluster) -> dict:
    """role → pid of the leader system's processes, from the process tree: admin → supervisor →
    ResourceManager → TaskExecutors → tasks, supervisor → Dispatcher → JobMasters."""
    admin = cluster.info()["admin_pid"]
    tes = sorted(cluster.task_executor_pids().values())
    rm = parent(tes[0])
    supervisor = parent(rm)
    dispatcher = [p for p in _descendants(supervisor) if parent(p) == supervisor and p != rm][0]
    job_masters = sorted(p for p in _descendants(dispatcher) if parent(p) == dispatcher)
    tasks = sorted(cluster.task_processes(tes))  # a job's, not the TaskExecutors' pooled ones
    return {"admin": admin, "supervisor": supervisor, "ResourceManager": rm, "Dispatcher": dispatcher,
            "JobMaster": job_masters[0] if job_masters else None, "TaskExecutor": tes[0],
            "task": tasks[0] if tasks else None}


def kill(cluster, pid: int) -> None:
    cluster.remember_processes_silently()  # the stop check covers the processes orphaned by the kill
    os.kill(pid, signal.SIGKILL)


def status(cluster):
    return cluster.cli("cluster", "status", "--port", str(cluster.port), check=False)


def wait_all_slots_free(cluster, timeout_s: float = 20.0) -> None:
    wait_for(lambda: "2 TaskExecutor(s), 4 slot(s), 4 free" in status(cluster).stdout, timeout_s,
             "all 4 slots of 2 TaskExecutors to be free")


def assert_next_job_runs_on_all_slots(cluster) -> None:
    wait_all_slots_free(cluster)
    env = cluster.environment(parallelism=4)
    result = (env.from_collection(LINES)
              .flat_map(lambda line: [(w, 1) for w in line.split()],
                        output_type=Types.TUPLE([Types.STRING(), Types.INT()]))
              .key_by(lambda t: t[0])
              .reduce(lambda a, b: (a[0], a[1] + b[1]))
              .execute_and_collect())
    counts, expected = {}, []
    for line in LINES:
        for w in line.split():
            counts[w] = counts.get(w, 0) + 1
            expected.append((w, counts[w]))
    assert sorted(result) == sorted(expected)
    cluster.wait_no_task_processes()


def job_failure(client) -> str:
    with pytest.raises(JobExecutionException) as info:
        client.get_job_execution_result().result(120)  # a hang guard sized for a loaded box
    assert client.get_job_status() is JobStatus.FAILED or "is gone" in str(info.value)
    return str(info.value)


def test_a_killed_job_master_fails_its_job_and_frees_its_slots_and_tasks(local_cluster):
    c = local_cluster(2, 2, extra_env=HEARTBEATS)
    client = start_victim_job(c)
    pid = wait_for(lambda: roles(c)["JobMaster"], 10, "the JobMaster process")
    kill(c, pid)
    message = job_failure(client)
    assert f"failed: its JobMaster (pid {pid}) exited" in message
    c.wait_no_task_processes()
    assert_next_job_runs_on_all_slots(c)


def test_a_killed_dispatcher_is_restarted_and_its_job_fails_naming_it(local_cluster):
    c = local_cluster(2, 2, extra_env=HEARTBEATS)
    client = start_victim_job(c)
    pid = roles(c)["Dispatcher"]
    kill(c, pid)
    message = job_failure(client)
    assert f"ControlProcessLostException: the Dispatcher (pid {pid}) exited" in message
    c.wait_no_task_processes()
    assert_next_job_runs_on_all_slots(c)
    assert roles(c)["Dispatcher"] != pid


def test_a_killed_resource_manager_is_restarted_with_all_task_executors(local_cluster):
    c = local_cluster(2, 2, extra_env=HEARTBEATS)
    client = start_victim_job(c)
    old = roles(c)
    kill(c, old["ResourceManager"])
    message = job_failure(client)
    assert f"the ResourceManager (pid {old['ResourceManager']}) exited" in message
    wait_for(lambda: not any(_alive(p) for p in (old["TaskExecutor"], old["task"])), 20,
             "the old TaskExecutors and their tasks to exit")
    assert_next_job_runs_on_all_slots(c)


def test_a_killed_task_executor_is_replaced(local_cluster):
    c = local_cluster(2, 2, extra_env=HEARTBEATS)
    client = start_victim_job(c)
    old = roles(c)
    rid = [r for r, p in c.task_executor_pids().items() if p == old["TaskExecutor"]][0]
    kill(c, old["TaskExecutor"])
    message = job_failure(client)
    assert f"TaskExecutor {rid} (pid {old['TaskExecutor']} on 127.0.0.1) was lost: its process exited" in message
    wait_for(lambda: old["TaskExecutor"] not in c.task_executor_pids().values()
             and len(c.task_executor_pids()) == 2, 20, "a new TaskExecutor in place of the lost one")
    assert_next_job_runs_on_all_slots(c)


def test_a_stopped_task_executor_is_lost_after_the_heartbeat_timeout_and_its_job_fails(local_cluster):
    """SIGSTOP: the TaskExecutor's process neither exits nor answers, so only its missing
    heartbeats tell: the ResourceManager declares it lost after heartbeat.timeout, its job fails
    naming it and the cause, and it is replaced. Once continued it exits (the ResourceManager
    told it to), and no task process of it is left."""
    c = local_cluster(2, 2, extra_env=HEARTBEATS)
    client = start_victim_job(c)
    # the ResourceManager's registrations (what `rill cluster status` lists), not a guess
    rid, pid = sorted(c.task_executor_pids().items())[0]
    assert pid in c.pids, "a TaskExecutor the status names must be a process of this cluster"
    tasks = c.task_processes([pid])
    assert tasks, "the victim job runs tasks in both TaskExecutors"
    c.remember_processes_silently()
    os.kill(pid, signal.SIGSTOP)
    stopped_at = time.monotonic()
    try:
        message = job_failure(client)
        lost_after_s = time.monotonic() - stopped_at
        assert _stat(pid)[0] == "T", "the TaskExecutor must still be stopped when its job fails"
    finally:
        os.kill(pid, signal.SIGCONT)
    assert (f"TaskExecutor {rid} (pid {pid} on 127.0.0.1) was lost: no heartbeat for 3000 ms (heartbeat.timeout)"
            in message), message
    # its last heartbeat left at most one interval (200 ms) before the stop
    assert lost_after_s >= 3.0 - 0.2, lost_after_s
    wait_for(lambda: not any(_alive(p) for p in {pid, *tasks}), 20, "the lost TaskExecutor and its tasks to exit")
    wait_for(lambda: pid not in c.task_executor_pids().values() and len(c.task_executor_pids()) == 2, 20,
             "a new TaskExecutor in place of the lost one")
    assert_next_job_runs_on_all_slots(c)


def test_a_killed_task_process_fails_the_job_and_leaves_no_task(local_cluster):
    c = local_cluster(2, 2, extra_env=HEARTBEATS)
    client = start_victim_job(c)
    pid = roles(c)["task"]
    kill(c, pid)
    message = job_failure(client)
    assert re.search(r"raised RemoteTaskException: the process of task .+ \(\d/\d\) exited \(TaskExecutor "
                     r"taskexecutor-\d\)", message), message
    c.wait_no_task_processes()
    assert_next_job_runs_on_all_slots(c)


@pytest.mark.parametrize("victim", ["admin", "supervisor"])
def test_a_killed_admin_or_supervisor_takes_the_whole_cluster_down(local_cluster, victim):
    """Nothing can restart these or reach the cluster without them: it shuts itself down."""
    c = local_cluster(2, 2, extra_env=HEARTBEATS)
    client = start_victim_job(c)
    c.remember_processes_silently()
    admin = c.info()["admin_pid"]
    kill(c, roles(c)[victim])
    message = job_failure(client)
    assert f"the cluster at {c.address} is gone" in message
    wait_for(lambda: not any(_alive(p) for p in c.pids), 120, "every process of the cluster to exit")
    proc = status(c)
    assert proc.returncode == 1
    assert proc.stderr == (f"rill: the cluster at port {c.port} is not running: its admin (pid {admin}) exited; "
                           f"none of its processes is left; `rill cluster stop --port {c.port}` removes its record\n")


def test_task_executors_stop_the_tasks_of_a_job_master_whose_heartbeats_stopped(local_cluster):
    """A JobMaster that hangs (SIGSTOP) does not exit, so nobody is told: the TaskExecutors
    notice the missing heartbeats within heartbeat.timeout and stop its tasks and free its slots."""
    c = local_cluster(2, 2, extra_env=HEARTBEATS)
    client = start_victim_job(c)
    pid = wait_for(lambda: roles(c)["JobMaster"], 10, "the JobMaster process")
    os.kill(pid, signal.SIGSTOP)
    try:
        c.wait_no_task_processes(timeout_s=20)
        wait_all_slots_free(c)
        log = Path(c.info()["log_file"]).read_text()
        assert (f"the JobMaster of job {client.get_job_id()} was lost: no heartbeat for 3000 ms (heartbeat.timeout)"
                in log)
    finally:
        kill(c, pid)  # SIGKILL ends a stopped process too: no SIGCONT to a pid that may be reaped
    assert f"failed: its JobMaster (pid {pid}) exited" in job_failure(client)
    assert_next_job_runs_on_all_slots(c)


def test_a_member_systems_task_executor_is_recreated_after_a_resource_manager_restart(local_cluster):
    """A TaskExecutor that joined from another actor system is not a child process of the
    ResourceManager: it notices the lost ResourceManager by its unanswered heartbeats and exits,
    and the new ResourceManager creates a new one in that system."""
    c = local_cluster(0, 1, extra_env=HEARTBEATS)
    port = c.join(slots=1)
    rid = f"taskexecutor-127.0.0.1-{port}"
    old_te = c.task_executor_pids()[rid]
    log = Path(c.info()["log_file"])
    rm = int(re.findall(r"ResourceManager started \(pid (\d+)\)", log.read_text())[-1])
    kill(c, rm)
    wait_for(lambda: not _alive(old_te), 20, "the member's old TaskExecutor to exit")
    wait_for(lambda: c.task_executor_pids().get(rid) not in (None, old_te), 20, "a new TaskExecutor in the member")
    env = c.environment(parallelism=1)
    assert sorted(env.from_collection(list(range(10))).map(lambda x: x * 2).execute_and_collect()) == \
        [x * 2 for x in range(10)]
    c.wait_no_task_processes()


def test_a_dispatcher_that_keeps_dying_shuts_the_cluster_down_after_five_restarts(local_cluster):
    c = local_cluster(1, 1, extra_env=HEARTBEATS)
    c.remember_processes_silently()
    for restart in range(6):
        pid = roles(c)["Dispatcher"]
        kill(c, pid)
        if restart < 5:
            wait_for(lambda: _alive_dispatcher(c, pid), 20, f"restart {restart + 1} of the Dispatcher")
    c.remember_processes_silently()
    wait_for(lambda: not any(_alive(p) for p in c.pids), 120, "every process of the cluster to exit")
    log = Path(c.info()["log_file"]).read_text()
    assert "ERROR rill.cluster.supervisor the Dispatcher exited 6 times within 60 s: shutting the cluster down" in log


def _alive_dispatcher(cluster, old: int) -> bool:
    """Whether a new Dispatcher (not ``old``) runs and answers."""
    try:
        new = roles(cluster)["Dispatcher"]
    except (AssertionError, IndexError, KeyError, ValueError, TypeError):
        return False
    cluster.remember_processes_silently()
    return new != old and status(cluster).returncode == 0
