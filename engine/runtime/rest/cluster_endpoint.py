"""The REST endpoint of cluster mode: its own process, asking the Dispatcher.

Why a process of its own: a thread inside the Dispatcher's process must never call the actor's
``send`` (only the actor's thread may), and an HTTP server does not belong in an actor's
message loop. This process opens its own Thespian handle (``ClusterClient``) and asks the
Dispatcher, as the ``rill`` client does; each JobMaster includes a :class:`JobSnapshot` in the
status report it sends the Dispatcher every 200 ms, so a request costs one ask per job.

Run it next to a cluster::

    python -m rill.runtime.rest.cluster_endpoint [--cluster cluster://127.0.0.1:6123] [--rest-port 8081]

It reads the cluster's secret from the run directory's ``cluster-PORT.json`` (the token for
cancel is derived from it, see ``rill.runtime.rest.auth``), prints ``REST endpoint:
http://host:port`` once bound and serves until SIGTERM or SIGINT. ``rest.*`` keys of the
configuration apply; ``--rest-port`` overrides ``rest.port``.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from typing import Dict, List, Optional

from rill.common.configuration import ConfigOptions, load_configuration
from rill.runtime.cluster import messages as m
from rill.runtime.cluster.actor_system import parse_cluster_target, read_cluster_info
from rill.runtime.cluster.client import ClusterClient
from rill.runtime.rest.gateway import JobNotFoundError, RestfulGateway
from rill.runtime.rest.options import RestEndpointConfig, RestOptions
from rill.runtime.rest.server import RestServerEndpoint
from rill.runtime.rest.snapshot import JobSnapshot

__all__ = ["ClusterGateway", "main"]


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
        ids = [job_id for job_id, _name, _status in self._client.overview().jobs]
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
        if not self._client.cancel(job_id):
            raise JobNotFoundError(f"Job {job_id} not found")

    def list_taskmanagers(self) -> List[Dict]:
        return [{"id": rid, "slotsNumber": slots, "freeSlots": free, "host": host}
                for rid, slots, free, _pid, host in self._client.overview().task_executors]


def main(argv: Optional[List[str]] = None) -> int:
    """Serve the REST API of a running cluster until SIGTERM/SIGINT; 0, or 1 with a message
    when the cluster is not there."""
    p = argparse.ArgumentParser(prog="python -m rill.runtime.rest.cluster_endpoint")
    p.add_argument("--cluster", default=None, help="cluster://host:port (default: jobmanager.rpc.port on this host)")
    p.add_argument("--rest-port", default=None, help="rest.port (0: ephemeral)")
    args = p.parse_args(argv)
    conf = load_configuration()
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
    stop.wait()
    endpoint.close()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
