"""``rill cluster start|stop|status|join``, ``rill cancel``, ``rill savepoint``, ``rill stop`` and
``rill list`` (Flink's ``start-cluster.sh``, ``stop-cluster.sh``, ``taskmanager.sh start``,
``flink cancel``, ``flink savepoint``, ``flink stop``, ``flink list``)."""

from __future__ import annotations

import ipaddress
import socket
import sys
import time

from rill.common.configuration import ConfigOptions, load_configuration
from rill.runtime.cluster.actor_system import (
    ClusterNotRunningError,
    ClusterSecretError,
    parse_cluster_target,
    read_cluster_info,
    read_secret_file,
)

__all__ = ["run_cluster_command", "format_duration_s"]

CANCEL_WAIT_S = 30.0


def run_cluster_command(args) -> int:
    """Run a parsed cluster command; returns the exit code (0 ok, 1 failed)."""
    conf = load_configuration()
    port = args.port if args.port is not None else conf.get(ConfigOptions.JOBMANAGER_RPC_PORT)
    try:
        if args.command == "cancel":
            return _cancel(args.job_id, port)
        if args.command == "savepoint":
            return _savepoint(args.job_id, port, args.target_dir, None)
        if args.command == "stop":
            return _savepoint(args.job_id, port, args.savepoint_path, args.drain)
        if args.command == "list":
            return _status(port, jobs_only=True)
        if args.action in ("start", "join") and not args.in_process:
            if args.action == "join":
                _join_secret(args, conf)  # refuse before anything starts
            _warn_if_exposed(args.host or conf.get(ConfigOptions.TASKMANAGER_HOST), port)
            return _detached(args, port)
        if args.action == "start":
            return _start(args, port, conf)
        if args.action == "stop":
            return _stop(port, args.host)
        if args.action == "status":
            return _status(port)
        return _join(args, port, conf)
    except ClusterNotRunningError as e:
        print(f"rill: {e}", file=sys.stderr)
        return 1
    except (RuntimeError, ValueError) as e:  # ClusterSecretError included
        print(f"rill: {e}", file=sys.stderr)
        return 1


def _detached(args, port: int) -> int:
    """Run ``start``/``join`` in a new session, and wait for it: the actor processes fork from
    that process and inherit its file descriptors, so they must never hold this command's stdout
    (a caller reading it would wait forever). Their stdout goes to ``cluster-<port>.out`` (what
    ``print()`` in user functions writes, as Flink's TaskManager ``.out`` files); their stderr is
    appended to the cluster's log ``cluster-<port>.log`` (Python tracebacks and warnings of a
    process are diagnostics, not the job's output). What the command itself said is echoed:
    its ``.out`` text, and on failure the log's new text too (where its error went)."""
    import subprocess  # noqa: PLC0415

    from rill.runtime.cluster.actor_system import lock_port, port_bindable, run_dir  # noqa: PLC0415
    from rill.runtime.cluster.standalone import cluster_state  # noqa: PLC0415
    # nothing of a running cluster (its record, its .out file) may be touched before these checks
    lock = lock_port(port)
    host = args.host or "127.0.0.1"
    state = cluster_state(port, host)
    if state.pids:
        lock.close()
        raise RuntimeError(f"A Rill cluster is already running at port {port} ({len(state.pids)} process(es), admin "
                           f"pid {state.info.admin_pid}): see `rill cluster status --port {port}`")
    if not port_bindable(host, port):
        lock.close()
        who = f" by pid {state.listener}" if state.listener else ""
        raise RuntimeError(f"Port {port} on {host} is in use{who}: choose another --port")
    argv = [sys.executable, "-m", "rill.cli", "cluster", args.action, "--in-process", "--port", str(port)]
    for flag, value in (("--task-executors", args.task_executors), ("--slots", args.slots), ("--host", args.host),
                        ("--leader", args.leader), ("--secret-file", args.secret_file)):
        if value is not None:
            argv += [flag, str(value)]
    out_path, log_path = run_dir() / f"cluster-{port}.out", run_dir() / f"cluster-{port}.log"
    # append mode: the actors' log handler appends to the same file, neither overwrites the other
    with lock, open(out_path, "wb") as out, open(log_path, "ab") as err:
        log_offset = err.tell()
        rc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                            start_new_session=True).returncode
    text = out_path.read_text(errors="replace")
    if rc == 0:
        sys.stdout.write(text)
        return rc
    with open(log_path, "rb") as f:
        f.seek(log_offset)
        text += f.read().decode(errors="replace")
    sys.stderr.write(text)
    return rc


