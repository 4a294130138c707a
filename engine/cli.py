"""The ``rill`` command line (Flink's ``flink`` CLI: ``run``, ``info``/plan, ``cancel``, ``list``,
``savepoint``, ``stop``, and the standalone cluster scripts as ``rill cluster start|stop|status|join``).

``rill run JOB.py [ARGS]`` runs a DataStream program file as ``__main__``; its ``execute()``
shows a progress bar for bounded sources and ends with a summary per vertex.
``--target cluster`` (or ``cluster://host:port``) sends it to a running cluster instead of the
embedded one.
``rill plan JOB.py [ARGS]`` runs the program up to its first ``execute()`` and prints the four
graph layers instead of running the job (as Flink's plan environments abort the program with
a ``ProgramAbortException`` once the plan is known).

``rill run --from-savepoint PATH [--allow-non-restored-state]`` (Flink's ``-s``/``-n``) starts
the job from a savepoint or retained checkpoint (``execution.state-recovery.*``).
``rill savepoint JOB_ID [TARGET_DIR]`` and ``rill stop JOB_ID [--drain] [--savepoint-path DIR]``
(Flink's ``flink savepoint`` / ``flink stop``) take a savepoint of a cluster job, the latter
stopping it, and print ``Savepoint completed. Path: <dir>``.

``rill bench nexmark [ARGS]`` runs the Nexmark benchmark of a Rill source checkout (its
``bench/``, which is not part of the installed package) from the repository root: the same as
``python -m bench.nexmark [ARGS]`` there (see bench/README.md).

``rill run`` prints each job's id when it is submitted (as ``flink run`` does). Ctrl-C while a
job runs on a cluster cancels it and waits for it to stop, saying so with its id (a second
Ctrl-C leaves it running and says how to cancel it); an embedded job ends with the process.
When a cluster job has print sinks, ``rill run`` ends by saying which file got their output.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import runpy
import sys
import time
import traceback
from typing import List, Optional, Sequence, Tuple

import rill
from rill.datastream import stream_execution_environment as _see
from rill.graph.savepoint_restore_settings import SavepointRestoreSettings
from rill.runtime.reporting import format_summary, run_progress_bar

__all__ = ["main"]

CANCEL_WAIT_S = 30.0


def _dynamic_property(text: str) -> Tuple[str, str]:
    """``-D key=value`` -> ``(key, value)``. :raises argparse.ArgumentTypeError: without ``=``
    or with an empty key."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"-D expects KEY=VALUE, got {text!r}")
    return key.strip(), value


class _PlanAbort(Exception):
    """Stops the user program after its plan has been printed."""


class _CliContext:
    """Hooks ``rill`` puts into every environment the program creates."""

    def __init__(self, parallelism: Optional[int], mode: str, as_json: bool = False, progress: bool = True):
        self.parallelism = parallelism
        self.mode = mode
        self.as_json = as_json
        self.progress = progress
        self.executed = False
        self.cluster_jobs: List = []  # ClusterJobClients submitted by this program

    target: Optional[str] = None
    #: ``-D key=value`` settings, applied to every environment before the program's own
    dynamic_properties: Sequence[Tuple[str, str]] = ()
    #: ``--from-savepoint`` / ``--allow-non-restored-state`` (written into every job's configuration)
    savepoint_restore_settings: SavepointRestoreSettings = SavepointRestoreSettings.none()

    def configure(self, env) -> None:
        if self.parallelism is not None:
            env.set_parallelism(self.parallelism)
        conf = env.get_configuration()
        for key, value in self.dynamic_properties:
            conf.set_string(key, value)
        if self.savepoint_restore_settings.restore_savepoint():
            self.savepoint_restore_settings.to_configuration(conf)
        if self.target is not None:
            from rill.common.configuration import ConfigOptions  # noqa: PLC0415
            conf.set(ConfigOptions.EXECUTION_TARGET, self.target)

    def intercepts_execution(self) -> bool:
        return True

    def on_execute(self, env, stream_graph, collect_channel, transformations=None):
        self.executed = True
        if self.mode == "plan":
            from rill.graph.execution_graph import ExecutionGraph  # noqa: PLC0415
            from rill.graph.plan import render_plan, render_plan_json  # noqa: PLC0415
            job_graph = stream_graph.get_job_graph()
            execution_graph = ExecutionGraph(job_graph)
            if self.as_json:
                print(json.dumps(render_plan_json(stream_graph, job_graph, execution_graph, transformations), indent=2))
            else:
                print(render_plan(stream_graph, job_graph, execution_graph, transformations))
            raise _PlanAbort()
        from rill.runtime.executor import submit_job  # noqa: PLC0415
        job_graph = stream_graph.get_job_graph()
        client = submit_job(job_graph, env.get_configuration(),
                            env.get_global_job_parameters(), collect_channel=collect_channel)
        on_cluster = not client.tasks_share_a_process
        if on_cluster:
            self.cluster_jobs.append(client)
        # a cluster's address, Spark's master (execution.target: spark), or this process
        where = client.get_cluster_address() if hasattr(client, "get_cluster_address") else "the embedded cluster"
        print(f"rill: job '{client.get_job_name()}' ({client.get_job_id()}) submitted to {where}",
              file=sys.stderr, flush=True)
        if collect_channel is not None:
            return client
        prints = on_cluster and _has_print_sink(job_graph)
        return _ReportingJobClient(client, self.progress, prints)


