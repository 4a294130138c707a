"""The exactly-once suite (issue 11), in the spirit of Flink's ``StreamCheckpointingITCase``:
a job counts N records over 40 keys at parallelism 4 with EXACTLY_ONCE checkpoints (aligned, or
unaligned with ``--checkpoints unaligned``: FLIP-76, in-flight data stored and replayed) every 500 ms into an
exactly-once ``FileSink``; one failure is injected at a random record
between 40% and 70% of the input (or the first record after it that comes once a checkpoint
completed, so that there is one to restore); after the restart (from the latest completed one) the
committed output must hold every record exactly once and every key's counts must be exactly
``1 .. N/40``, each once (keyed state neither lost nor counted twice).

Failures (``--kind``):

- ``exception``: a user function raises (embedded and cluster);
- ``kill-task-process``: the task process running the failing subtask is SIGKILLed (cluster);
- ``kill-task-executor``: its TaskExecutor process is SIGKILLed (cluster; a private one).

Every run prints ``seed=<s>``; ``--seed S --runs 1`` reproduces it (the seed fixes the failing
record). ``tests/engine/runtime/checkpoint/test_exactly_once.py`` runs 20 seeded runs; this
script runs as many as asked::

    python -m bench.exactly_once --runs 200 --records 1000000 --mode embedded --kind exception
    python -m bench.exactly_once --runs 50 --mode cluster --kind kill-task-process
    python -m bench.exactly_once --runs 50 --checkpoints unaligned
    python -m bench.exactly_once --runs 200 --seed 1 --mode cluster --checkpoints both \\
        --kind exception --kind kill-task-process --kind kill-task-executor     # every scenario
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional

import numpy as np

from rill.common import Encoder, JobStatus
from rill.common.functions import CheckpointListener, KeyedProcessFunction, MapFunction
from rill.datastream.connectors import Boundedness, FileSink, Source, SourceReader, SourceSplit
from rill.state import ValueStateDescriptor

KEYS = 40
PARALLELISM = 4
SPLITS = 16
INTERVAL_MS = 500
KINDS = ("exception", "kill-task-process", "kill-task-executor")


@dataclass(frozen=True)
class RangeSplit(SourceSplit):
    """Records ``start .. end - 1``."""

    start: int
    end: int

    def split_id(self) -> str:
        return f"{self.start}-{self.end}"


class _RangeReader(SourceReader):
    """Reads at most ``rate`` records/s (0: as fast as it can), so that a run lasts long
    enough for checkpoints to complete before the failure whatever the machine's speed;
    while ahead of its rate it reports nothing available (the task goes on taking
    checkpoints), it never sleeps."""

    def __init__(self, rate: float):
        self.rate = rate
        self._start: Optional[float] = None
        self._emitted = 0

    def read(self, split: RangeSplit):
        step = self.batch_size
        for i in range(split.start, split.end, step):
            if self.rate:
                if self._start is None:
                    self._start = time.monotonic()
                while self._emitted > self.rate * (time.monotonic() - self._start):
                    yield []
            batch = list(range(i, min(i + step, split.end)))
            self.progress_units += len(batch)
            self._emitted += len(batch)
            yield batch

    def read_from(self, split: RangeSplit, records_to_skip: int):
        return self.read(RangeSplit(min(split.start + records_to_skip, split.end), split.end))


class RangeSplitsSource(Source):
    """``0 .. n-1`` in ``splits`` contiguous splits handed out first-come first-served (more
    splits than readers, so the enumerator's checkpointed state matters); replays exactly.
    ``rate``: records/s per reader (0: unthrottled)."""

    def __init__(self, n: int, splits: int = SPLITS, rate: float = 0):
        self.n, self.splits, self.rate = n, splits, rate

    def create_splits(self, parallelism: int) -> List[SourceSplit]:
        n, k = self.n, self.splits
        return [RangeSplit(n * i // k, n * (i + 1) // k) for i in range(k) if n * (i + 1) // k > n * i // k]

    def create_reader(self) -> SourceReader:
        return _RangeReader(self.rate)

    def get_boundedness(self):
        return Boundedness.BOUNDED

    def estimated_total_units(self) -> Optional[int]:
        return self.n


class InjectFailure(MapFunction, CheckpointListener):
    """Attempt 0 fails at the first record ``>= at`` it sees once one of the job's checkpoints
    completed (so that the restart restores one: ``at`` is drawn between 40% and 70% of the
    input, and the first checkpoint usually completed long before): ``exception`` raises;
    ``kill-task-process`` SIGKILLs its own process; ``hold`` writes its pid to
    ``<markers>/held.pid`` and waits for ``<markers>/release`` (the driver kills the
    TaskExecutor meanwhile). Only the first subtask that gets there fails (it creates
    ``<markers>/failed`` with the record it failed at). Later attempts pass every record."""

    def __init__(self, at: int, kind: str, markers: str):
        self.at, self.kind, self.markers = at, kind, markers

    def open(self, runtime_context):
        self.armed = runtime_context.get_attempt_number() == 0
        self.checkpointed = False

    def notify_checkpoint_complete(self, checkpoint_id):
        self.checkpointed = True

    def map(self, value):
        if value >= self.at and self.armed and self.checkpointed:
            self.armed = False
            try:  # one failure per run: the first subtask to get here claims it
                fd = os.open(os.path.join(self.markers, "failed"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return value
            os.write(fd, str(value).encode())
            os.close(fd)
            if self.kind == "exception":
                raise RuntimeError(f"injected failure at record {value}")
            if self.kind == "kill-task-process":
                os.kill(os.getpid(), signal.SIGKILL)
            Path(self.markers, "held.tmp").write_text(str(os.getpid()))
            os.replace(Path(self.markers, "held.tmp"), Path(self.markers, "held.pid"))
            deadline = time.monotonic() + 120
            while not Path(self.markers, "release").exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        return value


class CountPerKey(KeyedProcessFunction):
    """Emits ``"<record> <key> <count of the key so far> <attempt>"`` (the count in keyed
    state; the attempt shows whether a restarted attempt started from restored counts)."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))
        self.attempt = runtime_context.get_attempt_number()

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield f"{value} {value % KEYS} {n} {self.attempt}"


#: records/s over all readers: a run of N records lasts about N / RATE s
RATE = 200_000


def build_job(env, n: int, out_dir: str, fail_at: int, kind: str, markers: str, rate: float = RATE,
              unaligned: bool = False) -> None:
    """The suite's job on ``env``: checkpoints every 500 ms (EXACTLY_ONCE, aligned or
    ``unaligned``), one restart without delay, source (``rate`` records/s in all) → failure
    injector → key_by(record % 40) → count → FileSink."""
    env.set_parallelism(PARALLELISM)
    env.enable_checkpointing(INTERVAL_MS)
    if unaligned:
        env.get_checkpoint_config().enable_unaligned_checkpoints()
    conf = env.get_configuration()
    conf.set_string("restart-strategy.type", "fixed-delay")
    conf.set_string("restart-strategy.fixed-delay.attempts", "1")
    conf.set_string("restart-strategy.fixed-delay.delay", "0 ms")
    sink = FileSink.for_row_format(out_dir, Encoder.simple_string_encoder()).build()
    (env.from_source(RangeSplitsSource(n, rate=rate / PARALLELISM), None, "ranges")
        .map(InjectFailure(fail_at, "hold" if kind == "kill-task-executor" else kind, markers)).name("inject")
        .key_by(lambda v: v % KEYS).process(CountPerKey()).uid("count").name("count")
        .sink_to(sink))


def committed_lines(out_dir: str) -> List[str]:
    """Every line of the committed part files (hidden in-progress/pending files skipped)."""
    lines: List[str] = []
    for root, _dirs, names in os.walk(out_dir):
        for name in names:
            if not name.startswith("."):
                lines.extend(Path(root, name).read_text().splitlines())
    return lines


def check_output(out_dir: str, n: int) -> bool:
    """The exactly-once check; returns whether the restarted attempt began from restored keyed
    counts (some key's first count in attempt 1 above 1: it restored a completed checkpoint).

    :raises AssertionError: naming what was lost, duplicated or miscounted.
    """
    text = " ".join(committed_lines(out_dir))
    rows = np.array(text.split(), dtype=np.int64).reshape(-1, 4)  # record, key, count, attempt
    records, keys, counts, attempts = rows.T
    times = np.bincount(records, minlength=n)
    missing, dup = np.flatnonzero(times == 0), np.flatnonzero(times > 1)
    if len(missing) or len(dup) or len(times) != n:
        raise AssertionError(f"committed output: missing {len(missing)} records (first {missing[:5].tolist()}), "
                             f"duplicated {len(dup)} (first {dup[:5].tolist()})")
    per_key = n // KEYS
    expected = np.arange(1, per_key + 1)
    wrong = {}
    for k in range(KEYS):
        c = np.sort(counts[keys == k])
        if not np.array_equal(c, expected):
            wrong[k] = (len(c), int(c.max()) if len(c) else 0)
    if wrong:
        raise AssertionError(f"keyed counts not exactly 1..{per_key} per key: (lines, max) per wrong key {wrong}")
    restarted = attempts > 0
    return any(int(counts[restarted & (keys == k)].min(initial=per_key + 1)) > 1
               for k in range(KEYS) if np.any(restarted & (keys == k)))


@dataclass
class RunResult:
    seed: int
    kind: str
    records: int
    fail_at: int
    seconds: float
    failed_at: int  # the record attempt 0 failed at
    completed_checkpoints: int
    restored: bool  # the restart began from a completed checkpoint's keyed counts


def run_once(make_env: Callable[[], object], seed: int, kind: str, n: int, work_dir: str,
             kill_task_executor: Optional[Callable[[int], None]] = None, timeout_s: float = 300,
             rate: float = RATE, unaligned: bool = False) -> RunResult:
    """One seeded run: build, run to the end, check. ``kill_task_executor(pid)`` kills the
    TaskExecutor hosting task process ``pid`` (``kill-task-executor`` only).

    :raises AssertionError: if the output is not exact or the failure was not injected.
    """
    rng = random.Random(seed)
    fail_at = rng.randint(int(0.4 * n), int(0.7 * n))
    print(f"exactly-once run: seed={seed} kind={kind} records={n} fail_at={fail_at} "
          f"checkpoints={'unaligned' if unaligned else 'aligned'}", flush=True)
    out_dir, markers = os.path.join(work_dir, "out"), os.path.join(work_dir, "markers")
    os.makedirs(out_dir)
    os.makedirs(markers)
    env = make_env()
    build_job(env, n, out_dir, fail_at, kind, markers, rate, unaligned)
    start = time.monotonic()
    client = env.execute_async(f"exactly-once seed {seed}")
    if kind == "kill-task-executor":
        pid_file = Path(markers, "held.pid")
        deadline = time.monotonic() + timeout_s
        while not pid_file.exists():
            assert time.monotonic() < deadline, f"seed={seed}: the failing record {fail_at} was never reached"
            time.sleep(0.01)
        kill_task_executor(int(pid_file.read_text()))
        # the killed TaskExecutor's task processes run on until their parent-watch tick: released
        # at once, the held task could finish attempt 0 before the loss is seen (no restart)
        while client.get_job_status() is JobStatus.RUNNING:
            assert time.monotonic() < deadline, f"seed={seed}: the job never saw the TaskExecutor's loss"
            time.sleep(0.01)
        Path(markers, "release").touch()
    client.get_job_execution_result().result(timeout=timeout_s)
    seconds = time.monotonic() - start
    stats = client.get_checkpoint_stats()
    completed = 0 if stats is None else stats.counts.number_of_completed_checkpoints
    assert Path(markers, "failed").exists(), f"seed={seed}: no failure was injected"
    failed_at = int(Path(markers, "failed").read_text())
    restored = check_output(out_dir, n)
    return RunResult(seed, kind, n, fail_at, seconds, failed_at, completed, restored)


CHECKPOINTS = ("aligned", "unaligned", "both")


def _alignments(choice: str) -> List[bool]:
    """The ``unaligned`` flags cycled over the runs for ``--checkpoints``."""
    return {"aligned": [False], "unaligned": [True], "both": [False, True]}[choice]


def main(argv=None) -> int:
    """Runs ``--runs`` seeded runs, cycling ``--kind`` and (per full cycle of kinds) the
    checkpoint alignment, so that ``--checkpoints both`` with three kinds covers all six
    combinations every six runs. A run that is not exact (or fails or hangs) is reported with its
    seed and the runs go on; the summary names the seeds of every failure.

    :returns: 0 if every run was exact, 1 otherwise.
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rate", type=float, default=RATE, help="records/s over all readers (0: unthrottled)")
    parser.add_argument("--seed", type=int, default=None, help="first seed (default: random); run i uses seed+i")
    parser.add_argument("--mode", choices=("embedded", "cluster"), default="embedded")
    parser.add_argument("--checkpoints", choices=CHECKPOINTS, default="aligned",
                        help="aligned, unaligned (FLIP-76) or both (alternating per cycle of --kind)")
    parser.add_argument("--kind", choices=KINDS, action="append",
                        help="failure kinds, cycled over the runs (default: exception; the kill kinds need "
                             "--mode cluster)")
    args = parser.parse_args(argv)
    kinds = args.kind or ["exception"]
    alignments = _alignments(args.checkpoints)
    if args.mode == "embedded" and set(kinds) - {"exception"}:
        parser.error("only --kind exception runs embedded: the kill kinds kill cluster processes")
    first = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 30)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from conftest import LocalCluster  # noqa: PLC0415 - the tests' cluster driver, only for --mode cluster
    from rill.common import Configuration  # noqa: PLC0415
    from rill.datastream import StreamExecutionEnvironment  # noqa: PLC0415

    results, failures = [], []
    with tempfile.TemporaryDirectory(prefix="rill-exactly-once-") as tmp:
        cluster = None

        def start_cluster(i: int):
            run_dir = Path(tmp, f"cluster-{i}")
            run_dir.mkdir()
            return LocalCluster(run_dir, task_executors=3, slots=PARALLELISM).start()

        try:
            for i in range(args.runs):
                kind = kinds[i % len(kinds)]
                unaligned = alignments[(i // len(kinds)) % len(alignments)]
                if args.mode == "cluster" and cluster is None:
                    cluster = start_cluster(i)

                def make_env():
                    if cluster is not None:
                        return cluster.environment(parallelism=PARALLELISM)
                    return StreamExecutionEnvironment.get_execution_environment(Configuration())

                def kill_te(pid, c=cluster):
                    hosting = [te for te in c.task_executor_pids().values() if pid in c.task_processes([te])]
                    c.remember_processes_silently()
                    os.kill(hosting[0], signal.SIGKILL)

                try:
                    r = run_once(make_env, first + i, kind, args.records, os.path.join(tmp, f"run-{i}"), kill_te,
                                 rate=args.rate, unaligned=unaligned)
                except Exception as e:  # noqa: BLE001 - a failed run is reported with its seed; the runs go on
                    failures.append((first + i, kind, unaligned, f"{type(e).__name__}: {e}"))
                    print(f"  FAILED: seed={first + i} kind={kind} "
                          f"checkpoints={'unaligned' if unaligned else 'aligned'}: {type(e).__name__}: {e}",
                          flush=True)
                else:
                    results.append(r)
                    print(f"  ok: {r.seconds:.1f} s, failed at record {r.failed_at}, {r.completed_checkpoints} "
                          f"checkpoints completed, restart {'from a checkpoint' if r.restored else 'from nothing'}",
                          flush=True)
                # a killed TaskExecutor (or a failed run's leftovers) leaves the cluster short: a fresh one
                if cluster is not None and (kind == "kill-task-executor" or (failures and failures[-1][0] == first + i)):
                    cluster.stop()
                    cluster = None
        finally:
            if cluster is not None:
                cluster.stop()
    total = sum(r.seconds for r in results)
    from_nothing = sum(1 for r in results if not r.restored)
    print(f"summary: {args.runs} runs ({', '.join(sorted(set(kinds)))}; checkpoints {args.checkpoints}), "
          f"{args.records} records each, seeds {first}..{first + args.runs - 1}: {len(results)} exact, "
          f"{len(failures)} failed, {from_nothing} of the exact ones restarted from nothing, "
          f"{total:.0f} s in jobs", flush=True)
    for seed, kind, unaligned, error in failures:
        print(f"  failed seed={seed} kind={kind} checkpoints={'unaligned' if unaligned else 'aligned'}: {error}")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