def _start(args, port: int, conf) -> int:
    from rill.runtime.cluster.standalone import start_cluster  # noqa: PLC0415
    slots = args.slots if args.slots is not None else conf.get(ConfigOptions.NUM_TASK_SLOTS)
    info = start_cluster(args.task_executors, slots, port=port, host=args.host)
    print(f"rill: cluster started at {info.address} with {info.task_executors} TaskExecutor(s) x "
          f"{info.slots} slot(s) (admin pid {info.admin_pid}, log {info.log_file})")
    print(f"rill: run jobs with `rill run --target cluster ...` or RILL_EXECUTION_TARGET=cluster; "
          f"stop with `rill cluster stop{'' if port == 6123 else f' --port {port}'}`")
    return 0


def _join(args, port: int, conf) -> int:
    from rill.runtime.cluster.standalone import join_cluster  # noqa: PLC0415
    if not args.leader:
        raise ValueError("rill cluster join needs --leader cluster://host:port (the cluster to join)")
    leader_host, leader_port = parse_cluster_target(args.leader, 6123)
    slots = args.slots if args.slots is not None else conf.get(ConfigOptions.NUM_TASK_SLOTS)
    info = join_cluster(leader_host, leader_port, port, slots, host=args.host or conf.get(ConfigOptions.TASKMANAGER_HOST),
                        secret=_join_secret(args, conf), configuration=conf)
    print(f"rill: TaskExecutor with {slots} slot(s) at {info.host}:{info.port} joined {args.leader}")
    return 0


def _join_secret(args, conf) -> bytes:
    """The leader's secret for ``rill cluster join``: ``--secret-file`` or
    ``security.cluster.secret-file``; never guessed from this machine's run directory.

    :raises ClusterSecretError: when neither is given or the file is unusable.
    """
    path = args.secret_file or conf.get(ConfigOptions.SECURITY_CLUSTER_SECRET_FILE)
    if not path:
        raise ClusterSecretError(
            "rill cluster join needs the cluster's secret: --secret-file FILE, where FILE is a copy of the "
            "leader's cluster-<port>.json (mode 600), or set security.cluster.secret-file")
    return read_secret_file(path)


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(socket.gethostbyname(host)).is_loopback
    except (OSError, ValueError):
        return False


def _warn_if_exposed(host: str, port: int) -> None:
    """Say what a non-loopback bind address exposes (issue 10's threat model, see README)."""
    if _is_loopback(host):
        return
    print(f"rill: WARNING: binding to {host}, not loopback: from every host that can reach {host}, anyone can "
          f"connect to this cluster's actor system port ({port}), the port of every actor (Dispatcher, "
          "ResourceManager, JobMasters, TaskExecutors, tasks), the tasks' data-plane ports and the collect "
          "ports of clients running execute_and_collect. Each refuses peers that do not prove the cluster's "
          "secret, but nothing is encrypted: whoever can read that network sees job graphs and records and "
          "can replay captured control messages. Bind to such an address only on a trusted network.",
          file=sys.stderr)


def _stop(port: int, host) -> int:
    from rill.runtime.cluster.standalone import stop_cluster  # noqa: PLC0415
    pids = stop_cluster(port, host)
    if pids:
        print(f"rill: cluster at port {port} stopped ({len(pids)} process(es) ended)")
    else:
        print(f"rill: cluster at port {port} was not running (none of its processes was left); its record was "
              "removed")
    return 0


