"""Backpressure experiment: one slow consumer, with and without credit-based flow control.

    python -m bench.backpressure                      # both parts (~100 s on 2 cores)
    python -m bench.backpressure --quick              # a short run of both parts (~30 s)
    python -m bench.backpressure --part job --duration 30
    python -m bench.backpressure --part connection --conn-duration 10

The scenario of the seed notes (Flink's network stack, "背压问题" / "基于信用的流控制"): tasks A
and B at parallelism 4 joined by ``key_by`` on two TaskManagers of two slots each; subtask B.4
is slow. In Flink, B.3 and B.4 run in one TaskManager and the channels A.1→B.3, A.1→B.4,
A.2→B.3, A.2→B.4 share one TCP connection: without flow control B.4 running out of buffers
stops that connection and B.3 stops with it; with credit only B.4's channels stall.

**Part 1, job level** (the issue's topology on a real cluster): ``rill cluster start -n 2 -s 2``
in a temporary ``RILL_RUN_DIR`` on a free port, then per run the job
``A = from_sequence (p=4, as fast as it can) -> key_by(value % 4096) -> B = map -> discarding
sink (p=4, chained)``, where B.4 is throttled to ``1/slow-factor`` of the per-subtask rate of
B measured in a baseline run (nothing slow). Runs: ``baseline`` (credit on, nothing slow),
``credit`` and ``no-credit`` (``taskmanager.network.credit-model`` = false), each for
``warmup + duration`` seconds, then cancelled. ``ClusterJobClient.get_metrics()`` is sampled
every 0.5 s; window figures are differences between the first sample after the warm-up and the
last one, over each task's own clock (``duration_ms``): records/s (A: out, B: in),
back-pressured/busy/idle ms per second and Flink's OK/LOW/HIGH, pool usage. Per channel
(A.i→B.j): B's function counts the records it gets from each A subtask (A.i produces the i-th
quarter of the sequence) and appends its counts to a file every 0.25 s; no engine change.

In Rill every StreamTask is its own process and a connection joins a *pair of processes*:
A.i→B.j is alone on its connection, so B.3 and B.4 never share one. The connection-level part
builds the sharing explicitly.

**Part 2, connection level** (two processes, one connection, two channels): a producer process
(``multiprocessing`` spawn) serves two channels; this process reads both through one
``NettyConnectionManager`` (one TCP connection, checked), one gate and one reading thread per
channel, like two tasks of one TaskManager. Layouts: ``separate`` -- two partitions written by
two producer threads with their own buffer pools (two upstream tasks); ``shared`` -- one
partition with two subpartitions written by one thread (one upstream task whose records go to
both channels, as with ``key_by``). Each run: both channels read at full speed for the first
30% of the time (phase 1), then channel 2 is throttled to ``1/slow-factor`` of its phase-1 rate
(phase 2); records/s per channel every 0.1 s, the connection's read-paused time, the slow
sender's back-pressured time. Then the producers stop, channel 2 is released, and every record
is checked (each channel gets its sequence exactly once, in order).

Plus the **stall** scenario, by counts and states only: channel 2's reader stops polling; once
its sender is out of credit (with flow control) or the connection is paused (without), N records
are written to channel 1; with credit they all arrive while channel 2 is still stalled, without
credit none arrives while the connection stays paused, though the producer sent them. Then
channel 2 is released and everything arrives in order. ``tests/bench/test_backpressure_bench.py``
asserts these counts.

Output: the tables on stdout, ``OUT/backpressure.json`` (every sample) and
``OUT/backpressure.png``. Exit 1 if a check fails (records lost or reordered, a job that ended
before its window), 3 if cluster processes were left after ``rill cluster stop``.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from rill.datastream.functions import MapFunction, SinkFunction

__all__ = [
    "BenchCluster",
    "SlowSubtaskMap",
    "JobRun",
    "run_job",
    "summarize_job",
    "ConnectionRun",
    "run_connection",
    "StallResult",
    "stall_scenario",
    "main",
]

NUM_SUBTASKS = 4
SLOW_SUBTASK = 3  # B.4 (0-based index 3)
SEQUENCE_LENGTH = NUM_SUBTASKS * 10 ** 11  # A.i produces the i-th quarter: never exhausted
NUM_KEYS = 4096
SAMPLE_INTERVAL_S = 0.5
CHANNEL_PUBLISH_S = 0.25
CONN_SAMPLE_S = 0.1
RECORDS_PER_BUFFER = 1024  # the engine's default (taskmanager.network.records-per-buffer)
#: Buffers of a produced partition: n * buffers-per-channel + floating-buffers-per-gate (Flink's
#: maximum, what the engine gives a partition of n subpartitions with the default settings).
BUFFERS_PER_CHANNEL, FLOATING_BUFFERS = 2, 8
DEADLINE_S = 30.0


# =============================================================================================
# Cluster (started with the `rill` CLI, like tests/conftest.py's LocalCluster)
# =============================================================================================

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children_map() -> Dict[int, List[int]]:
    children: Dict[int, List[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    return children


def _descendants(pid: int) -> set:
    children = _children_map()
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


def socket_queue_bytes(pids) -> Tuple[int, int]:
    """Bytes waiting in the kernel queues of the TCP connections of ``pids``: (send queues,
    receive queues), from /proc/net/tcp (listening sockets excluded)."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    tx = rx = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if len(parts) > 9 and parts[9] in inodes and parts[3] != "0A":
                t, r = parts[4].split(":")
                tx += int(t, 16)
                rx += int(r, 16)
    return tx, rx


