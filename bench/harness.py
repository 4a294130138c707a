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
Window workloads end in a :class:`WindowResultSink`, which keeps every output with its
timestamp (the window's max timestamp); their outputs are compared as multisets.
"""

from __future__ import annotations

import gc
import math
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
    "format_table",
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
    and the order of outputs may differ (the check compares multisets).
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

_published: Dict[str, List[Tuple[int, Any]]] = {}
_published_lock = threading.Lock()


class CountingSink(SinkFunction):
    """Counts records and sums ``value[1]``; publishes ``(count, checksum)`` in ``close()``.

    Two attribute updates per record: the cheapest sink that still checks the values (a sink
    that did more would add the same cost to both sides and flatter the ratio).
    """

    def __init__(self, token: str):
        self.token = token
        self.count = 0
        self.checksum = 0

    def invoke(self, value, context):
        self.count += 1
        self.checksum += value[1]

    def close(self) -> None:
        with _published_lock:
            _published.setdefault(self.token, []).append((self.count, self.checksum))


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

    def __init__(self, token: str):
        super().__init__(token)
        self.checksum = []

    def invoke(self, value, context):
        self.count += 1
        self.checksum.append((value, context.timestamp()))


@dataclass(frozen=True)
class SinkResult:
    """What the sinks of one run published: record count, checksum, and how many sink
    instances (subtasks) published."""

    count: int
    checksum: Any
    instances: int


def new_token() -> str:
    return uuid.uuid4().hex


def take_result(token: str) -> SinkResult:
    """Sum what the sinks with ``token`` published and forget it.

    :raises ResultMismatch: if no sink published (the engine never closed its sink).
    """
    with _published_lock:
        parts = _published.pop(token, None)
    if not parts:
        raise ResultMismatch(f"no CountingSink with token {token} was closed: the sink never finished")
    count = sum(p[0] for p in parts)
    checksum = parts[0][1]
    for p in parts[1:]:
        checksum += p[1]
    return SinkResult(count, checksum, len(parts))


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

    @property
    def meets_target(self) -> Optional[bool]:
        return None if self.target_ratio is None else self.ratio_net >= self.target_ratio

    def to_json(self) -> Dict[str, Any]:
        d = asdict(self)
        d["meets_target"] = self.meets_target
        return d


def _run_baseline(workload: Workload, data: List[Any]) -> Tuple[float, SinkResult]:
    token = new_token()
    sink = getattr(workload, "sink_class", CountingSink)(token)
    gc.collect()
    t0 = time.perf_counter()
    workload.run_baseline(data, sink)
    sink.close()
    elapsed = time.perf_counter() - t0
    return elapsed, take_result(token)


def _run_rill(workload: Workload, data: List[Any], parallelism: int
              ) -> Tuple[float, float, float, SinkResult, List[str]]:
    token = new_token()
    gc.collect()
    t0 = time.perf_counter()
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    workload.run_rill(env, data, getattr(workload, "sink_class", CountingSink)(token))
    result = env.execute(f"bench-{workload.name}")
    wall = time.perf_counter() - t0
    # net runtime has ms resolution: at least 1 ms, so that tiny smoke runs do not divide by 0
    net = max(result.get_net_runtime(), 1) / 1000.0
    # the tasks' own span: from a task's start of processing (operators deserialized and
    # opened) to its end, longest over vertices (they run concurrently); net minus deployment
    task = max([v.duration_ms for v in result.vertices] + [1.0]) / 1000.0
    vertices = [f"{v.name} (p={v.parallelism})" for v in result.vertices]
    return net, wall, task, take_result(token), vertices


def run_workload(workload: Workload, data: Sequence[Any], repeat: int = 3, parallelism: int = 1,
                 warmup: bool = True, log=None) -> Measurement:
    """Warm up both sides (once each, on the first tenth of ``data``), then ``repeat`` times
    run Rill and the loop, alternating which goes first; check every run's result.

    :raises ResultMismatch: on the first run whose results differ.
    """
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, got {repeat}")
    data = list(data) if not isinstance(data, list) else data
    if warmup:
        part = data[: max(1, len(data) // 10)]
        _, expected = _run_baseline(workload, part)
        _, _, _, got, _ = _run_rill(workload, part, parallelism)
        check_same(workload.name, got, expected, parallelism)
    samples: List[Sample] = []
    vertices: List[str] = []
    for i in range(repeat):
        if i % 2 == 0:
            net, wall, task, got, vertices = _run_rill(workload, data, parallelism)
            base, expected = _run_baseline(workload, data)
        else:
            base, expected = _run_baseline(workload, data)
            net, wall, task, got, vertices = _run_rill(workload, data, parallelism)
        check_same(workload.name, got, expected, parallelism)
        samples.append(Sample(base, net, wall, task, len(data), expected.count))
        if log is not None:
            log(f"  {workload.name} p={parallelism} rep {i + 1}/{repeat}: loop {len(data) / base:,.0f}/s, "
                f"Rill net {len(data) / net:,.0f}/s wall {len(data) / wall:,.0f}/s task {len(data) / task:,.0f}/s, "
                f"sink got {expected.count:,} records (checked)")
    n = len(data)
    ratios = [s.baseline_s / s.rill_net_s for s in samples]
    return Measurement(
        workload=workload.name, unit=workload.unit, parallelism=parallelism, records=n,
        sink_records=samples[0].sink_records, repeat=repeat,
        target_ratio=workload.target_ratio if parallelism == 1 else None,
        baseline_rps=statistics.median(n / s.baseline_s for s in samples),
        rill_net_rps=statistics.median(n / s.rill_net_s for s in samples),
        rill_wall_rps=statistics.median(n / s.rill_wall_s for s in samples),
        rill_task_rps=statistics.median(n / s.rill_task_s for s in samples),
        ratio_net=statistics.median(ratios), ratio_net_min=min(ratios), ratio_net_max=max(ratios),
        ratio_wall=statistics.median(s.baseline_s / s.rill_wall_s for s in samples),
        ratio_task=statistics.median(s.baseline_s / s.rill_task_s for s in samples),
        startup_s=statistics.median(s.rill_wall_s - s.rill_net_s for s in samples),
        vertices=vertices, samples=samples,
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
        rows.append(
            f"| {m.workload} | {m.parallelism} | {m.records:,} {m.unit} | {_rate(m.baseline_rps)} | "
            f"{_rate(m.rill_net_rps)} | {_rate(m.rill_wall_rps)} | {_rate(m.rill_task_rps)} | {m.ratio_net:.2f} "
            f"({m.ratio_net_min:.2f}–{m.ratio_net_max:.2f}) | {m.ratio_wall:.2f} | {m.ratio_task:.2f} | "
            f"{target} | {verdict} |")
    return "\n".join(rows)
