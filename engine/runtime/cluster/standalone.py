"""Starting, joining, inspecting and stopping a local cluster (Flink's standalone cluster
scripts ``start-cluster.sh`` / ``taskmanager.sh start`` / ``stop-cluster.sh``), used by the
``rill cluster`` command.

A cluster is one Thespian actor system (the leader: a supervisor that keeps the Dispatcher and
the ResourceManager alive, and the TaskExecutors started with it) plus, optionally, member
systems that joined its convention, each contributing one TaskExecutor -- on other hosts, or
on this one at other ports. When the configuration sets ``rest.port``, the cluster's REST
endpoint process starts with it and stops with it (``rill.runtime.rest.cluster_endpoint``).

``stop`` and ``status`` act only on processes they can identify as the cluster's from what
``start`` recorded (see :mod:`~rill.runtime.cluster.processes`): never on whatever else listens
on the port.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import List, Optional

from rill.common.configuration import ConfigOptions, Configuration, load_configuration
from rill.runtime.cluster import messages as m
from rill.runtime.cluster import processes
from rill.runtime.cluster.actor_system import (
    SUPERVISOR_NAME,
    ClusterInfo,
    ClusterNotRunningError,
    ClusterSecretError,
    admin_pid,
    connect,
    max_message_bytes,
    new_secret,
    read_cluster_info,
    remove_cluster_info,
    run_dir,
    shutdown_actor_system,
    start_actor_system,
    write_cluster_info,
)
from rill.runtime.rest.cluster_endpoint import spawn_endpoint, stop_endpoint
from rill.runtime.rest.options import RestEndpointConfig

__all__ = ["start_cluster", "join_cluster", "stop_cluster", "cluster_overview", "cluster_state", "ClusterState"]


def start_cluster(task_executors: int, slots: int, port: Optional[int] = None, host: Optional[str] = None,
                  configuration: Optional[Configuration] = None, timeout_s: float = 60.0) -> ClusterInfo:
    """Start the leader actor system with ``task_executors`` TaskExecutors of ``slots`` slots
    each and wait until all have registered; the cluster outlives the caller.

    :raises ValueError: for fewer than 0 TaskExecutors or 1 slot.
    :raises RuntimeError: if the port is taken or the TaskExecutors do not register in time.
    """
    if task_executors < 0 or slots < 1:
        raise ValueError(f"A cluster needs --task-executors >= 0 and --slots >= 1, got {task_executors} "
                         f"and {slots}")
    conf = load_configuration(configuration)
    port = conf.get(ConfigOptions.JOBMANAGER_RPC_PORT) if port is None else port
    host = host or conf.get(ConfigOptions.TASKMANAGER_HOST)
    log_file = str(run_dir() / f"cluster-{port}.log")
    secret = new_secret()  # before the actor system: its processes fork with it
    system = start_actor_system(host, port, log_file, secret=secret, max_bytes=max_message_bytes(conf))
    from rill.runtime.cluster.supervisor import ClusterSupervisorActor  # noqa: PLC0415
    try:
        supervisor = system.createActor(ClusterSupervisorActor, globalName=SUPERVISOR_NAME)
        leaders = _ask(system, supervisor, m.InitSupervisor(
            secret, conf.get(ConfigOptions.HEARTBEAT_INTERVAL), conf.get(ConfigOptions.HEARTBEAT_TIMEOUT),
            task_executors, slots, host))
        _wait_registered(system, leaders.resource_manager, task_executors, timeout_s)
    except BaseException:
        system.shutdown()
        raise
    info = _with_identity(ClusterInfo(host, port, secret.hex(), admin_pid(host, port) or 0, log_file,
                                      task_executors, slots))
    write_cluster_info(info)
    if RestEndpointConfig.is_requested(conf):  # the REST API: a process of its own (rest.cluster_endpoint)
        try:
            spawn_endpoint(host, port, conf)
        except BaseException:
            stop_cluster(port, host)
            raise
    return info


def _with_identity(info: ClusterInfo) -> ClusterInfo:
    """``info`` with its admin's process identity (what stop and status identify it by)."""
    identity = processes.identify(info.admin_pid) if info.admin_pid else None
    if identity is None:
        return info
    return ClusterInfo(**{**info.__dict__, "process_group": identity.process_group,
                          "admin_start_ticks": identity.start_ticks, "cmdline": identity.cmdline})


