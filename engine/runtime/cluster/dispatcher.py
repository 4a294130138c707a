"""``DispatcherActor``: the cluster's entry point for jobs (Flink's ``Dispatcher``): accepts
submitted JobGraphs, starts one JobMaster actor per job, answers status queries from the
reports its JobMasters push, forwards cancellations, and keeps the final report of the last
``MAX_ARCHIVED`` jobs (Flink's ``jobstore.max-capacity``) after their JobMasters exit.

The cluster log gets one INFO line per job event, as Flink's Dispatcher and JobMaster log
them: submitted, each job status change (RUNNING, FINISHED, CANCELED ...) and FAILED with its
cause; per-task deployment details are DEBUG.

It never loads user code: the JobGraph stays bytes until the JobMaster's process loads it.

Failures of the processes around it: a JobMaster whose process exits (Thespian's
``ChildActorExited``, immediate) fails its job with that cause, and the ResourceManager frees
the job's slots and has its TaskExecutors stop its tasks (``JobMasterLost``); a lost
ResourceManager (``ResourceManagerLost`` from the supervisor) fails every running job; when its
own parent, the supervisor, is gone, nothing can restart or find the control actors any more:
the Dispatcher shuts the cluster down (see ``kill_cluster_process_group``). A
Dispatcher restarted by the supervisor has lost its jobs: it answers for unknown jobs with the
reason, non-final while the old jobs' orphaned JobMasters may still send their final reports.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import time
import uuid
from datetime import timedelta
from typing import Dict, Optional, Tuple

import cloudpickle
from thespian.actors import Actor, ActorExitRequest, ChildActorExited, PoisonMessage, WakeupMessage

from rill.runtime.cluster import messages as m
from rill.runtime.cluster.kv_state import KvStateRequest, route_in_dispatcher
from rill.runtime.cluster.job_master_actor import JobMasterActor
from rill.runtime.cluster.preload import preload_pyarrow_conversions
from rill.runtime.cluster.liveness import SHUTDOWN_GRACE_S, ParentWatch, kill_cluster_process_group
from rill.runtime.errors import JobExecutionException

__all__ = ["DispatcherActor"]

log = logging.getLogger("rill.cluster.dispatcher")

MAX_ARCHIVED = 100
TICK = timedelta(milliseconds=200)


#: how many savepoint operations the Dispatcher remembers (Flink's CompletedOperationCache)
MAX_SAVEPOINT_OPERATIONS = 1000


class _BoundedDict(collections.OrderedDict):
    """Forgets its oldest entries beyond ``limit``."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def __setitem__(self, key, value) -> None:
        super().__setitem__(key, value)
        while len(self) > self.limit:
            self.popitem(last=False)


