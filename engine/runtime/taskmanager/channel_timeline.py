"""Per-channel timelines of one task: credit, backlog and buffer-pool occupancy sampled every
few milliseconds and written as one Parquet file when the recording ends (Rill; Flink shows
only the current values, as the ``inPoolUsage``/``outPoolUsage`` gauges and the
``Shuffle.Netty`` buffer metrics).

What backpressure experiments need to see: *which* channel ran out of credit and when, how its
sender's backlog grew, how full each pool was. One row per sample and channel:

- ``side = "output"``: one subpartition of one of the task's result partitions. ``backlog`` is
  the buffers queued in the subpartition; ``pool_used`` / ``pool_total`` / ``requesters_blocked``
  the partition's ``LocalBufferPool`` (shared by its subpartitions); for a subpartition read by
  a remote channel, ``credit_available`` and ``back_pressured`` are the network server's view of
  that reader (credit announced by the consumer and not used yet; data but no credit).
- ``side = "input"``: one remote input channel of one of the task's gates: ``credit_available``
  and ``unannounced_credit`` as the consumer knows them, ``backlog`` the sender's backlog as
  last announced, ``queued`` buffers received and not yet read, ``exclusive_in_use`` /
  ``floating_in_use`` receiving buffers holding data; ``pool_used`` / ``pool_total`` the gate's
  floating pool. Local input channels have no credit and no receiving buffers: not sampled.

Columns (Spark reads the files as they are: µs UTC timestamps, int64, no unsigned types):
``ts``, ``job_id``, ``task_name``, ``subtask_index``, ``attempt_number``, ``side``, ``index``
(partition or gate index in the task), ``channel`` (subpartition or channel index),
``backlog``, ``credit_available``, ``unannounced_credit``, ``queued``, ``exclusive_in_use``,
``floating_in_use``, ``pool_used``, ``pool_total``, ``requesters_blocked``, ``back_pressured``,
``buffers`` (cumulative buffers emitted to / received by the channel), ``records`` (cumulative,
output side). Columns that do not apply to a side are null.

Sampling runs on a daemon thread of the task's process and reads the components' thread-safe
``statistics()`` snapshots: nothing is added to the record path, and a task blocked on a full
pool is still sampled.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from rill.common.configuration import ConfigOption, Configuration
from rill.network.partition.consumer.remote_input_channel import RemoteInputChannel

__all__ = ["ChannelTimelineOptions", "ChannelTimelineSettings", "ChannelTimelineRecorder", "ChannelTimelineStateError",
           "TIMELINE_SCHEMA", "timeline_file"]


class ChannelTimelineOptions:
    """The settings that turn recording on for every task of a job (Rill's keys)."""

    INTERVAL = ConfigOption(
        "rill.network.timeline.interval", 0,
        "ms between two samples of every task's channel credit, backlog and buffer pools "
        "(0: no timeline). Each task writes <dir>/<job id>/<task>-attempt<n>.parquet when it ends.")
    DIR = ConfigOption(
        "rill.network.timeline.dir", "timelines",
        "Directory of the channel timelines (relative: to the submitting client's working directory).")

TIMELINE_SCHEMA = pa.schema([
    ("ts", pa.timestamp("us", tz="UTC")),
    ("job_id", pa.string()),
    ("task_name", pa.string()),
    ("subtask_index", pa.int32()),
    ("attempt_number", pa.int32()),
    ("side", pa.string()),
    ("index", pa.int32()),
    ("channel", pa.int32()),
    ("backlog", pa.int64()),
    ("credit_available", pa.int64()),
    ("unannounced_credit", pa.int64()),
    ("queued", pa.int64()),
    ("exclusive_in_use", pa.int64()),
    ("floating_in_use", pa.int64()),
    ("pool_used", pa.int64()),
    ("pool_total", pa.int64()),
    ("requesters_blocked", pa.int64()),
    ("back_pressured", pa.bool_()),
    ("buffers", pa.int64()),
    ("records", pa.int64()),
])

_COLUMNS = TIMELINE_SCHEMA.names
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class ChannelTimelineStateError(RuntimeError):
    """A recording cannot start or stop now: the job is not running, records already (or
    records every task through ``rill.network.timeline.interval``), or records nothing to stop
    (the REST API answers 409)."""


def timeline_file(directory: str, job_id: str, task_name_with_subtasks: str, attempt_number: int) -> Path:
    """Where a task attempt's timeline goes: ``<directory>/<job id>/<task>-attempt<n>.parquet``
    (``directory`` resolved against this process's working directory; characters other than
    letters, digits, ``.``, ``_`` and ``-`` in the task name become ``_``)."""
    return (Path(directory).resolve() / job_id /
            f"{_UNSAFE.sub('_', task_name_with_subtasks)}-attempt{attempt_number}.parquet")


@dataclass(frozen=True)
class ChannelTimelineSettings:
    """What to record: every ``interval_ms`` ms (≥ 1) into ``directory`` (relative paths are
    resolved in the task's process, whose working directory is the submitting client's), for
    at most ``duration_ms`` ms after the task starts recording (``None``: until the task ends).

    :raises ValueError: for an interval below 1 ms or a non-positive duration.
    """

    interval_ms: int
    directory: str
    duration_ms: Optional[int] = None

    def __post_init__(self) -> None:
        if isinstance(self.interval_ms, bool) or not isinstance(self.interval_ms, int) or self.interval_ms < 1:
            raise ValueError(f"Channel timeline interval must be at least 1 ms, got {self.interval_ms!r}")
        if self.duration_ms is not None and (not isinstance(self.duration_ms, int) or self.duration_ms <= 0):
            raise ValueError(f"Channel timeline duration must be a positive number of ms, got {self.duration_ms!r}")

    @staticmethod
    def from_configuration(conf: Configuration) -> Optional["ChannelTimelineSettings"]:
        """The settings ``conf`` asks for, or ``None`` when ``rill.network.timeline.interval``
        is 0 (the default).

        :raises ValueError: for a negative or non-integer interval, naming the key.
        """
        raw = conf.get(ChannelTimelineOptions.INTERVAL)
        try:
            interval = int(raw)
        except (TypeError, ValueError):
            interval = -1
        if interval < 0 or str(raw).strip() not in (str(interval), f"{interval}.0"):
            raise ValueError(f"{ChannelTimelineOptions.INTERVAL.key} must be a whole number of ms >= 0, got {raw!r}")
        if interval == 0:
            return None
        return ChannelTimelineSettings(interval, str(conf.get(ChannelTimelineOptions.DIR)))


class ChannelTimelineRecorder:
    """Samples one task's result partitions and input gates until :meth:`stop`.

    :param settings: interval, directory and duration.
    :param job_id: the job (32 hex), the file's directory under ``settings.directory``.
    :param task_name_with_subtasks: e.g. ``"Map (2/4)"`` (names the file).
    :param subtask_index: the subtask, attempt_number: its attempt (columns and file name).
    :param result_partitions: the task's partitions (``statistics()``, ``buffer_pool``).
    :param input_gates: the task's gates (``get_channel(i).statistics()`` for remote channels).
    :param reader_statistics: ``() -> iterable`` of the process's network-server reader
        snapshots (``partition_id``, ``subpartition_index``, ``credit_available``,
        ``back_pressured``), or ``None`` when the process serves no remote reader.
    :param floating_pool: ``gate -> pool`` with ``statistics()`` (``assigned_buffers``,
        ``total_buffers``), or ``None``.
    """

    def __init__(self, settings: ChannelTimelineSettings, job_id: str, task_name_with_subtasks: str,
                 subtask_index: int, attempt_number: int, result_partitions: Sequence, input_gates: Sequence,
                 reader_statistics: Optional[Callable[[], Sequence]] = None,
                 floating_pool: Optional[Callable[[object], object]] = None,
                 clock_ns: Callable[[], int] = time.time_ns) -> None:
        self.settings = settings
        self._job_id = job_id
        self._task = task_name_with_subtasks
        self._subtask = subtask_index
        self._attempt = attempt_number
        self._partitions = list(result_partitions)
        self._gates = list(input_gates)
        self._reader_statistics = reader_statistics
        self._floating_pool = floating_pool
        self._clock_ns = clock_ns
        self._columns: Dict[str, List] = {c: [] for c in _COLUMNS}
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._done = False
        self._written: Optional[Path] = None
        self._lock = threading.Lock()
        self.path = timeline_file(settings.directory, job_id, task_name_with_subtasks, attempt_number)

    def start(self) -> None:
        """Start sampling on a daemon thread (the first sample at once)."""
        self._thread = threading.Thread(target=self._run, name=f"channel-timeline {self._task}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        interval_s = self.settings.interval_ms / 1000.0
        end = None if self.settings.duration_ms is None else time.monotonic() + self.settings.duration_ms / 1000.0
        while True:
            self.sample()
            if end is not None and time.monotonic() >= end:
                break
            if self._stop.wait(interval_s):
                self.sample()  # the last row of each channel is its state at the end
                break
        self._write()

    def stop(self) -> Optional[Path]:
        """End the recording and write the file (once); returns its path, ``None`` if nothing
        was sampled. Idempotent; safe from any thread.

        :raises OSError: if the file cannot be written.
        """
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(10.0)
        return self._write()

    def sample(self) -> None:
        """Append one row per output subpartition and remote input channel, now."""
        ts = self._clock_ns() // 1000
        readers = {}
        if self._reader_statistics is not None:
            for r in self._reader_statistics():
                readers[(r.partition_id, r.subpartition_index)] = r
        rows = []
        for p_index, partition in enumerate(self._partitions):
            stats = partition.statistics()
            pool = stats.buffer_pool
            for sub, backlog in enumerate(stats.backlog):
                reader = readers.get((stats.partition_id, sub))
                rows.append({
                    "side": "output", "index": p_index, "channel": sub, "backlog": backlog,
                    "credit_available": None if reader is None else reader.credit_available,
                    "back_pressured": (bool(pool.requesters_blocked) if pool is not None else False)
                    if reader is None else reader.back_pressured,
                    "pool_used": None if pool is None else pool.used_buffers,
                    "pool_total": None if pool is None else pool.total_buffers,
                    "requesters_blocked": None if pool is None else pool.requesters_blocked,
                    "buffers": stats.buffers_out[sub], "records": stats.records_out[sub],
                })
        for g_index, gate in enumerate(self._gates):
            floating = None if self._floating_pool is None else self._floating_pool(gate)
            fstats = None if floating is None else floating.statistics()
            for c in range(gate.get_number_of_input_channels()):
                channel = gate.get_channel(c)
                if not isinstance(channel, RemoteInputChannel):  # local: no credit, no receiving buffers
                    continue
                s = channel.statistics()
                rows.append({
                    "side": "input", "index": g_index, "channel": c, "backlog": s.sender_backlog,
                    "credit_available": s.credit_available, "unannounced_credit": s.unannounced_credit,
                    "queued": s.queued, "exclusive_in_use": s.exclusive_buffers_in_use,
                    "floating_in_use": s.floating_buffers_in_use,
                    "pool_used": None if fstats is None else fstats.assigned_buffers,
                    "pool_total": None if fstats is None else fstats.total_buffers,
                    "back_pressured": s.credit_available == 0 and s.sender_backlog > 0,
                    "buffers": s.buffers_received,
                })
        with self._lock:
            if self._done:
                return
            cols = self._columns
            for row in rows:
                cols["ts"].append(ts)
                cols["job_id"].append(self._job_id)
                cols["task_name"].append(self._task)
                cols["subtask_index"].append(self._subtask)
                cols["attempt_number"].append(self._attempt)
                for name in _COLUMNS[5:]:
                    cols[name].append(row.get(name))

    def _write(self) -> Optional[Path]:
        with self._lock:
            if self._done:
                return self._written
            self._done = True
            if not self._columns["ts"]:
                return None
            table = pa.Table.from_pydict(self._columns, schema=TIMELINE_SCHEMA)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name("." + self.path.name + ".inprogress")
            pq.write_table(table, tmp, coerce_timestamps="us")
            os.replace(tmp, self.path)  # readers never see a half-written file
            self._written = self.path
            self._columns = {c: [] for c in _COLUMNS}
            return self.path
