"""The benchmark harness: a workload runs on Rill and on a hand-written Python loop that calls
the same user functions, alternately, in one process; figures are medians and the headline is
the ratio Rill / loop (DESIGN.md: "a benchmark states its figure as a ratio against a baseline
measured in the same run"). Timings never go into tests: the smoke test only checks results.

Correctness is checked on every run, so a broken engine cannot print a good ratio: both sides
end in a :class:`CountingSink`, which counts the records it is given and sums field ``[1]`` of
each (the price in the stateless workload, the running count in WordCount). Rill copies user
functions per subtask (cloudpickle), so the sink publishes its figures in ``close()`` to a
process-wide registry under a fresh token; the harness sums what every subtask published and
compares count and checksum with the loop's. A sink that was never closed, a record dropped,
duplicated or transformed differently changes the figures and raises :class:`ResultMismatch`.
On a cluster (``bench/cluster.py``) every sink subtask runs in its own process, where that
registry is out of reach: the sink is then given a ``publish_dir`` and writes its figures to a
file of its own there (pickled, renamed into place), which the harness reads back the same way.
Window workloads end in a :class:`WindowResultSink`, which keeps every output with its
timestamp (the window's max timestamp); their outputs are compared as multisets.
"""

from __future__ import annotations

import gc
import marshal
import math
import pickle
from collections import Counter
import os
import platform
import statistics
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Protocol, Sequence, Tuple, runtime_checkable

from rill.common.configuration import ConfigOptions, Configuration
from rill.datastream import SinkFunction, StreamExecutionEnvironment

__all__ = [
    "Workload",
    "CountingSink",
    "WindowResultSink",
    "LoopSinkContext",
    "SinkResult",
    "ResultMismatch",
    "Sample",
    "Measurement",
    "run_workload",
    "run_cluster_speedup",
    "SpeedupMeasurement",
    "format_table",
    "format_speedup",
    "machine_info",
]


# -- the workload contract -----------------------------------------------------------------

@runtime_checkable
class Workload(Protocol):
    """What a benchmark workload provides.

    ``prepare`` builds the input once; both sides read the same list. ``run_rill`` only
    *builds* the job on ``env`` (the harness executes and times it); ``run_baseline`` is the
    hand-written loop: it must call the same user functions with the same semantics and hand
    the same records to ``sink.invoke(value, None)`` in the same order as Rill's job.

    Optional: ``sink_class`` (default :class:`CountingSink`), the sink both sides end in; with
    :class:`WindowResultSink` the loop passes a :class:`LoopSinkContext` instead of ``None``
    and the order of outputs may differ (the check compares multisets). ``materialize(data)``:
    write the files a workload reading from files needs for ``data`` (the harness calls it for
    every input list before any side is timed); ``close()``: remove them.
    """

    name: str
    description: str
    unit: str                     # what one input record is ("records", "lines")
    default_size: int             # input records by default
    target_ratio: Optional[float]  # Rill net records/s ÷ loop records/s that the issue asks for

    def prepare(self, size: int) -> List[Any]: ...

    def run_rill(self, env: StreamExecutionEnvironment, data: List[Any], sink: "CountingSink") -> None: ...

    def run_baseline(self, data: List[Any], sink: "CountingSink") -> None: ...


# -- the sink both sides end in ------------------------------------------------------------

_published: Dict[str, List[Tuple[int, Any, Optional[float], Optional[float]]]] = {}
_published_lock = threading.Lock()
#: this module's name: the sink finds the registry through ``sys.modules`` (see ``close``)
_HOME = __name__


class CountingSink(SinkFunction):
    """Counts records and sums ``value[1]``; publishes ``(count, checksum)`` in ``close()``.

    Two attribute updates per record: the cheapest sink that still checks the values (a sink
    that did more would add the same cost to both sides and flatter the ratio).

    :param publish_dir: ``None`` (embedded mode, the loop): publish to this process' registry.
        A directory (cluster mode: the sink runs in a task process): write
        ``<token>.<random>.pkl`` there instead, which :func:`take_result` reads back.
    """

    def __init__(self, token: str, publish_dir: Optional[str] = None):
        self.token = token
        self.publish_dir = publish_dir
        self.count = 0
        self.checksum = 0
        #: ``time.monotonic()`` (s) at ``open`` and at ``finish`` (end of input, before a job with
        #: checkpoints waits for its final checkpoint); ``None`` where not called (the loop).
        #: CLOCK_MONOTONIC is one clock for the host, so the stamps of cluster task processes
        #: compare.
        self.opened: Optional[float] = None
        self.finished: Optional[float] = None

    def open(self, runtime_context) -> None:
        self.opened = time.monotonic()

    def finish(self) -> None:
        self.finished = time.monotonic()

    def invoke(self, value, context):
        self.count += 1
        self.checksum += value[1]

    def close(self) -> None:
        if self.publish_dir is None:
            # through sys.modules, not this module's globals: once a job went to a cluster,
            # cloudpickle copies this module's classes by value (the engine registers local
            # modules for shipping, process-wide) and the copies' methods get copied globals
            home = sys.modules[_HOME]
            with home._published_lock:
                home._published.setdefault(self.token, []).append(self._published())
            return
        # one file per sink subtask, complete or absent: written aside, then renamed into place
        name = os.path.join(self.publish_dir, f"{self.token}.{uuid.uuid4().hex}")
        with open(name + ".tmp", "wb") as f:
            f.write(_encode_published(self._published()))
        os.replace(name + ".tmp", name + ".pkl")

    def _published(self) -> Tuple[int, Any, Optional[float], Optional[float]]:
        return self.count, self.checksum, self.opened, self.finished


