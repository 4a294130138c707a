"""Starting, joining, inspecting and stopping a local cluster (Flink's standalone cluster
scripts ``start-cluster.sh`` / ``taskmanager.sh start`` / ``stop-cluster.sh``), used by the
``rill cluster`` command.

A cluster is one Thespian actor system (the leader: Dispatcher, ResourceManager and the
TaskExecutors started with it) plus, optionally, member systems that joined its convention,
each contributing one TaskExecutor -- on other hosts, or on this one at other ports. When the
configuration sets ``rest.port``, the cluster's REST endpoint process starts with it and stops
with it (``rill.runtime.rest.cluster_endpoint``).
"""

from __future__ import annotations

import time
from typing import Optional

from rill.common.configuration import ConfigOptions, Configuration, load_configuration
from rill.runtime.cluster import messages as m
from rill.runtime.cluster.actor_system import (
    DISPATCHER_NAME,
    RESOURCE_MANAGER_NAME,
    ClusterInfo,
    ClusterNotRunningError,
    ClusterSecretError,
    admin_pid,
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

__all__ = ["start_cluster", "join_cluster", "stop_cluster", "cluster_overview"]


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
    from rill.runtime.cluster.dispatcher import DispatcherActor  # noqa: PLC0415
    from rill.runtime.cluster.resource_manager import ResourceManagerActor  # noqa: PLC0415
    try:
        rm = system.createActor(ResourceManagerActor, globalName=RESOURCE_MANAGER_NAME)
        _ask(system, rm, m.InitResourceManager(conf.get(ConfigOptions.HEARTBEAT_INTERVAL),
                                               conf.get(ConfigOptions.HEARTBEAT_TIMEOUT)))
        dispatcher = system.createActor(DispatcherActor, globalName=DISPATCHER_NAME)
        _ask(system, dispatcher, m.InitDispatcher(rm, secret))
        _ask(system, rm, m.StartTaskExecutors(task_executors, slots, host))
        _wait_registered(system, rm, task_executors, timeout_s)
    except BaseException:
        system.shutdown()
        raise
    info = ClusterInfo(host, port, secret.hex(), admin_pid(host, port) or 0, log_file, task_executors, slots)
    write_cluster_info(info)
    if RestEndpointConfig.is_requested(conf):  # the REST API: a process of its own (rest.cluster_endpoint)
        try:
            spawn_endpoint(host, port, conf)
        except BaseException:
            stop_cluster(port, host)
            raise
    return info


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
    from rill.runtime.cluster.actor_system import connect  # noqa: PLC0415
    from rill.runtime.cluster.resource_manager import ResourceManagerActor  # noqa: PLC0415
    max_bytes = max_message_bytes(load_configuration(configuration))
    leader_system = connect(leader_host, leader_port, secret=secret)
    rm = leader_system.createActor(ResourceManagerActor, globalName=RESOURCE_MANAGER_NAME)
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
    info = ClusterInfo(host, port, secret.hex(), admin_pid(host, port) or 0, log_file, 1, slots)
    write_cluster_info(info)
    return info


def stop_cluster(port: int, host: Optional[str] = None) -> bool:
    """Stop the actor system at ``port`` (every actor process exits) and forget it.

    :returns: whether a running cluster was found.
    """
    info = read_cluster_info(port)
    host = host or (info.host if info else "127.0.0.1")
    stop_endpoint(port)
    found = shutdown_actor_system(host, port, info.admin_pid if info and info.admin_pid else admin_pid(host, port),
                                  secret=info.secret if info and info.secret_hex else None)
    remove_cluster_info(port)
    return found


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
