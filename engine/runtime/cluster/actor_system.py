"""Starting, joining, reaching and stopping the Thespian actor systems of a Rill cluster.

Settings (measured in NOTES.md to leave nothing behind): the ``multiprocTCPBase`` system base
(every actor in its own process, reachable over TCP), ``THESPIAN_BASE_IPADDR`` set to the bind
host (loopback by default), two patches of Thespian's TCP transport (bind to that host only;
every message signed with the cluster's secret and verified before it is unpickled, see
:mod:`rill.runtime.cluster.auth_transport`), logging to a file
in the cluster's run directory, a chosen admin port (never Thespian's default 1900),
``transientUnique`` handles for clients, and a fresh capabilities dict for every call
(Thespian adds keys to it).

A cluster is described by a :class:`ClusterInfo` file in the run directory
(``$RILL_RUN_DIR``, default ``~/.rill/run``), ``cluster-<port>.json``, readable only by its
owner because it holds the cluster's shared secret: whoever can read it can submit jobs, that
is run code as the cluster's user. Every process of a cluster and every client signs its
actor messages with it (:func:`start_actor_system` and :func:`connect` take it); a process
started by ``rill cluster join`` is given it (``--secret-file``).

Multi-host (Thespian's *convention*): the leader system runs the Dispatcher and the
ResourceManager; a system started on another host with ``Convention Address.IPv4`` pointing at
the leader joins the convention and the ResourceManager creates a TaskExecutor in it (see
:func:`join_cluster`).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import signal
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

__all__ = [
    "ClusterInfo",
    "ClusterNotRunningError",
    "ClusterSecretError",
    "read_secret_file",
    "cluster_secret",
    "max_message_bytes",
    "run_dir",
    "capabilities",
    "start_actor_system",
    "connect",
    "shutdown_actor_system",
    "read_cluster_info",
    "parse_cluster_target",
    "free_port",
    "port_in_use",
    "port_bindable",
    "SYSTEM_BASE",
    "SUPERVISOR_NAME",
    "lock_port",
]

SYSTEM_BASE = "multiprocTCPBase"
SUPERVISOR_NAME = "rill.supervisor"
DEFAULT_PORT = 6123  # Flink's jobmanager.rpc.port


class ClusterNotRunningError(RuntimeError):
    """No cluster answers at the given address."""


class ClusterSecretError(RuntimeError):
    """The cluster's secret cannot be found or read (naming where it was looked for)."""


@dataclass(frozen=True)
class ClusterInfo:
    """What ``rill cluster start`` writes for clients and ``rill cluster stop``.

    :ivar host: the address every cluster socket binds to.
    :ivar port: the actor system's admin port (the cluster's address is ``cluster://host:port``).
    :ivar secret_hex: the cluster's shared secret (hex): signs every actor message and
        authenticates every data and collect connection.
    :ivar admin_pid: pid of the actor system's admin process (the stop backstop).
    :ivar log_file: where the actors log.
    :ivar task_executors: TaskExecutors started with the cluster.
    :ivar slots: slots per TaskExecutor.
    :ivar process_group: the admin's process group (every process of the cluster is in it).
    :ivar admin_start_ticks: the admin's start time in clock ticks since boot.
    :ivar cmdline: the admin's command line (every cluster process shares it); with the two
        above, what :mod:`~rill.runtime.cluster.processes` identifies the cluster's processes by.
    """

    host: str
    port: int
    secret_hex: str
    admin_pid: int
    log_file: str
    task_executors: int
    slots: int
    process_group: int = 0
    admin_start_ticks: int = 0
    cmdline: str = ""

    @property
    def identity(self):
        """The :class:`~rill.runtime.cluster.processes.ProcessIdentity` of the cluster's
        processes, or ``None`` for a record written without one."""
        from rill.runtime.cluster.processes import ProcessIdentity  # noqa: PLC0415
        if not self.process_group or not self.cmdline:
            return None
        return ProcessIdentity(self.process_group, self.admin_start_ticks, self.cmdline)

    @property
    def secret(self) -> bytes:
        return bytes.fromhex(self.secret_hex)

    @property
    def address(self) -> str:
        return f"cluster://{self.host}:{self.port}"


def run_dir() -> Path:
    """``$RILL_RUN_DIR`` or ``~/.rill/run`` (created)."""
    path = Path(os.environ.get("RILL_RUN_DIR") or Path.home() / ".rill" / "run")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _info_path(port: int) -> Path:
    return run_dir() / f"cluster-{port}.json"


def write_cluster_info(info: ClusterInfo) -> Path:
    path = _info_path(info.port)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # O_CREAT's mode does not apply to a file that already existed
    with os.fdopen(fd, "w") as f:
        json.dump(asdict(info), f, indent=2)
    return path


