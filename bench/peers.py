"""Rill against bytewax 0.21 on W1–W3, in one run (issue 16: "≥ 2× bytewax on all three at
p=1, measured in the same run").

    python -m bench.peers                                  # W1 (both forms), W2, W3; ~3 min
    python -m bench.peers --workload wordcount_sum --repeat 5 --size 200000
    python -m bench.peers --check-targets                  # exit 2 if Rill < 2 × bytewax somewhere

Per workload, ``--repeat`` times and rotating which goes first: the hand-written loop, Rill
embedded at p=1 and bytewax on one worker (:mod:`bench.bytewax_flows`), all three on the same
prepared input, each run's output checked against the loop's (as ``bench.run`` does: the
same sinks, :func:`bench.harness.check_same`). One warm-up of each on a tenth of the input.
Rill's time is its net runtime (the targets' figure in ``bench.run``) and its wall time
(environment to ``execute()`` returning); bytewax's is ``run_main``'s wall time (flow building
included: it is milliseconds). Ratios are medians of per-repetition ratios (min–max).

Workloads: ``wordcount`` (W1 idiomatic), ``wordcount_sum`` (W1 with ``sum(1)``), ``tumbling``
(W2 as bench/ defines it) and ``stateless`` (W3); smaller default inputs than ``bench.run``'s
(:data:`DEFAULT_SIZES`) because bytewax is slower, up to 30× on ``tumbling``'s 1,000 keys.

Needs the ``bench-peers`` extra (bytewax). Exit status: 0; 1 if an output differs from the
loop's; 2 with ``--check-targets`` if Rill net ÷ bytewax < :data:`TARGET` for a workload.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any, List, Optional

from bench.bytewax_flows import FLOWS, run_bytewax
from bench.harness import (
    CountingSink,
    ResultMismatch,
    _run_baseline,
    _run_rill_summaries,
    check_same,
    machine_info,
    new_token,
    take_result,
)
from bench.workloads import WORKLOADS

__all__ = ["PeerMeasurement", "DEFAULT_SIZES", "TARGET", "measure", "main"]

#: Rill ÷ bytewax at p=1 that issue 16 asks for, on every workload
TARGET = 2.0

#: input records per workload (bytewax's run time bounds them)
DEFAULT_SIZES = {"wordcount": 100_000, "wordcount_sum": 100_000, "tumbling": 100_000, "stateless": 1_000_000}


@dataclass
class PeerMeasurement:
    """One workload's medians: records/s of each side, Rill net ÷ loop, Rill net ÷ bytewax and
    Rill wall ÷ bytewax as (median, min, max) over the repetitions."""

    workload: str
    unit: str
    records: int
    sink_records: int
    repeat: int
    loop_rps: float
    rill_net_rps: float
    rill_wall_rps: float
    bytewax_rps: float
    rill_vs_loop: tuple
    rill_vs_bytewax: tuple
    rill_wall_vs_bytewax: tuple

    @property
    def meets_target(self) -> bool:
        return self.rill_vs_bytewax[0] >= TARGET


def _run_peer(workload: Any, data: List[Any]):
    token = new_token()
    sink = getattr(workload, "sink_class", CountingSink)(token)
    gc.collect()
    t0 = time.perf_counter()
    run_bytewax(workload.name, data, sink)
    sink.close()
    return time.perf_counter() - t0, take_result(token)


def _spread(values: List[float]) -> tuple:
    return statistics.median(values), min(values), max(values)


def measure(workload: Any, data: List[Any], repeat: int = 3, warmup: bool = True, log=None) -> PeerMeasurement:
    """Loop, Rill embedded p=1 and bytewax on ``data``, ``repeat`` times, rotating the order.

    :raises ResultMismatch: on the first run whose output differs from the loop's.
    :raises ValueError: if ``repeat < 1``.
    """
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, got {repeat}")
    if warmup:
        part = data[: max(1, len(data) // 10)]
        _, expected = _run_baseline(workload, part)
        check_same(workload.name, _run_rill_summaries(workload, part, 1)[3], expected, 1)
        check_same(f"{workload.name} (bytewax)", _run_peer(workload, part)[1], expected, 1)
    sides = ["loop", "rill", "bytewax"]
    rows = []
    n = len(data)
    for i in range(repeat):
        order = sides[i % 3:] + sides[:i % 3]
        runs = {}
        for side in order:
            if side == "loop":
                runs[side] = _run_baseline(workload, data)
            elif side == "rill":
                runs[side] = _run_rill_summaries(workload, data, 1)
            else:
                runs[side] = _run_peer(workload, data)
        loop_s, expected = runs["loop"]
        net, wall, _task, got, _ = runs["rill"]
        peer_s, peer_got = runs["bytewax"]
        check_same(workload.name, got, expected, 1)
        check_same(f"{workload.name} (bytewax)", peer_got, expected, 1)
        rows.append((loop_s, net, wall, peer_s, expected.count))
        if log is not None:
            log(f"  {workload.name} rep {i + 1}/{repeat} ({' → '.join(order)}): loop {n / loop_s:,.0f}/s, Rill net "
                f"{n / net:,.0f}/s, bytewax {n / peer_s:,.0f}/s; Rill/bytewax {peer_s / net:.2f}; "
                f"{expected.count:,} sink records (both checked)")
    med = statistics.median
    return PeerMeasurement(
        workload=workload.name, unit=workload.unit, records=n, sink_records=rows[0][4], repeat=repeat,
        loop_rps=med(n / r[0] for r in rows), rill_net_rps=med(n / r[1] for r in rows),
        rill_wall_rps=med(n / r[2] for r in rows), bytewax_rps=med(n / r[3] for r in rows),
        rill_vs_loop=_spread([r[0] / r[1] for r in rows]),
        rill_vs_bytewax=_spread([r[3] / r[1] for r in rows]),
        rill_wall_vs_bytewax=_spread([r[3] / r[2] for r in rows]),
    )


def _rate(x: float) -> str:
    return f"{x / 1e6:.2f} M" if x >= 1e6 else f"{x / 1e3:.0f} k"


def _r(spread: tuple) -> str:
    return f"{spread[0]:.2f} ({spread[1]:.2f}–{spread[2]:.2f})"


def format_table(measurements: List[PeerMeasurement]) -> str:
    """A Markdown table (paste-able into bench/README.md)."""
    rows = ["| workload | input | loop rec/s | Rill net rec/s | bytewax rec/s | Rill ÷ loop | **Rill net ÷ bytewax** "
            "| Rill wall ÷ bytewax | target | |", "|" + "---|" * 10]
    for m in measurements:
        rows.append(f"| {m.workload} | {m.records:,} {m.unit} | {_rate(m.loop_rps)} | {_rate(m.rill_net_rps)} | "
                    f"{_rate(m.bytewax_rps)} | {_r(m.rill_vs_loop)} | {_r(m.rill_vs_bytewax)} | "
                    f"{_r(m.rill_wall_vs_bytewax)} | ≥ {TARGET:.1f} | {'MET' if m.meets_target else 'MISSED'} |")
    return "\n".join(rows)


def _load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.peers", description="Rill vs bytewax 0.21 vs the loop")
    parser.add_argument("--workload", choices=sorted(FLOWS), action="append",
                        help="run only this workload (repeatable); default: all")
    parser.add_argument("--size", type=int, help="input records per run (default: DEFAULT_SIZES)")
    parser.add_argument("--repeat", type=int, default=3, help="timed repetitions per side (default 3)")
    parser.add_argument("--no-warmup", action="store_true", help="skip the warm-up run of each side")
    parser.add_argument("--check-targets", action="store_true", help=f"exit 2 if Rill net ÷ bytewax < {TARGET}")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the table")
    args = parser.parse_args(argv)
    if args.repeat < 1 or (args.size is not None and args.size < 1):
        parser.error("--repeat and --size must be at least 1")
    log = None if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    info = machine_info()
    if log:
        log(f"machine: nproc={info['nproc']} cpu={info['cpu']!r} python={info['python']}; {_load()}")
    started = time.perf_counter()
    measurements = []
    for name in args.workload or ["wordcount", "wordcount_sum", "tumbling", "stateless"]:
        workload = WORKLOADS[name]()
        size = args.size or DEFAULT_SIZES[name]
        data = workload.prepare(size)
        try:
            measurements.append(measure(workload, data, args.repeat, not args.no_warmup, log))
        except ResultMismatch as e:
            print(f"RESULT CHECK FAILED: {e}", file=sys.stderr)
            return 1
    print(format_table(measurements))
    print(f"\nRill embedded p=1 and bytewax 0.21 on one worker, same inputs and outputs (checked on every run); "
          f"ratios per repetition, median (min–max) over {args.repeat}. nproc={info['nproc']}, {info['cpu']}, "
          f"Python {info['python']}, {time.perf_counter() - started:.0f} s in all; {_load()}.")
    if args.check_targets and not all(m.meets_target for m in measurements):
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