class _ReportingJobClient:
    """A JobClient whose result future draws progress while waiting and prints the summary."""

    def __init__(self, client, progress: bool, cluster_prints: bool = False):
        self._client = client
        self._progress = progress
        self._cluster_prints = cluster_prints

    def __getattr__(self, item):
        return getattr(self._client, item)

    def get_job_execution_result(self):
        return self

    def result(self, timeout=None):
        if self._progress:
            run_progress_bar(self._client)
        try:
            result = self._client.get_job_execution_result().result(timeout)
        finally:
            print(format_summary(self._client), file=sys.stderr)
            if self._cluster_prints:
                print(_print_output_note(self._client), file=sys.stderr)
        return result


def _has_print_sink(job_graph) -> bool:
    from rill.operators.print_sink import PrintSinkOperator  # noqa: PLC0415
    return any(issubclass(cfg.operator_factory.operator_class, PrintSinkOperator)
               for v in job_graph.get_vertices() for cfg in v.stream_configs.values())


def _print_output_note(client) -> str:
    """Where a cluster job's print sinks wrote: the cluster's stdout file, not this terminal."""
    path = client.get_print_output_file()
    where = path if path is not None else (f"the .out file of {client.get_cluster_address()} "
                                           "(cluster-<port>.out in the run directory where it was started)")
    return (f"rill: the job's print() output went to the cluster's stdout, {where} "
            "(as Flink's TaskManager .out files), not to this terminal")


def _cancel_on_interrupt(context: "_CliContext") -> int:
    """Ctrl-C: cancel the program's cluster jobs that still run and wait for them to stop (up
    to ``CANCEL_WAIT_S`` each); a second Ctrl-C leaves them running. Returns 130 (SIGINT)."""
    running = [c for c in context.cluster_jobs if not c.is_done()]
    if not running:
        print("rill: interrupted", file=sys.stderr)
    for c in running:
        job_id, where = c.get_job_id(), c.get_cluster_address()
        port = where.rsplit(":", 1)[1]
        print(f"rill: interrupted: cancelling job {job_id} on {where} (Ctrl-C again to leave it running)",
              file=sys.stderr, flush=True)
        try:
            c.cancel()
            status = c.wait(CANCEL_WAIT_S)
        except KeyboardInterrupt:
            print(f"rill: job {job_id} keeps running on {where}; stop it with `rill cancel {job_id} --port {port}`",
                  file=sys.stderr)
            continue
        if c.is_done():
            print(f"rill: job {job_id} {status.name}", file=sys.stderr)
        else:
            print(f"rill: job {job_id} did not stop within {CANCEL_WAIT_S:.0f} s ({status.name}); see "
                  f"`rill list --port {port}`", file=sys.stderr)
    return 130


