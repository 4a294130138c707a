"""Issue 11's recovery benchmarks.

``failover``: the main job (``rill.examples.flight_stats``, all 336,776 flights, parallelism 2,
checkpoints every 1 s, each source subtask held to ``--rate`` records/s so that the job is still
running when the failure comes) fails once, 2 s after its first completed checkpoint, and is
timed from the failure until records flow again (the restarted window task has records in, or
the hourly FileSink gets a window result, whichever comes first), phase by phase
(:mod:`bench.failover_timeline`). Failures: on a cluster (2 TaskExecutors x 2
slots, started here), SIGKILL of the task process of the window task (``--kill-task``); in the
embedded mode, the job's ``parse_flight`` raising once. Restart strategies: fixed-delay with a
0 ms delay, and Flink's default once checkpointing is on (exponential-delay, 1 s initial
backoff). Baseline, same run: a fresh start of the same job, from submission to its first
records at the same sink.

``restore``: :mod:`bench.restore_keys` (10^6 keys of 96-character STRING state: savepoint,
then a second run restoring it), against pyarrow reading the same Parquet files alone.

    python -m bench.recovery                           # both parts, both modes (~6 min on 2 quiet cores)
    python -m bench.recovery --part failover --runs 3
    python -m bench.recovery --part restore --keys 1000000 --mode cluster
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, List, Optional, Tuple

from bench.failover_timeline import DirectoryWatch, Phases, StateChange, TaskLogCapture, parse_cluster_log, phases
from bench.restore_keys import run_restore_benchmark

__all__ = ["FailOnceArmed", "main"]

TIMEOUT_S = 300
#: records/s per source subtask: the whole input takes ~170 s, the failure comes after ~2 s
RATE = 1000
#: records per source batch (rill.source.batch-size): 50 ms of throttled input
SOURCE_BATCH = 50
STRATEGIES = {
    "fixed-delay 0 ms": {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "1",
                         "restart-strategy.fixed-delay.delay": "0 ms"},
    "default (exponential-delay, 1 s)": {},
}


class FailOnceArmed:
    """``parse_flight`` of the main job that raises once: in attempt 0, at the first record
    after ``<markers>/armed`` exists (checked every 1,024 records), on the first subtask that
    gets there (it creates ``<markers>/failed`` holding the wall-clock time of the raise)."""

    def __init__(self, parse: Callable, markers: str):
        self.parse, self.markers = parse, markers
        self.seen = 0

    def __call__(self, line: str):
        self.seen += 1
        if self.seen % 1024 == 0 and os.path.exists(os.path.join(self.markers, "armed")):
            try:
                fd = os.open(os.path.join(self.markers, "failed"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                pass
            else:
                os.write(fd, repr(time.time()).encode())
                os.close(fd)
                raise RuntimeError("injected failure (bench.recovery)")
        return self.parse(line)


def _configure(env, out: str, chk: str, strategy: dict, rate: float, parse=None) -> None:
    from rill.examples import flight_stats  # noqa: PLC0415 - the main job, built per run
    original = flight_stats.parse_flight
    if parse is not None:
        flight_stats.parse_flight = parse  # build_job reads the module's name when it builds
    try:
        flight_stats.configure(env, ["--output", out, "--checkpoint-interval", "1000", "--checkpoint-dir", chk,
                                     "--parallelism", "2", "--max-records-per-second", str(rate)])
    finally:
        flight_stats.parse_flight = original
    for key, value in strategy.items():
        env.get_configuration().set_string(key, value)
    # the throttle sleeps inside a source batch, and a cancelled task ends its batch first: at
    # the default 1,024 records per batch and RATE records/s that held a cancel ~1 s
    env.get_configuration().set_string("rill.source.batch-size", str(SOURCE_BATCH))


def _wait(condition: Callable[[], bool], what: str, timeout_s: float = TIMEOUT_S, client=None) -> None:
    """Poll ``condition`` until it holds; raise once ``timeout_s`` passed or ``client``'s job ended."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        if client is not None and client.is_done():
            raise RuntimeError(f"the job ended ({client.get_job_status().name}) while waiting for {what}")
        time.sleep(0.01)


def _completed_checkpoints(client) -> int:
    stats = client.get_checkpoint_stats()
    return 0 if stats is None else stats.counts.number_of_completed_checkpoints


def fresh_start(make_env, work: str, rate: float) -> float:
    """Seconds from submitting the main job to its first records at the hourly sink."""
    out = os.path.join(work, "out")
    env = make_env()
    _configure(env, out, os.path.join(work, "chk"), STRATEGIES["fixed-delay 0 ms"], rate)
    os.makedirs(os.path.join(out, "hourly"), exist_ok=True)
    watch = DirectoryWatch(os.path.join(out, "hourly")).start()
    submitted = time.time()
    client = env.execute_async("main job, fresh start")
    try:
        _wait(lambda: watch.first_after(submitted) is not None, "the first records at the sink", client=client)
        return watch.first_after(submitted) - submitted
    finally:
        watch.stop()
        client.cancel()
        client.wait(TIMEOUT_S)


