"""The REST endpoint of cluster mode: its own process, asking the Dispatcher.

Why a process of its own: a thread inside the Dispatcher's process must never call the actor's
``send`` (only the actor's thread may), and an HTTP server does not belong in an actor's
message loop. This process opens its own Thespian handle (``ClusterClient``) and asks the
Dispatcher, as the ``rill`` client does; each JobMaster includes a :class:`JobSnapshot` in the
status report it sends the Dispatcher every 200 ms, so a request costs one ask per job.

``rill cluster start`` starts it when the configuration sets ``rest.port`` (or
``rest.bind-port``) and ``rill cluster stop`` stops it (:func:`spawn_endpoint`,
:func:`stop_endpoint`); or run it next to a cluster::

    python -m rill.runtime.rest.cluster_endpoint [--cluster cluster://127.0.0.1:6123] [--rest-port 8081]

It reads the cluster's secret from the run directory's ``cluster-PORT.json`` (the token for
cancel is derived from it, see ``rill.runtime.rest.auth``), prints ``REST endpoint:
http://host:port`` once bound, writes ``{"url", "pid"}`` to ``rest-PORT.json`` in the run
directory (PORT: the cluster's) and serves until SIGTERM or SIGINT, then removes that file.
``rest.*`` keys of the configuration apply; ``--rest-port`` and ``-D key=value`` override them.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional

from rill.common.configuration import ConfigOptions, Configuration, load_configuration
from rill.runtime.cluster import messages as m
from rill.runtime.cluster.actor_system import parse_cluster_target, read_cluster_info, run_dir
from rill.runtime.cluster.client import ClusterClient
from rill.runtime.jobmaster.savepoints import SavepointStatus
from rill.runtime.rest.gateway import STOP_TIMELINES_TIMEOUT_S, JobNotFoundError, RestfulGateway
from rill.runtime.rest.options import RestEndpointConfig, RestOptions
from rill.runtime.rest.server import RestServerEndpoint
from rill.runtime.rest.snapshot import JobSnapshot
from rill.runtime.taskmanager.channel_timeline import ChannelTimelineSettings, ChannelTimelineStateError

__all__ = ["ClusterGateway", "main", "spawn_endpoint", "stop_endpoint", "endpoint_info_path"]


def endpoint_info_path(cluster_port: int) -> Path:
    """``rest-PORT.json`` in the run directory: the running endpoint's ``{"url", "pid"}``."""
    return run_dir() / f"rest-{cluster_port}.json"


def spawn_endpoint(cluster_host: str, cluster_port: int, conf: Configuration, timeout_s: float = 30.0) -> str:
    """Start the endpoint process for the cluster at ``cluster_host:cluster_port`` (detached: it
    outlives the caller, output to ``rest-PORT.log`` in the run directory) with the ``rest.*``
    keys of ``conf``; returns its URL once it is serving.

    :raises RuntimeError: when it exits or does not serve within ``timeout_s`` (the message
        has the end of its log).
    """
    info_path = endpoint_info_path(cluster_port)
    info_path.unlink(missing_ok=True)
    log_path = run_dir() / f"rest-{cluster_port}.log"
    settings = [f"-D{k}={v}" for k, v in conf.to_dict().items() if k.startswith(("rest.", "web."))]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rill.runtime.rest.cluster_endpoint", "--cluster",
             f"cluster://{cluster_host}:{cluster_port}", *settings],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if info_path.exists():
            return json.loads(info_path.read_text())["url"]
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    tail = log_path.read_text(errors="replace")[-2000:]
    raise RuntimeError(f"the REST endpoint of cluster://{cluster_host}:{cluster_port} did not start:\n{tail}")


