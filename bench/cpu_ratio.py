"""Loop CPU ÷ Rill CPU of a workload at p=1, embedded: a diagnostic for a loaded box.

``python -m bench.run`` reports wall-clock ratios. When other processes hold the cores, the
repetitions of one run spread by up to 2×. The process's CPU time moves less: this script runs
each side ``--repeat`` times, alternately (Rill first), and times them with
``time.process_time()`` (the whole process, so Rill's job set-up, its JobMaster and the
tasks' threads count). It prints the best CPU seconds of each side and their ratio. Outputs are
checked as in ``bench.run`` (:func:`bench.harness.check_same`; a mismatch raises
``ResultMismatch``). Not a target figure: the targets apply to ``bench.run``'s net
ratio.

    python -m bench.cpu_ratio --workload wordcount_sum --size 200000 --repeat 3
"""

from __future__ import annotations

import argparse
import time
from typing import List

from bench.harness import _run_baseline, _run_rill, check_same
from bench.workloads import WORKLOADS


def main(argv: List[str] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cpu_ratio", description=__doc__.split("\n")[0])
    parser.add_argument("--workload", choices=sorted(WORKLOADS), required=True)
    parser.add_argument("--size", type=int, default=None, help="input records (default: the workload's)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side (default 3)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1, got {args.repeat}")
    workload = WORKLOADS[args.workload]()
    data = workload.prepare(args.size or workload.default_size)
    rill: List[float] = []
    loop: List[float] = []
    for _ in range(args.repeat):
        c0 = time.process_time()
        _net, _wall, _task, got, _names = _run_rill(workload, data, 1)
        rill.append(time.process_time() - c0)
        c0 = time.process_time()
        _elapsed, expected = _run_baseline(workload, data)
        loop.append(time.process_time() - c0)
        check_same(args.workload, got, expected, 1)
    print(f"{args.workload}: {len(data):,} {workload.unit}, best of {args.repeat}: Rill {min(rill):.3f} s CPU, "
          f"loop {min(loop):.3f} s CPU, loop ÷ Rill {min(loop) / min(rill):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
