"""``DispatcherActor``: the cluster's entry point for jobs (Flink's ``Dispatcher``): accepts
submitted JobGraphs, starts one JobMaster actor per job, answers status queries from the
reports its JobMasters push, forwards cancellations, and keeps the final report of the last
``MAX_ARCHIVED`` jobs (Flink's ``jobstore.max-capacity``) after their JobMasters exit.

It never loads user code: the JobGraph stays bytes until the JobMaster's process loads it.
"""

from __future__ import annotations

import collections
import logging

import cloudpickle
from thespian.actors import Actor, ActorExitRequest, ChildActorExited, PoisonMessage

from rill.runtime.cluster import messages as m
from rill.runtime.cluster.kv_state import KvStateRequest, route_in_dispatcher
from rill.runtime.cluster.job_master_actor import JobMasterActor
from rill.runtime.errors import JobExecutionException

__all__ = ["DispatcherActor"]

log = logging.getLogger("rill.cluster.dispatcher")

MAX_ARCHIVED = 100


class DispatcherActor(Actor):
    """The Dispatcher (one, global name ``rill.dispatcher``)."""

    def __init__(self):
        super().__init__()
        self.resource_manager = None
        self.secret = None
        self.job_masters = {}  # job id → JobMaster address (while it runs)
        self.reports: "collections.OrderedDict[str, m.JobStatusReport]" = collections.OrderedDict()

    def receiveMessage(self, msg, sender):  # noqa: N802 - Thespian's name
        if isinstance(msg, m.InitDispatcher):
            self.resource_manager, self.secret = msg.resource_manager, msg.secret
            import rill.datastream  # noqa: F401, PLC0415 - JobMasters fork from here with it loaded
            import rill.runtime.jobmaster.job_master  # noqa: F401, PLC0415
            self.send(sender, m.Ack())
        elif isinstance(msg, m.SubmitJob):
            self._submit(msg, sender)
        elif isinstance(msg, m.JobStatusReport):
            self._store(msg)
        elif isinstance(msg, m.RequestJobStatus):
            report = self.reports.get(msg.job_id)
            self.send(sender, report if report is not None else m.UnknownJob(msg.job_id))
        elif isinstance(msg, m.CancelJob):
            jm = self.job_masters.get(msg.job_id)
            if jm is not None:
                self.send(jm, msg)
            self.send(sender, m.CancelAck(msg.job_id, msg.job_id in self.reports))
        elif isinstance(msg, KvStateRequest):
            route_in_dispatcher(self.job_masters, msg, sender, self.send)
        elif isinstance(msg, m.RequestClusterOverview):
            self.send(sender, m.ClusterOverview([], [(r.job_id, r.job_name, r.status) for r in self.reports.values()]))
        elif isinstance(msg, ChildActorExited):
            self._job_master_exited(msg.childAddress)
        elif isinstance(msg, ActorExitRequest):
            for jm in self.job_masters.values():
                self.send(jm, ActorExitRequest())
        elif isinstance(msg, PoisonMessage):
            log.warning("undeliverable %r", msg.poisonMessage)

    def _submit(self, msg: m.SubmitJob, sender) -> None:
        if self.resource_manager is None:
            self.send(sender, m.JobSubmissionFailed("the cluster is not initialized (no ResourceManager)"))
            return
        if msg.job_id in self.job_masters:
            self.send(sender, m.JobSubmissionFailed(f"Job {msg.job_id} is already running on this cluster"))
            return
        jm = self.createActor(JobMasterActor)
        self.job_masters[msg.job_id] = jm
        self._store(m.JobStatusReport(msg.job_id, msg.job_name, "CREATED", {}, [], [], (0, None), False, None))
        self.send(jm, m.StartJobMaster(msg.job_id, msg, self.myAddress, self.resource_manager, self.secret))
        self.send(sender, m.JobSubmitted(msg.job_id, msg.job_name))

    def _store(self, report: m.JobStatusReport) -> None:
        old = self.reports.get(report.job_id)
        if old is not None and old.result is not None:
            return  # final already
        self.reports[report.job_id] = report
        if report.result is not None:
            jm = self.job_masters.pop(report.job_id, None)
            if jm is not None:
                self.send(jm, ActorExitRequest())
            finished = [j for j, r in self.reports.items() if r.result is not None]
            for j in finished[:max(0, len(finished) - MAX_ARCHIVED)]:
                del self.reports[j]

    def _job_master_exited(self, address) -> None:
        for job_id, jm in list(self.job_masters.items()):
            if jm == address:
                del self.job_masters[job_id]
                report = self.reports.get(job_id)
                if report is not None and report.result is None:
                    error = JobExecutionException(job_id, f"Job '{report.job_name}' ({job_id}) failed: its "
                                                          "JobMaster process exited")
                    report.status = "FAILED"
                    report.result = cloudpickle.dumps((None, error, None))
