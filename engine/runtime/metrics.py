"""Per-task I/O metrics with Flink's names (``TaskIOMetricGroup``).

Counters are plain ints updated once per buffer on the task thread and read from other threads
(reads of an int are atomic under the GIL; a reader may see a value one buffer old).
Times are measured in ns and reported in ms per second as Flink does: busy + idle +
back-pressured = 1000 ms/s.

Rill addition: ``cpuTimeMsPerSecond``, the task thread's own CPU time. Task threads of one
process share the GIL, so a task that is neither idle nor back-pressured may be waiting for the
interpreter rather than working; Flink's "busy" (the remainder) includes that wait, and idle
and back-pressured times include the moment it takes to get the GIL back after a wake-up.
CPU time is what the task itself consumed: ``busy - cpu`` is roughly its GIL wait.

The ``*_per_second`` values of a running task average over the last :data:`RATE_WINDOW_S`
(between two of its snapshots, which the cluster takes every 200 ms), as Flink's
``TimerGauge`` averages over its update interval: a cause shows soon after it started, and
the start of a job (every consumer at full speed until the buffers fill) does not linger in
them. A task younger than the window, and a task that has ended, average over its whole life.

Network metrics (read from the task's network components, see
``rill.runtime.taskmanager.network_environment``): ``numBytesIn`` is the payload bytes its
remote input channels received, ``numBytesOut`` the payload bytes the network server sent from
its partitions to remote consumers; a local exchange counts 0 bytes (Rill hands buffers of
records to a consumer in the same process without serializing them, where Flink serializes
every buffer). ``numBuffersIn`` counts buffers polled from the gates, local and remote.
``inPoolUsage`` is the share of the remote channels' receiving buffers in use (0 with local
channels only, which have none); ``outPoolUsage`` the fullest output partition's pool usage.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Deque, Dict, Optional, Tuple

__all__ = ["TaskIOMetrics", "TaskMetricsSnapshot", "backpressure_level", "FLINK_METRIC_NAMES",
           "RATE_WINDOW_S"]

#: Span (s) the ``*_per_second`` values of a running task average over.
RATE_WINDOW_S = 1.0

#: Snapshot field -> Flink's metric name (task scope).
FLINK_METRIC_NAMES: Dict[str, str] = {
    "num_records_in": "numRecordsIn",
    "num_records_out": "numRecordsOut",
    "num_buffers_in": "numBuffersIn",
    "num_buffers_out": "numBuffersOut",
    "num_bytes_in": "numBytesIn",
    "num_bytes_out": "numBytesOut",
    "busy_time_ms_per_second": "busyTimeMsPerSecond",
    "idle_time_ms_per_second": "idleTimeMsPerSecond",
    "back_pressured_time_ms_per_second": "backPressuredTimeMsPerSecond",
    "input_pool_usage": "inPoolUsage",
    "output_pool_usage": "outPoolUsage",
}


def backpressure_level(back_pressured_ms_per_s: float) -> str:
    """Flink's thresholds: OK up to 10%, LOW up to 50%, HIGH above."""
    ratio = back_pressured_ms_per_s / 1000.0
    if ratio <= 0.10:
        return "OK"
    if ratio <= 0.50:
        return "LOW"
    return "HIGH"


@dataclass(frozen=True)
class TaskMetricsSnapshot:
    """One reading of a task's metrics. Times in ms (``*_time_ms``: totals over the task's
    life); ``*_per_second`` in ms per second over the last :data:`RATE_WINDOW_S` while the
    task runs, over its life once it has ended.

    ``num_bytes_in``/``num_bytes_out`` are payload bytes of remote exchanges (0 for local ones);
    ``input_pool_usage``/``output_pool_usage`` are fractions in [0, 1]. Flink's names:
    :data:`FLINK_METRIC_NAMES`, :meth:`as_flink_dict`.
    """

    task_name: str
    subtask_index: int
    num_records_in: int
    num_records_out: int
    num_buffers_in: int
    num_buffers_out: int
    num_bytes_in: int
    num_bytes_out: int
    duration_ms: float
    busy_time_ms: float
    idle_time_ms: float
    back_pressured_time_ms: float
    busy_time_ms_per_second: float
    idle_time_ms_per_second: float
    back_pressured_time_ms_per_second: float
    cpu_time_ms: float
    cpu_time_ms_per_second: float
    input_pool_usage: float
    output_pool_usage: float
    source_progress_units: int
    #: Flink's ``currentInputWatermark`` (epoch ms): the minimum over the task's logical inputs'
    #: watermarks; None for a source task (no input).
    current_input_watermark: Optional[int] = None

    @property
    def backpressure_status(self) -> str:
        return backpressure_level(self.back_pressured_time_ms_per_second)

    def as_dict(self) -> Dict[str, object]:
        d = dict(self.__dict__)
        d["backpressure_status"] = self.backpressure_status
        return d

    def as_flink_dict(self) -> Dict[str, object]:
        """The metrics that have a Flink name, by that name (``numBytesIn``, ``inPoolUsage``...)."""
        return {flink: getattr(self, field) for field, flink in FLINK_METRIC_NAMES.items()}


