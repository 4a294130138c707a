"""Checkpoint duration, unaligned vs aligned, under the backpressure experiment's slow subtask
(issue 11: "unaligned stays within 2x its unloaded duration while aligned grows").

    python -m bench.unaligned_checkpoints                  # embedded, ~4 x 14 s
    python -m bench.unaligned_checkpoints --mode cluster   # on a 2 x 2 local cluster
    python -m bench.unaligned_checkpoints --quick          # 4 x 7 s

The job is ``bench/backpressure.py``'s: ``A = from_source(NumberSequenceSource) (p=4, as fast as
it can) -> key_by(value % 4096) -> B = SlowSubtaskMap -> discarding sink (p=4)``. Four runs,
each checkpointing every ``--interval-ms``: aligned and unaligned (FLIP-76), each unloaded
(nothing slow) and loaded (B.4 throttled to ``--slow-rate`` records/s, so that A blocks on its
full output to B.4 and the channels to B.4 hold a backlog). Per run, after ``--warmup`` s, the
median end-to-end duration of the checkpoints completed in the next ``--duration`` s, and the
median in-flight data they stored (``CheckpointStats.persisted_data_bytes``); the figure of
merit is each mode's loaded median as a ratio to its own unloaded one, from the same
invocation. Output: a table on stdout and ``OUT/unaligned_checkpoints.json``.
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
    try:
        while time.time() < start + args.warmup + args.duration:
            time.sleep(0.25)  # sampling the statistics, not synchronization
            stats = client.get_checkpoint_stats()
            for c in () if stats is None else stats.history:
                if c.trigger_timestamp >= window_start_ms and c.status is not CheckpointStatsStatus.IN_PROGRESS:
                    seen[c.checkpoint_id] = c
    finally:
        client.cancel().result(60)
    for c in sorted(seen.values(), key=lambda c: c.checkpoint_id):
        if c.status is CheckpointStatsStatus.COMPLETED:
            result.durations_ms.append(c.end_to_end_duration_ms)
            result.persisted_bytes.append(c.persisted_data_bytes)
        else:
            result.failed += 1
    return result


def format_table(runs: List[Run]) -> str:
    by = {r.name: r for r in runs}
    lines = [f"{'run':<22}{'checkpoints':>12}{'failed':>8}{'median ms':>11}{'ratio':>8}{'persisted (median)':>20}"]
    for r in runs:
        base = by["aligned-unloaded" if not r.unaligned else "unaligned-unloaded"]
        ratio = r.median_ms / base.median_ms if base.median_ms else float("nan")
        lines.append(f"{r.name:<22}{len(r.durations_ms):>12}{r.failed:>8}{r.median_ms:>11.0f}{ratio:>8.2f}"
                     f"{r.median_persisted_bytes:>18,.0f} B")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("embedded", "cluster"), default="embedded")
    parser.add_argument("--interval-ms", type=int, default=1000)
    parser.add_argument("--warmup", type=float, default=4.0)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--slow-rate", type=float, default=2000.0, help="records/s of the slow subtask B.4")
    parser.add_argument("--records-per-buffer", type=int, default=128)
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
            runs = []
            for unaligned in (False, True):
                for slow_rate in (None, args.slow_rate):
                    name = f"{'unaligned' if unaligned else 'aligned'}-{'loaded' if slow_rate else 'unloaded'}"
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