def stop_endpoint(cluster_port: int, timeout_s: float = 15.0) -> bool:
    """Stop the endpoint process of the cluster at ``cluster_port`` (SIGTERM, SIGKILL after
    ``timeout_s``); returns whether one was running."""
    info_path = endpoint_info_path(cluster_port)
    try:
        pid = int(json.loads(info_path.read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return False
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        info_path.unlink(missing_ok=True)
        return False
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
    info_path.unlink(missing_ok=True)
    return True


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class ClusterGateway(RestfulGateway):
    """Asks a cluster's Dispatcher (and ResourceManager) through a :class:`ClusterClient`.

    A job whose JobMaster has not reported yet (or that failed before it started) shows with
    its status and no vertices.
    """

    def __init__(self, client: ClusterClient):
        self._client = client

    def _snapshot(self, job_id: str) -> Optional[JobSnapshot]:
        report = self._client.job_report(job_id)
        if not isinstance(report, m.JobStatusReport):
            return None
        if report.rest_snapshot is not None:
            return report.rest_snapshot
        now_ms = int(time.time() * 1000)
        return JobSnapshot(report.job_id, report.job_name, report.status, now_ms,
                           now_ms if report.result is not None else -1, now_ms, -1,
                           {"jid": report.job_id, "name": report.job_name, "type": "STREAMING", "nodes": []}, [])

    def list_jobs(self) -> List[JobSnapshot]:
        ids = [job[0] for job in self._client.overview().jobs]  # (id, name, status, submitted, ended)
        snaps = [s for s in (self._snapshot(j) for j in ids) if s is not None]
        running = [s for s in snaps if not s.is_terminal]
        done = sorted((s for s in snaps if s.is_terminal), key=lambda s: s.end_time_ms, reverse=True)
        return running + done

    def get_job(self, job_id: str) -> JobSnapshot:
        snap = self._snapshot(job_id)
        if snap is None:
            raise JobNotFoundError(f"Job {job_id} not found")
        return snap

    def cancel_job(self, job_id: str) -> None:
        if not self._client.cancel(job_id).known:
            raise JobNotFoundError(f"Job {job_id} not found")

    def trigger_savepoint(self, job_id: str, target_directory: Optional[str], drain: Optional[bool],
                          cancel_job: bool = False) -> str:
        if self._snapshot(job_id) is None:
            raise JobNotFoundError(f"Job {job_id} not found")
        return self._client.trigger_savepoint(job_id, target_directory, drain, cancel_job).trigger_id

    def checkpoint_stats(self, job_id: str):
        report = self._client.job_report(job_id)
        if not isinstance(report, m.JobStatusReport):
            raise JobNotFoundError(f"Job {job_id} not found")
        return report.checkpoint_stats

    def _timelines(self, job_id: str, settings: Optional[ChannelTimelineSettings]) -> List[str]:
        reply = self._client.channel_timelines(job_id, settings, STOP_TIMELINES_TIMEOUT_S)
        if reply.error_kind == "not-found":
            raise JobNotFoundError(reply.error)
        if reply.error_kind == "conflict":
            raise ChannelTimelineStateError(reply.error)
        if reply.error is not None:
            raise OSError(reply.error)
        return list(reply.files or [])

    def start_channel_timelines(self, job_id: str, settings: ChannelTimelineSettings) -> None:
        self._timelines(job_id, settings)

    def stop_channel_timelines(self, job_id: str) -> List[str]:
        return self._timelines(job_id, None)

    def savepoint_status(self, job_id: str, trigger_id: str) -> Optional[SavepointStatus]:
        report = self._client.savepoint_status(job_id, trigger_id)
        if report.status == "UNKNOWN":
            return None
        return SavepointStatus(report.status, report.location, report.failure_cause)

    def list_taskmanagers(self) -> List[Dict]:
        return [{"id": rid, "slotsNumber": slots, "freeSlots": free, "host": host}
                for rid, slots, free, _pid, host in self._client.overview().task_executors]


def main(argv: Optional[List[str]] = None) -> int:
    """Serve the REST API of a running cluster until SIGTERM/SIGINT; 0, or 1 with a message
    when the cluster is not there."""
    p = argparse.ArgumentParser(prog="python -m rill.runtime.rest.cluster_endpoint")
    p.add_argument("--cluster", default=None, help="cluster://host:port (default: jobmanager.rpc.port on this host)")
    p.add_argument("--rest-port", default=None, help="rest.port (0: ephemeral)")
    p.add_argument("-D", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                   help="a configuration setting (rest.* keys)")
    args = p.parse_args(argv)
    conf = load_configuration()
    for setting in args.settings:
        key, sep, value = setting.partition("=")
        if not sep:
            p.error(f"-D expects KEY=VALUE, got {setting!r}")
        conf.set_string(key.strip(), value.strip())
    host, port = parse_cluster_target(args.cluster or "cluster", conf.get(ConfigOptions.JOBMANAGER_RPC_PORT))
    info = read_cluster_info(port)
    if info is None:
        print(f"no cluster info for port {port} in the run directory: is the cluster running "
              f"(rill cluster start --port {port})?", file=sys.stderr)
        return 1
    if args.rest_port is not None:
        conf.set_string(RestOptions.PORT.key, args.rest_port)
    endpoint = RestServerEndpoint(ClusterGateway(ClusterClient.for_address(host, port)),
                                  RestEndpointConfig.from_configuration(conf), info.secret)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(f"REST endpoint: {endpoint.url}", flush=True)
    info_path = endpoint_info_path(port)
    tmp = info_path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"url": endpoint.url, "pid": os.getpid()}))
    tmp.replace(info_path)  # whole or absent for a reader
    try:
        stop.wait()
    finally:
        endpoint.close()
        try:
            if json.loads(info_path.read_text()).get("pid") == os.getpid():
                info_path.unlink()
        except (OSError, ValueError):
            pass
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