def join_cluster(leader_host: str, leader_port: int, port: int, slots: int, resource_id: Optional[str] = None,
                 host: str = "127.0.0.1", timeout_s: float = 60.0, *, secret: bytes,
                 configuration: Optional[Configuration] = None) -> ClusterInfo:
    """Start a member actor system at ``host:port`` that joins the convention led by
    ``leader_host:leader_port``; the leader's ResourceManager creates a TaskExecutor with
    ``slots`` slots in it. Returns once it has registered.

    :param secret: the leader's cluster secret (``rill cluster join --secret-file``): the
        member signs with it, and the leader refuses a member without it.
    :raises ClusterNotRunningError: when no leader answers (also when it refuses ``secret``:
        it then sends nothing back).
    :raises ClusterSecretError: for a missing secret.
    """
    if not secret:
        raise ClusterSecretError("Joining a cluster needs its secret (rill cluster join --secret-file FILE)")
    from rill.runtime.cluster.supervisor import ClusterSupervisorActor  # noqa: PLC0415
    max_bytes = max_message_bytes(load_configuration(configuration))
    leader_system = connect(leader_host, leader_port, secret=secret)
    supervisor = leader_system.createActor(ClusterSupervisorActor, globalName=SUPERVISOR_NAME)
    rm = _ask(leader_system, supervisor, m.RequestLeaders()).resource_manager
    resource_id = resource_id or f"taskexecutor-{host}-{port}"
    log_file = str(run_dir() / f"cluster-{port}.log")
    start_actor_system(host, port, log_file, {
        "Convention Address.IPv4": (leader_host, leader_port),
        "rill.task_executor": resource_id, "rill.slots": slots, "rill.host": host,
    }, secret=secret, max_bytes=max_bytes)
    deadline = time.monotonic() + timeout_s
    while True:
        overview = _ask(leader_system, rm, m.RequestClusterOverview())
        if any(te[0] == resource_id for te in overview.task_executors):
            break
        if time.monotonic() > deadline:
            shutdown_actor_system(host, port, admin_pid(host, port), secret=secret)
            raise RuntimeError(f"TaskExecutor {resource_id} at {host}:{port} did not register with the cluster at "
                               f"{leader_host}:{leader_port} within {timeout_s} s")
        time.sleep(0.1)
    info = _with_identity(ClusterInfo(host, port, secret.hex(), admin_pid(host, port) or 0, log_file, 1, slots))
    write_cluster_info(info)
    return info


@dataclass(frozen=True)
class ClusterState:
    """What this machine can tell about the cluster recorded at a port, without asking it.

    :ivar info: the record ``rill cluster start`` wrote (``None``: none in the run directory).
    :ivar pids: the live processes identified as the cluster's.
    :ivar admin_running: whether the recorded admin is one of them.
    :ivar listener: the pid listening on the port, if any (the cluster's admin or a stranger).
    """

    port: int
    info: Optional[ClusterInfo]
    pids: List[int]
    admin_running: bool
    listener: Optional[int]

    @property
    def foreign_listener(self) -> Optional[int]:
        """The pid of a process that is not the cluster's and listens on its port."""
        return self.listener if self.listener is not None and self.listener not in self.pids else None


def cluster_state(port: int, host: Optional[str] = None) -> ClusterState:
    """Identify the processes of the cluster recorded at ``port`` (see :mod:`processes`)."""
    info = read_cluster_info(port)
    host = host or (info.host if info else "127.0.0.1")
    identity = info.identity if info else None
    pids = processes.members(identity) if identity else []
    listener = admin_pid(host, port)
    return ClusterState(port, info, pids, bool(info and info.admin_pid in pids), listener)


def stop_cluster(port: int, host: Optional[str] = None) -> List[int]:
    """Stop the cluster recorded at ``port``: its REST endpoint process if it has one, then ask
    its actor system to shut down (every actor process exits), then end any of its identified
    processes left, and remove its record. Nothing that cannot be identified as the cluster's is
    sent a message or a signal.

    :returns: the pids of the cluster's processes that were running.
    :raises ClusterNotRunningError: when no cluster is recorded at ``port`` (naming the process
        that listens there, if any, which is left alone), or the record predates process
        identities and its admin is not the process listening on the port.
    """
    state = cluster_state(port, host)
    info = state.info
    where = f"port {port}"
    if info is None:
        if state.listener is not None:
            raise ClusterNotRunningError(
                f"No Rill cluster was started at {where} from this run directory ({run_dir()}): the process "
                f"listening there (pid {state.listener}) is not one, and was left alone")
        raise ClusterNotRunningError(f"No Rill cluster is running at {where}: nothing to stop")
    if info.identity is None:
        raise ClusterNotRunningError(
            f"The record of the cluster at {where} ({run_dir()}/cluster-{port}.json) holds no process identity "
            "(written by an older Rill): stop its processes by hand, then remove the record")
    host = host or info.host
    running = list(state.pids)
    stop_endpoint(port)
    if state.admin_running and state.listener == info.admin_pid:
        try:
            connect(host, port, secret=info.secret).shutdown()
        except Exception:  # noqa: BLE001 - the signals below still end it
            pass
    processes.terminate(info.identity)
    remove_cluster_info(port)
    if state.foreign_listener is not None:
        raise ClusterNotRunningError(
            f"Stopped {len(running)} process(es) of the cluster recorded at {where}, but the process listening "
            f"on the port (pid {state.foreign_listener}) is not the cluster's and was left alone")
    return running


def cluster_overview(port: int, host: Optional[str] = None) -> m.ClusterOverview:
    """TaskExecutors and jobs of the cluster at ``port``.

    :raises ClusterNotRunningError: when none answers.
    """
    from rill.runtime.cluster.client import ClusterClient  # noqa: PLC0415
    info = read_cluster_info(port)
    host = host or (info.host if info else "127.0.0.1")
    return ClusterClient.for_address(host, port).overview()


def _ask(system, target, message, timeout_s: float = 30.0):
    reply = system.ask(target, message, timeout_s)
    if reply is None:
        raise ClusterNotRunningError(f"No reply to {type(message).__name__} within {timeout_s} s")
    return reply


def _wait_registered(system, rm, count: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        overview = _ask(system, rm, m.RequestClusterOverview())
        if len(overview.task_executors) >= count:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"Only {len(overview.task_executors)} of {count} TaskExecutors registered within "
                               f"{timeout_s} s")
        time.sleep(0.05)
