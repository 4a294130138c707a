"""A local Rill cluster for one benchmark run (``--target cluster``, ``--cluster-speedup``).

:class:`BenchCluster` starts ``rill cluster start --port P -n N -s S`` on a free port with its
own temporary run directory (``RILL_RUN_DIR``, so nothing goes to ``~/.rill``), and
:meth:`BenchCluster.stop` stops it with ``rill cluster stop`` and checks that none of its
processes (admin, actors, TaskExecutors, task processes) is left; any straggler is killed and
reported. Use it as a context manager, so the cluster is stopped whatever happens::

    with BenchCluster(task_executors=1, slots=2) as cluster:
        run_workload(workload, data, parallelism=2, cluster=cluster)

The cluster's sinks publish their figures to ``results_dir`` (see ``bench.harness.CountingSink``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Set

__all__ = ["BenchCluster", "ClusterLeftovers", "machine_cpu_seconds"]

_TICKS = os.sysconf("SC_CLK_TCK")


def machine_cpu_seconds() -> float:
    """CPU time the whole machine spent busy (all cores, all processes), from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) / _TICKS  # everything but idle and iowait


class ClusterLeftovers(RuntimeError):
    """Processes of the benchmark's cluster were still running after ``rill cluster stop``."""


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _parents() -> Dict[int, List[int]]:
    children: Dict[int, List[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    return children


def descendants(pid: int) -> Set[int]:
    """Every process below ``pid`` (from /proc)."""
    children = _parents()
    out: Set[int] = set()
    frontier = [pid]
    while frontier:
        for c in children.get(frontier.pop(), []):
            if c not in out:
                out.add(c)
                frontier.append(c)
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class BenchCluster:
    """``task_executors`` TaskExecutors × ``slots`` slots on ``host``, in a temporary run
    directory. Every task of a job runs in its own process under a TaskExecutor."""

    def __init__(self, task_executors: int = 1, slots: int = 2, host: str = "127.0.0.1",
                 start_timeout_s: float = 120.0):
        self.task_executors = task_executors
        self.slots = slots
        self.host = host
        self.start_timeout_s = start_timeout_s
        self.port: Optional[int] = None
        self.run_dir: Optional[str] = None
        self.results_dir: Optional[str] = None
        self.admin_pid: Optional[int] = None
        self._pids: Set[int] = set()

    @property
    def address(self) -> str:
        return f"cluster://{self.host}:{self.port}"

    @property
    def secret_file(self) -> str:
        """The cluster's ``cluster-<port>.json`` (its secret): what this process submits with."""
        return str(Path(self.run_dir, f"cluster-{self.port}.json"))

    @property
    def shape(self) -> str:
        return f"{self.task_executors} TaskExecutor(s) × {self.slots} slot(s)"

    def _env(self) -> Dict[str, str]:
        return {**os.environ, "RILL_RUN_DIR": self.run_dir}

    def _cli(self, *args: str, timeout: float) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "rill.cli", "cluster", *args], env=self._env(),
                              cwd=self.run_dir, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout)

    def start(self) -> "BenchCluster":
        """:raises RuntimeError: if ``rill cluster start`` fails (the cluster is then stopped)."""
        self.run_dir = tempfile.mkdtemp(prefix="rill-bench-cluster-")
        self.results_dir = os.path.join(self.run_dir, "sink-results")
        os.mkdir(self.results_dir)
        self.port = _free_port(self.host)
        try:
            proc = self._cli("start", "--port", str(self.port), "--host", self.host, "-n", str(self.task_executors),
                             "-s", str(self.slots), timeout=self.start_timeout_s)
            if proc.returncode != 0:
                raise RuntimeError(f"`rill cluster start --port {self.port}` exited {proc.returncode}:\n"
                                   f"{proc.stdout}{proc.stderr}")
            info = json.loads(Path(self.run_dir, f"cluster-{self.port}.json").read_text())
            self.admin_pid = int(info["admin_pid"])
            self._remember()
        except BaseException:
            self.stop()
            raise
        return self

    def _remember(self) -> None:
        if self.admin_pid:
            self._pids |= {self.admin_pid} | descendants(self.admin_pid)
        for pid in list(self._pids):
            self._pids |= descendants(pid)

    def processes(self) -> Set[int]:
        """The cluster's live processes (admin, actors, TaskExecutors, task processes)."""
        self._remember()
        return {p for p in self._pids if _alive(p)}

    def cpu_seconds(self) -> float:
        """CPU time (user + system) used so far by the cluster's live processes and by the
        children they have reaped (finished task processes, JobMasters): the difference over a
        run is what the run cost the cluster."""
        total = 0
        for pid in self.processes():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
        return total / _TICKS

    def stop(self) -> None:
        """Stop the cluster and remove its run directory.

        :raises ClusterLeftovers: if any of its processes was still running afterwards (they
            are killed first).
        """
        if self.run_dir is None:
            return
        self._remember()
        stop_output = ""
        if self.port is not None:
            try:
                proc = self._cli("stop", "--port", str(self.port), timeout=60)
                stop_output = proc.stdout + proc.stderr
            except subprocess.TimeoutExpired:
                stop_output = "rill cluster stop timed out"
        deadline = time.monotonic() + 15
        while any(_alive(p) for p in self._pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = sorted(p for p in self._pids if _alive(p))
        for p in left:  # never leave anything behind, even when the stop failed
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        shutil.rmtree(self.run_dir, ignore_errors=True)
        self.run_dir = None
        if left:
            raise ClusterLeftovers(f"processes of the benchmark's cluster at port {self.port} were still running "
                                   f"after `rill cluster stop` (killed): {left}\n{stop_output}")

    def __enter__(self) -> "BenchCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
