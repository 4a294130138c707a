"""Checkpoint duration, unaligned vs aligned, under the backpressure experiment's slow subtask
(issue 11: "unaligned stays within 2x its unloaded duration while aligned grows").

    python -m bench.unaligned_checkpoints                  # embedded, ~4 x 15 s
    python -m bench.unaligned_checkpoints --mode cluster   # on a 2 x 2 local cluster
    python -m bench.unaligned_checkpoints --quick          # 4 x 7 s

The job is ``bench/backpressure.py``'s: ``A = from_source(NumberSequenceSource) (p=4, as fast as
it can) -> key_by(value % 4096) -> B = SlowSubtaskMap -> discarding sink (p=4)``. Four runs,
each checkpointing every ``--interval-ms``: aligned and unaligned (FLIP-76), each unloaded
(nothing slow) and loaded (B.4 throttled, as in the backpressure experiment, to
``1/slow-factor`` of the median per-subtask rate of B measured in the aligned unloaded run, or
to ``--slow-rate`` records/s; A then blocks on its full output to B.4 and the channels to B.4
hold a backlog). The engine's defaults otherwise (1,024 records per buffer and per source
batch). Per run, after ``--warmup`` s, the
median end-to-end duration of the checkpoints completed in the next ``--duration`` s, and the
median in-flight data they stored (``CheckpointStats.persisted_data_bytes``); the figure of
merit is each mode's loaded median as a ratio to its own unloaded one, from the same
invocation. When no checkpoint of a run completed in the window, the age of the oldest one
still pending when the run was cancelled is printed as a lower bound (``>``). Output: a table on stdout and ``OUT/unaligned_checkpoints.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import List, Optional

from bench.backpressure import NUM_KEYS, NUM_SUBTASKS, SLOW_SUBTASK, DiscardingSink, SlowSubtaskMap

SEQUENCE_LENGTH = 1 << 40  # unbounded in practice: every run is cancelled


def _key(value):
    return value % NUM_KEYS


@dataclass
class Run:
    name: str
    unaligned: bool
    slow_rate: Optional[float]
    durations_ms: List[int] = field(default_factory=list)
    persisted_bytes: List[int] = field(default_factory=list)
    failed: int = 0
    #: ms since the trigger of the checkpoints still in progress when the run was cancelled
    in_progress_ms: List[int] = field(default_factory=list)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.durations_ms) if self.durations_ms else float("nan")

    @property
    def median_persisted_bytes(self) -> float:
        return statistics.median(self.persisted_bytes) if self.persisted_bytes else 0.0


def run(make_env, name: str, unaligned: bool, slow_rate: Optional[float], args, work_dir: Path) -> Run:
    """One run: the job with checkpoints, ``warmup + duration`` seconds, then cancelled."""
    from rill.datastream.connectors.number_seq import NumberSequenceSource  # noqa: PLC0415
    from rill.runtime.checkpoint.checkpoint_stats import CheckpointStatsStatus  # noqa: PLC0415

    env = make_env()
    env.set_parallelism(NUM_SUBTASKS)
    env.enable_checkpointing(args.interval_ms)
    if unaligned:
        env.get_checkpoint_config().enable_unaligned_checkpoints()
    conf = env.get_configuration()
    conf.set_integer("taskmanager.network.records-per-buffer", args.records_per_buffer)
    conf.set_string("execution.checkpointing.num-retained", "1")
    prefix = str(work_dir / f"channels-{name}")
    (env.from_source(NumberSequenceSource(0, SEQUENCE_LENGTH - 1), None, "A")
        .key_by(_key)
        .map(SlowSubtaskMap(SLOW_SUBTASK, slow_rate, prefix, SEQUENCE_LENGTH // NUM_SUBTASKS, NUM_SUBTASKS))
        .name("B")
        .add_sink(DiscardingSink()).name("discard"))
    client = env.execute_async(f"unaligned-bench-{name}")
    result = Run(name, unaligned, slow_rate)
    seen = {}
    start = time.time()
    window_start_ms = (start + args.warmup) * 1000
    in_progress = {}
    try:
        while time.time() < start + args.warmup + args.duration:
            time.sleep(0.25)  # sampling the statistics, not synchronization
            stats = client.get_checkpoint_stats()
            for c in () if stats is None else stats.history:
                if c.trigger_timestamp < window_start_ms:
                    continue
                if c.status is CheckpointStatsStatus.IN_PROGRESS:
                    in_progress[c.checkpoint_id] = int(time.time() * 1000) - c.trigger_timestamp
                else:
                    seen[c.checkpoint_id] = c
                    in_progress.pop(c.checkpoint_id, None)
    finally:
        client.cancel().result(60)
    result.in_progress_ms = sorted(in_progress.values())
    for c in sorted(seen.values(), key=lambda c: c.checkpoint_id):
        if c.status is CheckpointStatsStatus.COMPLETED:
            result.durations_ms.append(c.end_to_end_duration_ms)
            result.persisted_bytes.append(c.persisted_data_bytes)
        else:
            result.failed += 1
    return result


def measured_rate(work_dir: Path, name: str, seconds: float) -> float:
    """The median per-subtask records/s of B in run ``name`` (from ``SlowSubtaskMap``'s
    count files: the last line of each ``B<j>``, over the run's length)."""
    rates = []
    for j in range(1, NUM_SUBTASKS + 1):
        lines = Path(work_dir, f"channels-{name}-B{j}.jsonl").read_text().splitlines()
        first, last = json.loads(lines[0]), json.loads(lines[-1])
        rates.append(sum(last["counts"]) / max(1e-3, last["t"] - first["t"]))
    return statistics.median(rates)


def format_table(runs: List[Run]) -> str:
    by = {r.name: r for r in runs}
    lines = [f"{'run':<22}{'completed':>10}{'failed':>8}{'pending':>9}{'median ms':>11}{'ratio':>8}"
             f"{'persisted (median)':>20}"]
    for r in runs:
        base = by["aligned-unloaded" if not r.unaligned else "unaligned-unloaded"]
        if r.durations_ms:
            median, ratio = f"{r.median_ms:.0f}", f"{r.median_ms / base.median_ms:.2f}"
        elif r.in_progress_ms:  # none completed: the oldest pending one is a lower bound
            median, ratio = f">{max(r.in_progress_ms)}", f">{max(r.in_progress_ms) / base.median_ms:.1f}"
        else:
            median = ratio = "-"
        lines.append(f"{r.name:<22}{len(r.durations_ms):>10}{r.failed:>8}{len(r.in_progress_ms):>9}{median:>11}"
                     f"{ratio:>8}{r.median_persisted_bytes:>18,.0f} B")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("embedded", "cluster"), default="embedded")
    parser.add_argument("--interval-ms", type=int, default=1000)
    parser.add_argument("--warmup", type=float, default=4.0)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--slow-factor", type=float, default=10.0)
    parser.add_argument("--slow-rate", type=float, default=None,
                        help="records/s of the slow subtask B.4 (default: measured rate / slow-factor)")
    parser.add_argument("--records-per-buffer", type=int, default=1024)
    parser.add_argument("--quick", action="store_true", help="warm-up 2 s, window 5 s")
    parser.add_argument("--out", default="bench-results")
    args = parser.parse_args(argv)
    if args.quick:
        args.warmup, args.duration = 2.0, 5.0
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from conftest import LocalCluster  # noqa: PLC0415 - the tests' cluster driver, only for --mode cluster
    from rill.common import Configuration  # noqa: PLC0415
    from rill.datastream import StreamExecutionEnvironment  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="rill-unaligned-") as tmp:
        cluster = None
        if args.mode == "cluster":
            run_dir = Path(tmp, "cluster")
            run_dir.mkdir()
            cluster = LocalCluster(run_dir, task_executors=2, slots=2 * NUM_SUBTASKS).start()

        def make_env():
            if cluster is not None:
                return cluster.environment(parallelism=NUM_SUBTASKS)
            return StreamExecutionEnvironment.get_execution_environment(Configuration())

        try:
            runs = [run(make_env, "aligned-unloaded", False, None, args, Path(tmp))]
            if args.slow_rate is None:
                args.slow_rate = measured_rate(Path(tmp), "aligned-unloaded", args.warmup + args.duration) / args.slow_factor
            for name, unaligned, slow_rate in (("aligned-loaded", False, args.slow_rate),
                                               ("unaligned-unloaded", True, None),
                                               ("unaligned-loaded", True, args.slow_rate)):
                print(f"run {name} ...", flush=True)
                runs.append(run(make_env, name, unaligned, slow_rate, args, Path(tmp)))
        finally:
            if cluster is not None:
                cluster.stop()
    print(f"mode {args.mode}, checkpoints every {args.interval_ms} ms, B.4 at {args.slow_rate:.0f} records/s "
          f"when loaded, {args.records_per_buffer} records per buffer")
    print(format_table(runs))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "unaligned_checkpoints.json").write_text(json.dumps(
        {"args": vars(args), "runs": [asdict(r) for r in runs]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