def failover(make_env, work: str, strategy: dict, rate: float, kill: Optional[Callable[[object], float]],
             log: Callable[[str], List[StateChange]], watch_task: str = "Window") -> Phases:
    """One failover of the main job: ``kill(client)`` kills a task process and returns when
    (epoch s); without it, ``parse_flight`` raises once. ``log(job_id)`` gives the task state changes."""
    out, markers = os.path.join(work, "out"), os.path.join(work, "markers")
    os.makedirs(markers)
    os.makedirs(os.path.join(out, "hourly"), exist_ok=True)
    from rill.examples import flight_stats  # noqa: PLC0415
    env = make_env()
    _configure(env, out, os.path.join(work, "chk"), strategy, rate,
               None if kill is not None else FailOnceArmed(flight_stats.parse_flight, markers))
    watch = DirectoryWatch(os.path.join(out, "hourly")).start()
    client = env.execute_async("main job, failover")
    try:
        _wait(lambda: _completed_checkpoints(client) >= 1, "a completed checkpoint", client=client)
        time.sleep(2.0)  # the job runs on: the failure lands between two checkpoints
        if kill is not None:
            failure_s = kill(client)
        else:
            Path(markers, "armed").touch()
            _wait(lambda: os.path.exists(os.path.join(markers, "failed")) and
                  os.path.getsize(os.path.join(markers, "failed")) > 0, "the injected failure", client=client)
            failure_s = float(Path(markers, "failed").read_text())
        job_id = client.get_job_id()
        # the metrics are the new attempt's once its watched tasks run (the JobMaster replaced its
        # tasks before deploying them; on a cluster its reports come every 100 ms, deployment
        # takes longer)
        _wait(lambda: any(c.attempt == 1 and c.new == "RUNNING" and watch_task in c.task for c in log(job_id)),
              "the new attempt's watched task to run", client=client)
        _wait(lambda: _records_in(client, watch_task) > 0, "records in at the restarted task", client=client)
        flowing_at = time.time()
        _wait(lambda: watch.first_after(failure_s) is not None and any(
            c.attempt == 1 and c.new == "RUNNING" for c in log(job_id)), "records at the sink after the restart",
              client=client)
        _wait(lambda: _phases_or_none(log(job_id), failure_s, watch, flowing_at) is not None,
              "every phase in the log", 30)
        return _phases_or_none(log(job_id), failure_s, watch, flowing_at)
    finally:
        watch.stop()
        client.cancel()
        client.wait(TIMEOUT_S)


def _records_in(client, task_name_part: str) -> int:
    """Records in of the subtasks whose task name contains ``task_name_part`` (current attempt)."""
    return sum(m.num_records_in for m in client.get_metrics() if task_name_part in m.task_name)


def _phases_or_none(changes, failure_s, watch, flowing_at) -> Optional[Phases]:
    try:
        return phases(changes, failure_s, 0, watch, flowing_at)
    except ValueError:
        return None


def _print_failover(title: str, runs: List[Phases], fresh: List[float]) -> None:
    print(f"\n{title}: {len(runs)} run(s); seconds, median (min-max)")
    rows = [r.rows() for r in runs]
    for i, (name, _) in enumerate(rows[0]):
        values = [r[i][1] for r in rows]
        print(f"  {name:<52} {statistics.median(values):6.2f} ({min(values):.2f}-{max(values):.2f})")
    total = statistics.median(r.total_s for r in runs)
    base = statistics.median(fresh)
    print(f"  {'fresh start: submission -> first records at the sink':<52} {base:6.2f} "
          f"({min(fresh):.2f}-{max(fresh):.2f})")
    print(f"  recovery / fresh start: {total / base:.2f}; target: total <= 2 s: {'MET' if total <= 2 else 'MISSED'}")


def _task_pid(changes: List[StateChange], name_part: str) -> Tuple[int, str]:
    for c in changes:
        if c.attempt == 0 and name_part in c.task:
            return c.pid, c.task
    raise LookupError(f"no task of attempt 0 whose name contains {name_part!r}; tasks: "
                      f"{sorted({c.task for c in changes})}")


