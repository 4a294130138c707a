"""``MiniCluster``: the embedded mode, a whole cluster inside the caller's process (Flink's
``MiniCluster`` behind ``LocalStreamEnvironment``).

One TaskExecutor sized to the job (as Flink's local environment sizes its slots to the job's
parallelism), one JobMaster; every task runs on its own thread in this process.

REST: the first job whose configuration sets ``rest.port`` (or ``rest.bind-port``) starts the
MiniCluster's REST endpoint (``rill.runtime.rest``), which then serves every job of this
MiniCluster, running and finished, until :meth:`MiniCluster.close_rest_endpoint` or the end of
the process (its threads are daemons). ``JobClient.get_web_interface_url()`` gives its URL.
"""

from __future__ import annotations

import itertools
import os
import threading
from typing import Dict, Optional

from rill.common.configuration import Configuration
from rill.runtime.collect_bridge import attach_collect_channel
from rill.runtime.job_client import JobClient
from rill.runtime.jobmaster.job_master import JobMaster
from rill.runtime.jobmaster.scheduler import required_slots
from rill.runtime.rest import EmbeddedGateway, RestEndpointConfig, RestServerEndpoint, derive_bearer_token
from rill.runtime.taskmanager.task_executor import TaskExecutor

__all__ = ["MiniCluster"]

_ids = itertools.count()


class MiniCluster:
    """Runs jobs in this process. ``num_slots=None`` sizes the TaskExecutor to each job."""

    def __init__(self, num_slots: Optional[int] = None):
        self.num_slots = num_slots
        self._lock = threading.Lock()
        self._jobs: Dict[str, JobMaster] = {}
        self._rest_secret = os.urandom(32)
        self._gateway: Optional[EmbeddedGateway] = None
        self._rest: Optional[RestServerEndpoint] = None

    def submit_job(self, job_graph, configuration: Configuration, job_parameters=None,
                   collect_channel=None) -> JobClient:
        rest_url = self._ensure_rest_endpoint(configuration)
        slots = self.num_slots or sum(required_slots(job_graph).values())
        executor = TaskExecutor(slots, resource_id=f"embedded-{next(_ids)}", configuration=configuration)

        def on_terminal(jm: JobMaster) -> None:
            if self._gateway is not None:
                self._gateway.archive(jm)  # before it leaves the running jobs
            with self._lock:
                self._jobs.pop(jm.job_id, None)
            # Flink releases a job's partitions when it ends: a finished producer's partition
            # whose consumer failed is never consumed, and its buffers return only now.
            executor.partition_manager.shutdown()

        jm = JobMaster(job_graph, executor, configuration, job_parameters, on_terminal=on_terminal)
        if collect_channel is not None:
            attach_collect_channel(jm, collect_channel)
        with self._lock:
            self._jobs[jm.job_id] = jm
        jm.start()
        return JobClient(jm, web_interface_url=rest_url)

    # -- REST ------------------------------------------------------------------------------
    def _ensure_rest_endpoint(self, configuration: Configuration) -> Optional[str]:
        """Start the REST endpoint if the configuration asks for one and none runs; its URL,
        or None. :raises OSError: when the configured port cannot be bound."""
        with self._lock:
            if self._rest is None and RestEndpointConfig.is_requested(configuration):
                self._gateway = EmbeddedGateway(self._running_job_masters)
                self._rest = RestServerEndpoint(self._gateway, RestEndpointConfig.from_configuration(configuration),
                                                self._rest_secret)
            return self._rest.url if self._rest is not None else None

    def _running_job_masters(self):
        with self._lock:
            return list(self._jobs.values())

    @property
    def rest_endpoint(self) -> Optional[RestServerEndpoint]:
        """The running REST endpoint, or None."""
        return self._rest

    def rest_bearer_token(self) -> str:
        """The token ``PATCH /jobs/:jobid`` (cancel) needs: ``Authorization: Bearer <token>``."""
        return derive_bearer_token(self._rest_secret)

    def close_rest_endpoint(self) -> None:
        """Stop the REST endpoint (if any) and forget the finished jobs' archive."""
        with self._lock:
            rest, self._rest, self._gateway = self._rest, None, None
        if rest is not None:
            rest.close()
