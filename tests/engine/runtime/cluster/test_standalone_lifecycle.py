"""``rill cluster start|stop|status`` around other processes: stop never sends a message or a
signal to a process it cannot identify as the cluster's (an unrelated server on the port, a
stale record whose pid was reused); a second or concurrent start on a port fails clearly and
leaves the running cluster and its files alone."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rill.runtime.cluster import processes
from rill.runtime.cluster.actor_system import free_port

RILL = str(Path(sys.executable).parent / "rill")

SERVER = r"""
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
open(sys.argv[2], "w").close()
while True:
    conn, _ = s.accept()
    with open(sys.argv[2], "a") as f:
        f.write("connection\n")
    conn.close()
"""


@pytest.fixture
def unrelated_server(tmp_path):
    """A plain Python socket server on a free port; records every connection it accepts."""
    port = free_port()
    log = tmp_path / "server-connections.txt"
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(port), str(log)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not log.exists():
        assert time.monotonic() < deadline and proc.poll() is None, "the test server did not start"
        time.sleep(0.02)
    yield proc, port, log
    proc.kill()
    proc.wait()


def rill(run_dir: Path, *args, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([RILL, *args], env={**os.environ, "RILL_RUN_DIR": str(run_dir)}, capture_output=True,
                          text=True, timeout=timeout, cwd=run_dir)


def test_stop_leaves_an_unrelated_server_on_the_port_alone(tmp_path, unrelated_server):
    proc, port, log = unrelated_server
    result = rill(tmp_path, "cluster", "stop", "--port", str(port))
    assert result.returncode == 1
    assert result.stderr == (f"rill: No Rill cluster was started at port {port} from this run directory ({tmp_path}): "
                             f"the process listening there (pid {proc.pid}) is not one, and was left alone\n")
    assert proc.poll() is None
    assert log.read_text() == ""  # not even a connection


def test_stop_with_a_stale_record_never_signals_a_process_that_reused_its_pid(tmp_path, unrelated_server):
    proc, port, log = unrelated_server
    # the record of a cluster that died, whose admin pid is now the unrelated server's
    (tmp_path / f"cluster-{port}.json").write_text(json.dumps({
        "host": "127.0.0.1", "port": port, "secret_hex": "00" * 32, "admin_pid": proc.pid, "log_file": "x.log",
        "task_executors": 1, "slots": 1, "process_group": os.getpgid(proc.pid), "admin_start_ticks": 1,
        "cmdline": "python3\0-m\0rill.cli\0cluster\0start\0--in-process\0"}))
    result = rill(tmp_path, "cluster", "stop", "--port", str(port))
    assert result.returncode == 1
    assert result.stderr == (f"rill: Stopped 0 process(es) of the cluster recorded at port {port}, but the process "
                             f"listening on the port (pid {proc.pid}) is not the cluster's and was left alone\n")
    assert proc.poll() is None
    assert log.read_text() == ""
    status = rill(tmp_path, "cluster", "status", "--port", str(port))
    assert status.returncode == 1
    assert status.stderr == (f"rill: no Rill cluster was started at port {port} from this run directory; the process "
                             f"listening there (pid {proc.pid}) is not one\n")


def test_start_on_a_port_another_server_uses_fails_and_writes_nothing(tmp_path, unrelated_server):
    proc, port, log = unrelated_server
    result = rill(tmp_path, "cluster", "start", "--port", str(port))
    assert result.returncode == 1
    assert result.stderr == f"rill: Port {port} on 127.0.0.1 is in use by pid {proc.pid}: choose another --port\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("cluster-")) == [f"cluster-{port}.lock"]
    assert proc.poll() is None and log.read_text() == ""


def test_a_second_start_on_a_running_clusters_port_fails_and_touches_none_of_its_files(local_cluster):
    c = local_cluster(1, 1)
    files = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in c.run_dir.iterdir() if p.is_file()}
    result = c.cli("cluster", "start", "--port", str(c.port), check=False)
    assert result.returncode == 1
    assert re.fullmatch(rf"rill: A Rill cluster is already running at port {c.port} \(\d+ process\(es\), admin pid "
                        rf"{c.info()['admin_pid']}\): see `rill cluster status --port {c.port}`\n", result.stderr)
    assert {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in c.run_dir.iterdir() if p.is_file()} == files
    assert "1 TaskExecutor(s), 1 slot(s), 1 free" in c.cli("cluster", "status", "--port", str(c.port)).stdout


def test_concurrent_starts_on_one_port_start_one_cluster_and_fail_the_others_clearly(tmp_path):
    port = free_port()
    env = {**os.environ, "RILL_RUN_DIR": str(tmp_path)}
    starts = [subprocess.Popen([RILL, "cluster", "start", "--port", str(port), "-n", "1", "-s", "1"], env=env,
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for _ in range(2)]
    outcomes = [(p.wait(120), *p.communicate()) for p in starts]
    record = tmp_path / f"cluster-{port}.json"
    identity = processes.ProcessIdentity(**{k: v for k, v in json.loads(record.read_text()).items()
                                            if k in ("process_group", "cmdline")},
                                         start_ticks=json.loads(record.read_text())["admin_start_ticks"])
    try:
        assert sorted(rc for rc, _, _ in outcomes) == [0, 1]
        _, _, error = [o for o in outcomes if o[0] == 1][0]
        assert re.fullmatch(
            rf"rill: (Another `rill cluster start` \(or join\) on port {port} is in progress: wait for it, then see "
            rf"`rill cluster status --port {port}`|A Rill cluster is already running at port {port} .*)\n", error)
        assert len(processes.members(identity)) > 1
    finally:
        rill(tmp_path, "cluster", "stop", "--port", str(port))
        left = processes.members(identity)
        processes.terminate(identity)
    assert left == []


def test_status_and_stop_after_the_cluster_died_tell_the_truth(local_cluster):
    c = local_cluster(1, 1)
    c.remember_processes_silently()
    admin = c.info()["admin_pid"]
    os.kill(admin, signal.SIGKILL)
    deadline = time.monotonic() + 20
    while any(_alive(p) for p in c.pids):
        assert time.monotonic() < deadline, "the cluster did not shut itself down after its admin was killed"
        time.sleep(0.05)
    status = c.cli("cluster", "status", "--port", str(c.port), check=False)
    assert (status.returncode, status.stdout) == (1, "")
    assert status.stderr == (f"rill: the cluster at port {c.port} is not running: its admin (pid {admin}) exited; "
                             f"none of its processes is left; `rill cluster stop --port {c.port}` removes its record\n")
    stop = c.cli("cluster", "stop", "--port", str(c.port), check=False)
    assert (stop.returncode, stop.stderr) == (0, "")
    assert stop.stdout == (f"rill: cluster at port {c.port} was not running (none of its processes was left); its "
                           "record was removed\n")
    again = c.cli("cluster", "stop", "--port", str(c.port), check=False)
    assert (again.returncode, again.stderr) == (1, f"rill: No Rill cluster is running at port {c.port}: nothing to "
                                                   "stop\n")


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