def _encode_published(published: Tuple[int, Any, Optional[float], Optional[float]]) -> bytes:
    """A sink's published figures as file bytes: ``marshal`` (one leading ``M``) when it can
    write them, else ``pickle`` (``P``). The cluster's sinks write these inside the job
    (``close()`` runs before a task ends), where the embedded sinks append to a list: a
    ``WindowResultSink`` publishing 200,000 outputs took 102 ms to pickle and 16–21 ms to
    marshal, a cost the cluster side alone paid in its net runtime. marshal writes every
    buffer-like object (a ``bytearray``, a numpy scalar) as ``bytes``: for a checksum that holds
    one, the check could only fail (the loop's figures keep the original type), never pass."""
    try:
        return b"M" + marshal.dumps(published)
    except ValueError:  # a type marshal does not know (a str subclass, a user class, ...)
        return b"P" + pickle.dumps(published, protocol=pickle.HIGHEST_PROTOCOL)


def _decode_published(data: bytes) -> Tuple[int, Any, Optional[float], Optional[float]]:
    """:raises ValueError: for bytes :func:`_encode_published` did not write."""
    kind, body = data[:1], memoryview(data)[1:]
    if kind == b"M":
        return marshal.loads(body)
    if kind == b"P":
        return pickle.loads(body)
    raise ValueError(f"not a published sink result (leading byte {kind!r})")


class LoopSinkContext:
    """What the hand-written loop passes as ``context`` to a :class:`WindowResultSink`: the
    output's timestamp (``ts``), as Rill's ``SinkFunction.Context.timestamp()`` gives it."""

    __slots__ = ("ts",)

    def __init__(self) -> None:
        self.ts: Optional[int] = None

    def timestamp(self) -> Optional[int]:
        return self.ts


class WindowResultSink(CountingSink):
    """Keeps every ``(value, context.timestamp())``: for window outputs, the result and the
    window's max timestamp (Rill stamps window outputs with it). It publishes ``(count, list of
    outputs)``; the check then compares the two sides' outputs as multisets, so key, window and
    result of every output must agree, whatever the order (windows firing at the same
    watermark may emit in another order than the loop)."""

    def __init__(self, token: str, publish_dir: Optional[str] = None):
        super().__init__(token, publish_dir)
        self.checksum = []

    def invoke(self, value, context):
        self.count += 1
        self.checksum.append((value, context.timestamp()))


@dataclass(frozen=True)
class SinkResult:
    """What the sinks of one run published: record count, checksum, and how many sink
    instances (subtasks) published; ``processing_s``, the span from the first sink's ``open``
    to the last sink's ``finish`` (the end of its input) in seconds, when every sink stamped
    both (``None`` for the loop). Unlike a job's net runtime, the span leaves out what a job
    does after its records are through: with checkpoints, waiting for the final checkpoint
    (FLIP-147) before its tasks end."""

    count: int
    checksum: Any
    instances: int
    processing_s: Optional[float] = field(default=None, compare=False)


def new_token() -> str:
    return uuid.uuid4().hex


def take_result(token: str, publish_dir: Optional[str] = None) -> SinkResult:
    """Sum what the sinks with ``token`` published and forget it (``publish_dir``: read and
    delete the files the sinks wrote there, see :class:`CountingSink`).

    :raises ResultMismatch: if no sink published (the engine never closed its sink).
    """
    if publish_dir is None:
        with _published_lock:
            parts = _published.pop(token, None)
    else:
        parts = []
        for entry in sorted(os.listdir(publish_dir)):
            if entry.startswith(token + ".") and entry.endswith(".pkl"):
                path = os.path.join(publish_dir, entry)
                with open(path, "rb") as f:
                    parts.append(_decode_published(f.read()))
                os.unlink(path)
    if not parts:
        raise ResultMismatch(f"no CountingSink with token {token} was closed: the sink never finished")
    count = sum(p[0] for p in parts)
    checksum = parts[0][1]
    for p in parts[1:]:
        checksum += p[1]
    opened = [p[2] for p in parts]
    finished = [p[3] for p in parts]
    span = (None if None in opened or None in finished
            else max(finished) - min(opened))
    return SinkResult(count, checksum, len(parts), span)


