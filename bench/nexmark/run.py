"""The Nexmark benchmark: ``python -m bench.nexmark`` (or ``rill bench nexmark``, which runs
this from the repository root).

One run per ``--query``: the Nexmark source (``--events N`` events, event-time rate
``--rate``) feeding the query at ``--parallelism P`` into a :class:`LatencySink`, embedded
(default) or on a local cluster it starts (``--target cluster``: ``rill cluster start`` with
one TaskExecutor of P slots and ``bench`` on its ``PYTHONPATH``), optionally with exactly-once
checkpoints every ``--checkpoint-interval-ms``. It prints, per run:

- events/s: events ÷ the job's net runtime (JobMaster start to the last task's end);
- events/s per core: events ÷ the CPU time (user + system) of every process involved (this
  one, and in cluster mode the cluster's processes and the task processes they reaped);
- p50/p99 end-to-end latency (ms): for every K-th sink record (``--latency-sample-every``, and
  each of the first K - 1),
  the sink's ``time.time()`` minus the time the source emitted the events of the record's
  timestamp (the source logs ``(first, last event time, time.time())`` per emitted block;
  see :mod:`bench.nexmark.source`). For q0-q3 that is the record's own source-to-sink time;
  for window results it is measured from the emission of the window's last event, so it
  includes the time the watermark needs to pass the window (event-time latency). q12's
  timestamps are processing time: no latency;
- peak RSS: the peak summed resident memory of the processes involved (sampled every 100 ms,
  the sampler's own CPU time left out of the CPU figure; embedded: this process's
  ``ru_maxrss``).

Results are appended to ``--parquet`` (default ``bench/nexmark_results.parquet``, one row per
run) and ``--plot`` (default ``bench/nexmark.png``) draws the per-core rates of the latest run
without checkpoints at this ``--rate`` of each (query, parallelism, target) next to Flink's
published per-core figures.
"""

from __future__ import annotations

import argparse
import os
import pickle
import resource
import shutil
import socket
import sys
import tempfile
import threading
import time
from bisect import bisect_left
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from rill.common import Configuration
from rill.common.configuration import ConfigOptions
from rill.common.functions import SinkFunction
from rill.datastream import StreamExecutionEnvironment

from bench.nexmark.config import NexmarkConfiguration
from bench.nexmark.queries import QUERIES, build_query
from bench.nexmark.source import NexmarkSource, nexmark_watermark_strategy

__all__ = ["LatencySink", "run_query", "main", "FLINK_PER_CORE"]

_REPO = Path(__file__).resolve().parents[2]
#: Flink's published Nexmark throughput per core (events/s), as issue 16 quotes them
FLINK_PER_CORE = {"q0": 175_000, "q1": 175_000, "q2": 175_000, "q5": 22_000, "q7": 12_000, "q8": 146_000}