def read_cluster_info(port: int) -> Optional[ClusterInfo]:
    """The cluster started on this machine at ``port``, or ``None`` if there is no file."""
    path = _info_path(port)
    if not path.is_file():
        return None
    return ClusterInfo(**json.loads(path.read_text()))


def read_secret_file(path) -> bytes:
    """The cluster secret held in ``path``: a ``cluster-<port>.json`` that ``rill cluster start``
    wrote (its ``secret_hex``), or the secret alone in hex.

    :raises ClusterSecretError: when the file is missing or unreadable, readable by group or
        others (as ssh refuses such a key), or holds no secret of at least 16 bytes.
    """
    path = Path(path).expanduser()
    try:
        mode = path.stat().st_mode & 0o777
        text = path.read_text().strip()
    except OSError as e:
        raise ClusterSecretError(f"Cannot read the cluster secret file {path}: {e.strerror or e}") from e
    if mode & 0o077:
        raise ClusterSecretError(f"The cluster secret file {path} has mode {mode:o}: it must not be readable by "
                                 f"group or others (chmod 600 {path})")
    try:
        hex_text = json.loads(text)["secret_hex"] if text.startswith("{") else text
        secret = bytes.fromhex(hex_text)
    except (ValueError, KeyError, TypeError) as e:
        raise ClusterSecretError(f"The cluster secret file {path} holds neither a cluster-<port>.json with "
                                 f"'secret_hex' nor a hex secret ({e})") from e
    if len(secret) < 16:
        raise ClusterSecretError(f"The cluster secret in {path} is {len(secret)} bytes; at least 16 are needed")
    return secret


def cluster_secret(port: int, configuration=None) -> bytes:
    """The secret of the cluster at ``port``: from ``security.cluster.secret-file`` when set,
    else from this machine's run directory (``cluster-<port>.json``).

    :raises ClusterSecretError: when neither is there or the file is unusable.
    """
    from rill.common.configuration import ConfigOptions, load_configuration  # noqa: PLC0415
    conf = configuration if configuration is not None else load_configuration()
    secret_file = conf.get(ConfigOptions.SECURITY_CLUSTER_SECRET_FILE)
    if secret_file:
        return read_secret_file(secret_file)
    path = _info_path(port)
    if not path.is_file():
        raise ClusterSecretError(
            f"No secret for the cluster at port {port}: {path} does not exist. Copy the leader's "
            f"cluster-{port}.json (mode 600) and set {ConfigOptions.SECURITY_CLUSTER_SECRET_FILE.key} "
            f"(or {ConfigOptions.SECURITY_CLUSTER_SECRET_FILE.env_var}) to it")
    return read_secret_file(path)


def max_message_bytes(configuration=None) -> int:
    """``cluster.rpc.max-message-size`` in bytes (a number or a size such as ``'256mb'``).

    :raises ValueError: for a value that is not a size or is below 1 KiB.
    """
    from rill.common.configuration import ConfigOptions, load_configuration  # noqa: PLC0415
    from rill.runtime.taskmanager.network_environment import parse_memory_size  # noqa: PLC0415
    conf = configuration if configuration is not None else load_configuration()
    option = ConfigOptions.CLUSTER_RPC_MAX_MESSAGE_SIZE
    raw = conf.get_string(option.key)
    value = option.default if raw is None else parse_memory_size(raw, option.key)
    if value < 1024:
        raise ValueError(f"'{option.key}' must be at least 1024 bytes, got {raw!r}")
    return value


def remove_cluster_info(port: int) -> None:
    _info_path(port).unlink(missing_ok=True)


def lock_port(port: int):
    """Take the run directory's exclusive lock for ``port`` (``cluster-<port>.lock``): one
    ``rill cluster start``/``join`` per port at a time. Returns the open lock file (the lock
    lasts until it is closed or the process exits).

    :raises RuntimeError: when another start holds the lock.
    """
    import fcntl  # noqa: PLC0415

    f = open(run_dir() / f"cluster-{port}.lock", "a")  # noqa: SIM115 - held by the caller
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        raise RuntimeError(f"Another `rill cluster start` (or join) on port {port} is in progress: "
                           "wait for it, then see `rill cluster status"
                           f"{'' if port == DEFAULT_PORT else f' --port {port}'}`") from None
    return f


