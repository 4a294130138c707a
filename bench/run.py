"""Run the benchmarks and print the table (and optionally JSON).

    python -m bench.run                                  # the README's table
    python -m bench.run --workload wordcount --parallelism 2 --size 100000 --repeat 5
    python -m bench.run --json out/bench.json
    python -m bench.run --workload wordcount --target cluster --parallelism 2
    python -m bench.run --cluster-speedup                # loop vs embedded p=1 vs cluster p=2
    python -m bench.run --cluster-speedup --workload wordcount_sum --workload stateless --workload tumbling

Without ``--workload``, runs stateless, WordCount (idiomatic, and ``wordcount_sum``: written
with ``key_by(itemgetter(0)).sum(1)``) and the tumbling-window workload at parallelism 1 (gated
by their target ratios), WordCount at parallelism 2 in the embedded mode and the sliding-window
workload at parallelism 1 (reported, not gated).

``--target cluster`` runs Rill's side on a local cluster the benchmark starts for the run
(``bench/cluster.py``: ``rill cluster start`` on a free port, 1 TaskExecutor × P slots by
default, a temporary ``RILL_RUN_DIR``; stopped at the end, with a check that none of its
processes is left). ``--cluster-speedup`` measures, in one run and alternately, the
hand-written loop, Rill embedded at parallelism 1 and Rill on such a cluster at
``--parallelism`` (default 2) for WordCount (or each ``--workload`` given: ``wordcount``,
``wordcount_sum``, ``stateless``, ``tumbling``), and prints cluster ÷ embedded and cluster ÷ loop
(bench/README.md, "Cluster WordCount"). With either, the input is not shipped inside the job
(``--source file``, the default there): WordCount reads its lines as the WordCount example does,
with ``read_text_file`` (16 files in a temporary directory), ``stateless`` (W3) and ``tumbling``
(W2) read files of binary records (``bench/workloads/record_file.py``: a splittable source,
subtask *i* of P reading every P-th block of 1,024 records), and the hand-written loop reads the
same files; ``--source parallel`` ships WordCount's lines or W3's bids inside the job to a
parallel source, ``--source collection`` to ``from_collection``. ``--cluster-speedup`` also runs
every side on the first ``--marginal`` of the input (default 0.2) and reports the marginal rates
(start-up excluded), on which its target is judged.

Exit status: 0; 1 if a result check fails (Rill's output differs from the loop's); 2 if
``--check-targets`` is given and a target ratio is missed (with ``--cluster-speedup``: cluster
÷ embedded below 1.7, issue 16's target, for any workload: on the marginal rates, or on net
records/s with ``--marginal 0``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import List, Optional, Tuple

from bench.harness import (
    Measurement,
    ResultMismatch,
    format_speedup,
    format_table,
    machine_info,
    run_cluster_speedup,
    run_workload,
)
from bench.workloads import WORKLOADS, WordCountWorkload

#: --cluster-speedup's default inputs, long enough that the cluster's start-up (≈ 0.1–0.2 s of
#: deployment and submission once nothing is shipped in the job) is not the figure: W1 540,000
#: lines (≈ 2.4 s embedded on a quiet box), W3 16,000,000 bids (≈ 2.1 s; at 8,000,000 the net
#: ratio was 1.67 against 1.80 marginal), W2 4,000,000 events (≈ 4.8 s)
CLUSTER_SPEEDUP_SIZES = {"wordcount": 540_000, "wordcount_sum": 540_000, "stateless": 16_000_000,
                         "tumbling": 4_000_000}
#: --cluster-speedup's default --marginal: the small input is this fraction of the full one
CLUSTER_SPEEDUP_MARGINAL = 0.2
#: workloads --cluster-speedup can measure
SPEEDUP_WORKLOADS = ("wordcount", "wordcount_sum", "stateless", "tumbling")


def _load() -> str:
    try:
        return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:  # pragma: no cover
        return "load average ?"


def _make(name: str, source: Optional[str]):
    """The workload, reading with ``source`` where it offers one (``SOURCES``); ``None``: its
    default."""
    cls = WORKLOADS[name]
    if source is None or source not in getattr(cls, "SOURCES", ()):
        return cls()
    return cls(source=source)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description="Rill vs the hand-written loop")
    parser.add_argument("--workload", choices=sorted(WORKLOADS), action="append",
                        help="run only this workload (repeatable); default: all at p=1, plus WordCount at p=2")
    parser.add_argument("--size", type=int, help="input records per run (default: the workload's)")
    parser.add_argument("--repeat", type=int, default=3, help="timed repetitions per side (default 3)")
    parser.add_argument("--parallelism", type=int, help="Rill's parallelism with --workload (default 1) or on "
                                                        "the cluster with --cluster-speedup (default 2)")
    parser.add_argument("--target", choices=["embedded", "cluster"], default="embedded",
                        help="where Rill runs: embedded (default) or a local cluster started for the run")
    parser.add_argument("--cluster-speedup", action="store_true",
                        help="WordCount: loop vs Rill embedded p=1 vs Rill cluster p=--parallelism, alternately")
    parser.add_argument("--task-executors", type=int, default=1,
                        help="the benchmark cluster's TaskExecutors (default 1)")
    parser.add_argument("--slots", type=int, help="slots per TaskExecutor (default: enough for the parallelism)")
    parser.add_argument("--source", choices=list(WordCountWorkload.SOURCES),
                        help="how Rill reads the input: from_collection (default embedded), a parallel source of "
                             "the records shipped in the job (wordcount, stateless), or files both sides read "
                             "(default with --target cluster and --cluster-speedup: WordCount's lines with "
                             "read_text_file, W2's and W3's records as binary blocks)")
    parser.add_argument("--marginal", type=float, metavar="FRACTION",
                        help=f"--cluster-speedup: also run every side on this fraction of the input and report "
                             f"the marginal (start-up excluded) rates, on which the target is then judged "
                             f"(default {CLUSTER_SPEEDUP_MARGINAL}; 0: net runtime only)")
    parser.add_argument("--no-warmup", action="store_true", help="skip the warm-up run of each side")
    parser.add_argument("--json", metavar="PATH", help="also write the measurements as JSON")
    parser.add_argument("--check-targets", action="store_true", help="exit 2 if a target ratio is missed")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the table")
    args = parser.parse_args(argv)

    clustered = args.cluster_speedup or args.target == "cluster"
    if args.cluster_speedup and args.target == "cluster":
        parser.error("--cluster-speedup runs both targets itself; leave --target out")
    if args.cluster_speedup and not set(args.workload or ()) <= set(SPEEDUP_WORKLOADS):
        parser.error(f"--cluster-speedup measures {', '.join(SPEEDUP_WORKLOADS)} only")
    source = args.source or ("file" if clustered else "collection")
    for name in args.workload or ["wordcount"]:
        if args.source and args.source not in getattr(WORKLOADS[name], "SOURCES", ()):
            parser.error(f"--source {args.source} does not apply to {name} (it reads with "
                         f"{', '.join(getattr(WORKLOADS[name], 'SOURCES', ('collection',)))})")
    marginal = CLUSTER_SPEEDUP_MARGINAL if args.marginal is None else args.marginal
    if args.marginal is not None and not args.cluster_speedup:
        parser.error("--marginal applies to --cluster-speedup")
    if not 0 <= marginal < 1:
        parser.error("--marginal must be in [0, 1)")
    args.marginal = marginal or None
    parallelism = args.parallelism or (2 if args.cluster_speedup else 1)
    if parallelism < 1 or args.task_executors < 1 or (args.slots is not None and args.slots < 1):
        parser.error("--parallelism, --task-executors and --slots must be at least 1")

    if args.workload:
        plan: List[Tuple[str, int]] = [(name, parallelism) for name in args.workload]
    else:
        plan = [("stateless", 1), ("wordcount", 1), ("wordcount_sum", 1), ("wordcount", 2), ("tumbling", 1),
                ("sliding", 1)]

    log = None if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    info = machine_info()
    if log:
        log(f"machine: nproc={info['nproc']} cpu={info['cpu']!r} python={info['python']}; {_load()}")

    cluster = None
    if clustered:
        from bench.cluster import BenchCluster  # noqa: PLC0415
        most = parallelism if args.cluster_speedup else max(p for _, p in plan)
        slots = args.slots or -(-most // args.task_executors)  # enough slots for the job: ceil(P / TEs)
        cluster = BenchCluster(args.task_executors, slots)
    started = time.perf_counter()
    try:
        if cluster is not None:
            t0 = time.perf_counter()
            cluster.start()
            if log:
                log(f"cluster: {cluster.shape} at {cluster.address} started in {time.perf_counter() - t0:.1f} s "
                    f"(run dir {cluster.run_dir})")
        if args.cluster_speedup:
            return _speedup(args, parallelism, source, cluster, info, log, started, argv)
        return _table(args, plan, source, cluster, info, log, started, argv)
    finally:
        if cluster is not None:
            cluster.stop()  # raises ClusterLeftovers if anything of it survived
            if log:
                log(f"cluster at port {cluster.port} stopped, no process left")


def _table(args, plan, source, cluster, info, log, started, argv) -> int:
    prepared = {}
    measurements: List[Measurement] = []
    for name, parallelism in plan:
        workload = _make(name, source)
        size = args.size or workload.default_size
        input_key = (type(workload).prepare, size)  # wordcount and wordcount_sum share their input
        if input_key not in prepared:
            prepared.clear()  # free the previous workload's input before building the next
            t0 = time.perf_counter()
            prepared[input_key] = workload.prepare(size)
            if log:
                log(f"{name}: prepared {size:,} {workload.unit} in {time.perf_counter() - t0:.1f} s")
        try:
            m = run_workload(workload, prepared[input_key], repeat=args.repeat, parallelism=parallelism,
                             warmup=not args.no_warmup, log=log, cluster=cluster)
        except ResultMismatch as e:
            print(f"RESULT CHECK FAILED: {e}", file=sys.stderr)
            return 1
        measurements.append(m)
    total = time.perf_counter() - started

    print(format_table(measurements))
    where = "" if cluster is None else (f" Rill ran on a local cluster ({cluster.shape}; every task in its own "
                                        f"process); the WordCount source: {source}.")
    print(f"\nratio = loop time / Rill time, per repetition, median (min–max) over {args.repeat}; the target "
          f"applies to ratio net. net = JobExecutionResult net runtime (deployment included); wall = "
          f"environment creation to execute() returning; task = longest vertex's processing span "
          f"(diagnostic).{where} nproc={info['nproc']}, {info['cpu']}, Python {info['python']}, {total:.0f} s in "
          f"all; {_load()}.")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": info, "argv": sys.argv[1:] if argv is None else argv,
                       "measurements": [m.to_json() for m in measurements]}, f, indent=2)
    if args.check_targets and any(m.meets_target is False for m in measurements):
        return 2
    return 0


def _speedup(args, parallelism, source, cluster, info, log, started, argv) -> int:
    reports = []
    code = 0
    for name in args.workload or ["wordcount"]:
        # one object for both sides: one copy of the input files
        workload = _make(name, source)
        size = args.size or CLUSTER_SPEEDUP_SIZES[name]
        t0 = time.perf_counter()
        data = workload.prepare(size)
        if log:
            log(f"{name}: prepared {size:,} {workload.unit} in {time.perf_counter() - t0:.1f} s; source: "
                f"{getattr(workload, 'source_kind', 'collection')}")
        try:
            m = run_cluster_speedup(workload, data, cluster, parallelism=parallelism, repeat=args.repeat,
                                    warmup=not args.no_warmup, log=log, marginal=args.marginal)
        except ResultMismatch as e:
            print(f"RESULT CHECK FAILED: {e}", file=sys.stderr)
            return 1
        finally:
            close = getattr(workload, "close", None)
            if close is not None:
                close()
        print(format_speedup(m))
        print(f"\nratios per repetition, median (min–max) over {args.repeat}; the target applies to "
              f"{m.judged_on}. marginal = (records − small input's records) ÷ (net runtime − the small input's "
              f"net runtime), start-up excluded (NOTES.md's measure of the peers). net = "
              f"JobExecutionResult net runtime (JobMaster start to the last task's end: deployment of the task "
              f"processes included); wall = environment creation to execute() returning (job shipping and result "
              f"polling included); task = longest vertex's processing span (diagnostic). Source: "
              f"{getattr(workload, 'source_kind', 'collection')}. nproc={info['nproc']}, {info['cpu']}, Python "
              f"{info['python']}, {time.perf_counter() - started:.0f} s in all; {_load()}.\n")
        reports.append(m)
        if args.check_targets and not m.meets_target:
            code = 2
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": info, "argv": sys.argv[1:] if argv is None else argv,
                       "cluster_speedup": reports[0].to_json() if len(reports) == 1 else None,
                       "cluster_speedups": [m.to_json() for m in reports]}, f, indent=2)
    return code


if __name__ == "__main__":
    sys.exit(main())
