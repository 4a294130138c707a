"""``Configuration``: string key/value settings (Flink's ``Configuration``), and the options
Rill understands with their Flink keys and defaults.

Precedence (lowest first): the option's default, the config file (``$RILL_CONF_DIR/config.yaml``
or ``~/.rill/config.yaml`` when present, flat ``key: value`` lines), ``RILL_*`` environment
variables (``RILL_PARALLELISM_DEFAULT`` for ``parallelism.default``), the program's
Configuration.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

__all__ = ["Configuration", "ConfigOption", "ConfigOptions", "load_configuration"]


#: key -> ConfigOption, for every option defined so far (in the order defined)
_DEFINED_OPTIONS: Dict[str, "ConfigOption"] = {}


@dataclass(frozen=True)
class ConfigOption:
    """One setting: its key, default and description (Flink's ``ConfigOption``).

    :ivar deprecated_keys: older keys read when ``key`` is not set, first match wins (Flink's
        ``withDeprecatedKeys``), so configurations written for older versions keep working.
    """

    key: str
    default: Any
    description: str
    deprecated_keys: Tuple[str, ...] = ()

    def __post_init__(self):
        # every option defined (ConfigOptions and the option groups: checkpointing, restart
        # strategies) can be set through its RILL_* variable, see load_configuration
        _DEFINED_OPTIONS.setdefault(self.key, self)

    @property
    def env_var(self) -> str:
        return "RILL_" + self.key.upper().replace(".", "_").replace("-", "_")


class ConfigOptions:
    """The options Rill understands, with Flink's keys and defaults (``ConfigOption`` each)."""

    PARALLELISM_DEFAULT = ConfigOption("parallelism.default", 1, "Default parallelism of operators.")
    MAX_PARALLELISM = ConfigOption("pipeline.max-parallelism", -1, "Default max parallelism (-1: Flink's rule).")
    OPERATOR_CHAINING = ConfigOption("pipeline.operator-chaining.enabled", True, "Chain operators where possible.")
    BUFFER_TIMEOUT = ConfigOption(
        "execution.buffer-timeout", 100,
        "Max ms a partly filled output buffer waits before it is flushed; 0 flushes after "
        "every record, -1 only when full.")
    RECORDS_PER_BUFFER = ConfigOption(
        "taskmanager.network.records-per-buffer", 1024,
        "Records per in-process network buffer (Rill: local buffers hold record batches, "
        "not serialized bytes).")
    BUFFERS_PER_CHANNEL = ConfigOption(
        "taskmanager.network.memory.buffers-per-channel", 2, "Exclusive buffers per channel.")
    FLOATING_BUFFERS_PER_GATE = ConfigOption(
        "taskmanager.network.memory.floating-buffers-per-gate", 8, "Floating buffers per gate.")
    NETWORK_MEMORY_MAX = ConfigOption(
        "taskmanager.memory.network.max", 64 * 1024 * 1024,
        "Network memory of a TaskExecutor in bytes (or a size such as '64mb'): the budget of "
        "network buffers (NetworkBufferPool), in segments of taskmanager.memory.segment-size. "
        "A local buffer (a batch of up to records-per-buffer records) counts as one segment. "
        "A task that cannot get its minimum buffers fails at deployment.")
    MEMORY_SEGMENT_SIZE = ConfigOption(
        "taskmanager.memory.segment-size", 32 * 1024,
        "Size of one network memory segment in bytes (or a size such as '32kb').")
    SOURCE_BATCH_SIZE = ConfigOption(
        "rill.source.batch-size", 1024, "Records a source emits per mailbox default action.")
    EXECUTION_TARGET = ConfigOption(
        "execution.target", "embedded",
        "embedded | cluster (the cluster `rill cluster start` started on this machine) | cluster://host:port.")
    JOBMANAGER_RPC_PORT = ConfigOption(
        "jobmanager.rpc.port", 6123,
        "Port of the cluster's actor system (its address is cluster://host:port).")
    TASKMANAGER_HOST = ConfigOption(
        "taskmanager.host", "127.0.0.1",
        "Address cluster sockets (actors, data plane) bind to; loopback unless set.")
    NUM_TASK_SLOTS = ConfigOption("taskmanager.numberOfTaskSlots", 1, "Slots per TaskExecutor.")
    CLUSTER_LOG_LEVEL = ConfigOption(
        "cluster.log-level", "INFO",
        "Level of the cluster log (cluster-<port>.log): INFO has one line per job event, DEBUG adds "
        "per-task deployment details (Flink sets this in log4j's configuration).")
    NETWORK_CREDIT_MODEL = ConfigOption(
        "taskmanager.network.credit-model", True,
        "Credit-based flow control between processes (false: send without credit on the shared "
        "connection, as before Flink 1.5; for experiments).")
    NETWORK_COMPRESSION = ConfigOption(
        "taskmanager.network.compression.enabled", False, "lz4-compress buffers sent between processes.")
    NETWORK_MAX_PAYLOAD_SIZE = ConfigOption(
        "taskmanager.network.max-payload-size", 64 * 1024 * 1024,
        "Largest serialized buffer (or event) in bytes a channel between processes accepts; a "
        "larger one fails the job naming the channel (Rill; Flink spills large records instead).")
    TASK_GC_THRESHOLDS = ConfigOption(
        "taskmanager.python.gc-thresholds", "10000,10,10",
        "CPython garbage-collector thresholds (gc.set_threshold: generation 0[,1[,2]]) of every "
        "task process on a cluster, or 'default' for CPython's 700,10,10 (Rill; what JVM GC "
        "options are to a Flink TaskManager). The embedded mode leaves the caller's collector alone.")
    TASK_PROCESS_POOL_SIZE = ConfigOption(
        "taskmanager.python.task-process-pool.size", 1,
        "Task processes each TaskExecutor of a cluster keeps started and ready, never used by a "
        "job, so that a deployment or a restart takes one instead of waiting for a new process "
        "(refilled in the background; 0: none). Rill's stand-in for Flink running a task as a "
        "thread of a TaskManager that is already up; read by the TaskExecutor when it starts.")
    HEARTBEAT_INTERVAL = ConfigOption("heartbeat.interval", 1000, "ms between TaskExecutor heartbeats.")
    HEARTBEAT_TIMEOUT = ConfigOption(
        "heartbeat.timeout", 50000, "ms without a heartbeat after which a TaskExecutor is lost.")
    AUTO_WATERMARK_INTERVAL = ConfigOption(
        "pipeline.auto-watermark-interval", 200,
        "ms of processing time between periodic watermark emissions (0: none).")
    CLUSTER_RPC_MAX_MESSAGE_SIZE = ConfigOption(
        "cluster.rpc.max-message-size", 256 * 1024 * 1024,
        "Largest control message (an actor message: job graph, deployment descriptor, status) in "
        "bytes (or a size such as '256mb') a cluster process or client sends or accepts; a larger "
        "incoming length header is refused before anything is buffered (Flink's pekko.framesize). "
        "Set the same value on every host and client of a cluster.")
    SECURITY_CLUSTER_SECRET_FILE = ConfigOption(
        "security.cluster.secret-file", "",
        "File holding the cluster's secret (the cluster-<port>.json that `rill cluster start` "
        "writes, or the secret in hex), for clients and `rill cluster join` on hosts whose run "
        "directory does not have it; must not be readable by group or others.")


class Configuration:
    """A mutable map of string keys to values with typed getters (PyFlink's
    ``pyflink.common.Configuration``)."""

    def __init__(self, other: Optional["Configuration"] = None):
        self._data: Dict[str, Any] = dict(other._data) if other is not None else {}

    @classmethod
    def from_dict(cls, settings: Dict[str, Any]) -> "Configuration":
        """A Configuration of ``settings`` (key -> value, stored as strings as ``set_string``
        does): the inverse of :meth:`to_dict`."""
        conf = cls()
        for key, value in settings.items():
            conf.set_string(key, str(value))
        return conf

    def set_string(self, key: str, value: str) -> "Configuration":
        self._data[key] = str(value)
        return self

    def get_string(self, key: str, default_value: Optional[str] = None) -> Optional[str]:
        v = self._data.get(key)
        return default_value if v is None else str(v)

    def set_integer(self, key: str, value: int) -> "Configuration":
        self._data[key] = int(value)
        return self

    def get_integer(self, key: str, default_value: int = 0) -> int:
        v = self._data.get(key)
        return default_value if v is None else int(v)

    def set_boolean(self, key: str, value: bool) -> "Configuration":
        self._data[key] = bool(value)
        return self

    def get_boolean(self, key: str, default_value: bool = False) -> bool:
        v = self._data.get(key)
        if v is None:
            return default_value
        if isinstance(v, str):
            return v.strip().lower() in ("true", "1", "yes")
        return bool(v)

    def set_float(self, key: str, value: float) -> "Configuration":
        self._data[key] = float(value)
        return self

    def get_float(self, key: str, default_value: float = 0.0) -> float:
        v = self._data.get(key)
        return default_value if v is None else float(v)

    def contains_key(self, key: str) -> bool:
        return key in self._data

    def remove_config(self, key: str) -> bool:
        return self._data.pop(key, None) is not None

    def key_set(self):
        return set(self._data)

    def add_all(self, other: "Configuration") -> "Configuration":
        self._data.update(other._data)
        return self

    def to_dict(self) -> Dict[str, str]:
        return {k: str(v) for k, v in self._data.items()}

    def get_raw(self, option: ConfigOption) -> Any:
        """The value stored under ``option``'s key, else under its first deprecated key that is
        set, else ``None``: unconverted, for options whose parsing is the caller's (durations,
        enums)."""
        v = self._data.get(option.key)
        if v is None:
            for key in option.deprecated_keys:
                v = self._data.get(key)
                if v is not None:
                    break
        return v

    def get(self, option: ConfigOption) -> Any:
        """The option's value (read through its deprecated keys too) converted to the type of
        its default."""
        v = self.get_raw(option)
        if v is None:
            return option.default
        d = option.default
        if isinstance(d, bool):
            return v if isinstance(v, bool) else str(v).strip().lower() in ("true", "1", "yes")
        if isinstance(d, int):
            return int(v)
        return v

    def set(self, option: ConfigOption, value: Any) -> "Configuration":
        self._data[option.key] = value
        return self

    def __repr__(self) -> str:
        return f"Configuration({self._data})"


def _config_file() -> Optional[Path]:
    conf_dir = os.environ.get("RILL_CONF_DIR")
    candidates = [Path(conf_dir) / "config.yaml"] if conf_dir else []
    candidates.append(Path.home() / ".rill" / "config.yaml")
    for c in candidates:
        if c.is_file():
            return c
    return None


def load_configuration(program: Optional[Configuration] = None) -> Configuration:
    """Merge defaults ← config file ← ``RILL_*`` environment variables ← ``program``.

    A ``RILL_*`` variable is read for every ``ConfigOption`` defined when this runs: those of
    ``ConfigOptions`` and of the option groups imported by then (``CheckpointingOptions`` and
    ``RestartStrategyOptions`` are, whenever a ``StreamExecutionEnvironment`` is built).
    """
    conf = Configuration()
    path = _config_file()
    if path is not None:
        for line in path.read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if ":" in line:
                k, v = line.split(":", 1)
                conf.set_string(k.strip(), v.strip().strip('"').strip("'"))
    for opt in list(_DEFINED_OPTIONS.values()):
        if opt.env_var in os.environ:
            conf.set_string(opt.key, os.environ[opt.env_var])
    if program is not None:
        conf.add_all(program)
    return conf
