"""The client side of cluster mode: submitting a job to a running cluster and following it
(Flink's ``RestClusterClient`` + ``ClusterClientJobClientAdapter``).

:class:`ClusterClient` is one connection to a cluster's actor system, shared by the whole
process (Thespian's external endpoint is not thread-safe: every ask holds a lock).
:class:`ClusterJobClient` has the same methods as the embedded ``JobClient``; a poller thread
asks the Dispatcher for the job's report every ``POLL_INTERVAL_S`` and completes the result
future when the job has ended.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
import time
import uuid
from typing import Any, Callable, Dict, List, Optional, Tuple

import cloudpickle

from rill.graph.states import ExecutionState, JobStatus
from rill.runtime.cluster import messages as m
from rill.runtime.cluster.actor_system import (
    SUPERVISOR_NAME,
    ClusterNotRunningError,
    _port_in_use,
    cluster_secret,
    connect,
    parse_cluster_target,
    port_in_use,
    read_cluster_info,
)
from rill.runtime.cluster.kv_state import ask_state
from rill.runtime.cluster.shipping import ship_job_graph
from rill.runtime.errors import JobCancellationException, JobExecutionException
from rill.runtime.queryable_state import StateQuery
from rill.runtime.rest.backpressure import find_root_cause

__all__ = ["ClusterClient", "ClusterJobClient", "submit_to_cluster"]

POLL_INTERVAL_S = 0.05
ASK_TIMEOUT_S = 10.0
#: A job's poller waits this long for one report before it checks that the cluster still listens.
POLL_TIMEOUT_S = 2.0
#: A job's poller gives up on a cluster that still listens but has not answered for this long.
LOST_CONTACT_S = 20.0
_clients: Dict[Tuple[str, int], "ClusterClient"] = {}
_clients_lock = threading.Lock()


class ClusterClient:
    """A connection to the cluster at ``host:port``, signing with the cluster's ``secret``
    (default: :func:`~rill.runtime.cluster.actor_system.cluster_secret` of ``port``). The
    Dispatcher and ResourceManager are looked up at the cluster's supervisor for every request,
    since the supervisor replaces them when their processes exit (a job's poller keeps the
    Dispatcher's address until an ask to it fails, see ``ClusterJobClient._poll``).

    :raises ClusterNotRunningError: when no cluster answers there.
    :raises ClusterSecretError: when no secret is given and none is found.
    """

    def __init__(self, host: str, port: int, secret: Optional[bytes] = None):
        self.host, self.port = host, port
        self.secret = cluster_secret(port) if secret is None else secret
        self._lock = threading.Lock()
        self._system = connect(host, port, secret=self.secret)
        from rill.runtime.cluster.supervisor import ClusterSupervisorActor  # noqa: PLC0415
        with self._lock:
            self.supervisor = self._system.createActor(ClusterSupervisorActor, globalName=SUPERVISOR_NAME)

    def leaders(self, timeout_s: float = ASK_TIMEOUT_S) -> m.Leaders:
        """The current Dispatcher and ResourceManager.

        :raises ClusterNotRunningError: when the supervisor does not answer, or is a new one
            (Thespian creates a global-name actor that is gone anew) that runs no cluster.
        """
        leaders = self.ask(self.supervisor, m.RequestLeaders(), timeout_s)
        if leaders.dispatcher is None or leaders.resource_manager is None:
            raise ClusterNotRunningError(
                f"The cluster at cluster://{self.host}:{self.port} is not running: its supervisor has no Dispatcher "
                f"and ResourceManager (the cluster is shutting down); stop it with `rill cluster stop --port "
                f"{self.port}`")
        return leaders

    @property
    def dispatcher(self):
        """The current Dispatcher's address."""
        return self.leaders().dispatcher

    @property
    def resource_manager(self):
        """The current ResourceManager's address."""
        return self.leaders().resource_manager

    def listening(self) -> bool:
        """Whether the cluster's admin still accepts connections."""
        return port_in_use(self.host, self.port, 1.0)

    @classmethod
    def for_address(cls, host: str, port: int, secret: Optional[bytes] = None) -> "ClusterClient":
        """The process-wide client of ``host:port`` (created on first use, and again when the
        cluster there has another secret: it was restarted)."""
        if secret is None:
            if not _port_in_use(host, port):  # say "no cluster" rather than "no secret"
                raise ClusterNotRunningError(f"No Rill cluster at cluster://{host}:{port}: start one with "
                                             f"`rill cluster start --port {port}`")
            secret = cluster_secret(port)
        with _clients_lock:
            client = _clients.get((host, port))
            if client is None or client.secret != secret:
                client = _clients[(host, port)] = cls(host, port, secret)
            return client

    def ask(self, target, message, timeout_s: float = ASK_TIMEOUT_S):
        """Send ``message`` and wait for its reply: the first message that answers it (see
        :func:`answers`); a late reply to an earlier ask that timed out is dropped.

        :raises ClusterNotRunningError: when no reply arrives within ``timeout_s``.
        """
        reply = self.ask_until(target, message, answers(message), time.monotonic() + timeout_s)
        if reply is None:
            raise ClusterNotRunningError(
                f"The cluster at cluster://{self.host}:{self.port} did not answer {type(message).__name__} "
                f"within {timeout_s} s (a cluster refuses, without answering, a client whose secret is not its own: "
                "see its log)")
        return reply

    def ask_until(self, target, message, accept, deadline: float):
        """Send ``message`` and wait until a reply for which ``accept(reply)`` holds arrives
        (replies of earlier asks that timed out are dropped), or ``time.monotonic()`` passes
        ``deadline``: then None."""
        with self._lock:
            reply = self._system.ask(target, message, max(0.0, deadline - time.monotonic()))
            while reply is not None and not accept(reply):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                reply = self._system.listen(remaining)
        return reply

    def overview(self) -> m.ClusterOverview:
        """TaskExecutors (from the ResourceManager) and jobs (from the Dispatcher)."""
        leaders = self.leaders()
        tes = self.ask(leaders.resource_manager, m.RequestClusterOverview())
        jobs = self.ask(leaders.dispatcher, m.RequestClusterOverview())
        return m.ClusterOverview(tes.task_executors, jobs.jobs)

    def cancel(self, job_id: str) -> m.CancelAck:
        """Ask the Dispatcher to cancel ``job_id``; the reply says whether it knows the job and
        the job's status when the request arrived (a terminal status: nothing was cancelled)."""
        return self.ask(self.dispatcher, m.CancelJob(job_id))

    def trigger_savepoint(self, job_id: str, target_directory: Optional[str] = None,
                          drain: Optional[bool] = None, cancel_job: bool = False):
        """Ask the Dispatcher for a savepoint of ``job_id`` (with ``drain`` not ``None``:
        stop-with-savepoint; with ``cancel_job``: cancel-with-savepoint); returns :class:`~rill.runtime.cluster.messages.SavepointTriggered`
        or, when the job does not run there, a failed ``SavepointStatusReport``."""
        return self.ask(self.dispatcher, m.TriggerSavepoint(job_id, target_directory, drain, cancel_job=cancel_job))

    def savepoint_status(self, job_id: str, trigger_id: str) -> m.SavepointStatusReport:
        """The status of savepoint operation ``trigger_id``."""
        return self.ask(self.dispatcher, m.RequestSavepointStatus(job_id, trigger_id))

    def savepoint_future(self, job_id: str, target_directory: Optional[str] = None,
                         drain: Optional[bool] = None) -> "concurrent.futures.Future[str]":
        """Trigger a savepoint (see :meth:`trigger_savepoint`) and return a future of its
        directory, completed by a thread that asks for its status every ``POLL_INTERVAL_S``.
        The future fails with ``RuntimeError`` naming the cause the JobMaster reported."""
        future: "concurrent.futures.Future[str]" = concurrent.futures.Future()
        first = self.trigger_savepoint(job_id, target_directory, drain)

        def settle(report: m.SavepointStatusReport) -> bool:
            if report.status == "IN_PROGRESS":
                return False
            if report.location is not None:
                future.set_result(report.location)
            else:
                future.set_exception(RuntimeError(f"Savepoint of job {job_id} failed: {report.failure_cause}"))
            return True

        if isinstance(first, m.SavepointStatusReport):
            settle(first)
            return future

        def poll() -> None:
            while True:
                try:
                    if settle(self.savepoint_status(job_id, first.trigger_id)):
                        return
                except Exception as e:  # noqa: BLE001 - the cluster went away
                    future.set_exception(e)
                    return
                time.sleep(POLL_INTERVAL_S)

        threading.Thread(target=poll, name=f"rill-savepoint-{first.trigger_id[:8]}", daemon=True).start()
        return future

    def channel_timelines(self, job_id: str, settings, timeout_s: float = ASK_TIMEOUT_S) -> m.ChannelTimelineResponse:
        """Start recording the channel timelines of ``job_id`` with ``settings`` (a
        ``ChannelTimelineSettings``) or, with ``None``, stop and get the files written.

        :raises ClusterNotRunningError: when no answer arrives within ``timeout_s``.
        """
        request_id = uuid.uuid4().hex
        reply = self.ask_until(self.dispatcher, m.ChannelTimelineRequest(job_id, request_id, settings),
                               lambda r: isinstance(r, m.ChannelTimelineResponse) and r.request_id == request_id,
                               time.monotonic() + timeout_s)
        if reply is None:
            raise ClusterNotRunningError(f"The cluster at cluster://{self.host}:{self.port} did not answer the "
                                         f"channel timeline request for job {job_id} within {timeout_s} s")
        return reply

    def job_report(self, job_id: str, timeout_s: float = ASK_TIMEOUT_S):
        return self.ask(self.leaders(timeout_s).dispatcher, m.RequestJobStatus(job_id), timeout_s)

    def submit(self, job_graph, configuration, job_parameters=None, collect_channel=None) -> "ClusterJobClient":
        """Ship ``job_graph`` and start it; returns its :class:`ClusterJobClient`.

        :raises OperatorSerializationError: when a function cannot be shipped.
        :raises JobSubmissionException: when the Dispatcher refuses the job.
        """
        from rill.runtime.errors import JobSubmissionException  # noqa: PLC0415
        payload = ship_job_graph(job_graph)
        job_id, job_name = str(job_graph.get_job_id()), job_graph.get_name()
        collect, endpoints, secret, channel_ids = _start_collect(job_graph, collect_channel)
        reply = self.ask(self.dispatcher, m.SubmitJob(job_id, job_name, payload, configuration,
                                                      dict(job_parameters or {}), endpoints, secret,
                                                      working_directory=os.getcwd()))
        if isinstance(reply, m.JobSubmissionFailed):
            if collect is not None:
                collect.close()
            raise JobSubmissionException(job_id, f"The cluster refused job '{job_name}' ({job_id}): {reply.message}")
        return ClusterJobClient(self, job_id, job_name, collect_channel, collect, channel_ids)


def answers(request) -> Callable[[Any], bool]:
    """Which messages answer ``request`` (same job and operation where the reply names them).

    Thespian's ``ActorSystem.ask`` returns whatever arrives next, and a reply that comes after
    its ask timed out arrives at the next ask: under load a ``RequestLeaders`` was once
    answered with a ``JobStatusReport``. Requests not listed here take any reply.
    """
    job_id = getattr(request, "job_id", None)
    if isinstance(request, m.RequestLeaders):
        return lambda r: isinstance(r, m.Leaders)
    if isinstance(request, m.RequestClusterOverview):
        return lambda r: isinstance(r, m.ClusterOverview)
    if isinstance(request, m.RequestJobStatus):
        return lambda r: isinstance(r, (m.JobStatusReport, m.UnknownJob)) and r.job_id == job_id
    if isinstance(request, m.CancelJob):
        return lambda r: isinstance(r, m.CancelAck) and r.job_id == job_id
    if isinstance(request, m.SubmitJob):
        return lambda r: (isinstance(r, m.JobSubmitted) and r.job_id == job_id) or isinstance(r, m.JobSubmissionFailed)
    if isinstance(request, m.TriggerSavepoint):
        return lambda r: isinstance(r, (m.SavepointTriggered, m.SavepointStatusReport)) and r.job_id == job_id
    if isinstance(request, m.RequestSavepointStatus):
        return lambda r: (isinstance(r, m.SavepointStatusReport) and r.job_id == job_id
                          and r.trigger_id == request.trigger_id)
    return lambda r: True


def _start_collect(job_graph, channel):
    """One collect server for every collecting sink of the job whose channel lives in this
    process: ``execute_and_collect``'s ``channel`` and each ``sink_to(CollectSink())`` (its
    channel is registered here when the sink is created), so both read the records the task
    processes send back, as in the embedded mode.

    :returns: ``(server, channel id → address, secret, attached channel ids)``; ``(None, {},
        None, [])`` when the job collects nothing.
    """
    from rill.operators.collect_sink import CollectSinkOperator, get_channel  # noqa: PLC0415
    from rill.runtime.cluster.collect_service import CollectServer  # noqa: PLC0415
    writers: Dict[str, int] = {}
    for v in job_graph.get_vertices():
        for cfg in v.stream_configs.values():
            op = getattr(cfg.operator_factory, "operator", None)
            if isinstance(op, CollectSinkOperator):
                writers[op.channel_id] = writers.get(op.channel_id, 0) + v.get_parallelism()
    channels = []
    for channel_id in writers:
        if channel is not None and channel_id == channel.channel_id:
            channels.append(channel)
        else:
            try:
                channels.append(get_channel(channel_id))
            except RuntimeError:
                continue  # not ours: the sink subtask reports the missing channel when it opens
    if not channels:
        return None, {}, None, []
    secret = os.urandom(32)
    server = CollectServer(secret)
    address = server.start()
    for c in channels:
        server.attach(c, writers[c.channel_id])
    return server, {c.channel_id: tuple(address) for c in channels}, secret, [c.channel_id for c in channels]


class ClusterJobClient:
    """A job running on a cluster; the same methods as the embedded ``JobClient``."""

    #: Tasks run in processes of their own (read by ``rill run``'s summary).
    tasks_share_a_process = False

    def __init__(self, client: ClusterClient, job_id: str, job_name: str, collect_channel=None, collect_server=None,
                 collect_channel_ids=()):
        self._client = client
        self._job_id = job_id
        self._job_name = job_name
        self._report: Optional[m.JobStatusReport] = None
        self._result: "concurrent.futures.Future" = concurrent.futures.Future()
        self._collect_channel = collect_channel
        self._collect_server = collect_server
        self._collect_channel_ids = list(collect_channel_ids)
        self._poller = threading.Thread(target=self._poll, name=f"rill-job-{job_id[:8]}", daemon=True)
        self._poller.start()

    # -- polling -------------------------------------------------------------------------------
    def _poll(self) -> None:
        """Ask the Dispatcher for the job's report every ``POLL_INTERVAL_S`` until it holds the
        result. The Dispatcher's address is looked up at the supervisor once, and again only
        after an ask failed or the Dispatcher did not know the job (the supervisor replaces a
        Dispatcher whose process exited): a lookup per poll doubled the messages, each costing
        the client and the cluster about a millisecond of CPU."""
        last_answer = time.monotonic()
        dispatcher = None
        while True:
            try:
                if dispatcher is None:
                    dispatcher = self._client.leaders(POLL_TIMEOUT_S).dispatcher
                report = self._client.ask(dispatcher, m.RequestJobStatus(self._job_id), POLL_TIMEOUT_S)
                last_answer = time.monotonic()
            except Exception as e:  # noqa: BLE001 - the cluster may be gone
                dispatcher = None
                if not self._client.listening():
                    self._finish(None, JobExecutionException(
                        self._job_id, f"Job '{self._job_name}' ({self._job_id}) failed: the cluster at "
                                      f"cluster://{self._client.host}:{self._client.port} is gone (its actor "
                                      "system admin no longer listens)"), None)
                    return
                if time.monotonic() - last_answer > LOST_CONTACT_S:
                    self._finish(None, JobExecutionException(
                        self._job_id, f"Lost contact with the cluster running job '{self._job_name}' "
                                      f"({self._job_id}): {e}"), None)
                    return
                time.sleep(POLL_INTERVAL_S)
                continue
            if isinstance(report, m.JobStatusReport):
                self._report = report
                if report.result is not None:
                    result, error, cause = cloudpickle.loads(report.result)
                    self._finish(result, error, cause)
                    return
            elif isinstance(report, m.UnknownJob):
                dispatcher = None  # perhaps a new Dispatcher by now: look it up again
                if not report.final:
                    time.sleep(POLL_INTERVAL_S)
                    continue
                why = f": {report.reason}" if report.reason else ""
                self._finish(None, JobExecutionException(
                    self._job_id, f"The cluster no longer knows job '{self._job_name}' ({self._job_id}){why}"), None)
                return
            time.sleep(POLL_INTERVAL_S)

    def _finish(self, result, error, cause) -> None:
        if error is not None and cause is not None:
            error.__cause__ = cause
        if self._collect_server is not None:
            try:
                if error is None:
                    for channel_id in self._collect_channel_ids:
                        problems = self._collect_server.wait_writers_done(channel_id, 30.0)
                        if problems:
                            raise problems[0]
            except Exception as e:  # noqa: BLE001 - results are missing: the job failed for the reader
                error = JobExecutionException(self._job_id, f"Job '{self._job_name}' ({self._job_id}) finished "
                                                            f"but its collected results did not all arrive: {e}")
                error.__cause__ = e
            finally:
                self._collect_server.close()
        if self._collect_channel is not None:
            self._collect_channel.end(None if isinstance(error, JobCancellationException) else error)
        if error is not None:
            self._result.set_exception(error)
        else:
            self._result.set_result(result)

    # -- JobClient ----------------------------------------------------------------------------
    def get_job_id(self) -> str:
        return self._job_id

    def get_cluster_address(self) -> str:
        """``cluster://host:port`` of the cluster running the job."""
        return f"cluster://{self._client.host}:{self._client.port}"

    def get_print_output_file(self) -> Optional[str]:
        """Where the cluster's processes' stdout goes (``print()`` in tasks, Flink's TaskManager
        ``.out`` file): ``cluster-<port>.out`` next to the cluster's log, when the cluster was
        started on this machine with the run directory this process sees; else None."""
        info = read_cluster_info(self._client.port)
        if info is None or info.host != self._client.host:
            return None
        return os.path.splitext(info.log_file)[0] + ".out"

    def get_job_name(self) -> str:
        return self._job_name

    def get_job_status(self) -> JobStatus:
        report = self._report
        return JobStatus[report.status] if report is not None else JobStatus.CREATED

    def cancel(self) -> "concurrent.futures.Future[None]":
        """Cancel the job; the returned future completes when it has stopped."""
        self._client.cancel(self._job_id)
        done: "concurrent.futures.Future[None]" = concurrent.futures.Future()
        self._result.add_done_callback(lambda _f: done.set_result(None))
        return done

    def get_job_execution_result(self) -> "concurrent.futures.Future":
        return self._result

    def trigger_savepoint(self, savepoint_directory: Optional[str] = None) -> "concurrent.futures.Future[str]":
        """As ``JobClient.trigger_savepoint``; the future fails with ``RuntimeError`` naming the
        JobMaster's reason."""
        return self._client.savepoint_future(self._job_id, savepoint_directory)

    def stop_with_savepoint(self, advance_to_end_of_event_time: bool = False,
                            savepoint_directory: Optional[str] = None) -> "concurrent.futures.Future[str]":
        """As ``JobClient.stop_with_savepoint``: done once the job is FINISHED and this client
        has its final report."""
        done: "concurrent.futures.Future[str]" = concurrent.futures.Future()
        savepoint = self._client.savepoint_future(self._job_id, savepoint_directory, bool(advance_to_end_of_event_time))

        def on_savepoint(f: concurrent.futures.Future) -> None:
            if f.exception() is not None:
                done.set_exception(f.exception())
            else:
                self._result.add_done_callback(lambda _r: done.set_result(f.result()))

        savepoint.add_done_callback(on_savepoint)
        return done

    def wait(self, timeout_s: Optional[float] = None) -> JobStatus:
        concurrent.futures.wait([self._result], timeout=timeout_s)
        return self.get_job_status()

    def is_done(self) -> bool:
        return self._result.done()

    def get_execution_states(self) -> Dict[str, ExecutionState]:
        report = self._report
        return {} if report is None else {k: ExecutionState[v] for k, v in report.execution_states.items()}

    def get_metrics(self) -> List:
        report = self._report
        return [] if report is None else list(report.metrics)

    def get_network_memory_segments(self) -> Dict[str, Tuple[int, int]]:
        """``"Name (i/p)"`` → ``(available, total)`` memory segments of the NetworkBufferPool of
        that task's process, as of the latest report (Flink's TaskManager metrics
        ``Status.Shuffle.Netty.AvailableMemorySegments`` / ``TotalMemorySegments``; every
        cluster task has a process of its own). Once a task has ended: as read right before it
        reported its final state, so ``available == total`` there says the task had given every
        buffer back when it reported FINISHED, CANCELED or FAILED. Empty before the first report.
        """
        report = self._report
        return {} if report is None else dict(report.network_memory)

    def get_vertex_summaries(self):
        report = self._report
        return [] if report is None else list(report.vertex_summaries)

    def get_checkpoint_stats(self):
        """The job's ``CheckpointStatsSnapshot`` as of the latest report (the final one once the
        job ended), or ``None`` when checkpointing is off or no report arrived yet."""
        report = self._report
        return None if report is None else report.checkpoint_stats

    def get_backpressure_root_cause(self):
        """The vertex (and subtask) causing backpressure as of the latest report, or None
        (``rill.runtime.rest.backpressure``)."""
        report = self._report
        snap = None if report is None else report.rest_snapshot
        return None if snap is None else find_root_cause(snap)

    def get_source_progress(self) -> Tuple[int, Optional[int]]:
        report = self._report
        return (0, None) if report is None else tuple(report.source_progress)

    def source_units_are_bytes(self) -> bool:
        report = self._report
        return bool(report and report.source_units_are_bytes)

    def get_net_runtime_ms(self) -> Optional[int]:
        report = self._report
        return None if report is None else report.net_runtime_ms

    def get_state(self, uid: str, state_name: str, key, timeout_s: float = 30.0):
        """One key's keyed state in the running job (queryable state), asked through the
        Dispatcher and the JobMaster of the subtask owning the key, which reads it in a mail
        (see :mod:`rill.runtime.cluster.kv_state`); ``None`` if the key has no entry.

        :raises UnknownOperatorUidError, NotKeyedOperatorError, UnknownStateNameError,
            JobNotRunningError: as in embedded mode.
        :raises TimeoutError: if no answer came within ``timeout_s`` seconds.
        """
        return ask_state(self._client, self._job_id, StateQuery.of(uid, state_name, key), timeout_s)


def submit_to_cluster(target: str, job_graph, configuration, job_parameters=None, collect_channel=None):
    """Submit to the cluster named by ``target`` (``cluster`` or ``cluster://host:port``).

    ``cluster`` means the cluster ``rill cluster start`` started on this machine at
    ``jobmanager.rpc.port``.

    :raises ClusterNotRunningError: when no cluster answers.
    """
    from rill.common.configuration import ConfigOptions  # noqa: PLC0415
    host, port = parse_cluster_target(target, configuration.get(ConfigOptions.JOBMANAGER_RPC_PORT))
    if target == "cluster":
        info = read_cluster_info(port)
        if info is None:
            raise ClusterNotRunningError(
                f"execution.target is 'cluster' but no cluster was started on this machine at port {port}: "
                f"run `rill cluster start --port {port}` (or set jobmanager.rpc.port / use cluster://host:port)")
        host = info.host
    from rill.common.configuration import load_configuration  # noqa: PLC0415
    secret = cluster_secret(port, load_configuration(configuration))
    return ClusterClient.for_address(host, port, secret).submit(job_graph, configuration, job_parameters,
                                                                collect_channel)