class LatencySink(SinkFunction):
    """Counts records; each of the first ``sample_every - 1`` and then every ``sample_every``-th
    one records ``(context.timestamp(), time.time())`` (so queries with few outputs, q5 and q7,
    are sampled too); at ``close()`` writes ``(count, samples)`` to ``<log_dir>/sink-*.pkl``.
    One modulo, one comparison and two attribute updates per record."""

    def __init__(self, log_dir: str, sample_every: int):
        if sample_every < 1:
            raise ValueError(f"LatencySink: sample_every must be >= 1, got {sample_every}")
        self.log_dir = log_dir
        self.sample_every = sample_every
        self.count = 0
        self.samples: List[tuple] = []

    def invoke(self, value, context):
        self.count += 1
        if self.count % self.sample_every == 0 or self.count < self.sample_every:
            self.samples.append((context.timestamp(), time.time()))

    def close(self) -> None:
        name = os.path.join(self.log_dir, f"sink-{os.getpid()}-{id(self)}-{time.monotonic_ns()}")
        with open(name + ".tmp", "wb") as f:
            pickle.dump((self.count, self.samples), f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(name + ".tmp", name + ".pkl")


def _load(log_dir: str, prefix: str) -> List:
    out = []
    for entry in sorted(os.listdir(log_dir)):
        if entry.startswith(prefix) and entry.endswith(".pkl"):
            with open(os.path.join(log_dir, entry), "rb") as f:
                out.append(pickle.load(f))
    return out


def latencies_ms(log_dir: str) -> List[float]:
    """Every sampled sink record's latency (ms): its arrival minus the emission of the first
    source block whose last event time is at or after the record's timestamp."""
    blocks = sorted(b for log in _load(log_dir, "emissions-") for b in log)
    last_times = [b[1] for b in blocks]
    out = []
    for _, samples in _load(log_dir, "sink-"):
        for ts, arrived in samples:
            if ts is None:
                continue
            i = bisect_left(last_times, ts)
            if i < len(blocks):
                out.append((arrived - blocks[i][2]) * 1000.0)
    return out


def _percentile(values: Sequence[float], q: float) -> Optional[float]:
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class _RssSampler(threading.Thread):
    """Peak of the summed RSS of the processes ``pids()`` names, every 100 ms. ``pids()`` may
    walk /proc (the cluster's process tree), so it is re-read only every second; ``cpu`` is the
    sampler's own CPU time, which the measurement subtracts (it is not the job's)."""

    def __init__(self, pids):
        super().__init__(daemon=True)
        self.pids, self.peak, self.cpu, self._stop_event = pids, 0, 0.0, threading.Event()

    def run(self):
        start, known, tick = time.thread_time(), [], 0
        while not self._stop_event.is_set():
            if tick % 10 == 0:
                known = self.pids()
            tick += 1
            self.peak = max(self.peak, sum(_rss_bytes(p) for p in known))
            self._stop_event.wait(0.1)
        self.cpu = time.thread_time() - start

    def stop(self):
        self._stop_event.set()
        self.join()


def _cpu_self() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run_query(query: str, config: NexmarkConfiguration, parallelism: int = 1, cluster=None,
              checkpoint_interval_ms: Optional[int] = None, sample_every: int = 100) -> Dict:
    """Run ``query`` once and measure it; returns the figures as a dict (one Parquet row).

    :param cluster: a started :class:`bench.cluster.BenchCluster`, or ``None`` (embedded).
    :raises ValueError: for an unknown query (see :func:`bench.nexmark.queries.build_query`).
    """
    log_dir = tempfile.mkdtemp(prefix="rill-nexmark-")
    try:
        if cluster is None:
            env = StreamExecutionEnvironment.get_execution_environment()
        else:
            conf = Configuration()
            conf.set(ConfigOptions.EXECUTION_TARGET, cluster.address)
            conf.set(ConfigOptions.SECURITY_CLUSTER_SECRET_FILE, cluster.secret_file)
            env = StreamExecutionEnvironment.get_execution_environment(conf)
        env.set_parallelism(parallelism)
        if checkpoint_interval_ms:
            env.enable_checkpointing(checkpoint_interval_ms)
        events = env.from_source(NexmarkSource(config, log_dir), nexmark_watermark_strategy(config), "Nexmark")
        build_query(query, events, config).add_sink(LatencySink(log_dir, sample_every)).name("Latency sink")
        me = os.getpid()
        cluster_cpu0 = cluster.cpu_seconds() if cluster is not None else 0.0
        cpu0, t0 = _cpu_self(), time.perf_counter()
        # embedded: ru_maxrss is the peak, no sampling needed
        sampler = _RssSampler(lambda: [me, *cluster.processes()]) if cluster is not None else None
        if sampler is not None:
            sampler.start()
        try:
            result = env.execute(f"nexmark-{query}")
        finally:
            if sampler is not None:
                sampler.stop()
        wall = time.perf_counter() - t0
        cpu = _cpu_self() - cpu0
        if cluster is not None:
            cpu += cluster.cpu_seconds() - cluster_cpu0 - sampler.cpu
        net = max(result.get_net_runtime(), 1) / 1000.0
        outputs = sum(count for count, _ in _load(log_dir, "sink-"))
        lat = latencies_ms(log_dir) if query != "q12" else []
        peak = sampler.peak if cluster is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return {
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "host": socket.gethostname(),
            "query": query, "events": config.num_events, "event_rate": config.first_event_rate,
            "parallelism": parallelism, "target": "embedded" if cluster is None else "cluster",
            "checkpoint_interval_ms": checkpoint_interval_ms or 0, "outputs": outputs,
            "net_s": net, "wall_s": wall, "cpu_s": cpu, "events_per_s": config.num_events / net,
            "events_per_s_per_core": config.num_events / cpu if cpu > 0 else float("nan"),
            "latency_samples": len(lat), "latency_p50_ms": _percentile(lat, 0.50),
            "latency_p99_ms": _percentile(lat, 0.99), "peak_rss_bytes": peak,
            "load_avg_1m": os.getloadavg()[0],
            "flink_per_core": FLINK_PER_CORE.get(query),
        }
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)


def append_parquet(rows: List[Dict], path: str) -> None:
    """Append ``rows`` to the Parquet file at ``path`` (created if missing)."""
    import pyarrow as pa  # noqa: PLC0415 - only the benchmark's CLI writes Parquet
    import pyarrow.parquet as pq  # noqa: PLC0415
    table = pa.Table.from_pylist(rows)
    if os.path.exists(path):
        old = pq.read_table(path)
        table = pa.concat_tables([old, table.cast(old.schema)]) if old.schema.names == table.schema.names \
            else pa.concat_tables([old, table], promote_options="default")
    pq.write_table(table, path)