def run_failover_cluster(runs: int, rate: float, kill_task: str, work: str) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from conftest import LocalCluster  # noqa: PLC0415 - the tests' cluster driver (stops and checks)

    run_dir = Path(work, "cluster")
    run_dir.mkdir()
    cluster = LocalCluster(run_dir, task_executors=2, slots=2).start()
    try:
        make_env = lambda: cluster.environment(parallelism=2)  # noqa: E731
        log = lambda job_id: parse_cluster_log(str(cluster.log_file), job_id)  # noqa: E731
        fresh = [fresh_start(make_env, os.path.join(work, f"fresh-{i}"), rate) for i in range(runs)]
        cluster.wait_no_task_processes()
        killed = ["?"]
        for name, strategy in STRATEGIES.items():
            results = []
            for i in range(runs):
                def kill(client) -> float:
                    pid, task = _task_pid(log(client.get_job_id()), kill_task)
                    assert pid in cluster.task_processes(), f"pid {pid} ({task}) is not a task process of the cluster"
                    killed[0] = task
                    at = time.time()
                    os.kill(pid, signal.SIGKILL)
                    return at

                results.append(failover(make_env, os.path.join(work, f"{name[:5]}-{i}"), strategy, rate, kill, log,
                                        kill_task))
                cluster.wait_no_task_processes()
            _print_failover(f"cluster, SIGKILL of the task process of '{killed[0]}', restart {name}",
                            results, fresh)
    finally:
        cluster.stop()


def run_failover_embedded(runs: int, rate: float, work: str) -> None:
    from rill.common import Configuration  # noqa: PLC0415
    from rill.datastream import StreamExecutionEnvironment  # noqa: PLC0415
    make_env = lambda: StreamExecutionEnvironment.get_execution_environment(Configuration())  # noqa: E731
    with TaskLogCapture() as capture:
        fresh = [fresh_start(make_env, os.path.join(work, f"efresh-{i}"), rate) for i in range(runs)]
        for name, strategy in STRATEGIES.items():
            results = [failover(make_env, os.path.join(work, f"e{name[:5]}-{i}"), strategy, rate, None,
                                capture.of_job) for i in range(runs)]
            _print_failover(f"embedded, parse_flight raises once, restart {name}", results, fresh)


def run_restore(keys: int, parallelism: int, mode: str, work: str) -> None:
    if mode == "cluster":
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from conftest import LocalCluster  # noqa: PLC0415
        run_dir = Path(work, "restore-cluster")
        run_dir.mkdir()
        cluster = LocalCluster(run_dir, task_executors=2, slots=2).start()
        make_env = lambda: cluster.environment(parallelism=parallelism)  # noqa: E731
        log = lambda job_id: parse_cluster_log(str(cluster.log_file), job_id)  # noqa: E731
    else:
        from rill.common import Configuration  # noqa: PLC0415
        from rill.datastream import StreamExecutionEnvironment  # noqa: PLC0415
        cluster = None
        make_env = lambda: StreamExecutionEnvironment.get_execution_environment(Configuration())  # noqa: E731
        log = None
    capture = TaskLogCapture()
    try:
        with capture:
            r = run_restore_benchmark(make_env, keys, parallelism, os.path.join(work, "restore"),
                                      log=log or capture.of_job)
    finally:
        if cluster is not None:
            cluster.stop()
    print(f"\nrestore, {mode}, parallelism {parallelism}: {r.keys:,} keys, {r.state_bytes / 1e6:.1f} MB of Parquet "
          f"(state built and savepointed in {r.snapshot_s:.1f} s)")
    if r.to_all_running_s is not None:
        print(f"  submission -> every task RUNNING: {r.to_all_running_s:.2f} s; the restore's own part (a keyed "
              f"subtask's RUNNING -> open, longest): {r.restore_part_s:.2f} s")
    print(f"  submission -> every keyed subtask restored (open): {r.to_state_restored_s:.2f} s; target <= 10 s: "
          f"{'MET' if r.to_state_restored_s <= 10 else 'MISSED'}")
    print(f"  pyarrow alone reading the same files: {r.pyarrow_read_s:.2f} s; restore / pyarrow: "
          f"{r.to_state_restored_s / r.pyarrow_read_s:.2f}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("all", "failover", "restore"), default="all")
    parser.add_argument("--mode", choices=("both", "cluster", "embedded"), default="both",
                        help="failover: where to run (default both); restore: cluster or embedded (default embedded)")
    parser.add_argument("--runs", type=int, default=1, help="failovers per restart strategy and mode")
    parser.add_argument("--rate", type=float, default=RATE, help="records/s per source subtask of the main job")
    parser.add_argument("--kill-task", default="Window", help="the task process to kill: part of its task name")
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--parallelism", type=int, default=2, help="of the restore job")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rill-recovery-") as work:
        if args.part in ("all", "failover"):
            if args.mode in ("both", "cluster"):
                run_failover_cluster(args.runs, args.rate, args.kill_task, work)
            if args.mode in ("both", "embedded"):
                run_failover_embedded(args.runs, args.rate, work)
        if args.part in ("all", "restore"):
            run_restore(args.keys, args.parallelism, "cluster" if args.mode == "cluster" else "embedded", work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