class ResultMismatch(AssertionError):
    """Rill's sink output differs from the hand-written loop's."""


def check_same(workload: str, rill: SinkResult, baseline: SinkResult, parallelism: int) -> None:
    """:raises ResultMismatch: naming the workload and both figures, unless Rill's count
    equals the loop's, both are non-zero, the checksums agree (floats to a relative 1e-9:
    summation order may differ across subtasks) and every sink subtask published."""
    problems = []
    if baseline.count == 0:
        problems.append("the loop produced no records: the check would be vacuous")
    if rill.count != baseline.count:
        problems.append(f"count {rill.count} != loop's {baseline.count}")
    if isinstance(rill.checksum, list) or isinstance(baseline.checksum, list):
        # WindowResultSink: the outputs themselves, compared as multisets
        got, expected = Counter(rill.checksum), Counter(baseline.checksum)
        if got != expected:
            extra, missing = got - expected, expected - got
            problems.append(
                f"outputs differ: {sum(extra.values())} not in the loop's (e.g. {list(extra)[:3]!r}), "
                f"{sum(missing.values())} of the loop's missing (e.g. {list(missing)[:3]!r})")
    else:
        same = (math.isclose(rill.checksum, baseline.checksum, rel_tol=1e-9, abs_tol=1e-6)
                if isinstance(rill.checksum, float) or isinstance(baseline.checksum, float)
                else rill.checksum == baseline.checksum)
        if not same:
            problems.append(f"checksum {rill.checksum!r} != loop's {baseline.checksum!r}")
    if rill.instances != parallelism:
        problems.append(f"{rill.instances} sink subtasks published, expected {parallelism}")
    if problems:
        raise ResultMismatch(f"workload '{workload}' at parallelism {parallelism}: Rill's result differs "
                             f"from the hand-written loop's: " + "; ".join(problems))


# -- measuring -----------------------------------------------------------------------------

@dataclass
class Sample:
    """One repetition, in seconds: the loop's time; Rill's net runtime (the JobExecutionResult's:
    from the JobMaster starting the job, deployment included, to the last task's end); Rill's
    wall time (environment creation, job building, ``execute()`` returning: start-up and
    teardown included); Rill's task span (the longest vertex's ``duration_ms``: from its tasks'
    start of processing, after operators are deserialized and opened, to their end). The task
    span is a diagnostic that separates deployment from per-record work; the gate is net."""

    baseline_s: float
    rill_net_s: float
    rill_wall_s: float
    rill_task_s: float
    records: int
    sink_records: int


@dataclass
class Measurement:
    workload: str
    unit: str
    parallelism: int
    records: int
    sink_records: int
    repeat: int
    target_ratio: Optional[float]
    baseline_rps: float            # medians over the repetitions
    rill_net_rps: float
    rill_wall_rps: float
    rill_task_rps: float           # diagnostic: records ÷ the longest vertex's run span
    ratio_net: float               # median of the per-repetition ratios
    ratio_net_min: float
    ratio_net_max: float
    ratio_wall: float
    ratio_task: float
    startup_s: float               # median wall - net: job building, deployment, teardown
    vertices: List[str] = field(default_factory=list)
    samples: List[Sample] = field(default_factory=list)
    target: str = "embedded"       # where Rill ran: "embedded" or "cluster" (bench/cluster.py)
    vertex_times: List[Dict[str, Any]] = field(default_factory=list)  # last repetition's, per vertex

    @property
    def meets_target(self) -> Optional[bool]:
        return None if self.target_ratio is None else self.ratio_net >= self.target_ratio

    def to_json(self) -> Dict[str, Any]:
        d = asdict(self)
        d["meets_target"] = self.meets_target
        return d


def _materialize(workload: Workload, data: List[Any]) -> None:
    """Write the input files of a workload that reads ``data`` from files (its
    ``materialize(data)``, if it has one) before any side is timed, so that no side's first
    run pays for writing them."""
    materialize = getattr(workload, "materialize", None)
    if materialize is not None:
        materialize(data)


def _run_baseline(workload: Workload, data: List[Any]) -> Tuple[float, SinkResult]:
    token = new_token()
    sink = getattr(workload, "sink_class", CountingSink)(token)
    gc.collect()
    t0 = time.perf_counter()
    workload.run_baseline(data, sink)
    sink.close()
    elapsed = time.perf_counter() - t0
    return elapsed, take_result(token)


def _run_rill(workload: Workload, data: List[Any], parallelism: int, cluster: Any = None
              ) -> Tuple[float, float, float, SinkResult, List[str]]:
    """One Rill run; ``cluster`` (a :class:`bench.cluster.BenchCluster`, or anything with
    ``address`` and ``results_dir``) sends the job there instead of the embedded mode."""
    net, wall, task, got, summaries = _run_rill_summaries(workload, data, parallelism, cluster)
    return net, wall, task, got, [f"{v.name} (p={v.parallelism})" for v in summaries]


