"""End-to-end latency, source emission to sink, against the buffer timeout (issue 16, "Latency").

The job (parallelism 2): a rate-limited source of ``(seq, emitted_ns)`` records → ``map`` to
``(seq % 128, seq, emitted_ns)`` (chained with the source) → ``key_by`` the first field (a
keyed exchange through the network stack) → a sink that, for every ``--sample-every``-th record,
keeps ``(emitted_ns, arrived_ns)``. Both stamps are ``time.monotonic_ns()``: ``CLOCK_MONOTONIC``
is one clock for the whole Linux host, so stamps taken in the cluster's task processes compare
with each other and with this process.

A source reader stamps a batch once, when it makes it (the stamp is the emission time of every
record in the batch); rate-limited, it emits at each wake-up the records that are due (at most
``rill.source.batch-size``) and reports "nothing available" while ahead (the task then sleeps
~1 ms on its mailbox), so batches are small and records leave close to their due time.

Per mode (``embedded``: tasks are threads of this process; ``cluster``: a local cluster started
with ``rill cluster start`` in a temporary run directory, stopped at the end):

1. the maximum throughput: one unthrottled run at the default buffer timeout (100 ms), the
   sink's arrival rate over the middle half of the run (steady state: deployment, start and the
   final drain of the network buffers are not counted); one reference rate for every timeout,
   so the three timeouts see the same offered load;
2. for each buffer timeout (``execution.buffer-timeout``: 0 flushes after every emit call,
   T > 0 every T ms) and each load (50% and 90% of that maximum): a run of ``--seconds`` at that
   rate; the samples of the first ``--warmup-s`` of emission are dropped; p50 / p99 / max.

Run: ``python -m bench.latency [--mode embedded|cluster|both] [--seconds 10] [--plot PATH]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from array import array
from dataclasses import asdict, dataclass, field
from operator import itemgetter
from typing import Dict, List, Optional, Sequence, Tuple

from bench.cluster import BenchCluster
from rill.common import Configuration
from rill.common.configuration import ConfigOptions
from rill.common.functions import SinkFunction
from rill.datastream import StreamExecutionEnvironment
from rill.datastream.connectors import Boundedness, Source, SourceReader, SourceSplit

__all__ = ["LatencySink", "RateLimitedSource", "LatencyRun", "run_job", "measure_mode", "main"]

PARALLELISM = 2
KEYS = 128
TIMEOUTS_MS = (0, 10, 100)
LOADS = (0.5, 0.9)
#: the issue's target at 50% load on the cluster: p99 <= buffer timeout + this
TARGET_SLACK_MS = 5.0


@dataclass(frozen=True)
class SeqSplit(SourceSplit):
    """Records ``start .. end - 1``."""

    start: int
    end: int

    def split_id(self) -> str:
        return f"{self.start}-{self.end}"


class _StampingReader(SourceReader):
    """Yields ``(seq, emitted_ns)`` batches; ``rate`` records/s (0: as fast as it can)."""

    def __init__(self, rate: float):
        self.rate = rate

    def open(self, subtask_index: int, parallelism: int) -> None:
        self.rate /= parallelism  # the source's rate is for all its readers

    def read(self, split: SeqSplit):
        clock = time.monotonic_ns
        rate_per_ns = self.rate / 1e9
        step = self.batch_size
        i, end = split.start, split.end
        first = None
        while i < end:
            now = clock()
            if first is None:
                first = now
            n = min(step, end - i)
            if rate_per_ns:
                # the records due by now (the first at once); ahead of the rate: nothing now
                n = min(n, int((now - first) * rate_per_ns) + 1 - (i - split.start))
                if n <= 0:
                    yield []
                    continue
            batch = list(zip(range(i, i + n), itertools.repeat(now, n)))
            i += n
            self.progress_units += n
            yield batch


class RateLimitedSource(Source):
    """``records`` records ``(seq, emitted_ns)``, ``seq`` in ``0 .. records - 1``, one contiguous
    split per subtask; each reader emits at most ``rate / parallelism`` records/s (``rate`` 0:
    unthrottled). ``emitted_ns`` is ``time.monotonic_ns()`` when the record's batch was made.

    :raises ValueError: if ``records`` < 1 or ``rate`` < 0.
    """

    def __init__(self, records: int, rate: float = 0.0):
        if records < 1:
            raise ValueError(f"RateLimitedSource: records must be >= 1, got {records!r}")
        if rate < 0:
            raise ValueError(f"RateLimitedSource: rate must be >= 0 records/s, got {rate!r}")
        self.records, self.rate = records, rate

    def create_splits(self, parallelism: int) -> List[SourceSplit]:
        n = self.records
        return [SeqSplit(n * i // parallelism, n * (i + 1) // parallelism) for i in range(parallelism)]

    def create_reader(self) -> SourceReader:
        return _StampingReader(self.rate)

    def get_boundedness(self) -> Boundedness:
        return Boundedness.BOUNDED


class LatencySink(SinkFunction):
    """Counts records and keeps ``(emitted_ns, arrived_ns)`` of every record whose ``seq``
    (``value[1]``) is a multiple of ``every``; in ``close()`` writes
    ``<out_dir>/<token>.<random>.samples``: int64 native order, the record count then the pairs
    (written aside and renamed, so a file is complete or absent). Read with :func:`read_samples`.
    """

    def __init__(self, token: str, out_dir: str, every: int):
        self.token, self.out_dir, self.every = token, out_dir, every

    def open(self, runtime_context) -> None:
        self.count = 0
        self.samples = array("q")
        self._clock = time.monotonic_ns

    def invoke(self, value, context) -> None:
        self.count += 1
        if value[1] % self.every == 0:
            self.samples.extend((value[2], self._clock()))

    def close(self) -> None:
        name = os.path.join(self.out_dir, f"{self.token}.{uuid.uuid4().hex}")
        with open(name + ".tmp", "wb") as f:
            array("q", [self.count]).tofile(f)
            self.samples.tofile(f)
        os.replace(name + ".tmp", name + ".samples")


def read_samples(token: str, out_dir: str) -> Tuple[int, List[Tuple[int, int]], int]:
    """``(records, [(emitted_ns, arrived_ns), ...] sorted by emission, sink subtasks)`` of the
    run ``token``; its files are deleted.

    :raises RuntimeError: if no sink of the run wrote its samples.
    """
    count, pairs, files = 0, [], 0
    for entry in sorted(os.listdir(out_dir)):
        if entry.startswith(token + ".") and entry.endswith(".samples"):
            path = os.path.join(out_dir, entry)
            data = array("q")
            with open(path, "rb") as f:
                data.frombytes(f.read())
            os.unlink(path)
            count += data[0]
            pairs.extend(zip(data[1::2], data[2::2]))
            files += 1
    if not files:
        raise RuntimeError(f"no LatencySink of run {token} wrote its samples: the sink never closed")
    pairs.sort()
    return count, pairs, files


class SleepLagProbe:
    """A daemon thread that sleeps 1 ms in a loop and records how late it woke up (ms), as
    ``bench.event_loop_lag`` measures its ticker; a context manager (started on enter, stopped
    and joined on exit). About 1,000 wake-ups/s: a negligible load."""

    def __init__(self) -> None:
        self.lags_ms: List[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sleep-lag-probe", daemon=True)

    def _run(self) -> None:
        clock, lags = time.perf_counter, self.lags_ms
        while not self._stop.is_set():
            t0 = clock()
            time.sleep(0.001)
            lags.append(max(0.0, (clock() - t0 - 0.001) * 1000))

    def p99_ms(self) -> float:
        return _percentile(sorted(self.lags_ms), 99) if self.lags_ms else float("nan")

    def __enter__(self) -> "SleepLagProbe":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100) of an ascending, non-empty sequence."""
    rank = max(1, -(-len(sorted_values) * q // 100))
    return sorted_values[int(rank) - 1]


def load_average() -> float:
    """The machine's 1-minute load average (``/proc/loadavg``)."""
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


@dataclass
class LatencyRun:
    """One run. Times in ms, rates in records/s.

    ``rate``: the offered rate (0: unthrottled); ``emitted_rate``: records ÷ emission span of
    the samples (below ``rate`` when the source was held back); ``throughput``: the sink's
    arrival rate over the middle half of the samples' arrivals (steady state: neither the start
    nor the records that filled the network buffers and drain at the end); ``samples``: those
    kept after the warm-up; ``sleep_lag_p99_ms``: p99 of how late a 1 ms sleep in a thread of
    this process woke up during the run (what the machine's scheduler, and in the embedded mode
    the GIL, cost any thread); ``cores``: CPU seconds the job used (this process, plus the
    cluster's processes in the cluster mode) ÷ the wall time of ``execute()``, deployment
    included.
    """

    mode: str
    buffer_timeout_ms: int
    load: Optional[float]
    rate: float
    records: int
    samples: int
    dropped_warmup: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    emitted_rate: float
    throughput: float
    load_average: Tuple[float, float]
    sleep_lag_p99_ms: float
    cores: float
    latencies_ms: List[float] = field(default_factory=list, repr=False)


def _job_cpu_seconds(cluster) -> float:
    """CPU seconds used so far by this process and, given a cluster, by the cluster's processes."""
    t = os.times()
    return t.user + t.system + (cluster.cpu_seconds() if cluster is not None else 0.0)


def run_job(mode: str, records: int, rate: float, buffer_timeout_ms: int, out_dir: str,
            every: int, warmup_s: float, cluster=None, load: Optional[float] = None) -> LatencyRun:
    """Run the job once and summarize it.

    :param cluster: a :class:`bench.cluster.BenchCluster` for ``mode == "cluster"``.
    :raises RuntimeError: if the sinks did not see every record, or kept no sample.
    """
    conf = Configuration()
    if cluster is not None:
        conf.set(ConfigOptions.EXECUTION_TARGET, cluster.address)
        conf.set(ConfigOptions.SECURITY_CLUSTER_SECRET_FILE, cluster.secret_file)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(PARALLELISM)
    env.set_buffer_timeout(buffer_timeout_ms)
    token = uuid.uuid4().hex
    (env.from_source(RateLimitedSource(records, rate), None, "stamped")
        .map(lambda r: (r[0] % KEYS, r[0], r[1])).name("key")
        .key_by(itemgetter(0))
        .add_sink(LatencySink(token, out_dir, every)).name("latency"))
    la0 = load_average()
    cpu0, wall0 = _job_cpu_seconds(cluster), time.monotonic()
    with SleepLagProbe() as probe:
        env.execute(f"latency {mode} timeout={buffer_timeout_ms}ms rate={rate:.0f}/s")
    cores = (_job_cpu_seconds(cluster) - cpu0) / (time.monotonic() - wall0)
    la1 = load_average()
    count, pairs, _ = read_samples(token, out_dir)
    if count != records:
        raise RuntimeError(f"latency job ({mode}): the sinks saw {count} records, the source emitted {records}")
    if not pairs:
        raise RuntimeError(f"latency job ({mode}): no sample kept (records {records}, every {every})")
    first_emit, last_emit = pairs[0][0], pairs[-1][0]
    arrivals = sorted(a for _, a in pairs)
    lo, hi = len(arrivals) // 4, len(arrivals) * 3 // 4
    mid_span = (arrivals[hi] - arrivals[lo]) / 1e9
    kept = [(a - e) / 1e6 for e, a in pairs if e >= first_emit + warmup_s * 1e9]
    if not kept:
        raise RuntimeError(f"latency job ({mode}): every sample fell in the {warmup_s} s warm-up")
    kept.sort()
    emit_span = (last_emit - first_emit) / 1e9
    return LatencyRun(
        mode=mode, buffer_timeout_ms=buffer_timeout_ms, load=load, rate=rate, records=records,
        samples=len(kept), dropped_warmup=len(pairs) - len(kept),
        p50_ms=_percentile(kept, 50), p99_ms=_percentile(kept, 99), max_ms=kept[-1],
        emitted_rate=records / emit_span if emit_span > 0 else float("inf"),
        throughput=(hi - lo) * every / mid_span if mid_span > 0 else float("inf"),
        load_average=(la0, la1), sleep_lag_p99_ms=probe.p99_ms(), cores=cores, latencies_ms=kept)


def measure_mode(mode: str, args, out_dir: str, cluster=None, log=print) -> List[LatencyRun]:
    """The maximum-throughput run, then every (timeout, load) run of ``mode``."""
    def rounded(n: float) -> int:  # a multiple of parallelism × every: each split starts with a sample
        unit = PARALLELISM * args.sample_every
        return max(unit, int(n) // unit * unit)

    runs = []
    if args.max_throughput:
        top_rate = args.max_throughput
        log(f"{mode}: maximum throughput given: {top_rate:,.0f} records/s")
    else:
        top = run_job(mode, rounded(args.max_records), 0.0, 100, out_dir, args.sample_every, 0.0, cluster)
        runs.append(top)
        top_rate = top.throughput
        log(f"{mode}: maximum throughput {top_rate:,.0f} records/s ({top.records:,} records unthrottled, "
            f"timeout 100 ms; {top.cores:.2f} cores; load average {top.load_average[0]:.1f})")
    for timeout in args.timeouts:
        for load in args.loads:
            rate = load * top_rate
            run = run_job(mode, rounded(rate * args.seconds), rate, timeout, out_dir, args.sample_every,
                          args.warmup_s, cluster, load)
            runs.append(run)
            log(f"{mode}: timeout {timeout:>3} ms, {load:.0%} load ({rate:,.0f}/s offered, "
                f"{run.emitted_rate:,.0f}/s emitted): p50 {run.p50_ms:.2f} ms, p99 {run.p99_ms:.2f} ms, "
                f"max {run.max_ms:.1f} ms ({run.samples:,} samples; {run.cores:.2f} cores; 1 ms sleep late by p99 {run.sleep_lag_p99_ms:.1f} ms; "
                f"load average {run.load_average[0]:.1f})")
    return runs


def format_table(runs: Sequence[LatencyRun]) -> str:
    """The Markdown table of the throttled runs (the issue's target checked on the cluster at 50%)."""
    lines = ["| mode | buffer timeout | load | offered rec/s | emitted rec/s | p50 ms | p99 ms | max ms "
             "| samples | job cores | 1 ms sleep late p99 | load avg | target p99 ≤ timeout + 5 ms |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        if r.load is None:
            continue
        target = "—"
        if r.mode == "cluster" and r.load == 0.5:
            target = "MET" if r.p99_ms <= r.buffer_timeout_ms + TARGET_SLACK_MS else "MISSED"
        lines.append(f"| {r.mode} | {r.buffer_timeout_ms} ms | {r.load:.0%} | {r.rate:,.0f} | {r.emitted_rate:,.0f} "
                     f"| {r.p50_ms:.2f} | {r.p99_ms:.2f} | {r.max_ms:.1f} | {r.samples:,} | {r.cores:.2f} | {r.sleep_lag_p99_ms:.1f} ms "
                     f"| {r.load_average[0]:.1f} | {target} |")
    return "\n".join(lines)


def plot(runs: Sequence[LatencyRun], path: str) -> None:
    """p50 and p99 against the buffer timeout, one panel per mode, one colour per load; the
    dashed line is the target (timeout + 5 ms). PNG at ``path``."""
    import matplotlib  # noqa: PLC0415 (optional: the bench extra)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    modes = [m for m in ("embedded", "cluster") if any(r.mode == m and r.load is not None for r in runs)]
    fig, axes = plt.subplots(1, len(modes), figsize=(5.5 * len(modes), 4.2), squeeze=False, sharey=True)
    for ax, mode in zip(axes[0], modes):
        mine = [r for r in runs if r.mode == mode and r.load is not None]
        timeouts = sorted({r.buffer_timeout_ms for r in mine})
        xs = range(len(timeouts))
        for i, load in enumerate(sorted({r.load for r in mine})):
            colour = f"C{i}"
            by_t = {r.buffer_timeout_ms: r for r in mine if r.load == load}
            ax.plot(xs, [by_t[t].p50_ms for t in timeouts], "o-", color=colour, label=f"p50, {load:.0%} load")
            ax.plot(xs, [by_t[t].p99_ms for t in timeouts], "^--", color=colour, label=f"p99, {load:.0%} load")
        ax.plot(xs, [t + TARGET_SLACK_MS for t in timeouts], "k:", label="target: timeout + 5 ms")
        ax.set_xticks(list(xs), [f"{t} ms" for t in timeouts])
        ax.set_xlabel("buffer timeout")
        ax.set_yscale("log")
        ax.set_title(f"{mode}, p={PARALLELISM}")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("latency, source emission → sink (ms)")
    axes[0][-1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.latency", description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=("embedded", "cluster", "both"), default="both")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of a throttled run (default 10)")
    parser.add_argument("--warmup-s", type=float, default=1.0,
                        help="samples emitted in the first S seconds of a run are dropped (default 1)")
    parser.add_argument("--max-records", type=int, default=2_000_000,
                        help="records of the unthrottled run (default 2,000,000)")
    parser.add_argument("--max-throughput", type=float, default=None,
                        help="use this maximum (records/s) instead of measuring it")
    parser.add_argument("--sample-every", type=int, default=50, help="keep every k-th record (default 50)")
    parser.add_argument("--timeouts", type=int, nargs="+", default=list(TIMEOUTS_MS))
    parser.add_argument("--loads", type=float, nargs="+", default=list(LOADS))
    parser.add_argument("--task-executors", type=int, default=1)
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--plot", default=None, help="write the PNG plot there")
    parser.add_argument("--json", default=None, help="write every run (summary and latencies) as JSON there")
    args = parser.parse_args(argv)
    if args.sample_every < 1:
        parser.error(f"--sample-every must be >= 1, got {args.sample_every}")
    if not all(load > 0 for load in args.loads):
        parser.error(f"--loads must be fractions > 0 of the maximum (0 would run unthrottled), got {args.loads}")
    if not all(t >= 0 for t in args.timeouts):
        parser.error(f"--timeouts are buffer timeouts >= 0 ms (-1, flush only when full, has no bound to "
                     f"compare with), got {args.timeouts}")
    if args.seconds <= 0 or args.warmup_s < 0 or args.warmup_s >= args.seconds:
        parser.error(f"need --seconds > 0 and 0 <= --warmup-s < --seconds, got {args.seconds} and {args.warmup_s}")
    modes = ("embedded", "cluster") if args.mode == "both" else (args.mode,)
    print(f"end-to-end latency, p={PARALLELISM}, source -> map -> key_by -> sink; every {args.sample_every}th "
          f"record sampled; throttled runs of {args.seconds:g} s, first {args.warmup_s:g} s dropped; "
          f"nproc {os.cpu_count()}, load average {load_average():.1f}")
    out_dir = tempfile.mkdtemp(prefix="rill-latency-")
    runs: List[LatencyRun] = []
    try:
        for mode in modes:
            if mode == "cluster":
                with BenchCluster(task_executors=args.task_executors, slots=args.slots) as cluster:
                    runs += measure_mode(mode, args, out_dir, cluster)
            else:
                runs += measure_mode(mode, args, out_dir)
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    print(format_table(runs))
    if args.plot:
        plot(runs, args.plot)
        print(f"plot: {args.plot}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([asdict(r) for r in runs], f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