def plot(path_parquet: str, path_png: str, rate: int = 10_000_000) -> None:
    """Bar chart of per-core events/s, the latest run without checkpoints at event-time rate
    ``rate`` of each (query, p, target), with Flink's published per-core figures, log scale."""
    import matplotlib  # noqa: PLC0415
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415
    rows = pq.read_table(path_parquet).to_pylist()
    latest: Dict[tuple, Dict] = {}
    for r in rows:
        if not r["checkpoint_interval_ms"] and r["event_rate"] == rate:
            latest[(r["query"], r["parallelism"], r["target"])] = r
    queries = sorted({k[0] for k in latest}, key=lambda q: int(q[1:]))
    series = sorted({(k[1], k[2]) for k in latest})
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / (len(series) + 1)
    for i, (p, target) in enumerate(series):
        xs = [j + i * width for j, q in enumerate(queries) if (q, p, target) in latest]
        ys = [latest[(q, p, target)]["events_per_s_per_core"] for q in queries if (q, p, target) in latest]
        ax.bar(xs, ys, width, label=f"Rill {target} p={p}")
    xs = [j + len(series) * width for j, q in enumerate(queries) if q in FLINK_PER_CORE]
    ax.bar(xs, [FLINK_PER_CORE[q] for q in queries if q in FLINK_PER_CORE], width, label="Flink (published)",
           color="0.6")
    ax.set_xticks([j + width * len(series) / 2 for j in range(len(queries))], queries)
    ax.set_yscale("log")
    ax.set_ylabel("events/s per core (CPU time)")
    ax.set_title(f"Nexmark on Rill (event rate {rate:,}/s) vs Flink's published per-core throughput")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=len(series) + 1)
    fig.tight_layout()
    fig.savefig(path_png, dpi=100)
    plt.close(fig)


def _fmt(x, unit=""):
    if x is None:
        return "—"
    if x >= 1e6:
        return f"{x / 1e6:.2f} M{unit}"
    if x >= 1e3:
        return f"{x / 1e3:.1f} k{unit}"
    return f"{x:.1f}{unit}"


def format_row(r: Dict) -> str:
    flink = r["flink_per_core"]
    ratio = f"{r['events_per_s_per_core'] / flink:.3f}" if flink else "—"
    lat = (f"{r['latency_p50_ms']:.0f} / {r['latency_p99_ms']:.0f}" if r["latency_p50_ms"] is not None else "—")
    return (f"| {r['query']} | {r['target']} | {r['parallelism']} | {r['events']:,} | {r['outputs']:,} | "
            f"{_fmt(r['events_per_s'])} | {_fmt(r['events_per_s_per_core'])} | {_fmt(flink)} | {ratio} | {lat} | "
            f"{r['peak_rss_bytes'] / 2**20:.0f} MiB | {r['load_avg_1m']:.1f} |")


HEADER = ("| query | target | p | events | outputs | events/s | events/s per core | Flink per core | Rill ÷ Flink "
          "per core | latency p50 / p99 ms | peak RSS | load avg |\n|---|---|---|---|---|---|---|---|---|---|---|---|")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.nexmark", description=__doc__.split("\n\n")[0])
    parser.add_argument("--query", action="append", choices=sorted(QUERIES, key=lambda q: int(q[1:])),
                        help="query to run (repeatable; default q0)")
    parser.add_argument("--events", type=int, default=1_000_000, help="events to generate (default 1,000,000)")
    parser.add_argument("--parallelism", type=int, default=1)
    parser.add_argument("--checkpoint-interval-ms", type=int, default=None,
                        help="exactly-once checkpoints every M ms (default: none)")
    parser.add_argument("--target", choices=("embedded", "cluster"), default="embedded")
    parser.add_argument("--rate", type=int, default=10_000_000,
                        help="events per second of event time (default 10,000,000, nexmark-flink's)")
    parser.add_argument("--latency-sample-every", type=int, default=100, metavar="K",
                        help="sample every K-th sink record for latency (default 100)")
    parser.add_argument("--parquet", default=str(_REPO / "bench" / "nexmark_results.parquet"))
    parser.add_argument("--plot", default=str(_REPO / "bench" / "nexmark.png"))
    parser.add_argument("--no-record", action="store_true", help="print only: no Parquet row, no plot")
    args = parser.parse_args(argv)
    if args.events < 1 or args.parallelism < 1:
        parser.error(f"--events and --parallelism must be >= 1, got {args.events} and {args.parallelism}")
    config = NexmarkConfiguration(num_events=args.events, first_event_rate=args.rate)
    cluster = None
    if args.target == "cluster":
        from bench.cluster import BenchCluster  # noqa: PLC0415 - only the cluster target starts one
        # the task processes read records and run code of bench/: the repository on their path
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(_REPO), os.environ.get("PYTHONPATH")) if p)
        cluster = BenchCluster(task_executors=1, slots=args.parallelism).start()
    rows = []
    try:
        print(HEADER, flush=True)
        for query in args.query or ["q0"]:
            row = run_query(query, config, args.parallelism, cluster, args.checkpoint_interval_ms,
                            args.latency_sample_every)
            rows.append(row)
            print(format_row(row), flush=True)
    finally:
        if cluster is not None:
            cluster.stop()
    if not args.no_record:
        append_parquet(rows, args.parquet)
        plot(args.parquet, args.plot, args.rate)
        print(f"appended {len(rows)} row(s) to {args.parquet}; plot: {args.plot}", file=sys.stderr)
    return 0