def _run_program(args: argparse.Namespace, context: _CliContext) -> int:
    _see._set_context(context)
    argv = sys.argv
    try:
        if args.module:
            sys.argv = [args.module] + list(args.args)
            runpy.run_module(args.module, run_name="__main__", alter_sys=True)
        else:
            sys.argv = [args.job] + list(args.args)
            # absolute: the program's code objects carry this name to the cluster's tracebacks
            runpy.run_path(os.path.abspath(args.job), run_name="__main__")
    except _PlanAbort:
        return 0
    except KeyboardInterrupt:
        return _cancel_on_interrupt(context)
    except SystemExit as e:  # the program's own argparse/exit
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException as e:  # noqa: BLE001 - report the program's failure, not ours
        print("".join(traceback.format_exception(e)), file=sys.stderr, end="")
        print(f"rill: the program failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    finally:
        sys.argv = argv
        _see._set_context(None)
    if not context.executed:
        print("rill: the program did not call execute(): it contained no job "
              f"to {'plan' if context.mode == 'plan' else 'run'}.", file=sys.stderr)
        return 1
    return 0


#: ``rill bench NAME`` -> the module of the checkout's bench/ whose ``main(argv)`` it runs
_BENCHMARKS = {"nexmark": "bench.nexmark.run"}


def _run_benchmark(name: str, argv: List[str], root: str) -> int:
    """Run benchmark ``name`` of the source checkout at ``root`` with ``argv``; 2 (and a message
    saying where it looked) when ``root`` has no ``bench/`` with it: benchmarks are not
    installed with the package."""
    module = _BENCHMARKS[name]
    if not os.path.isfile(os.path.join(root, *module.split(".")[:-1], "__init__.py")):
        print(f"rill bench {name}: no {'/'.join(module.split('.')[:-1])}/ under {root}: the benchmarks live "
              f"in a Rill source checkout, not in the installed package; run this from the repository "
              f"root (or give rill bench --repo DIR {name})", file=sys.stderr)
        return 2
    if root not in sys.path:
        sys.path.insert(0, root)
    return importlib.import_module(module).main(argv)


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of the ``rill`` command; returns the exit code (0 ok, 1 the program failed
    or contained no job, 2 bad arguments)."""
    parser = argparse.ArgumentParser(prog="rill", description="Rill: stream processing with Flink's architecture")
    parser.add_argument("--version", action="version", version=f"rill {rill.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def job_args(p):
        p.add_argument("job", nargs="?", help="the DataStream program file")
        p.add_argument("-m", "--module", help="run a module instead of a file (e.g. rill.examples.word_count)")
        p.add_argument("-p", "--parallelism", type=int, help="default parallelism of the job")
        p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the program")

    run = sub.add_parser("run", help="run a job file", description=(
        "Run a DataStream program (a file, or a module with -m) as __main__; its execute() submits the job "
        "to the embedded cluster in this process, or with --target to a running cluster. Prints the job's "
        "id at submission, a progress bar and a summary per vertex; Ctrl-C cancels a cluster job."))
    job_args(run)
    run.add_argument("--target", "-t", default=None,
                     help="where the job runs: embedded (default: execution.target), cluster (the cluster "
                          "`rill cluster start` started here), cluster://host:port, or spark (a bounded "
                          "program in BATCH mode on Spark: the active SparkSession, else rill.spark.master, "
                          "else local[N])")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument("-D", dest="dynamic_properties", action="append", default=[], metavar="KEY=VALUE",
                     type=_dynamic_property,
                     help="a configuration setting for the job, as Flink's `flink run -D` (repeatable)")
    run.add_argument("--from-savepoint", "-s", metavar="PATH", default=None,
                     help="restore the job from this savepoint or retained checkpoint (its directory or metadata "
                          "file); sets execution.state-recovery.path")
    run.add_argument("--allow-non-restored-state", "-n", action="store_true",
                     help="with --from-savepoint: skip state of operators the job no longer has instead of "
                          "failing (execution.state-recovery.ignore-unclaimed-state)")

    plan = sub.add_parser("plan", help="print the graphs of a job file without running it", description=(
        "Run the program up to its first execute() and print the Transformations, StreamGraph, JobGraph "
        "and ExecutionGraph instead of running the job."))
    job_args(plan)
    plan.add_argument("--json", action="store_true", help="JSON instead of text")

    cluster = sub.add_parser("cluster", help="start, stop, inspect or join a local cluster", description=(
        "start: a cluster on this machine (returns once it runs); stop: every process of it exits; "
        "status: its TaskExecutors, slots and jobs; join: add a TaskExecutor from this host to a cluster "
        "(--leader)."))
    cluster.add_argument("action", choices=["start", "stop", "status", "join"])
    cluster.add_argument("--task-executors", "-n", type=int, default=1, help="TaskExecutors to start (start)")
    cluster.add_argument("--slots", "-s", type=int, default=None,
                         help="slots per TaskExecutor (default: taskmanager.numberOfTaskSlots)")
    cluster.add_argument("--port", type=int, default=None,
                         help="the actor system's port (default: jobmanager.rpc.port, 6123)")
    cluster.add_argument("--host", default=None, help="bind address (default: taskmanager.host, 127.0.0.1)")
    cluster.add_argument("--leader", default=None,
                         help="join: the cluster to join, cluster://host:port")
    cluster.add_argument("--secret-file", default=None,
                         help="join: the leader's cluster-<port>.json (or its secret in hex), mode 600 "
                              "(default: security.cluster.secret-file); required to join")
    cluster.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)

    cancel = sub.add_parser("cancel", help="cancel a job running on a cluster", description=(
        "Cancel a job of a cluster and wait until it has stopped; exits 1 when the job is unknown, had "
        "already ended (its final state is printed) or did not stop."))
    cancel.add_argument("job_id", help="the job's id (printed by rill run, listed by rill list)")
    cancel.add_argument("--port", type=int, default=None, help="the cluster's port (default 6123)")

    savepoint = sub.add_parser("savepoint", help="take a savepoint of a job running on a cluster", description=(
        "Trigger a savepoint of a running job (flink savepoint) and print its path; the job runs on. "
        "TARGET_DIR defaults to execution.checkpointing.savepoint-dir of the job."))
    savepoint.add_argument("job_id", help="the job's id (printed by rill run, listed by rill list)")
    savepoint.add_argument("target_dir", nargs="?", default=None, help="where the savepoint's directory is created")
    savepoint.add_argument("--port", type=int, default=None, help="the cluster's port (default 6123)")

    stop = sub.add_parser("stop", help="stop a job running on a cluster with a savepoint", description=(
        "Stop a job with a savepoint (flink stop): the sources stop after the savepoint and the job ends "
        "FINISHED; prints the savepoint's path. Resume with rill run --from-savepoint PATH."))
    stop.add_argument("job_id", help="the job's id (printed by rill run, listed by rill list)")
    stop.add_argument("--savepoint-path", "-p", default=None, metavar="DIR",
                      help="where the savepoint's directory is created (default: execution.checkpointing.savepoint-dir)")
    stop.add_argument("--drain", "-d", action="store_true",
                      help="emit MAX_WATERMARK before the savepoint, so that every event-time window fires")
    stop.add_argument("--port", type=int, default=None, help="the cluster's port (default 6123)")

    listing = sub.add_parser("list", help="list the jobs of a cluster", description=(
        "The jobs a cluster runs or ran (its last 100 finished ones): id, status, submission time, "
        "duration and name."))
    listing.add_argument("--port", type=int, default=None, help="the cluster's port (default 6123)")

    info = sub.add_parser("info", help="print a job's vertices, records and backpressure from the REST API",
                          description=(
        "Ask the REST API of a job's cluster (--url) for the job and print its vertices, parallelism, status, "
        "records in/out, busy and back-pressured ratios and the backpressure root cause."))
    info.add_argument("job_id", help="the job's id (printed by rill run)")
    info.add_argument("--url", default=None, help="the REST endpoint (default: http://rest.address:rest.port)")

    bench = sub.add_parser("bench", help="run a benchmark of a Rill source checkout (bench/)", description=(
        "Run one of the repository's benchmarks (bench/ of a source checkout; it is not installed with the "
        "package): nexmark = python -m bench.nexmark. Arguments after the name go to the benchmark "
        "(rill bench nexmark --help)."))
    bench.add_argument("benchmark", choices=sorted(_BENCHMARKS))
    bench.add_argument("--repo", default=None, help="the checkout's root (default: the working directory); before the benchmark's name")
    bench.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the benchmark")

    args = parser.parse_args(argv)
    if args.command == "bench":
        return _run_benchmark(args.benchmark, list(args.args), os.path.abspath(args.repo or os.getcwd()))
    if args.command == "info":
        from rill.runtime.rest.job_info import run_info_command  # noqa: PLC0415 - only for this command
        return run_info_command(args.job_id, args.url)
    if args.command in ("cluster", "cancel", "list", "savepoint", "stop"):
        from rill.cluster_cli import run_cluster_command  # noqa: PLC0415 - thespian only when needed
        return run_cluster_command(args)
    if args.module and args.job:  # with -m, the first positional is already a program argument
        args.args = [args.job] + list(args.args)
        args.job = None
    if not args.module and not args.job:
        parser.error(f"{args.command}: give a job file or -m MODULE")
    if args.args and args.args[0] == "--":
        args.args = args.args[1:]
    if args.command == "run":
        ctx = _CliContext(args.parallelism, "run", progress=not args.no_progress)
        ctx.target = args.target
        ctx.dynamic_properties = tuple(args.dynamic_properties)
        if args.allow_non_restored_state and not args.from_savepoint:
            parser.error("run: --allow-non-restored-state needs --from-savepoint PATH")
        if args.from_savepoint:
            path = args.from_savepoint  # a local path is the client's; a URL (s3://...) is kept as is
            ctx.savepoint_restore_settings = SavepointRestoreSettings.for_path(
                path if "://" in path else os.path.abspath(path), args.allow_non_restored_state)
    else:
        ctx = _CliContext(args.parallelism, "plan", as_json=args.json)
    started = time.monotonic()
    rc = _run_program(args, ctx)
    if args.command == "run" and rc == 0:
        print(f"rill: program finished in {time.monotonic() - started:.2f} s", file=sys.stderr)
    return rc


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
