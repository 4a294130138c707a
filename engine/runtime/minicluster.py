"""``MiniCluster``: the embedded mode, a whole cluster inside the caller's process (Flink's
``MiniCluster`` behind ``LocalStreamEnvironment``).

One TaskExecutor sized to the job (as Flink's local environment sizes its slots to the job's
parallelism), one JobMaster; every task runs on its own thread in this process.
"""

from __future__ import annotations

import itertools
import threading
from typing import Dict, Optional

from rill.common.configuration import Configuration
from rill.runtime.collect_bridge import attach_collect_channel
from rill.runtime.job_client import JobClient
from rill.runtime.jobmaster.job_master import JobMaster
from rill.runtime.jobmaster.scheduler import required_slots
from rill.runtime.taskmanager.task_executor import TaskExecutor

__all__ = ["MiniCluster"]

_ids = itertools.count()


class MiniCluster:
    """Runs jobs in this process. ``num_slots=None`` sizes the TaskExecutor to each job."""

    def __init__(self, num_slots: Optional[int] = None):
        self.num_slots = num_slots
        self._lock = threading.Lock()
        self._jobs: Dict[str, JobMaster] = {}

    def submit_job(self, job_graph, configuration: Configuration, job_parameters=None,
                   collect_channel=None) -> JobClient:
        slots = self.num_slots or sum(required_slots(job_graph).values())
        executor = TaskExecutor(slots, resource_id=f"embedded-{next(_ids)}", configuration=configuration)

        def on_terminal(jm: JobMaster) -> None:
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
        return JobClient(jm)
