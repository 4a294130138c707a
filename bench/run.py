"""Run the benchmarks and print the table (and optionally JSON).

    python -m bench.run                                  # the README's table
    python -m bench.run --workload wordcount --parallelism 2 --size 100000 --repeat 5
    python -m bench.run --json out/bench.json

Without ``--workload``, runs stateless, WordCount and the tumbling-window workload at
parallelism 1 (gated by their target ratios), WordCount at parallelism 2 in the embedded mode
and the sliding-window workload at parallelism 1 (reported, not gated).
Exit status: 0; 1 if a result check fails (Rill's output differs from the loop's); 2 if
``--check-targets`` is given and a target ratio is missed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import List, Optional, Tuple

from bench.harness import Measurement, ResultMismatch, format_table, machine_info, run_workload
from bench.workloads import WORKLOADS


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description="Rill vs the hand-written loop")
    parser.add_argument("--workload", choices=sorted(WORKLOADS), action="append",
                        help="run only this workload (repeatable); default: all at p=1, plus WordCount at p=2")
    parser.add_argument("--size", type=int, help="input records per run (default: the workload's)")
    parser.add_argument("--repeat", type=int, default=3, help="timed repetitions per side (default 3)")
    parser.add_argument("--parallelism", type=int, default=1, help="Rill's parallelism with --workload (default 1)")
    parser.add_argument("--no-warmup", action="store_true", help="skip the warm-up run of each side")
    parser.add_argument("--json", metavar="PATH", help="also write the measurements as JSON")
    parser.add_argument("--check-targets", action="store_true", help="exit 2 if a target ratio is missed")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the table")
    args = parser.parse_args(argv)

    if args.workload:
        plan: List[Tuple[str, int]] = [(name, args.parallelism) for name in args.workload]
    else:
        plan = [("stateless", 1), ("wordcount", 1), ("wordcount", 2), ("tumbling", 1), ("sliding", 1)]

    log = None if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    info = machine_info()
    if log:
        log(f"machine: nproc={info['nproc']} cpu={info['cpu']!r} python={info['python']}")
    prepared = {}
    measurements: List[Measurement] = []
    started = time.perf_counter()
    for name, parallelism in plan:
        workload = WORKLOADS[name]()
        size = args.size or workload.default_size
        if (name, size) not in prepared:
            prepared.clear()  # free the previous workload's input before building the next
            t0 = time.perf_counter()
            prepared[name, size] = workload.prepare(size)
            if log:
                log(f"{name}: prepared {size:,} {workload.unit} in {time.perf_counter() - t0:.1f} s")
        try:
            m = run_workload(workload, prepared[name, size], repeat=args.repeat, parallelism=parallelism,
                             warmup=not args.no_warmup, log=log)
        except ResultMismatch as e:
            print(f"RESULT CHECK FAILED: {e}", file=sys.stderr)
            return 1
        measurements.append(m)
    total = time.perf_counter() - started

    print(format_table(measurements))
    print(f"\nratio = loop time / Rill time, per repetition, median (min–max) over {args.repeat}; the target "
          f"applies to ratio net. net = JobExecutionResult net runtime (deployment included); wall = "
          f"environment creation to execute() returning; task = longest vertex's processing span "
          f"(diagnostic). nproc={info['nproc']}, {info['cpu']}, Python {info['python']}, {total:.0f} s in all.")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": info, "argv": sys.argv[1:] if argv is None else argv,
                       "measurements": [m.to_json() for m in measurements]}, f, indent=2)
    if args.check_targets and any(m.meets_target is False for m in measurements):
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