class BenchCluster:
    """``rill cluster start --port P -n N -s M`` in its own run directory; :meth:`stop` runs
    ``rill cluster stop`` and checks that none of the cluster's processes is left (killing
    any that is, and saying so)."""

    def __init__(self, run_dir: Path, task_executors: int = 2, slots: int = 2):
        self.run_dir = Path(run_dir)
        self.port = _free_port()
        self.task_executors = task_executors
        self.slots = slots
        self.env = {**os.environ, "RILL_RUN_DIR": str(self.run_dir)}
        self.pids: set = set()
        self._te_pids: Dict[str, int] = {}
        self.rill = str(Path(sys.executable).parent / "rill")
        if not os.path.exists(self.rill):  # not installed next to the interpreter: the module
            self.rill = None

    @property
    def address(self) -> str:
        return f"cluster://127.0.0.1:{self.port}"

    def cli(self, *args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
        argv = [self.rill, *args] if self.rill else [sys.executable, "-m", "rill.cli", *args]
        proc = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=timeout,
                              cwd=self.run_dir, stdin=subprocess.DEVNULL)
        if check and proc.returncode != 0:
            raise RuntimeError(f"rill {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        return proc

    def start(self) -> "BenchCluster":
        self.cli("cluster", "start", "--port", str(self.port), "-n", str(self.task_executors),
                 "-s", str(self.slots))
        self._remember()
        self._te_pids = self._query_task_executor_pids()
        return self

    def _remember(self) -> None:
        try:
            info = json.loads((self.run_dir / f"cluster-{self.port}.json").read_text())
            admin = int(info.get("admin_pid", 0))
        except (OSError, ValueError):
            admin = 0
        if admin > 0:
            self.pids |= {admin} | _descendants(admin)
        for pid in list(self.pids):
            self.pids |= _descendants(pid)

    def task_executor_pids(self) -> Dict[str, int]:
        """TaskExecutor name -> pid (asked once, at start, with `rill cluster status`)."""
        return dict(self._te_pids)

    def _query_task_executor_pids(self) -> Dict[str, int]:
        out = self.cli("cluster", "status", "--port", str(self.port)).stdout
        pids = {}
        for line in out.splitlines():
            parts = line.split()
            if parts and parts[0].startswith("taskexecutor-") and "pid" in parts:
                pids[parts[0]] = int(parts[parts.index("pid") + 1])
        return pids

    def task_processes(self) -> Dict[str, List[int]]:
        """Live processes under each TaskExecutor (one per deployed task)."""
        return {name: sorted(p for p in _descendants(pid) if _alive(p))
                for name, pid in self.task_executor_pids().items()}

    def wait_no_task_processes(self, timeout_s: float = 20.0) -> Tuple[float, List[int]]:
        """Wait until no task process is left; returns (seconds waited, pids still alive)."""
        started = time.monotonic()
        while True:
            left = [p for ps in self.task_processes().values() for p in ps]
            if not left or time.monotonic() - started > timeout_s:
                return time.monotonic() - started, left
            time.sleep(0.1)

    def stop(self) -> List[int]:
        """Stop the cluster; returns the pids that were still alive 15 s later (killed)."""
        self._remember()
        self.cli("cluster", "stop", "--port", str(self.port), check=False)
        deadline = time.monotonic() + 15
        while any(_alive(p) for p in self.pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = sorted(p for p in self.pids if _alive(p))
        for p in left:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        return left


# =============================================================================================
# Part 1: the job (A -> key_by -> B, B.4 slow) on the cluster
# =============================================================================================

class SlowSubtaskMap(MapFunction):
    """B: passes records on; subtask ``slow_index`` processes at most ``slow_rate`` records/s
    (it sleeps whenever it is more than 1 ms ahead of that pace). Counts the records received
    from each A subtask (A.i produces values in the i-th quarter of the sequence) and appends
    ``{"t": wall time, "counts": [...]}`` to ``<prefix>-B<j>.jsonl`` every 0.25 s."""

    def __init__(self, slow_index: int, slow_rate: Optional[float], channel_prefix: str,
                 range_size: int, num_sources: int):
        self.slow_index = slow_index
        self.slow_rate = slow_rate
        self.channel_prefix = channel_prefix
        self.range_size = range_size
        self.num_sources = num_sources

    def open(self, runtime_context) -> None:
        self.index = runtime_context.get_index_of_this_subtask()
        self.interval = (1.0 / self.slow_rate) if (self.slow_rate and self.index == self.slow_index) else 0.0
        self.next_due = 0.0
        self.counts = [0] * self.num_sources
        self.seen = 0
        self.file = open(f"{self.channel_prefix}-B{self.index + 1}.jsonl", "a")
        self.next_publish = time.monotonic()
        self._publish()

    def map(self, value):
        self.counts[value // self.range_size] += 1
        if self.interval:
            now = time.perf_counter()
            if self.next_due < now:
                self.next_due = now
            self.next_due += self.interval
            ahead = self.next_due - now
            if ahead > 0.001:
                time.sleep(ahead)
        self.seen += 1
        if not self.seen & 255 and time.monotonic() >= self.next_publish:
            self._publish()
        return value

    def _publish(self) -> None:
        self.next_publish = time.monotonic() + CHANNEL_PUBLISH_S
        self.file.write(json.dumps({"t": time.time(), "counts": self.counts}) + "\n")
        self.file.flush()

    def close(self) -> None:
        if getattr(self, "file", None) is not None and not self.file.closed:
            self._publish()
            self.file.close()


class DiscardingSink(SinkFunction):
    def invoke(self, value, context) -> None:
        pass


def _key(value):
    return value % NUM_KEYS


@dataclass
class JobRun:
    """One run of the job: its settings, every metrics sample and how it ended."""

    name: str
    credit: bool
    slow_rate: Optional[float]
    warmup_s: float
    duration_s: float
    samples: List[dict] = field(default_factory=list)  # {"t", "wall", "tasks": {label: metrics}}
    channels: Dict[str, List[dict]] = field(default_factory=dict)  # B.j -> [{"t", "counts"}]
    window: Tuple[float, float] = (0.0, 0.0)  # wall-clock start, end
    final_status: str = ""
    end_error: Optional[str] = None
    cancel_s: Optional[float] = None
    task_processes_per_te: Dict[str, int] = field(default_factory=dict)
    socket_queues: Optional[Tuple[int, int]] = None  # kernel send / receive queue bytes at the end
    processes_left_after_s: Optional[float] = None
    processes_left: List[int] = field(default_factory=list)
    root_cause: Optional[dict] = None  # the REST API's backpressure-root-cause at the window's end


_FIELDS = ("num_records_in", "num_records_out", "num_buffers_in", "num_buffers_out", "num_bytes_in",
           "num_bytes_out", "duration_ms", "busy_time_ms", "idle_time_ms", "back_pressured_time_ms",
           "input_pool_usage", "output_pool_usage")


def _label(snapshot) -> str:
    kind = "A" if snapshot.task_name.startswith("Source") else "B"
    return f"{kind}.{snapshot.subtask_index + 1}"


LABELS = [f"A.{i}" for i in range(1, NUM_SUBTASKS + 1)] + [f"B.{i}" for i in range(1, NUM_SUBTASKS + 1)]


TIMELINE_INTERVAL_MS = 50


def plot_timelines(path: Path, work_dir: Path, run_names: Sequence[str]) -> Optional[Path]:
    """One row per run: the backlog of A's subpartitions towards each B.j (buffers queued at
    the sender) and the credit each B.j's remote channels had left, over time, from the
    runs' channel timelines (``rill.network.timeline.*``). ``None`` if no run left one."""
    import matplotlib  # noqa: PLC0415
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415

    tables = {}
    for name in run_names:
        d = work_dir / "timelines" / name
        files = sorted(d.rglob("*.parquet")) if d.exists() else []
        if files:
            tables[name] = pq.read_table(files[0].parent).to_pylist()
    if not tables:
        return None
    fig, axes = plt.subplots(len(tables), 2, figsize=(14, 3.6 * len(tables)), squeeze=False)
    for row, (name, rows) in enumerate(tables.items()):
        t0 = min(r["ts"] for r in rows)
        for col, (side, field, title) in enumerate((("output", "backlog", "A -> B.j backlog (buffers queued at A)"),
                                                   ("input", "credit_available", "credit left at B.j's remote channels"))):
            ax = axes[row][col]
            # per B.j: in each sampling interval, the last value of every (task, channel) summed
            last: Dict[str, Dict[int, Dict[tuple, int]]] = {}
            for r in rows:
                if r["side"] != side or r[field] is None:
                    continue
                if (side == "output") != r["task_name"].startswith("Source"):
                    continue  # A's outputs; B's inputs
                j = r["channel"] + 1 if side == "output" else r["subtask_index"] + 1
                bucket = int((r["ts"] - t0).total_seconds() * 1000) // TIMELINE_INTERVAL_MS
                last.setdefault(f"B.{j}", {}).setdefault(bucket, {})[(r["task_name"], r["index"], r["channel"])] = r[field]
            series = {label: {b * TIMELINE_INTERVAL_MS / 1000: sum(v.values()) for b, v in buckets.items()}
                      for label, buckets in last.items()}
            for label in sorted(series):
                pts = sorted(series[label].items())
                ax.plot([p[0] for p in pts], [p[1] for p in pts], label=label, lw=2.2 if label == f"B.{SLOW_SUBTASK + 1}" else 1)
            ax.set_title(f"{name}: {title}")
            ax.set_xlabel("s")
            ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def run_job(cluster: Optional[BenchCluster], address: str, name: str, credit: bool, slow_rate: Optional[float],
            warmup_s: float, duration_s: float, work_dir: Path, log=print,
            timeline_dir: Optional[Path] = None) -> JobRun:
    """Submit the job, sample its metrics for ``warmup_s + duration_s`` seconds, cancel it.

    :raises RuntimeError: if the job ends (fails) before its window is over.
    """
    from rill.common import Configuration  # noqa: PLC0415
    from rill.common.configuration import ConfigOptions  # noqa: PLC0415
    from rill.datastream import StreamExecutionEnvironment  # noqa: PLC0415
    from rill.datastream.connectors.number_seq import NumberSequenceSource  # noqa: PLC0415

    run = JobRun(name, credit, slow_rate, warmup_s, duration_s)
    prefix = str(work_dir / f"channels-{name}")
    conf = Configuration()
    conf.set(ConfigOptions.EXECUTION_TARGET, address)
    if cluster is not None:  # its secret is in its own run directory, not this process' one
        conf.set(ConfigOptions.SECURITY_CLUSTER_SECRET_FILE, str(cluster.run_dir / f"cluster-{cluster.port}.json"))
    conf.set_string("taskmanager.network.credit-model", "true" if credit else "false")
    # per-channel credit / backlog / pool timelines, one Parquet file per task (plot_timelines)
    if timeline_dir is not None:
        conf.set_string("rill.network.timeline.interval", str(TIMELINE_INTERVAL_MS))
        conf.set_string("rill.network.timeline.dir", str(timeline_dir / name))
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(NUM_SUBTASKS)
    (env.from_source(NumberSequenceSource(0, SEQUENCE_LENGTH - 1), None, "A")
        .key_by(_key)
        .map(SlowSubtaskMap(SLOW_SUBTASK, slow_rate, prefix, SEQUENCE_LENGTH // NUM_SUBTASKS, NUM_SUBTASKS))
        .name("B")
        .add_sink(DiscardingSink()).name("discard"))
    client = env.execute_async(f"backpressure-{name}")
    submitted = time.monotonic()
    started_at = None
    try:
        while True:
            time.sleep(SAMPLE_INTERVAL_S)
            if client.is_done():
                break
            metrics = client.get_metrics()
            tasks = {_label(s): {f: getattr(s, f) for f in _FIELDS} for s in metrics}
            now = time.monotonic()
            if started_at is None:
                if len(tasks) == 2 * NUM_SUBTASKS and all(t["duration_ms"] > 0 for t in tasks.values()):
                    started_at = now
                elif now - submitted > DEADLINE_S:
                    raise RuntimeError(f"job {name}: tasks not running {DEADLINE_S}s after submission: "
                                       f"{client.get_execution_states()}")
                else:
                    continue
            run.samples.append({"t": now - started_at, "wall": time.time(), "tasks": tasks})
            if now - started_at >= warmup_s + duration_s:
                cause = client.get_backpressure_root_cause()
                run.root_cause = cause.as_json() if cause is not None else None
                if cluster is not None:  # after the window: `rill cluster status` costs CPU
                    processes = cluster.task_processes()
                    run.socket_queues = socket_queue_bytes([p for ps in processes.values() for p in ps])
                    run.task_processes_per_te = {k: len(v) for k, v in processes.items()}
                break
        if client.is_done():
            try:
                client.get_job_execution_result().result(0)
                cause = "it finished"
            except Exception as e:  # noqa: BLE001 - the job's failure, reported
                cause = f"{type(e).__name__}: {e}"
            raise RuntimeError(f"job {name} ended before its measurement window was over: {cause}")
    finally:
        t_cancel = time.monotonic()
        if not client.is_done():
            client.cancel()
        try:
            client.get_job_execution_result().result(DEADLINE_S)
        except Exception as e:  # noqa: BLE001 - cancelled (expected) or failed: recorded
            if type(e).__name__ != "JobCancellationException":
                cause = e.__cause__
                run.end_error = f"{type(e).__name__}: {e}" + (f" (cause: {cause!r})" if cause else "")
        run.cancel_s = time.monotonic() - t_cancel
        run.final_status = client.get_job_status().name
        if not client.is_done():
            run.end_error = (run.end_error or "") + f" job not terminal {DEADLINE_S}s after cancel"
        if cluster is not None:
            waited, left = cluster.wait_no_task_processes(20.0)
            run.processes_left_after_s, run.processes_left = waited, left
    windowed = [s for s in run.samples if s["t"] >= warmup_s]
    if len(windowed) >= 2:
        run.window = (windowed[0]["wall"], windowed[-1]["wall"])
    for j in range(1, NUM_SUBTASKS + 1):
        path = Path(f"{prefix}-B{j}.jsonl")
        entries = []
        if path.exists():
            for line in path.read_text().splitlines():
                try:
                    entries.append(json.loads(line))
                except ValueError:  # a line cut by the cancellation
                    pass
        run.channels[f"B.{j}"] = entries
    return run


def _window_pair(run: JobRun, label: str, start_s: Optional[float] = None) -> Optional[Tuple[dict, dict]]:
    start_s = run.warmup_s if start_s is None else start_s
    windowed = [s["tasks"][label] for s in run.samples if s["t"] >= start_s and label in s["tasks"]]
    if len(windowed) < 2 or windowed[-1]["duration_ms"] <= windowed[0]["duration_ms"]:
        return None
    return windowed[0], windowed[-1]


def _records(label: str, m: dict) -> int:
    return m["num_records_out"] if label.startswith("A") else m["num_records_in"]


def summarize_job(run: JobRun) -> Dict[str, Any]:
    """Window figures per subtask, per channel, and totals."""
    from rill.runtime.metrics import backpressure_level  # noqa: PLC0415
    out: Dict[str, Any] = {"subtasks": {}, "channels": {}}
    for label in LABELS:
        pair = _window_pair(run, label)
        if pair is None:
            out["subtasks"][label] = None
            continue
        a, b = pair
        dt_ms = b["duration_ms"] - a["duration_ms"]

        def per_s(f: str) -> float:
            return (b[f] - a[f]) * 1000.0 / dt_ms

        bp = per_s("back_pressured_time_ms")
        out["subtasks"][label] = {
            "records_per_s": (_records(label, b) - _records(label, a)) * 1000.0 / dt_ms,
            "back_pressured_ms_per_s": bp,
            "level": backpressure_level(bp),
            "busy_ms_per_s": per_s("busy_time_ms"),
            "idle_ms_per_s": per_s("idle_time_ms"),
            "out_pool_usage": b["output_pool_usage"],
            "in_pool_usage": b["input_pool_usage"],
            "records_total": _records(label, b),
        }
    last = run.samples[-1]["tasks"] if run.samples else {}
    sent = sum(last[lab]["num_records_out"] for lab in LABELS[:NUM_SUBTASKS] if lab in last)
    received = sum(last[lab]["num_records_in"] for lab in LABELS[NUM_SUBTASKS:] if lab in last)
    out["records_in_flight"] = sent - received
    out["bytes_out_A"] = sum(last[lab]["num_bytes_out"] for lab in LABELS[:NUM_SUBTASKS] if lab in last)
    out["bytes_in_B"] = sum(last[lab]["num_bytes_in"] for lab in LABELS[NUM_SUBTASKS:] if lab in last)
    ws, we = run.window
    for j in range(1, NUM_SUBTASKS + 1):
        entries = [e for e in run.channels.get(f"B.{j}", []) if ws <= e["t"] <= we]
        if len(entries) >= 2 and entries[-1]["t"] > entries[0]["t"]:
            dt = entries[-1]["t"] - entries[0]["t"]
            out["channels"][f"B.{j}"] = [(c1 - c0) / dt for c0, c1 in zip(entries[0]["counts"], entries[-1]["counts"])]
        else:
            out["channels"][f"B.{j}"] = None
    subs = out["subtasks"]
    b3, b4 = subs.get("B.3"), subs.get("B.4")
    out["b3_over_b4"] = (b3["records_per_s"] / b4["records_per_s"]) if b3 and b4 and b4["records_per_s"] > 0 else None
    # the same over the window's second half (the no-credit run's first seconds are a transient)
    half = {}
    for lab in ("B.3", "B.4"):
        pair = _window_pair(run, lab, run.warmup_s + run.duration_s / 2)
        if pair:
            a, b = pair
            half[lab] = (b["num_records_in"] - a["num_records_in"]) * 1000.0 / (b["duration_ms"] - a["duration_ms"])
    out["b3_per_s_2nd_half"], out["b4_per_s_2nd_half"] = half.get("B.3"), half.get("B.4")
    out["b3_over_b4_2nd_half"] = (half["B.3"] / half["B.4"]) if half.get("B.3") is not None and half.get("B.4") else None
    a_pools = [subs[lab]["out_pool_usage"] for lab in LABELS[:NUM_SUBTASKS] if subs.get(lab)]
    out["a_out_pool_usage"] = statistics.fmean(a_pools) if a_pools else None
    out["b4_in_pool_usage"] = b4["in_pool_usage"] if b4 else None
    out["total_B_per_s"] = sum(s["records_per_s"] for lab, s in subs.items() if lab.startswith("B") and s)
    series = job_time_series(run)
    for lab in ("B.3", "B.4"):
        pts = [r for t, r in series[lab] if t > run.warmup_s]
        out[f"{lab}_zero_samples"] = (sum(1 for r in pts if r == 0) / len(pts)) if pts else None
    out["b4_backlog_s"] = (out["records_in_flight"] / b4["records_per_s"]) if b4 and b4["records_per_s"] > 0 else None
    return out


def job_time_series(run: JobRun) -> Dict[str, List[Tuple[float, float]]]:
    """records/s per subtask between consecutive samples whose task clocks moved."""
    series: Dict[str, List[Tuple[float, float]]] = {lab: [] for lab in LABELS}
    for lab in LABELS:
        prev = None
        for s in run.samples:
            m = s["tasks"].get(lab)
            if m is None:
                continue
            if prev is not None and m["duration_ms"] > prev[1]["duration_ms"]:
                rate = (_records(lab, m) - _records(lab, prev[1])) * 1000.0 / (m["duration_ms"] - prev[1]["duration_ms"])
                series[lab].append((s["t"], rate))
            if prev is None or m["duration_ms"] > prev[1]["duration_ms"]:
                prev = (s["t"], m)
    return series


def _k(x: Optional[float]) -> str:
    if x is None:
        return "—"
    if x >= 1e6:
        return f"{x / 1e6:.2f} M"
    if x >= 1e4:
        return f"{x / 1e3:.0f} k"
    if x >= 1e3:
        return f"{x / 1e3:.1f} k"
    return f"{x:.0f}"


def format_job_table(runs: Sequence[JobRun], summaries: Sequence[Dict[str, Any]]) -> str:
    head = ["subtask", "slot (TE)"]
    for run in runs:
        head += [f"{run.name} rec/s", f"{run.name} back-pressured ms/s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for lab in LABELS:
        i = int(lab.split(".")[1]) - 1
        row = [lab, f"{i} (TE{i // 2 + 1})"]
        for summary in summaries:
            s = summary["subtasks"].get(lab)
            if s is None:
                row += ["—", "—"]
            else:
                row += [_k(s["records_per_s"]), f"{s['back_pressured_ms_per_s']:.0f} {s['level']}"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def format_job_details(runs: Sequence[JobRun], summaries: Sequence[Dict[str, Any]]) -> str:
    head = ["run", "slow B.4 limit", "B rec/s (sum)", "B.3 / B.4", "B.3 / B.4, 2nd half of window",
            "A out-pool / B.4 in-pool usage (end)", "A busy/bp/idle ms/s (mean)",
            "B.1–3 idle ms/s (mean)", "B.4 busy ms/s", "0.5 s samples in which B.3 got nothing",
            "records in flight (end)", "≈ s of B.4's work", "TCP queues in the kernel (end)",
            "ended as", "cancel s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for run, s in zip(runs, summaries):
        subs = s["subtasks"]
        a = [subs[lab] for lab in LABELS[:NUM_SUBTASKS] if subs.get(lab)]
        bf = [subs[lab] for lab in ("B.1", "B.2", "B.3") if subs.get(lab)]
        b4 = subs.get("B.4")
        mean = (lambda xs: statistics.fmean(xs) if xs else float("nan"))
        lines.append("| " + " | ".join([
            run.name,
            f"{_k(run.slow_rate)} rec/s" if run.slow_rate else "none",
            _k(s["total_B_per_s"]),
            f"{s['b3_over_b4']:.2f}" if s["b3_over_b4"] is not None else "—",
            (f"{s['b3_over_b4_2nd_half']:.2f} ({_k(s['b3_per_s_2nd_half'])} / {_k(s['b4_per_s_2nd_half'])})"
             if s["b3_over_b4_2nd_half"] is not None else "—"),
            (f"{s['a_out_pool_usage']:.2f} / {s['b4_in_pool_usage']:.2f}"
             if s["a_out_pool_usage"] is not None and s["b4_in_pool_usage"] is not None else "—"),
            f"{mean([x['busy_ms_per_s'] for x in a]):.0f} / {mean([x['back_pressured_ms_per_s'] for x in a]):.0f}"
            f" / {mean([x['idle_ms_per_s'] for x in a]):.0f}",
            f"{mean([x['idle_ms_per_s'] for x in bf]):.0f}",
            f"{b4['busy_ms_per_s']:.0f}" if b4 else "—",
            f"{100 * s['B.3_zero_samples']:.0f}%" if s["B.3_zero_samples"] is not None else "—",
            f"{s['records_in_flight']:,}",
            f"{s['b4_backlog_s']:.1f}" if s["b4_backlog_s"] is not None and run.slow_rate else "—",
            f"{sum(run.socket_queues) / 2 ** 20:.1f} MiB" if run.socket_queues else "—",
            run.final_status + (" (!)" if run.end_error else ""),
            f"{run.cancel_s:.2f}" if run.cancel_s is not None else "—",
        ]) + " |")
    return "\n".join(lines)


def format_channel_table(runs: Sequence[JobRun], summaries: Sequence[Dict[str, Any]]) -> str:
    head = ["consumer"] + [f"{run.name}: A.1–A.4 → B.j rec/s per channel" for run in runs]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for j in range(1, NUM_SUBTASKS + 1):
        row = [f"B.{j}"]
        for s in summaries:
            ch = s["channels"].get(f"B.{j}")
            row.append("—" if ch is None else " / ".join(_k(x) for x in ch))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


# =============================================================================================
# Part 2: two channels on one connection between two processes
# =============================================================================================

def _channel_key(record):
    return record[0]


def _channel_partition(key, num_partitions):
    return key


def _producer_main(secret: bytes, conn, layout: str, records_per_buffer: int) -> None:
    """The producer process: serves two channels (``layout`` "separate": two partitions, one
    writer thread and one buffer pool each; "shared": one partition of two subpartitions, one
    writer). Records are ``(channel, seq)``. Commands on ``conn``: ("produce", channel, count or
    None), ("stop",), ("stats",), ("exit",)."""
    from rill.network import (  # noqa: PLC0415
        BufferPoolDestroyedError,
        CustomPartitionerWrapper,
        ForwardPartitioner,
        LocalBufferPool,
        NettyConfig,
        NettyConnectionManager,
        PartitionReleasedError,
        RecordWriter,
        ResultPartition,
        ResultPartitionID,
        ResultPartitionManager,
        ResultPartitionType,
    )

    manager = ResultPartitionManager()
    network = NettyConnectionManager(NettyConfig(secret=secret), manager, name="bp-producer")

    def make_partition(name: str, n: int) -> "ResultPartition":
        pool = LocalBufferPool(n * BUFFERS_PER_CHANNEL + FLOATING_BUFFERS, f"{name} pool")
        partition = ResultPartition(ResultPartitionID(name, "attempt-0"), ResultPartitionType.PIPELINED_BOUNDED,
                                    n, pool, name)
        manager.register_result_partition(partition)
        return partition

    stop = threading.Event()
    produced = [0, 0]
    done = [False, False]
    errors: List[str] = []
    threads: List[threading.Thread] = []
    try:
        address = network.start()
        if layout == "separate":
            partitions = [make_partition("channel-1", 1), make_partition("channel-2", 1)]
            channels = [(partitions[0].partition_id, 0), (partitions[1].partition_id, 0)]
            writers = [RecordWriter(p, ForwardPartitioner(), records_per_buffer) for p in partitions]
        else:
            partition = make_partition("shared", 2)
            partitions = [partition]
            channels = [(partition.partition_id, 0), (partition.partition_id, 1)]
            writers = [RecordWriter(partition, CustomPartitionerWrapper(_channel_partition, _channel_key),
                                    records_per_buffer)]
        conn.send(("address", address, channels))

        def write(writer, targets: List[int], count: Optional[int]) -> None:
            try:
                while not stop.is_set() and (count is None or produced[targets[0]] < count):
                    n = records_per_buffer if count is None else min(records_per_buffer, count - produced[targets[0]])
                    start = produced[targets[0]]
                    # with two targets, the channels' records alternate, as a keyed stream's do
                    writer.emit_batch([(c, s) for s in range(start, start + n) for c in targets])
                    for c in targets:
                        produced[c] += n
                writer.flush_all()
                writer.partition.finish()
                for c in targets:
                    done[c] = True
            except (BufferPoolDestroyedError, PartitionReleasedError):
                pass
            except Exception as e:  # noqa: BLE001 - reported to the consumer
                errors.append(f"{type(e).__name__}: {e}")
            finally:
                writer.close()

        while True:
            command = conn.recv()
            if command[0] == "produce":
                _, channel, count = command
                if layout == "separate":
                    target = (writers[channel], [channel])
                else:
                    target = (writers[0], [0, 1])
                t = threading.Thread(target=write, args=(*target, count), name=f"writer-{channel}", daemon=True)
                t.start()
                threads.append(t)
                conn.send(("ok",))
            elif command[0] == "stop":
                stop.set()
                conn.send(("ok",))
            elif command[0] == "stats":
                readers = {}
                for r in network.reader_statistics():
                    for c, (pid, sub) in enumerate(channels):
                        if r.partition_id == pid and r.subpartition_index == sub:
                            readers[c] = {"records_sent": r.records_sent, "segments_sent": r.segments_sent,
                                          "back_pressured_time_ns": r.back_pressured_time_ns,
                                          "back_pressured": r.back_pressured, "credit_available": r.credit_available}
                pools = [p.buffer_pool.statistics() for p in partitions]
                conn.send(("stats", {
                    "produced": list(produced), "done": list(done), "errors": list(errors),
                    "readers": readers,
                    "writers_blocked": [getattr(s, "requesters_blocked", 0) for s in pools],
                    "pool_used": [getattr(s, "used_buffers", 0) for s in pools],
                    "network_errors": [repr(e) for e in network.network_thread_errors()],
                    "outbound_bytes_queued": [c.outbound_bytes_queued for c in network.connection_statistics()],
                }))
            elif command[0] == "exit":
                break
    finally:
        stop.set()
        manager.shutdown()
        for t in threads:
            t.join(5.0)
        network.shutdown()


class _Producer:
    """The producer process and its command pipe."""

    def __init__(self, secret: bytes, layout: str, records_per_buffer: int = RECORDS_PER_BUFFER):
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_producer_main, args=(secret, child, layout, records_per_buffer),
                                   daemon=True, name=f"bp-producer-{layout}")
        self.process.start()
        child.close()
        try:
            kind, address, channels = self.ask(None, timeout_s=60.0)
            if kind != "address":
                raise RuntimeError(f"the producer process answered {kind!r} instead of its address")
        except BaseException:
            self.process.kill()
            self.process.join()
            self.conn.close()
            raise
        self.address, self.channels = tuple(address), channels

    def ask(self, command: Optional[tuple], timeout_s: float = DEADLINE_S):
        if command is not None:
            self.conn.send(command)
        if not self.conn.poll(timeout_s):
            raise RuntimeError(f"the producer process did not answer {command!r} within {timeout_s}s")
        return self.conn.recv()

    def stats(self) -> dict:
        return self.ask(("stats",))[1]

    def close(self) -> None:
        try:
            self.conn.send(("exit",))
        except (BrokenPipeError, OSError):
            pass
        self.process.join(DEADLINE_S)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
            raise RuntimeError("the producer process did not exit")
        self.conn.close()


class ChannelConsumer:
    """Reads one gate on its own thread, like a task: poll, and wait for the availability
    listener when there is nothing. ``hold()`` stops polling (buffers already received stay
    queued, holding their credit); ``throttle(rate)`` keeps to ``rate`` records/s, holding each
    buffer while 'processing' it; ``release()`` reads at full speed. Checks that channel ``c``
    receives ``(c, 0), (c, 1), ...`` in order."""

    def __init__(self, gate, channel: int, name: str):
        self.gate = gate
        self.channel = channel
        self.name = name
        self.records = 0
        self.errors: List[str] = []
        self.finished = False
        self._rate: Optional[float] = None
        self._held = threading.Event()
        self._go = threading.Event()
        self._go.set()
        self._stop = threading.Event()
        self._wake = threading.Event()
        gate.set_availability_listener(self._wake.set)
        gate.setup()
        self.thread = threading.Thread(target=self._run, name=f"consumer-{name}", daemon=True)
        self.thread.start()

    def hold(self) -> None:
        self._go.clear()

    def throttle(self, rate: Optional[float]) -> None:
        self._rate = rate
        self._go.set()

    def release(self) -> None:
        self.throttle(None)

    def _run(self) -> None:
        next_due = 0.0
        try:
            while not self._stop.is_set() and not self.gate.is_finished():
                if not self._go.is_set():
                    self._go.wait(0.05)
                    continue
                self._wake.clear()
                boe = self.gate.poll_next()
                if boe is None:
                    self._wake.wait(0.05)
                    continue
                if not boe.is_buffer():
                    continue
                buffer = boe.buffer
                values = buffer.values
                n = len(values)
                first, last = values[0], values[-1]
                if (first != (self.channel, self.records) or last != (self.channel, self.records + n - 1)
                        or any(v[0] != self.channel for v in values)):
                    self.errors.append(f"{self.name}: expected records from {(self.channel, self.records)}, "
                                       f"got {first!r}..{last!r}")
                rate = self._rate
                if rate:
                    now = time.perf_counter()
                    next_due = max(next_due, now) + n / rate
                    if next_due > now:
                        time.sleep(next_due - now)
                self.records += n
                buffer.recycle_buffer()
            self.finished = self.gate.is_finished()
        except Exception as e:  # noqa: BLE001 - reported by the run
            self.errors.append(f"{self.name}: {type(e).__name__}: {e}")

    def close(self, timeout_s: float = DEADLINE_S) -> None:
        self._stop.set()
        self._go.set()
        self.thread.join(timeout_s)
        self.gate.close()


def _open_consumers(secret: bytes, producer: _Producer, flow_control: bool):
    from rill.network import NettyConfig, NettyConnectionManager, RemoteInputChannel, SingleInputGate  # noqa: PLC0415
    client = NettyConnectionManager(NettyConfig(secret=secret, flow_control=flow_control), name="bp-consumer")
    client.start()
    channels, consumers = [], []
    for c, (pid, sub) in enumerate(producer.channels):
        channel = RemoteInputChannel(client, producer.address, pid, sub,
                                     client.create_floating_buffer_pool(f"gate of channel {c + 1}"))
        channels.append(channel)
        gate = SingleInputGate(0, [channel], f"consumer of channel {c + 1}")
        consumers.append(ChannelConsumer(gate, c, f"channel {c + 1}"))
    _wait_until(lambda: [s.channels for s in client.connection_statistics()] == [2],
                "both channels on one connection")
    return client, channels, consumers


def _wait_until(predicate, what: str, timeout_s: float = DEADLINE_S, interval_s: float = 0.001) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout_s}s waiting until {what}")
        time.sleep(interval_s)


@dataclass
class ConnectionRun:
    layout: str
    flow_control: bool
    duration_s: float
    switch_s: float
    slow_rate: float = 0.0
    samples: List[Tuple[float, int, int, int]] = field(default_factory=list)  # t, ch1, ch2, paused ns
    stats_at_switch: dict = field(default_factory=dict)
    stats_at_end: dict = field(default_factory=dict)
    totals: Tuple[int, int] = (0, 0)
    produced: Tuple[int, int] = (0, 0)
    errors: List[str] = field(default_factory=list)
    drain_s: float = 0.0


def _rate_between(samples, t0: float, t1: float, index: int) -> float:
    inside = [s for s in samples if t0 <= s[0] <= t1]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return float("nan")
    return (inside[-1][index] - inside[0][index]) / (inside[-1][0] - inside[0][0])


def run_connection(layout: str, flow_control: bool, duration_s: float, slow_factor: float,
                   secret: Optional[bytes] = None) -> ConnectionRun:
    """Both channels at full speed for 30% of ``duration_s``, then channel 2 throttled to
    1/``slow_factor`` of its phase-1 rate; then stop, drain and check."""
    secret = secret or os.urandom(32)
    switch = duration_s * 0.3
    run = ConnectionRun(layout, flow_control, duration_s, switch)
    producer = _Producer(secret, layout)
    client = None
    consumers: List[ChannelConsumer] = []
    try:
        client, channels, consumers = _open_consumers(secret, producer, flow_control)
        producer.ask(("produce", 0, None))
        if layout == "separate":
            producer.ask(("produce", 1, None))
        started = time.monotonic()
        switched = False
        while True:
            time.sleep(CONN_SAMPLE_S)
            t = time.monotonic() - started
            [conn_stats] = client.connection_statistics()
            run.samples.append((t, consumers[0].records, consumers[1].records, conn_stats.read_paused_time_ns))
            if not switched and t >= switch:
                run.slow_rate = max(1.0, _rate_between(run.samples, 0.5 * switch, switch, 2) / slow_factor)
                consumers[1].throttle(run.slow_rate)
                run.stats_at_switch = producer.stats()
                switched = True
            if t >= duration_s:
                break
        run.stats_at_end = producer.stats()
        producer.ask(("stop",))
        drain_start = time.monotonic()
        consumers[1].release()
        _wait_until(lambda: all(c.finished or c.errors for c in consumers), "both channels read to the end",
                    timeout_s=120.0, interval_s=0.01)
        run.drain_s = time.monotonic() - drain_start
        final = producer.stats()
        run.produced = tuple(final["produced"])
        run.totals = (consumers[0].records, consumers[1].records)
        run.errors = [e for c in consumers for e in c.errors] + final["errors"] + final["network_errors"]
        if run.totals != run.produced:
            run.errors.append(f"records produced {run.produced} != received {run.totals}")
        run.errors += [repr(e) for e in client.network_thread_errors()]
    finally:
        for c in consumers:
            c.close()
        if client is not None:
            client.shutdown()
        producer.close()
    return run


def summarize_connection(run: ConnectionRun) -> Dict[str, float]:
    s1 = (0.5 * run.switch_s, run.switch_s)
    s2 = (run.switch_s + 0.5, run.duration_s)
    fast1, slow1 = _rate_between(run.samples, *s1, 1), _rate_between(run.samples, *s1, 2)
    fast2, slow2 = _rate_between(run.samples, *s2, 1), _rate_between(run.samples, *s2, 2)
    paused = _rate_between(run.samples, *s2, 3) / 1e9  # seconds paused per second
    bp = float("nan")
    a, b = run.stats_at_switch.get("readers", {}), run.stats_at_end.get("readers", {})
    a2, b2 = a.get(1) or a.get("1"), b.get(1) or b.get("1")
    if a2 and b2:
        bp = (b2["back_pressured_time_ns"] - a2["back_pressured_time_ns"]) / 1e9 / (run.duration_s - run.switch_s)
    return {"fast_1": fast1, "slow_1": slow1, "fast_2": fast2, "slow_2": slow2,
            "ratio_2": fast2 / slow2 if slow2 else float("nan"),
            "fast_kept": fast2 / fast1 if fast1 else float("nan"),
            "paused": paused, "slow_sender_bp": bp}


def format_connection_table(runs: Sequence[ConnectionRun]) -> str:
    head = ["layout", "flow control", "phase 1 ch1 / ch2 rec/s", "phase 2 ch1 (fast) rec/s",
            "phase 2 ch2 (slow) rec/s", "ch1 / ch2", "ch1 kept", "connection read paused",
            "ch2 sender without credit"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for run in runs:
        s = summarize_connection(run)
        pct = (lambda x: "—" if math.isnan(x) else f"{100 * x:.0f}%")
        lines.append("| " + " | ".join([
            run.layout, "credit" if run.flow_control else "off",
            f"{_k(s['fast_1'])} / {_k(s['slow_1'])}", _k(s["fast_2"]), _k(s["slow_2"]),
            f"{s['ratio_2']:.1f}", pct(s["fast_kept"]), pct(s["paused"]),
            pct(s["slow_sender_bp"]) if run.flow_control else "n/a",
        ]) + " |")
    return "\n".join(lines)


@dataclass
class StallResult:
    """Counts of the stall scenario (see the module docstring)."""

    flow_control: bool
    num_fast: int
    slow_buffers_held: int = 0
    slow_sender_back_pressured: bool = False
    connection_paused: bool = False
    fast_written_by_producer: int = 0  # records of channel 1 its writer emitted
    fast_sent_by_producer: int = 0  # records of channel 1 the producer's server sent meanwhile
    fast_received_while_stalled: int = 0
    slow_records_after_fast: int = 0
    fast_total: int = 0
    slow_total: int = 0
    slow_produced: int = 0
    errors: List[str] = field(default_factory=list)


def stall_scenario(flow_control: bool, num_fast: int = 100 * RECORDS_PER_BUFFER,
                   num_slow: int = 40 * RECORDS_PER_BUFFER, secret: Optional[bytes] = None) -> StallResult:
    """Channel 2 stops reading; once it is stalled, channel 1 gets ``num_fast`` records.
    States, not timing: every wait is for an observable state (deadline 30 s)."""
    secret = secret or os.urandom(32)
    result = StallResult(flow_control, num_fast)
    producer = _Producer(secret, "separate")
    client = None
    consumers: List[ChannelConsumer] = []
    try:
        client, channels, consumers = _open_consumers(secret, producer, flow_control)
        fast_channel, slow_channel = channels
        consumers[1].hold()
        producer.ask(("produce", 1, num_slow))
        total_buffers = BUFFERS_PER_CHANNEL + FLOATING_BUFFERS

        if flow_control:
            def slow_stalled() -> bool:
                st = slow_channel.statistics()
                readers = producer.stats()["readers"]
                r = readers.get(1)
                return (st.exclusive_buffers_in_use + st.floating_buffers_in_use == total_buffers
                        and r is not None and r["back_pressured"])
            _wait_until(slow_stalled, "channel 2 used its credit and its sender stalls", interval_s=0.01)
        else:
            def connection_paused() -> bool:
                stats = client.connection_statistics()
                return len(stats) == 1 and stats[0].read_paused and slow_channel.statistics().blocking_connection
            _wait_until(connection_paused, "channel 2, out of buffers, pauses the connection")
        st = slow_channel.statistics()
        result.slow_buffers_held = st.exclusive_buffers_in_use + st.floating_buffers_in_use
        result.slow_sender_back_pressured = bool((producer.stats()["readers"].get(1) or {}).get("back_pressured"))

        producer.ask(("produce", 0, num_fast))
        if flow_control:
            _wait_until(lambda: consumers[0].finished or consumers[0].errors,
                        "channel 1 read all its records while channel 2 is stalled", interval_s=0.01)
        else:
            def fast_left_the_producer() -> bool:
                s = producer.stats()
                r = s["readers"].get(0)
                if r is None:  # released after sending EndOfPartition (it was requested up front)
                    return s["done"][0]
                return r["records_sent"] > 0 and (s["done"][0] or s["writers_blocked"][0] > 0)
            _wait_until(fast_left_the_producer,
                        "channel 1's records left the producer (its writer is done or blocked)", interval_s=0.01)
        stats = producer.stats()
        result.fast_written_by_producer = stats["produced"][0]
        reader = stats["readers"].get(0)
        # a reader that sent EndOfPartition is released and no longer listed: it sent everything
        result.fast_sent_by_producer = reader["records_sent"] if reader else stats["produced"][0]
        result.connection_paused = bool(client.connection_statistics()[0].read_paused)
        result.fast_received_while_stalled = consumers[0].records
        st = slow_channel.statistics()
        result.slow_records_after_fast = st.records_received
        if st.exclusive_buffers_in_use + st.floating_buffers_in_use != result.slow_buffers_held:
            result.errors.append("channel 2's buffers changed while it was stalled")

        consumers[1].release()
        _wait_until(lambda: all(c.finished or c.errors for c in consumers), "both channels read to the end",
                    interval_s=0.01)
        final = producer.stats()
        result.fast_total, result.slow_total = consumers[0].records, consumers[1].records
        result.slow_produced = final["produced"][1]
        result.errors += [e for c in consumers for e in c.errors] + final["errors"] + final["network_errors"]
        if (result.fast_total, result.slow_total) != (num_fast, num_slow):
            result.errors.append(f"received {(result.fast_total, result.slow_total)}, "
                                 f"expected {(num_fast, num_slow)}")
        result.errors += [repr(e) for e in client.network_thread_errors()]
    finally:
        for c in consumers:
            c.close()
        if client is not None:
            client.shutdown()
        producer.close()
    return result


def format_stall_table(results: Sequence[StallResult]) -> str:
    head = ["flow control", "ch2 buffers held / records read", "ch2 sender stalled by credit",
            "connection read paused", "ch1 records written / sent by the producer",
            "ch1 records received while ch2 stalled",
            "after ch2's release"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        lines.append("| " + " | ".join([
            "credit" if r.flow_control else "off",
            f"{r.slow_buffers_held} / {r.slow_records_after_fast:,}",
            "yes" if r.slow_sender_back_pressured else "no",
            "yes" if r.connection_paused else "no",
            f"{r.fast_written_by_producer:,} / {r.fast_sent_by_producer:,}",
            f"{r.fast_received_while_stalled:,} of {r.num_fast:,}",
            "all records, in order" if not r.errors else "; ".join(r.errors)[:120],
        ]) + " |")
    return "\n".join(lines)


# =============================================================================================
# Plot, CLI
# =============================================================================================

def plot(path: Path, job_runs: Sequence[JobRun], job_summaries: Sequence[dict],
         conn_runs: Sequence[ConnectionRun]) -> None:
    import matplotlib  # noqa: PLC0415
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    rows = (1 if job_runs else 0) + (1 if conn_runs else 0)
    if rows == 0:
        return
    fig, axes = plt.subplots(rows, 3, figsize=(18, 5.2 * rows), squeeze=False)
    colors = {"baseline": "#999999", "credit": "#1f77b4", "no-credit": "#d62728"}
    r = 0
    if job_runs:
        ax_rate, ax_bp, ax_ts = axes[r]
        width = 0.8 / len(job_runs)
        x = list(range(len(LABELS)))
        for k, (run, s) in enumerate(zip(job_runs, job_summaries)):
            rates = [(s["subtasks"].get(lab) or {}).get("records_per_s", 0) for lab in LABELS]
            bps = [(s["subtasks"].get(lab) or {}).get("back_pressured_ms_per_s", 0) for lab in LABELS]
            xs = [i + (k - (len(job_runs) - 1) / 2) * width for i in x]
            ax_rate.bar(xs, rates, width, label=run.name, color=colors.get(run.name))
            ax_bp.bar(xs, bps, width, label=run.name, color=colors.get(run.name))
        ax_rate.set_yscale("log")
        ax_rate.set_title("Job: records/s per subtask (window)")
        ax_bp.set_title("Job: back-pressured ms/s per subtask (window)")
        ax_bp.axhline(100, color="k", lw=0.5, ls=":")
        ax_bp.axhline(500, color="k", lw=0.5, ls=":")
        ax_bp.set_ylim(0, 1000)
        for ax in (ax_rate, ax_bp):
            ax.set_xticks(x)
            ax.set_xticklabels(LABELS)
            ax.legend(fontsize=8)
        for run in job_runs:
            if run.name == "baseline":
                continue
            series = job_time_series(run)
            for lab, style in (("B.3", "-"), ("B.4", "--")):
                pts = series[lab]
                ax_ts.plot([p[0] for p in pts], [max(p[1], 1.0) for p in pts], style, color=colors.get(run.name),
                           label=f"{run.name} {lab}")
        ax_ts.set_yscale("log")
        ax_ts.set_xlabel("s since all tasks ran")
        ax_ts.set_title("Job: B.3 (solid) and B.4 (dashed) records/s over time\n(0 drawn at 1; dotted: end of warm-up)")
        if job_runs:
            ax_ts.axvline(job_runs[0].warmup_s, color="k", lw=0.5, ls=":")
        ax_ts.legend(fontsize=8)
        r += 1
    if conn_runs:
        panels = [("separate", True), ("separate", False), ("shared", None)]
        for ax, (layout, fc) in zip(axes[r], panels):
            for run in conn_runs:
                if run.layout != layout or (fc is not None and run.flow_control != fc):
                    continue
                color = colors["credit" if run.flow_control else "no-credit"]
                tag = "credit" if run.flow_control else "no credit"
                for idx, style, name in ((1, "-", "ch1 (fast)"), (2, "--", "ch2 (slowed)")):
                    pts = [(b[0], (b[idx] - a[idx]) / (b[0] - a[0])) for a, b in zip(run.samples, run.samples[1:])
                           if b[0] > a[0]]
                    ax.plot([p[0] for p in pts], [max(p[1], 1.0) for p in pts], style, color=color,
                            label=f"{tag} {name}")
                ax.axvline(run.switch_s, color="k", lw=0.5, ls=":")
            title = {"separate": "two producers (own pools)", "shared": "one producer, two subpartitions"}[layout]
            mode = "" if fc is None else (", credit" if fc else ", no flow control")
            ax.set_title(f"Connection: {title}{mode}\nrecords/s per channel; ch2 slowed at the dotted line")
            ax.set_yscale("log")
            ax.set_xlabel("s")
            ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _machine() -> Dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"nproc": len(os.sched_getaffinity(0)), "cpu": cpu, "python": sys.version.split()[0],
            "load_average": os.getloadavg()}


def _jsonable(x):
    if isinstance(x, float) and math.isnan(x):
        return None
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return x


def run_job_part(args, log) -> Tuple[List[JobRun], List[dict], List[str], int]:
    """Start a cluster (unless --cluster), run baseline/credit/no-credit, stop it."""
    problems: List[str] = []
    left: List[int] = []
    runs: List[JobRun] = []
    summaries: List[dict] = []
    work = Path(tempfile.mkdtemp(prefix="rill-bp-"))
    cluster = None
    try:
        if args.cluster:
            address = args.cluster
        else:
            cluster = BenchCluster(work, 2, 2)
            log(f"starting a cluster of 2 TaskExecutors x 2 slots at {cluster.address} (RILL_RUN_DIR={work})")
            cluster.start()
            address = cluster.address
        slow_rate = args.slow_rate
        plan = [("baseline", True, None)] if not slow_rate else []
        plan += [("credit", True, "slow"), ("no-credit", False, "slow")]
        for name, credit, slow in plan:
            rate = slow_rate if slow else None
            log(f"job run '{name}': credit-based flow control {'on' if credit else 'off'}, "
                f"B.4 limited to {_k(rate) + ' rec/s' if rate else 'nothing'}, {args.warmup:g} s warm-up + "
                f"{args.duration:g} s window ...")
            run = run_job(cluster, address, name, credit, rate, args.warmup, args.duration, work, log,
                          timeline_dir=Path(args.out).resolve() / "timelines")
            summary = summarize_job(run)
            summary["root_cause"] = run.root_cause
            log(f"job run '{name}': backpressure root cause {json.dumps(run.root_cause)}")
            if name == "credit" and (run.root_cause is None or not run.root_cause["vertex-name"].startswith("B")
                                     or run.root_cause["subtask"] != SLOW_SUBTASK):
                problems.append(f"job run '{name}': the root cause should be B.{SLOW_SUBTASK + 1}, "
                                f"got {json.dumps(run.root_cause)}")
            runs.append(run)
            summaries.append(summary)
            if run.end_error:
                problems.append(f"job run '{name}' ended {run.final_status} after cancel: {run.end_error}")
            if run.processes_left:
                problems.append(f"job run '{name}': task processes {run.processes_left} still alive "
                                f"{run.processes_left_after_s:.1f} s after the job ended")
            if name == "baseline":
                b_rates = [summary["subtasks"][f"B.{j}"]["records_per_s"] for j in range(1, NUM_SUBTASKS + 1)
                           if summary["subtasks"].get(f"B.{j}")]
                if not b_rates:
                    raise RuntimeError("the baseline run measured no B subtask")
                slow_rate = statistics.median(b_rates) / args.slow_factor
                log(f"  baseline B rec/s per subtask: {', '.join(_k(x) for x in b_rates)}; B.4 will be limited "
                    f"to median / {args.slow_factor:g} = {_k(slow_rate)} rec/s")
    finally:
        if cluster is not None:
            left = cluster.stop()
            if left:
                problems.append(f"processes left after `rill cluster stop` (killed): {left}")
            else:
                log(f"cluster stopped; none of its {len(cluster.pids)} processes is left")
        shutil.rmtree(work, ignore_errors=True)
    return runs, summaries, problems, len(left)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.backpressure", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="out/backpressure", help="directory for backpressure.png/.json")
    parser.add_argument("--duration", type=float, default=None, help="job-level measurement window, s (15)")
    parser.add_argument("--warmup", type=float, default=None, help="job-level warm-up before the window, s (3)")
    parser.add_argument("--conn-duration", type=float, default=None, help="connection-level run length, s (8)")
    parser.add_argument("--slow-factor", type=float, default=10.0,
                        help="B.4 / channel 2 run at 1/this of the rate measured without slowness (10)")
    parser.add_argument("--slow-rate", type=float, default=None,
                        help="limit B.4 to this many records/s instead (skips the baseline run)")
    parser.add_argument("--part", choices=("all", "job", "connection"), default="all")
    parser.add_argument("--cluster", default=None,
                        help="use this running cluster (cluster://host:port, >= 4 free slots on this machine) "
                             "instead of starting one")
    parser.add_argument("--quick", action="store_true", help="short runs (smoke test)")
    parser.add_argument("-q", "--quiet", action="store_true")
    args = parser.parse_args(argv)
    if args.duration is None:
        args.duration = 2.0 if args.quick else 15.0
    if args.warmup is None:
        args.warmup = 1.0 if args.quick else 3.0
    if args.conn_duration is None:
        args.conn_duration = 3.0 if args.quick else 8.0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = (lambda *a: None) if args.quiet else (lambda *a: print(*a, flush=True))
    started = time.monotonic()
    problems: List[str] = []
    leftover = 0
    report: Dict[str, Any] = {"machine": _machine(), "args": vars(args)}
    job_runs: List[JobRun] = []
    job_summaries: List[dict] = []
    conn_runs: List[ConnectionRun] = []
    stalls: List[StallResult] = []

    if args.part in ("all", "job"):
        job_runs, job_summaries, job_problems, leftover = run_job_part(args, log)
        problems += job_problems
        report["job"] = [{"run": asdict(r), "summary": s, "series": job_time_series(r)}
                         for r, s in zip(job_runs, job_summaries)]
    if args.part in ("all", "connection"):
        secret = os.urandom(32)
        for fc in (True, False):
            log(f"connection stall scenario, flow control {'on' if fc else 'off'} ...")
            stalls.append(stall_scenario(fc, secret=secret))
        for layout in ("separate", "shared"):
            for fc in (True, False):
                log(f"connection run: layout {layout}, flow control {'on' if fc else 'off'}, "
                    f"{args.conn_duration:g} s ...")
                conn_runs.append(run_connection(layout, fc, args.conn_duration, args.slow_factor, secret))
        for s in stalls:
            problems += [f"stall scenario (flow control {s.flow_control}): {e}" for e in s.errors]
        for r in conn_runs:
            problems += [f"connection run {r.layout}/{r.flow_control}: {e}" for e in r.errors]
        report["connection"] = {
            "stall": [asdict(s) for s in stalls],
            "runs": [{"run": asdict(r), "summary": summarize_connection(r)} for r in conn_runs],
        }

    elapsed = time.monotonic() - started
    print()
    if job_runs:
        print("## Job level: A (p=4) -> key_by -> B (p=4), 2 TaskExecutors x 2 slots, B.4 slow")
        print(f"(window: {args.duration:g} s after a {args.warmup:g} s warm-up; A: records out, B: records in; "
              "back-pressured ms/s with Flink's level)\n")
        print(format_job_table(job_runs, job_summaries))
        print()
        print(format_job_details(job_runs, job_summaries))
        print()
        print(format_channel_table(job_runs, job_summaries))
        print()
    if stalls:
        print("## Connection level: stall scenario (channel 2 stops reading; then channel 1 gets its records)\n")
        print(format_stall_table(stalls))
        print()
    if conn_runs:
        print("## Connection level: two channels on one connection between two processes "
              f"(phase 2: channel 2 at 1/{args.slow_factor:g} of its phase-1 rate)\n")
        print(format_connection_table(conn_runs))
        print()
    png = out / "backpressure.png"
    plot(png, job_runs, job_summaries, conn_runs)
    timelines_png = plot_timelines(out / "channel_timelines.png", out, [r.name for r in job_runs])
    if timelines_png is not None:
        print(f"channel timelines: {timelines_png} (Parquet: {out / 'timelines'})")
    report["elapsed_s"] = elapsed
    report["problems"] = problems
    (out / "backpressure.json").write_text(json.dumps(_jsonable(report), indent=1, default=str))
    print(f"plot: {png}   data: {out / 'backpressure.json'}   ({elapsed:.0f} s)")
    for p in problems:
        print(f"PROBLEM: {p}")
    if leftover:
        return 3
    hard = [p for p in problems if "ended" not in p and "still alive" not in p]
    return 1 if hard else 0


if __name__ == "__main__":
    sys.exit(main())