def _run_rill_summaries(workload: Workload, data: List[Any], parallelism: int, cluster: Any = None
                        ) -> Tuple[float, float, float, SinkResult, List[Any]]:
    token = new_token()
    sink_class = getattr(workload, "sink_class", CountingSink)
    publish_dir = None if cluster is None else cluster.results_dir
    gc.collect()
    t0 = time.perf_counter()
    if cluster is None:
        env = StreamExecutionEnvironment.get_execution_environment()
        sink = sink_class(token)
    else:
        conf = Configuration()
        conf.set(ConfigOptions.EXECUTION_TARGET, cluster.address)
        conf.set(ConfigOptions.SECURITY_CLUSTER_SECRET_FILE, cluster.secret_file)
        env = StreamExecutionEnvironment.get_execution_environment(conf)
        sink = sink_class(token, publish_dir)
    env.set_parallelism(parallelism)
    workload.run_rill(env, data, sink)
    result = env.execute(f"bench-{workload.name}")
    wall = time.perf_counter() - t0
    # net runtime has ms resolution: at least 1 ms, so that tiny smoke runs do not divide by 0
    net = max(result.get_net_runtime(), 1) / 1000.0
    # the tasks' own span: from a task's start of processing (operators deserialized and
    # opened) to its end, longest over vertices (they run concurrently); net minus deployment
    task = max([v.duration_ms for v in result.vertices] + [1.0]) / 1000.0
    return net, wall, task, take_result(token, publish_dir), list(result.vertices)


def _vertex_times(summaries: Sequence[Any]) -> List[Dict[str, Any]]:
    """Per vertex (subtask averages): span, busy, idle, back-pressured and CPU time in ms."""
    return [{"name": v.name, "parallelism": v.parallelism, "duration_ms": v.duration_ms,
             "busy_ms": round(v.busy_time_ms), "idle_ms": round(v.idle_time_ms),
             "back_pressured_ms": round(v.back_pressured_time_ms), "cpu_ms": round(v.cpu_time_ms),
             "records_in": v.records_in, "records_out": v.records_out} for v in summaries]


