"""What the REST handlers ask: the jobs, a job, the TaskManagers, cancel, savepoints and channel
timeline recordings (Flink's
``RestfulGateway``, which the Dispatcher implements).

:class:`RestfulGateway` is the interface the server calls, from its request threads; it must
therefore be thread-safe and never block on a job. :class:`EmbeddedGateway` serves the
embedded MiniCluster: live jobs are read from their JobMasters on each request, finished jobs
from an archive of their final :class:`JobSnapshot` (the last :data:`MAX_ARCHIVED_JOBS`, as the
cluster's Dispatcher keeps the last 100 results).
"""

from __future__ import annotations

import concurrent.futures
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from typing import Callable, Dict, List, Optional

from rill.runtime.jobmaster.savepoints import SavepointOperations, SavepointStatus
from rill.runtime.rest.snapshot import JobSnapshot, snapshot_job_master
from rill.runtime.taskmanager.channel_timeline import ChannelTimelineSettings, ChannelTimelineStateError

__all__ = ["RestfulGateway", "EmbeddedGateway", "JobNotFoundError", "MAX_ARCHIVED_JOBS"]

MAX_ARCHIVED_JOBS = 100
#: how long stopping a channel timeline recording waits for the tasks' files, s
STOP_TIMELINES_TIMEOUT_S = 60.0


class JobNotFoundError(LookupError):
    """No running or archived job has that id (the server answers 404)."""


class RestfulGateway(ABC):
    """The server's view of the cluster. Every method is called from request threads."""

    @abstractmethod
    def list_jobs(self) -> List[JobSnapshot]:
        """Every known job, running ones first, then finished ones, newest first."""

    @abstractmethod
    def get_job(self, job_id: str) -> JobSnapshot:
        """:raises JobNotFoundError: for an unknown id."""

    @abstractmethod
    def cancel_job(self, job_id: str) -> None:
        """Ask the job to cancel and return at once (Flink answers 202 Accepted).
        :raises JobNotFoundError: for an unknown id."""

    @abstractmethod
    def list_taskmanagers(self) -> List[Dict]:
        """``[{"id", "slotsNumber", "freeSlots", "host"}]``, one per TaskExecutor."""

    @abstractmethod
    def trigger_savepoint(self, job_id: str, target_directory: Optional[str], drain: Optional[bool],
                          cancel_job: bool = False) -> str:
        """Start a savepoint of the job (``drain`` ``None``; with ``cancel_job`` the job is
        cancelled once it completed) or stop it with one (``drain`` ``True``/``False``) and
        return at once with the operation's trigger id (Flink's ``triggerSavepoint`` /
        ``stopWithSavepoint`` through the ``CompletedOperationCache``).
        :raises JobNotFoundError: for an unknown id."""

    @abstractmethod
    def savepoint_status(self, job_id: str, trigger_id: str) -> Optional[SavepointStatus]:
        """The savepoint operation's status, ``None`` for an unknown trigger id."""

    @abstractmethod
    def start_channel_timelines(self, job_id: str, settings: ChannelTimelineSettings) -> None:
        """Start recording the channel timelines of every task of the job (Rill).

        :raises JobNotFoundError: for an unknown id.
        :raises ChannelTimelineStateError: when the job is not running or records already."""

    @abstractmethod
    def stop_channel_timelines(self, job_id: str) -> List[str]:
        """Stop the job's recording; returns once every task wrote its file, with their paths.

        :raises JobNotFoundError: for an unknown id.
        :raises ChannelTimelineStateError: when nothing is being recorded.
        :raises OSError: when a file could not be written."""

    @abstractmethod
    def checkpoint_stats(self, job_id: str):
        """The job's ``CheckpointStatsSnapshot`` (its final one once it ended), ``None`` without
        checkpointing. :raises JobNotFoundError: for an unknown id."""