class TaskIOMetrics:
    """Counters of one task; the gauges (idle ns, back-pressured ns, pool usage, bytes in and
    out) are read from the components that measure them through callables set by the task.

    :ivar num_bytes_in: bytes counted directly (added to ``bytes_in()`` in a snapshot).
    :ivar bytes_in: ``() -> int``, payload bytes received by remote input channels.
    :ivar bytes_out: ``() -> int``, payload bytes sent from the task's partitions to remote
        consumers.
    :ivar input_pool_usage: ``() -> float`` in [0, 1], Flink's ``inPoolUsage``.
    :ivar output_pool_usage: ``() -> float`` in [0, 1], Flink's ``outPoolUsage``.
    :ivar current_input_watermark: ``() -> int | None``, Flink's ``currentInputWatermark``.
    """

    def __init__(self, task_name: str, subtask_index: int):
        self.task_name = task_name
        self.subtask_index = subtask_index
        self.num_records_in = 0
        self.num_buffers_in = 0
        self.num_bytes_in = 0
        self.start_ns: Optional[int] = None
        self.end_ns: Optional[int] = None
        self._thread_id: Optional[int] = None
        self._cpu_clock: Optional[int] = None
        self._cpu_start_ns = 0
        self._cpu_end_ns: Optional[int] = None
        self._cpu_last_ns = 0
        self.idle_ns: Callable[[], int] = lambda: 0
        self.back_pressured_ns: Callable[[], int] = lambda: 0
        self.records_out: Callable[[], int] = lambda: 0
        self.buffers_out: Callable[[], int] = lambda: 0
        self.bytes_in: Callable[[], int] = lambda: 0
        self.bytes_out: Callable[[], int] = lambda: 0
        self.input_pool_usage: Callable[[], float] = lambda: 0.0
        self.output_pool_usage: Callable[[], float] = lambda: 0.0
        self.source_progress: Callable[[], int] = lambda: 0
        self.current_input_watermark: Callable[[], Optional[int]] = lambda: None
        # (monotonic ns, idle, back-pressured, busy, cpu ns) of recent snapshots; snapshots are
        # taken by the task's actor and by REST threads alike
        self._samples: Deque[Tuple[int, int, int, int, int]] = deque()
        self._samples_lock = threading.Lock()

    def mark_start(self) -> None:
        """Start the clocks; call on the task thread."""
        self.start_ns = time.monotonic_ns()
        self._thread_id = threading.get_ident()
        try:
            self._cpu_clock = time.pthread_getcpuclockid(self._thread_id)
        except (AttributeError, OSError):  # not on this platform
            self._cpu_clock = None
        self._cpu_start_ns = time.thread_time_ns()

    def mark_end(self) -> None:
        """Stop the clocks (idempotent); the CPU clock stops only when called on the task
        thread."""
        if self.end_ns is None:
            self.end_ns = time.monotonic_ns()
        if self._cpu_end_ns is None and self._thread_id == threading.get_ident():
            self._cpu_end_ns = time.thread_time_ns()

    def cpu_ns(self) -> int:
        """CPU time (ns) the task thread has used since :meth:`mark_start`."""
        if self._cpu_end_ns is not None:
            return self._cpu_end_ns - self._cpu_start_ns
        if self._cpu_clock is not None:
            try:
                self._cpu_last_ns = time.clock_gettime_ns(self._cpu_clock) - self._cpu_start_ns
            except OSError:  # the thread has just ended
                pass
        return self._cpu_last_ns

    def snapshot(self) -> TaskMetricsSnapshot:
        started = self.start_ns is not None
        now = self.end_ns if self.end_ns is not None else time.monotonic_ns()
        dur_ns = max(1, now - self.start_ns) if started else 1
        idle = min(self.idle_ns(), dur_ns)
        bp = min(self.back_pressured_ns(), dur_ns - idle)
        busy = max(0, dur_ns - idle - bp)
        cpu = self.cpu_ns() if started else 0
        base = self._window_start((now, idle, bp, busy, cpu)) if started and self.end_ns is None else None
        span_ns, d_idle, d_bp, d_busy, d_cpu = dur_ns, idle, bp, busy, cpu
        if base is not None:
            span_ns = max(1, now - base[0])
            d_idle, d_bp, d_busy, d_cpu = idle - base[1], bp - base[2], busy - base[3], cpu - base[4]

        def per_second(ns: int) -> float:  # share of the span, as ms per second
            return max(0.0, ns * 1000.0 / span_ns) if started else 0.0

        return TaskMetricsSnapshot(
            task_name=self.task_name,
            subtask_index=self.subtask_index,
            num_records_in=self.num_records_in,
            num_records_out=self.records_out(),
            num_buffers_in=self.num_buffers_in,
            num_buffers_out=self.buffers_out(),
            num_bytes_in=self.num_bytes_in + self.bytes_in(),
            num_bytes_out=self.bytes_out(),
            duration_ms=dur_ns / 1e6 if started else 0.0,
            busy_time_ms=busy / 1e6,
            idle_time_ms=idle / 1e6,
            back_pressured_time_ms=bp / 1e6,
            busy_time_ms_per_second=per_second(d_busy),
            idle_time_ms_per_second=per_second(d_idle),
            back_pressured_time_ms_per_second=per_second(d_bp),
            cpu_time_ms=cpu / 1e6,
            cpu_time_ms_per_second=per_second(d_cpu),
            input_pool_usage=self.input_pool_usage(),
            output_pool_usage=self.output_pool_usage(),
            source_progress_units=self.source_progress(),
            current_input_watermark=self.current_input_watermark(),
        )

    def _window_start(self, sample: Tuple[int, int, int, int, int]) -> Optional[Tuple[int, int, int, int, int]]:
        """Record ``sample`` and return the newest earlier sample at least :data:`RATE_WINDOW_S`
        old, or None while the task is younger than that (its life is the window)."""
        edge = sample[0] - int(RATE_WINDOW_S * 1e9)
        with self._samples_lock:
            samples = self._samples
            if samples and samples[-1][0] == sample[0]:
                samples.pop()
            samples.append(sample)
            while len(samples) >= 2 and samples[1][0] <= edge:
                samples.popleft()
            return samples[0] if samples[0][0] <= edge else None
