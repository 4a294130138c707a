"""Fixtures shared across the test tree: real local clusters (Thespian actor systems started by
the ``rill cluster`` command in their own run directory and port, stopped afterwards with a
check that none of their processes is left)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

RILL = str(Path(sys.executable).parent / "rill")


def _descendants(pid: int) -> set:
    children = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    out, frontier = set(), [pid]
    while frontier:
        p = frontier.pop()
        for c in children.get(p, []):
            if c not in out:
                out.add(c)
                frontier.append(c)
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalCluster:
    """A cluster started with ``rill cluster start`` in its own run directory."""

    def __init__(self, run_dir: Path, task_executors: int = 2, slots: int = 2, extra_env=None):
        self.run_dir = run_dir
        self.port = free_port()
        self.task_executors = task_executors
        self.slots = slots
        self.env = {**os.environ, "RILL_RUN_DIR": str(run_dir), **(extra_env or {})}
        self.pids: set = set()
        self.members: list = []

    @property
    def address(self) -> str:
        return f"cluster://127.0.0.1:{self.port}"

    def cli(self, *args, timeout=120, check=True) -> subprocess.CompletedProcess:
        proc = subprocess.run([RILL, *args], env=self.env, capture_output=True, text=True, timeout=timeout,
                              cwd=self.run_dir)
        if check and proc.returncode != 0:
            raise AssertionError(f"rill {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        return proc

    @property
    def secret_file(self) -> Path:
        """The leader's cluster-<port>.json (mode 600): what clients and members need to join."""
        return self.run_dir / f"cluster-{self.port}.json"

    def info(self, port=None) -> dict:
        return json.loads((self.run_dir / f"cluster-{port or self.port}.json").read_text())

    def start(self) -> "LocalCluster":
        self.cli("cluster", "start", "--port", str(self.port), "-n", str(self.task_executors),
                 "-s", str(self.slots))
        self.remember_processes()
        return self

    def join(self, slots: int = 1) -> int:
        port = free_port()
        self.cli("cluster", "join", "--leader", self.address, "--port", str(port), "-s", str(slots),
                 "--secret-file", str(self.secret_file))
        self.members.append(port)
        self.remember_processes()
        return port

    def remember_processes(self) -> None:
        for port in [self.port, *self.members]:
            admin = self.info(port)["admin_pid"]
            assert admin > 0, "rill cluster start must record the admin pid"
            self.pids |= {admin} | _descendants(admin)

    def task_executor_pids(self) -> dict:
        out = self.cli("cluster", "status", "--port", str(self.port)).stdout
        pids = {}
        for line in out.splitlines():
            parts = line.split()
            if parts and parts[0].startswith("taskexecutor-"):
                pids[parts[0]] = int(parts[parts.index("pid") + 1])
        return pids

    def task_processes(self) -> set:
        """Live processes under the TaskExecutors (one per deployed task)."""
        out = set()
        for pid in self.task_executor_pids().values():
            out |= {p for p in _descendants(pid) if _alive(p)}
        return out

    def wait_no_task_processes(self, timeout_s: float = 15.0) -> None:
        """Every task process of finished jobs exits (nothing is left after a job)."""
        deadline = time.monotonic() + timeout_s
        while (left := self.task_processes()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not left, f"task processes left after the job ended: {sorted(left)}"

    def stop(self) -> None:
        self.remember_processes_silently()
        for port in [*self.members, self.port]:
            self.cli("cluster", "stop", "--port", str(port), check=False)
        deadline = time.monotonic() + 15
        while any(_alive(p) for p in self.pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = [p for p in self.pids if _alive(p)]
        for p in left:  # never leave anything behind, even when the check below fails
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        assert not left, f"processes left running after `rill cluster stop`: {left}"

    def remember_processes_silently(self) -> None:
        for pid in list(self.pids):
            self.pids |= _descendants(pid)


@pytest.fixture
def local_cluster(tmp_path):
    """A factory of private clusters for tests that kill or reshape them; each is stopped (and
    checked for leftover processes) when the test ends."""
    started = []

    def make(task_executors: int = 2, slots: int = 2, **kwargs) -> LocalCluster:
        c = LocalCluster(tmp_path / f"cluster-{len(started)}", task_executors, slots, **kwargs)
        c.run_dir.mkdir()
        started.append(c)
        return c.start()

    yield make
    for c in started:
        c.stop()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    """One cluster of 2 TaskExecutors × 2 slots for the session's cluster tests."""
    c = LocalCluster(tmp_path_factory.mktemp("cluster"), 2, 2)
    c.start()
    try:
        yield c
    finally:
        c.stop()