class EmbeddedGateway(RestfulGateway):
    """The gateway of a MiniCluster.

    :param running_job_masters: ``() -> list of JobMaster``, the MiniCluster's running jobs.
    """

    def __init__(self, running_job_masters: Callable[[], List[object]]):
        self._running = running_job_masters
        self._lock = threading.Lock()
        self._archive: "OrderedDict[str, JobSnapshot]" = OrderedDict()
        self._savepoints = SavepointOperations()
        self._archived_stats: "OrderedDict[str, object]" = OrderedDict()

    def archive(self, job_master) -> None:
        """Keep the final picture of a job that has ended (call before it leaves the running
        list, so a request never misses it)."""
        snap = snapshot_job_master(job_master)
        stats = job_master.get_checkpoint_stats()
        with self._lock:
            self._archive[snap.job_id] = snap
            self._archived_stats[snap.job_id] = stats
            while len(self._archive) > MAX_ARCHIVED_JOBS:
                self._archived_stats.pop(self._archive.popitem(last=False)[0], None)

    def _live(self) -> Dict[str, object]:
        return {jm.job_id: jm for jm in self._running()}

    def list_jobs(self) -> List[JobSnapshot]:
        live = self._live()
        with self._lock:
            archived = [s for jid, s in reversed(self._archive.items()) if jid not in live]
        return [snapshot_job_master(jm) for jm in live.values()] + archived

    def get_job(self, job_id: str) -> JobSnapshot:
        jm = self._live().get(job_id)
        if jm is not None:
            return snapshot_job_master(jm)
        with self._lock:
            snap = self._archive.get(job_id)
        if snap is None:
            raise JobNotFoundError(f"Job {job_id} not found")
        return snap

    def cancel_job(self, job_id: str) -> None:
        jm = self._live().get(job_id)
        if jm is None:
            with self._lock:
                known = job_id in self._archive
            if not known:
                raise JobNotFoundError(f"Job {job_id} not found")
            return  # already ended: cancelling is a no-op, as in Flink
        jm.cancel()

    def trigger_savepoint(self, job_id: str, target_directory: Optional[str], drain: Optional[bool],
                          cancel_job: bool = False) -> str:
        jm = self._live().get(job_id)
        if jm is None:
            with self._lock:
                known = job_id in self._archive
            if not known:
                raise JobNotFoundError(f"Job {job_id} not found")
            future: "concurrent.futures.Future[str]" = concurrent.futures.Future()
            future.set_exception(RuntimeError(f"Job {job_id} has ended: no savepoint can be taken"))
        elif drain is not None:
            future = jm.stop_with_savepoint(target_directory, drain)
        elif cancel_job:
            future = jm.cancel_with_savepoint(target_directory)
        else:
            future = jm.trigger_savepoint(target_directory)
        return self._savepoints.register(future)

    def savepoint_status(self, job_id: str, trigger_id: str) -> Optional[SavepointStatus]:
        return self._savepoints.status(trigger_id)

    def _live_or_error(self, job_id: str, what: str):
        jm = self._live().get(job_id)
        if jm is not None:
            return jm
        with self._lock:
            snap = self._archive.get(job_id)
        if snap is None:
            raise JobNotFoundError(f"Job {job_id} not found")
        raise ChannelTimelineStateError(f"Cannot {what} channel timelines of job '{snap.name}' ({job_id}): it is "
                                        f"{snap.state}, not RUNNING (a task's recording ends with it)")

    def start_channel_timelines(self, job_id: str, settings: ChannelTimelineSettings) -> None:
        self._live_or_error(job_id, "record").start_channel_timelines(settings)

    def stop_channel_timelines(self, job_id: str) -> List[str]:
        return self._live_or_error(job_id, "stop the").stop_channel_timelines().result(STOP_TIMELINES_TIMEOUT_S)

    def checkpoint_stats(self, job_id: str):
        jm = self._live().get(job_id)
        if jm is not None:
            return jm.get_checkpoint_stats()
        with self._lock:
            if job_id not in self._archive:
                raise JobNotFoundError(f"Job {job_id} not found")
            return self._archived_stats.get(job_id)

    def list_taskmanagers(self) -> List[Dict]:
        # the embedded mode sizes one TaskExecutor to each running job: all its slots are used
        return [{"id": jm.task_executor.resource_id, "slotsNumber": jm.task_executor.num_slots,
                 "freeSlots": 0, "host": "127.0.0.1"} for jm in self._running()]