class DispatcherActor(Actor):
    """The Dispatcher (one, global name ``rill.dispatcher``)."""

    def __init__(self):
        super().__init__()
        self.resource_manager = None
        self.secret = None
        self.job_masters = {}  # job id → JobMaster address (while it runs)
        self.reports: "collections.OrderedDict[str, m.JobStatusReport]" = collections.OrderedDict()
        #: savepoint operations by trigger id, the last MAX_SAVEPOINT_OPERATIONS kept
        self.savepoint_operations: Dict[str, m.SavepointStatusReport] = _BoundedDict(MAX_SAVEPOINT_OPERATIONS)
        self.init: Optional[m.InitDispatcher] = None
        self.started = time.monotonic()
        self.watch = ParentWatch()
        self.orphaned_at: Optional[float] = None
        self.times: Dict[str, Tuple[float, Optional[float]]] = {}  # job id → (submitted, ended), epoch s

    def receiveMessage(self, msg, sender):  # noqa: N802, C901 - Thespian's name; one dispatch
        if isinstance(msg, m.InitDispatcher):
            self.init = msg
            self.resource_manager, self.secret = msg.resource_manager, msg.secret
            self.started = time.monotonic()
            import rill.datastream  # noqa: F401, PLC0415 - JobMasters fork from here with it loaded
            import rill.runtime.jobmaster.job_master  # noqa: F401, PLC0415
            preload_pyarrow_conversions()  # a JobMaster restoring its sources' enumerators reads Parquet
            self.send(sender, m.ControlActorStarted("Dispatcher", os.getpid()))
            self.wakeupAfter(TICK)
        elif isinstance(msg, WakeupMessage):
            self._tick()
        elif isinstance(msg, m.ResourceManagerLost):
            self.resource_manager = msg.resource_manager
            for jm in self.job_masters.values():
                self.send(jm, msg)
        elif isinstance(msg, m.SubmitJob):
            self._submit(msg, sender)
        elif isinstance(msg, m.JobStatusReport):
            self._store(msg)
        elif isinstance(msg, m.RequestJobStatus):
            if self.orphaned_at is not None:
                # The cluster is shutting down (its supervisor exited, and this Dispatcher is
                # stopping the JobMasters): a job's report would name its JobMaster's exit.
                # Unanswered, a client learns what happened from the cluster itself, as it
                # does when it asks the supervisor first (its job's poller asks this
                # Dispatcher directly).
                return
            report = self.reports.get(msg.job_id)
            self.send(sender, report if report is not None else self._unknown(msg.job_id))
        elif isinstance(msg, m.CancelJob):
            jm = self.job_masters.get(msg.job_id)
            if jm is not None:
                self.send(jm, msg)
            report = self.reports.get(msg.job_id)
            if report is not None and report.result is None:
                log.info("job %s (%s): cancellation requested", msg.job_id, report.job_name)
            self.send(sender, m.CancelAck(msg.job_id, report is not None, report.status if report else None))
        elif isinstance(msg, m.TriggerSavepoint):
            self._trigger_savepoint(msg, sender)
        elif isinstance(msg, m.SavepointStatusReport):  # a JobMaster's savepoint operation ended
            self.savepoint_operations[msg.trigger_id] = msg
        elif isinstance(msg, m.RequestSavepointStatus):
            self.send(sender, self.savepoint_operations.get(msg.trigger_id) or m.SavepointStatusReport(
                msg.job_id, msg.trigger_id, "UNKNOWN", failure_cause=f"No savepoint operation {msg.trigger_id}"))
        elif isinstance(msg, m.ChannelTimelineRequest):
            self._channel_timelines(msg, sender)
        elif isinstance(msg, KvStateRequest):
            route_in_dispatcher(self.job_masters, msg, sender, self.send)
        elif isinstance(msg, m.RequestClusterOverview):
            self.send(sender, m.ClusterOverview([], [(r.job_id, r.job_name, r.status, *self.times[r.job_id])
                                                     for r in self.reports.values()]))
        elif isinstance(msg, ChildActorExited):
            self._job_master_exited(msg.childAddress)
        elif isinstance(msg, ActorExitRequest):
            for jm in self.job_masters.values():
                self.send(jm, ActorExitRequest())
        elif isinstance(msg, PoisonMessage):
            log.warning("undeliverable %r", msg.poisonMessage)

    def _trigger_savepoint(self, msg: m.TriggerSavepoint, sender) -> None:
        """Forward a savepoint request to the job's JobMaster under a new trigger id and answer
        with the id; the JobMaster reports the outcome here (Flink's ``CompletedOperationCache``)."""
        jm = self.job_masters.get(msg.job_id)
        report = self.reports.get(msg.job_id)
        trigger_id = uuid.uuid4().hex
        if jm is None or report is None or report.result is not None:
            why = ("the cluster knows no such job" if report is None
                   else f"the job is {report.status}, not RUNNING")
            failed = m.SavepointStatusReport(msg.job_id, trigger_id, "COMPLETED",
                                             failure_cause=f"Cannot take a savepoint of job {msg.job_id}: {why}")
            self.savepoint_operations[trigger_id] = failed
            self.send(sender, failed)
            return
        self.savepoint_operations[trigger_id] = m.SavepointStatusReport(msg.job_id, trigger_id, "IN_PROGRESS")
        log.info("job %s: %s requested (trigger %s)", msg.job_id,
                 "stop-with-savepoint" if msg.drain is not None
                 else "cancel-with-savepoint" if msg.cancel_job else "savepoint", trigger_id)
        self.send(jm, dataclasses.replace(msg, trigger_id=trigger_id))
        self.send(sender, m.SavepointTriggered(msg.job_id, trigger_id))

    def _channel_timelines(self, msg: m.ChannelTimelineRequest, sender) -> None:
        """Forward a channel timeline request to the job's JobMaster, which answers the asker;
        answer here for a job this Dispatcher does not run."""
        jm = self.job_masters.get(msg.job_id)
        report = self.reports.get(msg.job_id)
        if report is None:
            self.send(sender, m.ChannelTimelineResponse(msg.request_id, error=f"Job {msg.job_id} not found",
                                                        error_kind="not-found"))
        elif jm is None or report.result is not None:
            self.send(sender, m.ChannelTimelineResponse(
                msg.request_id, error=f"Cannot record channel timelines of job {msg.job_id}: it is "
                f"{report.status}, not RUNNING", error_kind="conflict"))
        else:
            self.send(jm, dataclasses.replace(msg, reply_to=sender))

    def _submit(self, msg: m.SubmitJob, sender) -> None:
        if self.resource_manager is None:
            self.send(sender, m.JobSubmissionFailed("the cluster is not initialized (no ResourceManager)"))
            return
        if msg.job_id in self.job_masters:
            self.send(sender, m.JobSubmissionFailed(f"Job {msg.job_id} is already running on this cluster"))
            return
        jm = self.createActor(JobMasterActor)
        self.job_masters[msg.job_id] = jm
        self.times[msg.job_id] = (time.time(), None)
        log.info("job %s (%s) submitted", msg.job_id, msg.job_name)
        self._store(m.JobStatusReport(msg.job_id, msg.job_name, "CREATED", {}, [], [], (0, None), False, None))
        init = self.init
        self.send(jm, m.StartJobMaster(msg.job_id, msg, self.myAddress, self.resource_manager, self.secret,
                                       init.supervisor if init else None,
                                       init.heartbeat_interval_ms if init else 1000))
        self.send(sender, m.JobSubmitted(msg.job_id, msg.job_name))

    def _tick(self) -> None:
        """Without its supervisor nothing restarts the cluster's control actors and clients
        cannot find them: the cluster shuts down (the JobMasters stop their tasks first)."""
        if self.orphaned_at is None and self.watch.parent_died():
            self.orphaned_at = time.monotonic()
            log.error("the cluster's supervisor (pid %s) exited: shutting the cluster down", self.watch.parent_pid)
            for jm in self.job_masters.values():
                self.send(jm, ActorExitRequest())
        if self.orphaned_at is not None and time.monotonic() - self.orphaned_at > SHUTDOWN_GRACE_S:
            kill_cluster_process_group()
        self.wakeupAfter(TICK)

    def _unknown(self, job_id: str) -> m.UnknownJob:
        if self.init is None:  # a client can reach a new Dispatcher before the supervisor's InitDispatcher
            return m.UnknownJob(job_id, "the Dispatcher is starting", final=False)
        previous = self.init.previous_exit
        if previous is None:
            return m.UnknownJob(job_id)
        recovering = (time.monotonic() - self.started) * 1000 < self.init.recovery_ms
        return m.UnknownJob(job_id, f"{previous}; the jobs it ran were lost with it", final=not recovering)

    def _store(self, report: m.JobStatusReport) -> None:
        # a job this Dispatcher did not accept (a restarted Dispatcher hears from the previous
        # one's JobMasters): its start is when it was first heard of
        self.times.setdefault(report.job_id, (time.time(), None))
        old = self.reports.get(report.job_id)
        if old is not None and old.result is not None:
            return  # final already
        if old is not None and report.job_master_pid is None:
            report.job_master_pid = old.job_master_pid
        self.reports[report.job_id] = report
        if old is not None and old.status != report.status:
            self._log_status(report)
        if report.result is not None:
            self.times[report.job_id] = (self.times[report.job_id][0], time.time())
            jm = self.job_masters.pop(report.job_id, None)
            if jm is not None:
                self.send(jm, ActorExitRequest())
            finished = [j for j, r in self.reports.items() if r.result is not None]
            for j in finished[:max(0, len(finished) - MAX_ARCHIVED)]:
                del self.reports[j]
                del self.times[j]

    @staticmethod
    def _log_status(report: m.JobStatusReport) -> None:
        if report.status == "FAILED":
            log.info("job %s (%s) FAILED: %s", report.job_id, report.job_name, report.failure_cause or "unknown cause")
        else:
            log.info("job %s (%s) is %s", report.job_id, report.job_name, report.status)

    def _job_master_exited(self, address) -> None:
        for job_id, jm in list(self.job_masters.items()):
            if jm == address:
                del self.job_masters[job_id]
                for trigger_id, op in list(self.savepoint_operations.items()):
                    if op.job_id == job_id and op.status == "IN_PROGRESS":  # nothing will report it
                        self.savepoint_operations[trigger_id] = dataclasses.replace(
                            op, status="COMPLETED", failure_cause=f"The JobMaster of job {job_id} exited")
                report = self.reports.get(job_id)
                if report is not None and report.result is None:
                    pid = report.job_master_pid if report.job_master_pid is not None else "?"
                    cause = f"its JobMaster (pid {pid}) exited"
                    log.warning("job %s failed: %s", job_id, cause)
                    error = JobExecutionException(job_id, f"Job '{report.job_name}' ({job_id}) failed: {cause}")
                    report.status = "FAILED"
                    report.failure_cause = str(error)
                    report.result = cloudpickle.dumps((None, error, None))
                    # its tasks would run on and hold their slots: the ResourceManager frees the
                    # slots and has the TaskExecutors stop the tasks
                    if self.resource_manager is not None:
                        self.send(self.resource_manager, m.JobMasterLost(job_id, cause))
                    self.times[job_id] = (self.times[job_id][0], time.time())
                    self._log_status(report)