def _status(port: int, jobs_only: bool = False) -> int:
    from rill.runtime.cluster.standalone import cluster_overview, cluster_state  # noqa: PLC0415
    state = cluster_state(port)
    info = state.info
    if info is not None and info.identity is not None and not state.admin_running:
        left = (f"{len(state.pids)} of its processes are still running (pids {' '.join(map(str, state.pids))}): "
                f"`rill cluster stop --port {port}` ends them" if state.pids else
                f"none of its processes is left; `rill cluster stop --port {port}` removes its record")
        print(f"rill: the cluster at port {port} is not running: its admin (pid {info.admin_pid}) exited; {left}",
              file=sys.stderr)
        return 1
    if info is None and state.listener is not None:
        print(f"rill: no Rill cluster was started at port {port} from this run directory; the process listening "
              f"there (pid {state.listener}) is not one", file=sys.stderr)
        return 1
    overview = cluster_overview(port)
    if not jobs_only:
        where = info.address if info else f"port {port}"
        print(f"cluster {where}: {len(overview.task_executors)} TaskExecutor(s), "
              f"{sum(t[1] for t in overview.task_executors)} slot(s), {sum(t[2] for t in overview.task_executors)} free")
        for rid, slots, free, pid, host in overview.task_executors:
            print(f"  {rid:<28} host {host:<15} pid {pid:<8} slots {slots} free {free}")
    _print_jobs(overview.jobs)
    return 0


def _print_jobs(jobs) -> None:
    """One line per job, as ``flink list``: id, status, submission time (local), duration (up
    to now while it runs), name."""
    now = time.time()
    print(f"jobs: {len(jobs)}")
    for job_id, name, status, submitted, ended in jobs:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(submitted))
        duration = format_duration_s((ended if ended is not None else now) - submitted)
        print(f"  {job_id}  {status:<10} started {started}  duration {duration:>8}  {name}")


def format_duration_s(seconds: float) -> str:
    """``0.4 s``, ``59.9 s``, ``1:00:05`` (h:mm:ss from one minute on)."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = int(seconds)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def _cancel(job_id: str, port: int) -> int:
    """``flink cancel``: ask, then wait until the job has stopped and say how it ended.
    Exit 0 only when this command cancelled it; 1 for an unknown job, a job that had already
    ended (naming its final state), or one that did not stop within ``CANCEL_WAIT_S``."""
    from rill.graph.states import JobStatus  # noqa: PLC0415
    from rill.runtime.cluster import messages as m  # noqa: PLC0415
    from rill.runtime.cluster.client import ClusterClient  # noqa: PLC0415
    info = read_cluster_info(port)
    client = ClusterClient.for_address(info.host if info else "127.0.0.1", port)
    ack = client.cancel(job_id)
    if not ack.known:
        print(f"rill: the cluster knows no job {job_id}", file=sys.stderr)
        return 1
    if JobStatus[ack.status].is_globally_terminal_state():
        print(f"rill: job {job_id} had already ended: {ack.status}; nothing to cancel", file=sys.stderr)
        return 1
    print(f"rill: cancelling job {job_id}")
    deadline = time.monotonic() + CANCEL_WAIT_S
    status = ack.status
    while time.monotonic() < deadline:
        report = client.job_report(job_id)
        if not isinstance(report, m.JobStatusReport):  # UnknownJob: archived away meanwhile
            print(f"rill: the cluster no longer knows job {job_id} (last status {status})", file=sys.stderr)
            return 1
        status = report.status
        if report.result is not None:
            print(f"rill: job {job_id} {status}")
            return 0 if status == "CANCELED" else 1
        time.sleep(0.05)
    print(f"rill: job {job_id} did not stop within {CANCEL_WAIT_S:.0f} s (status {status})", file=sys.stderr)
    return 1


def _savepoint(job_id: str, port: int, target_directory, drain) -> int:
    """``flink savepoint JOB [DIR]`` (``drain`` None) and ``flink stop [-p DIR] [-d] JOB``: print
    the savepoint's path (exit 0) or why it failed (exit 1). A local target is made absolute:
    the cluster's processes may run elsewhere."""
    import os  # noqa: PLC0415
    from rill.runtime.cluster.client import ClusterClient  # noqa: PLC0415
    if target_directory is not None and "://" not in target_directory:
        target_directory = os.path.abspath(target_directory)
    info = read_cluster_info(port)
    client = ClusterClient.for_address(info.host if info else "127.0.0.1", port)
    what = "Savepoint" if drain is None else "Stop-with-savepoint"
    print(f"rill: {'triggering a savepoint of' if drain is None else 'stopping'} job {job_id}", file=sys.stderr)
    try:
        path = client.savepoint_future(job_id, target_directory, drain).result()
    except RuntimeError as e:
        print(f"rill: {what} failed: {e}", file=sys.stderr)
        return 1
    print(f"Savepoint completed. Path: {path}")
    return 0