def run_workload(workload: Workload, data: Sequence[Any], repeat: int = 3, parallelism: int = 1,
                 warmup: bool = True, log=None, cluster: Any = None) -> Measurement:
    """Warm up both sides (once each, on the first tenth of ``data``), then ``repeat`` times
    run Rill and the loop, alternating which goes first; check every run's result.

    ``cluster``: run Rill's side on that cluster (:class:`bench.cluster.BenchCluster`) instead
    of the embedded mode; not gated (``target_ratio`` is ``None``).

    :raises ResultMismatch: on the first run whose results differ.
    """
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, got {repeat}")
    data = list(data) if not isinstance(data, list) else data
    where = "embedded" if cluster is None else "cluster"
    _materialize(workload, data)
    if warmup:
        part = data[: max(1, len(data) // 10)]
        _materialize(workload, part)
        _, expected = _run_baseline(workload, part)
        _, _, _, got, _ = _run_rill_summaries(workload, part, parallelism, cluster)
        check_same(workload.name, got, expected, parallelism)
    samples: List[Sample] = []
    summaries: List[Any] = []
    for i in range(repeat):
        if i % 2 == 0:
            net, wall, task, got, summaries = _run_rill_summaries(workload, data, parallelism, cluster)
            base, expected = _run_baseline(workload, data)
        else:
            base, expected = _run_baseline(workload, data)
            net, wall, task, got, summaries = _run_rill_summaries(workload, data, parallelism, cluster)
        check_same(workload.name, got, expected, parallelism)
        samples.append(Sample(base, net, wall, task, len(data), expected.count))
        if log is not None:
            log(f"  {workload.name} p={parallelism}{'' if cluster is None else ' cluster'} rep {i + 1}/{repeat}: "
                f"loop {len(data) / base:,.0f}/s, "
                f"Rill net {len(data) / net:,.0f}/s wall {len(data) / wall:,.0f}/s task {len(data) / task:,.0f}/s, "
                f"sink got {expected.count:,} records (checked)")
    n = len(data)
    ratios = [s.baseline_s / s.rill_net_s for s in samples]
    return Measurement(
        workload=workload.name, unit=workload.unit, parallelism=parallelism, records=n,
        sink_records=samples[0].sink_records, repeat=repeat,
        target_ratio=workload.target_ratio if parallelism == 1 and cluster is None else None,
        baseline_rps=statistics.median(n / s.baseline_s for s in samples),
        rill_net_rps=statistics.median(n / s.rill_net_s for s in samples),
        rill_wall_rps=statistics.median(n / s.rill_wall_s for s in samples),
        rill_task_rps=statistics.median(n / s.rill_task_s for s in samples),
        ratio_net=statistics.median(ratios), ratio_net_min=min(ratios), ratio_net_max=max(ratios),
        ratio_wall=statistics.median(s.baseline_s / s.rill_wall_s for s in samples),
        ratio_task=statistics.median(s.baseline_s / s.rill_task_s for s in samples),
        startup_s=statistics.median(s.rill_wall_s - s.rill_net_s for s in samples),
        vertices=[f"{v.name} (p={v.parallelism})" for v in summaries], samples=samples,
        target=where, vertex_times=_vertex_times(summaries),
    )


# -- cluster speed-up: loop, embedded p=1 and cluster p=P in the same run --------------------

#: issue 16's target: cluster p=2 ≥ 1.7 × embedded p=1 on W1–W3, on net records/s (the cluster
#: WordCount issue before it asked for 1.5)
CLUSTER_SPEEDUP_TARGET = 1.7


@dataclass
class SpeedupSample:
    """One repetition of the three sides, in seconds (net/wall/task as in :class:`Sample`)."""

    order: List[str]
    loop_s: float
    embedded_net_s: float
    embedded_wall_s: float
    embedded_task_s: float
    cluster_net_s: float
    cluster_wall_s: float
    cluster_task_s: float
    embedded_cpu_s: float = math.nan   # CPU the embedded run used (this process)
    cluster_cpu_s: float = math.nan    # CPU the cluster run used (this process + the cluster's)
    others_cores: float = math.nan     # cores busy with other processes during the cluster run
    # the same three sides on the small input (``marginal`` given), net runtimes; NaN otherwise
    small_loop_s: float = math.nan
    small_embedded_net_s: float = math.nan
    small_cluster_net_s: float = math.nan


def _measured(run, cluster: Any):
    """``run()``, and the CPU it cost (this process, plus the cluster's processes) and the
    average number of cores other processes kept busy meanwhile (machine busy time minus ours,
    over the run's wall time; NaN off Linux)."""
    from bench.cluster import machine_cpu_seconds  # noqa: PLC0415

    def ours() -> float:
        t = os.times()
        return t.user + t.system + (cluster.cpu_seconds() if cluster is not None else 0.0)

    try:
        m0, o0 = machine_cpu_seconds(), ours()
    except OSError:
        return run(), math.nan, math.nan
    t0 = time.perf_counter()
    out = run()
    wall = time.perf_counter() - t0
    m1, o1 = machine_cpu_seconds(), ours()
    return out, o1 - o0, max(0.0, (m1 - m0) - (o1 - o0)) / wall


def _spread(values: Sequence[float]) -> Tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


@dataclass
class SpeedupMeasurement:
    """The loop, Rill embedded at p=1 and Rill on the cluster at p=``parallelism``, measured
    alternately in one run. Ratios are medians of per-repetition ratios, as (median, min, max);
    rates are medians of records/s."""

    workload: str
    unit: str
    records: int
    sink_records: int
    parallelism: int
    repeat: int
    cluster_shape: str
    target_speedup: float
    loop_rps: float
    embedded_net_rps: float
    embedded_wall_rps: float
    embedded_task_rps: float
    cluster_net_rps: float
    cluster_wall_rps: float
    cluster_task_rps: float
    speedup_net: Tuple[float, float, float]            # cluster pP ÷ embedded p1 (records/s)
    speedup_wall: Tuple[float, float, float]
    speedup_task: Tuple[float, float, float]
    cluster_vs_loop_net: Tuple[float, float, float]    # cluster pP ÷ loop
    cluster_vs_loop_wall: Tuple[float, float, float]
    embedded_vs_loop_net: Tuple[float, float, float]   # embedded p1 ÷ loop
    embedded_vs_loop_wall: Tuple[float, float, float]
    cluster_deploy_s: float      # median cluster net − task span: deployment of the task processes
    cluster_startup_s: float     # median cluster wall − net: job building, shipping, slot request, result
    embedded_cpu_s: float        # median CPU seconds of an embedded run
    cluster_cpu_s: float         # median CPU seconds of a cluster run (client + cluster processes)
    others_cores: float          # median cores kept busy by other processes during the cluster runs
    #: records of the small input of the marginal measurement (0: not measured)
    small_records: int = 0
    #: marginal (start-up excluded) rates: (records − small records) ÷ (net runtime − the small
    #: input's net runtime), medians; NaN when not measured
    loop_marginal_rps: float = math.nan
    embedded_marginal_rps: float = math.nan
    cluster_marginal_rps: float = math.nan
    #: cluster pP ÷ embedded p1 on the marginal rates (per repetition), and cluster ÷ loop
    speedup_marginal: Optional[Tuple[float, float, float]] = None
    cluster_vs_loop_marginal: Optional[Tuple[float, float, float]] = None
    embedded_vs_loop_marginal: Optional[Tuple[float, float, float]] = None
    embedded_vertices: List[Dict[str, Any]] = field(default_factory=list)  # last repetition's
    cluster_vertices: List[Dict[str, Any]] = field(default_factory=list)
    samples: List[SpeedupSample] = field(default_factory=list)

    @property
    def judged_on(self) -> str:
        """Which ratio the target is judged on: ``"marginal"`` when measured (NOTES.md's measure
        of the field: throughput with start-up excluded), else ``"net"``."""
        return "marginal" if self.speedup_marginal is not None else "net"

    @property
    def meets_target(self) -> bool:
        ratio = self.speedup_marginal if self.speedup_marginal is not None else self.speedup_net
        return ratio[0] >= self.target_speedup

    def to_json(self) -> Dict[str, Any]:
        d = asdict(self)
        d["meets_target"] = self.meets_target
        d["judged_on"] = self.judged_on
        return d


def run_cluster_speedup(workload: Workload, data: Sequence[Any], cluster: Any, parallelism: int = 2,
                        repeat: int = 3, warmup: bool = True, log=None,
                        cluster_workload: Optional[Workload] = None,
                        marginal: Optional[float] = None) -> SpeedupMeasurement:
    """Measure the hand-written loop, Rill embedded at parallelism 1 and Rill on ``cluster`` at
    ``parallelism``, ``repeat`` times, rotating which side goes first (loop → embedded →
    cluster, then embedded → cluster → loop, then cluster → loop → embedded, ...); one warm-up
    of each side on the first tenth of ``data``. Every Rill run's result is checked against the
    loop's of the same repetition. ``cluster_workload`` (default ``workload``) builds the
    cluster's job, e.g. the same WordCount with a parallel source.

    ``marginal`` (a fraction, e.g. 0.25): each side also runs, right after its full run, on the
    first ``marginal`` of ``data`` (the "small input"), and the marginal rate of a side is
    ``(N − n) ÷ (t(N) − t(n))`` on net runtimes: what one more record costs once the job runs,
    whatever its start-up (deployment, opening, first batches) costs, as NOTES.md measures
    the peers ("marginal throughput, start-up excluded"). The warm-up then runs on the small
    input.

    :raises ResultMismatch: on the first run whose results differ.
    :raises ValueError: for ``repeat < 1`` or ``marginal`` outside (0, 1).
    """
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, got {repeat}")
    if marginal is not None and not 0 < marginal < 1:
        raise ValueError(f"marginal must be a fraction in (0, 1), got {marginal}")
    data = list(data) if not isinstance(data, list) else data
    cluster_workload = cluster_workload or workload
    small = data[: max(1, int(len(data) * marginal))] if marginal is not None else None
    part = (small if small is not None else data[: max(1, len(data) // 10)]) if warmup else None
    for w in {id(workload): workload, id(cluster_workload): cluster_workload}.values():
        for inputs in (data, small, part):
            if inputs is not None:
                _materialize(w, inputs)
    if warmup:
        _, expected = _run_baseline(workload, part)
        got = _run_rill_summaries(workload, part, 1)[3]
        check_same(workload.name, got, expected, 1)
        got = _run_rill_summaries(cluster_workload, part, parallelism, cluster)[3]
        check_same(cluster_workload.name, got, expected, parallelism)
    sides = ["loop", "embedded", "cluster"]
    samples: List[SpeedupSample] = []
    emb_summaries: List[Any] = []
    cl_summaries: List[Any] = []
    n = len(data)
    for i in range(repeat):
        order = sides[i % 3:] + sides[:i % 3]
        runs: Dict[str, Any] = {}
        cpu: Dict[str, Tuple[float, float]] = {}
        smalls: Dict[str, Any] = {}
        for side in order:
            if side == "loop":
                runs[side] = _run_baseline(workload, data)
                if small is not None:
                    smalls[side] = _run_baseline(workload, small)
            elif side == "embedded":
                runs[side], *cpu[side] = _measured(lambda: _run_rill_summaries(workload, data, 1), None)
                if small is not None:
                    smalls[side] = _run_rill_summaries(workload, small, 1)
            else:
                runs[side], *cpu[side] = _measured(
                    lambda: _run_rill_summaries(cluster_workload, data, parallelism, cluster), cluster)
                if small is not None:
                    smalls[side] = _run_rill_summaries(cluster_workload, small, parallelism, cluster)
        loop_s, expected = runs["loop"]
        e_net, e_wall, e_task, e_got, emb_summaries = runs["embedded"]
        c_net, c_wall, c_task, c_got, cl_summaries = runs["cluster"]
        check_same(workload.name, e_got, expected, 1)
        check_same(cluster_workload.name, c_got, expected, parallelism)
        sample = SpeedupSample(order, loop_s, e_net, e_wall, e_task, c_net, c_wall, c_task,
                               cpu["embedded"][0], cpu["cluster"][0], cpu["cluster"][1])
        if small is not None:
            small_expected = smalls["loop"][1]
            check_same(workload.name, smalls["embedded"][3], small_expected, 1)
            check_same(cluster_workload.name, smalls["cluster"][3], small_expected, parallelism)
            sample.small_loop_s, sample.small_embedded_net_s, sample.small_cluster_net_s = (
                smalls["loop"][0], smalls["embedded"][0], smalls["cluster"][0])
        samples.append(sample)
        if log is not None and small is not None:
            m = n - len(small)
            log(f"  rep {i + 1}/{repeat} marginal ({len(small):,} → {n:,}): loop {m / (loop_s - sample.small_loop_s):,.0f}/s; "
                f"embedded p=1 {m / (e_net - sample.small_embedded_net_s):,.0f}/s; cluster p={parallelism} "
                f"{m / (c_net - sample.small_cluster_net_s):,.0f}/s; cluster/embedded "
                f"{(e_net - sample.small_embedded_net_s) / (c_net - sample.small_cluster_net_s):.2f}")
        if log is not None:
            log(f"  rep {i + 1}/{repeat} ({' → '.join(order)}): loop {n / loop_s:,.0f}/s; embedded p=1 net "
                f"{n / e_net:,.0f}/s wall {n / e_wall:,.0f}/s; cluster p={parallelism} net {n / c_net:,.0f}/s "
                f"wall {n / c_wall:,.0f}/s task {n / c_task:,.0f}/s; cluster/embedded net {e_net / c_net:.2f} "
                f"wall {e_wall / c_wall:.2f}; CPU embedded {cpu['embedded'][0]:.1f} s, cluster {cpu['cluster'][0]:.1f} s, "
                f"other processes {cpu['cluster'][1]:.1f} cores; sink got {expected.count:,} records (both checked)")
    med = statistics.median
    return SpeedupMeasurement(
        workload=cluster_workload.name, unit=workload.unit, records=n, sink_records=expected.count,
        parallelism=parallelism, repeat=repeat, cluster_shape=getattr(cluster, "shape", "?"),
        target_speedup=CLUSTER_SPEEDUP_TARGET,
        loop_rps=med(n / s.loop_s for s in samples),
        embedded_net_rps=med(n / s.embedded_net_s for s in samples),
        embedded_wall_rps=med(n / s.embedded_wall_s for s in samples),
        embedded_task_rps=med(n / s.embedded_task_s for s in samples),
        cluster_net_rps=med(n / s.cluster_net_s for s in samples),
        cluster_wall_rps=med(n / s.cluster_wall_s for s in samples),
        cluster_task_rps=med(n / s.cluster_task_s for s in samples),
        speedup_net=_spread([s.embedded_net_s / s.cluster_net_s for s in samples]),
        speedup_wall=_spread([s.embedded_wall_s / s.cluster_wall_s for s in samples]),
        speedup_task=_spread([s.embedded_task_s / s.cluster_task_s for s in samples]),
        cluster_vs_loop_net=_spread([s.loop_s / s.cluster_net_s for s in samples]),
        cluster_vs_loop_wall=_spread([s.loop_s / s.cluster_wall_s for s in samples]),
        embedded_vs_loop_net=_spread([s.loop_s / s.embedded_net_s for s in samples]),
        embedded_vs_loop_wall=_spread([s.loop_s / s.embedded_wall_s for s in samples]),
        cluster_deploy_s=med(s.cluster_net_s - s.cluster_task_s for s in samples),
        cluster_startup_s=med(s.cluster_wall_s - s.cluster_net_s for s in samples),
        embedded_cpu_s=med(s.embedded_cpu_s for s in samples),
        cluster_cpu_s=med(s.cluster_cpu_s for s in samples),
        others_cores=med(s.others_cores for s in samples),
        embedded_vertices=_vertex_times(emb_summaries), cluster_vertices=_vertex_times(cl_summaries),
        samples=samples, **_marginals(samples, n, None if small is None else len(small)),
    )


def _marginals(samples: Sequence[SpeedupSample], n: int, small: Optional[int]) -> Dict[str, Any]:
    """The marginal fields of :class:`SpeedupMeasurement` (none when ``small`` is None). A
    side whose full run took no longer than its small one (a noise spike) counts as 1 ns for
    that repetition: a huge rate, which the median absorbs and the max shows."""
    if small is None:
        return {}
    m = n - small

    def dt(full: float, part: float) -> float:
        return max(full - part, 1e-9)

    loop = [dt(s.loop_s, s.small_loop_s) for s in samples]
    emb = [dt(s.embedded_net_s, s.small_embedded_net_s) for s in samples]
    clu = [dt(s.cluster_net_s, s.small_cluster_net_s) for s in samples]
    med = statistics.median
    return dict(
        small_records=small,
        loop_marginal_rps=med(m / x for x in loop), embedded_marginal_rps=med(m / x for x in emb),
        cluster_marginal_rps=med(m / x for x in clu),
        speedup_marginal=_spread([e / c for e, c in zip(emb, clu)]),
        cluster_vs_loop_marginal=_spread([lo / c for lo, c in zip(loop, clu)]),
        embedded_vs_loop_marginal=_spread([lo / e for lo, e in zip(loop, emb)]),
    )


# -- reporting -----------------------------------------------------------------------------

def machine_info() -> Dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        usable = os.cpu_count()
    return {
        "nproc": usable,
        "cpu": cpu,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
    }


def _rate(x: float) -> str:
    return f"{x / 1e6:.2f} M" if x >= 1e6 else f"{x / 1e3:.0f} k"


def format_table(measurements: Sequence[Measurement]) -> str:
    """A Markdown table (paste-able into bench/README.md)."""
    head = ("| workload | p | input | loop rec/s | Rill net rec/s | Rill wall rec/s | Rill task rec/s "
            "| ratio net (min–max) | ratio wall | ratio task | target | |")
    rows = [head, "|" + "---|" * 12]
    for m in measurements:
        target = "—" if m.target_ratio is None else f"≥ {m.target_ratio:.2f}"
        verdict = {None: "not gated", True: "MET", False: "MISSED"}[m.meets_target]
        p = m.parallelism if m.target == "embedded" else f"{m.parallelism} ({m.target})"
        rows.append(
            f"| {m.workload} | {p} | {m.records:,} {m.unit} | {_rate(m.baseline_rps)} | "
            f"{_rate(m.rill_net_rps)} | {_rate(m.rill_wall_rps)} | {_rate(m.rill_task_rps)} | {m.ratio_net:.2f} "
            f"({m.ratio_net_min:.2f}–{m.ratio_net_max:.2f}) | {m.ratio_wall:.2f} | {m.ratio_task:.2f} | "
            f"{target} | {verdict} |")
    return "\n".join(rows)


def _r(spread: Tuple[float, float, float]) -> str:
    return f"{spread[0]:.2f} ({spread[1]:.2f}–{spread[2]:.2f})"


def format_speedup(m: SpeedupMeasurement) -> str:
    """The comparison as a Markdown table plus the two headline ratios (paste-able into
    bench/README.md)."""
    p = m.parallelism
    rows = [
        f"| side | {m.unit}/s net | {m.unit}/s wall | {m.unit}/s task | ÷ loop, net (min–max) | ÷ loop, wall "
        f"(min–max) |",
        "|---|---|---|---|---|---|",
        f"| hand-written loop | {_rate(m.loop_rps)} | | | | |",
        f"| Rill embedded p=1 | {_rate(m.embedded_net_rps)} | {_rate(m.embedded_wall_rps)} | "
        f"{_rate(m.embedded_task_rps)} | {_r(m.embedded_vs_loop_net)} | {_r(m.embedded_vs_loop_wall)} |",
        f"| Rill cluster p={p} | {_rate(m.cluster_net_rps)} | {_rate(m.cluster_wall_rps)} | "
        f"{_rate(m.cluster_task_rps)} | {_r(m.cluster_vs_loop_net)} | {_r(m.cluster_vs_loop_wall)} |",
    ]
    if m.speedup_marginal is not None:
        rows[0] += f" {m.unit}/s marginal | ÷ loop, marginal (min–max) |"
        rows[1] += "---|---|"
        rows[2] = f"| hand-written loop | {_rate(m.loop_rps)} | | | | | {_rate(m.loop_marginal_rps)} | |"
        rows[3] += f" {_rate(m.embedded_marginal_rps)} | {_r(m.embedded_vs_loop_marginal)} |"
        rows[4] += f" {_rate(m.cluster_marginal_rps)} | {_r(m.cluster_vs_loop_marginal)} |"
    marginal = ("" if m.speedup_marginal is None else
                f"marginal (start-up excluded: {m.small_records:,} → {m.records:,} {m.unit}) {_r(m.speedup_marginal)}, ")
    rows += [
        "",
        f"cluster p={p} ÷ embedded p=1: {marginal}net {_r(m.speedup_net)}, wall {_r(m.speedup_wall)}, task "
        f"{_r(m.speedup_task)}; target ≥ {m.target_speedup:.1f} on {m.judged_on}: "
        f"{'MET' if m.meets_target else 'MISSED'}",
        f"cluster p={p} ÷ loop: net {_r(m.cluster_vs_loop_net)}, wall {_r(m.cluster_vs_loop_wall)}",
        f"{m.workload}: {m.records:,} {m.unit} ({m.sink_records:,} sink records, checked on every run), "
        f"{m.repeat} repetitions; cluster {m.cluster_shape}; cluster deployment (net − task) "
        f"{m.cluster_deploy_s:.2f} s, submission and result (wall − net) {m.cluster_startup_s:.2f} s; CPU per run: "
        f"embedded {m.embedded_cpu_s:.1f} s, cluster {m.cluster_cpu_s:.1f} s (client and cluster processes); other "
        f"processes kept {m.others_cores:.1f} of the machine's cores busy during the cluster runs (medians)",
    ]
    return "\n".join(rows)