def port_in_use(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """Whether something accepts TCP connections at ``host:port``."""
    return _port_in_use(host, port, timeout_s)


def port_bindable(host: str, port: int) -> bool:
    """Whether this process could listen on ``host:port`` now -- found out by binding, so
    that a server already listening there is not even connected to."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def parse_cluster_target(target: str, default_port: int) -> Tuple[str, int]:
    """``"cluster"`` → (``127.0.0.1``, ``default_port``); ``"cluster://host:port"`` → (host, port).

    :raises ValueError: for any other form, naming the accepted ones.
    """
    if target == "cluster":
        return "127.0.0.1", default_port
    if target.startswith("cluster://"):
        rest = target[len("cluster://"):]
        host, sep, port = rest.rpartition(":")
        if sep and host and port.isdigit() and 0 < int(port) < 65536:
            return host, int(port)
    raise ValueError(
        f"Invalid execution target {target!r}: use 'embedded', 'cluster' (the cluster started on "
        "this machine) or 'cluster://host:port'")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free at the time of the call (for tests and ``--port 0``)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


#: The cluster log's line format.
LOG_FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s %(message)s"


def cluster_log_level() -> int:
    """The level of ``cluster.log-level`` (a ``logging`` level number).

    :raises ValueError: naming the key and the value when the level is not a logging level.
    """
    from rill.common.configuration import ConfigOptions, load_configuration  # noqa: PLC0415
    name = str(load_configuration().get(ConfigOptions.CLUSTER_LOG_LEVEL)).upper()
    level = logging.getLevelName(name)
    if not isinstance(level, int):
        raise ValueError(f"{ConfigOptions.CLUSTER_LOG_LEVEL.key}: '{name}' is not a logging level "
                         "(DEBUG, INFO, WARNING, ERROR, CRITICAL)")
    return level


def _log_defs(log_file: str) -> Dict[str, Any]:
    """Thespian's ``logDefs``: every actor's records into ``log_file`` at ``cluster.log-level``.

    :raises ValueError: naming the key and the value when the level is not a logging level.
    """
    level = cluster_log_level()
    return {
        "version": 1,
        "formatters": {"plain": {"format": LOG_FORMAT}},
        # the level on the handler too: records from actor processes reach it unfiltered
        "handlers": {"file": {"class": "logging.FileHandler", "filename": log_file, "formatter": "plain",
                              "level": level}},
        "root": {"handlers": ["file"], "level": level},
    }


def _bind_to_base_address() -> None:
    """Make Thespian's TCP sockets listen on the base address only.

    Thespian binds every externally reachable address (the admin's and every actor's) to all
    interfaces (``('', port)``) whatever ``THESPIAN_BASE_IPADDR`` says; a cluster must only be
    reachable where it was asked to be (loopback by default). Actor processes fork from the
    process that started the system, so patching here covers them all. Idempotent.
    """
    from thespian.system.transport import IPBase  # noqa: PLC0415

    cls = IPBase.IPActorAddress
    if getattr(cls, "_rill_bind_patched", False):
        return
    original = cls.__init__

    def __init__(self, *args, **kwargs):  # noqa: N807 - replaces Thespian's __init__
        original(self, *args, **kwargs)
        if self.bindname[0] == "" and os.environ.get("THESPIAN_BASE_IPADDR"):
            self.bindname = self.sockname

    cls.__init__ = __init__
    cls._rill_bind_patched = True


def _prepare_env(host: str, log_file: Optional[str], secret: bytes, max_bytes: int) -> None:
    from rill.runtime.cluster import auth_transport  # noqa: PLC0415 - imports thespian

    os.environ["THESPIAN_BASE_IPADDR"] = host
    _bind_to_base_address()
    # before the ActorSystem exists: its admin and every actor process fork from here
    auth_transport.install(secret, max_bytes, log_file, LOG_FORMAT)
    if log_file is not None:
        os.environ.setdefault("THESPLOG_FILE", log_file + ".thespian")


def capabilities(port: int, extra: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """A fresh capabilities dict for the system at ``port`` (Thespian mutates the dict)."""
    caps: Dict[str, Any] = {"Admin Port": int(port), "rill": True}
    caps.update(extra or {})
    return caps


def start_actor_system(host: str, port: int, log_file: str, extra_capabilities: Optional[Dict[str, Any]] = None,
                       *, secret: bytes, max_bytes: Optional[int] = None):
    """Start a new actor system whose admin listens on ``host:port``; it outlives the caller.

    :param secret: the cluster's secret: every process of the system signs its messages with
        it and refuses messages that do not verify (see :mod:`~rill.runtime.cluster.auth_transport`).
    :param max_bytes: ``cluster.rpc.max-message-size`` (default: from the configuration).
    :raises RuntimeError: if a system already answers on that port (Thespian would silently
        join it).
    :raises ValueError: for a secret shorter than 16 bytes.
    """
    from thespian.actors import ActorSystem  # noqa: PLC0415 - slow import, only for cluster mode

    if _port_in_use(host, port):
        raise RuntimeError(f"Port {port} on {host} is in use: is a cluster already running there? "
                           f"(`rill cluster status --port {port}`)")
    _prepare_env(host, log_file, secret, max_message_bytes() if max_bytes is None else max_bytes)
    # the admin and every actor fork from here and keep every inherited file descriptor:
    # callers that read this process' output through a pipe run it detached (see cluster_cli)
    return ActorSystem(SYSTEM_BASE, capabilities(port, extra_capabilities), logDefs=_log_defs(log_file),
                       transientUnique=True)


def connect(host: str, port: int, timeout_s: float = 5.0, secret: Optional[bytes] = None):
    """A handle on the running actor system at ``host:port`` (a transient external endpoint,
    which signs with ``secret`` for as long as it lives).

    :param secret: the cluster's secret (default: :func:`cluster_secret` of ``port``).
    :raises ClusterNotRunningError: when nothing listens there.
    :raises ClusterSecretError: when no secret is given and none is found, or the system there
        does not accept this process (wrong secret).
    """
    from thespian.actors import ActorSystem  # noqa: PLC0415

    if not _port_in_use(host, port, timeout_s):
        raise ClusterNotRunningError(
            f"No Rill cluster at cluster://{host}:{port}: start one with `rill cluster start --port {port}`")
    from thespian.actors import InvalidActorAddress  # noqa: PLC0415

    _prepare_env(host, None, cluster_secret(port) if secret is None else secret, max_message_bytes())
    try:
        return ActorSystem(SYSTEM_BASE, capabilities(port), logDefs=_log_defs(os.devnull), transientUnique=True)
    except InvalidActorAddress as e:  # a cluster answers nothing to a peer whose messages it refuses
        raise ClusterSecretError(
            f"The process at cluster://{host}:{port} did not answer as a Rill cluster: it refused this process' "
            "secret (the cluster's log names the refused address), or it is not a Rill cluster") from e


def _port_in_use(host: str, port: int, timeout_s: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def admin_pid(host: str, port: int) -> Optional[int]:
    """The pid of the process listening on ``host:port`` on this machine (from /proc), if any."""
    inode = None
    want = f"{socket.inet_aton(host)[::-1].hex().upper()}:{port:04X}"
    try:
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            parts = line.split()
            if parts[1] == want and parts[3] == "0A":  # LISTEN
                inode = parts[9]
                break
    except OSError:
        return None
    if inode is None:
        return None
    target = f"socket:[{inode}]"
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            for fd in (pid_dir / "fd").iterdir():
                if os.readlink(fd) == target:
                    return int(pid_dir.name)
        except OSError:
            continue
    return None


def shutdown_actor_system(host: str, port: int, pid: Optional[int] = None, timeout_s: float = 15.0,
                          secret: Optional[bytes] = None) -> bool:
    """Shut the system at ``host:port`` down (every actor process exits), then make sure its
    admin process ``pid`` and that process' children are gone (SIGTERM, then SIGKILL).

    :param secret: the cluster's secret (default: :func:`cluster_secret` of ``port``); without
        one the system cannot be asked, and only the pid backstop runs.
    :returns: whether a running system was found.
    """
    found = _port_in_use(host, port)
    if found:
        try:
            connect(host, port, secret=secret).shutdown()
        except Exception:  # noqa: BLE001 - the backstop below still runs
            logging.getLogger(__name__).warning("actor system shutdown at %s:%s failed", host, port, exc_info=True)
    if pid is not None:
        _kill_tree(pid, timeout_s)
    deadline = time.monotonic() + timeout_s
    while _port_in_use(host, port, 0.2) and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def _children(pid: int):
    out = []
    for pid_dir in Path("/proc").iterdir():
        if pid_dir.name.isdigit():
            try:
                stat = (pid_dir / "stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(pid_dir.name))
            except (OSError, ValueError, IndexError):
                continue
    return out


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _kill_tree(pid: int, timeout_s: float) -> None:
    pids = [pid]
    frontier = [pid]
    while frontier:
        nxt = []
        for p in frontier:
            nxt.extend(_children(p))
        pids.extend(nxt)
        frontier = nxt
    deadline = time.monotonic() + min(timeout_s, 5.0)
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in pids:
            if _alive(p):
                try:
                    os.kill(p, sig)
                except OSError:
                    pass
        end = time.monotonic() + 2.0
        while any(_alive(p) for p in pids) and time.monotonic() < end:
            time.sleep(0.05)


def new_secret() -> bytes:
    return secrets.token_bytes(32)
