"""Checkpoint statistics of a job: per checkpoint and per subtask (Flink's
``CheckpointStatsTracker`` and the records of ``CheckpointStatsSnapshot``: counts, a bounded
history, the latest completed and failed checkpoint).

All durations are ms, sizes bytes, timestamps epoch ms. The records are frozen and picklable:
the cluster's JobMaster sends the snapshot with its status reports, and ``JobClient
.get_checkpoint_stats()`` returns it in both modes.
"""

from __future__ import annotations

import collections
import enum
import math
import threading
from dataclasses import dataclass, field, fields, replace
from typing import Deque, Dict, List, Optional, Tuple

from rill.runtime.checkpoint.checkpoint_options import CheckpointMetrics

__all__ = [
    "StatsSummary",
    "CompletedCheckpointStatsSummary",
    "CheckpointStatsStatus",
    "SubtaskStateStats",
    "CheckpointStats",
    "CheckpointStatsCounts",
    "CheckpointStatsSnapshot",
    "CheckpointStatsTracker",
    "DEFAULT_HISTORY_SIZE",
]

#: Checkpoints kept in the history (Flink's ``web.checkpoints.history`` default).
DEFAULT_HISTORY_SIZE = 10
#: Values the summaries keep (the newest), as Flink's ``StatsSummary`` keeps a bounded histogram.
SUMMARY_WINDOW = 10_000
_QUANTILES = (0.5, 0.9, 0.95, 0.99, 0.999)


@dataclass(frozen=True)
class StatsSummary:
    """Min, max, average and quantiles of one figure over completed checkpoints (Flink's
    ``StatsSummarySnapshot``); all 0 when there is none.

    :param count: values summarized (the newest :data:`SUMMARY_WINDOW`).
    :param quantiles: ``((0.5, value), (0.9, ...), (0.95, ...), (0.99, ...), (0.999, ...))``, by
        nearest rank.
    """

    count: int = 0
    minimum: float = 0.0
    maximum: float = 0.0
    average: float = 0.0
    quantiles: Tuple[Tuple[float, float], ...] = tuple((q, 0.0) for q in _QUANTILES)

    def get_quantile(self, quantile: float) -> float:
        """The value at ``quantile`` (one of 0.5, 0.9, 0.95, 0.99, 0.999).

        :raises KeyError: for another quantile.
        """
        return dict(self.quantiles)[quantile]

    @staticmethod
    def of(values) -> "StatsSummary":
        """The summary of ``values`` (a sequence of numbers)."""
        if not values:
            return StatsSummary()
        ordered = sorted(values)
        n = len(ordered)
        return StatsSummary(n, ordered[0], ordered[-1], sum(ordered) / n,
                            tuple((q, ordered[max(0, math.ceil(round(q * n, 9)) - 1)]) for q in _QUANTILES))


@dataclass(frozen=True)
class CompletedCheckpointStatsSummary:
    """Summaries over completed checkpoints (Flink's ``CompletedCheckpointStatsSummarySnapshot``):
    per checkpoint its end-to-end duration (ms) and state size (bytes); per subtask
    acknowledgement its synchronous, asynchronous and alignment parts (ms)."""

    end_to_end_duration_ms: StatsSummary = field(default_factory=StatsSummary)
    state_size_bytes: StatsSummary = field(default_factory=StatsSummary)
    sync_checkpoint_duration_ms: StatsSummary = field(default_factory=StatsSummary)
    async_checkpoint_duration_ms: StatsSummary = field(default_factory=StatsSummary)
    alignment_duration_ms: StatsSummary = field(default_factory=StatsSummary)
    #: per checkpoint, the in-flight data its subtasks stored (unaligned checkpoints), bytes
    persisted_data_bytes: StatsSummary = field(default_factory=StatsSummary)


class CheckpointStatsStatus(enum.Enum):
    """Flink's ``CheckpointStatsStatus``."""

    IN_PROGRESS = "IN_PROGRESS"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"


@dataclass(frozen=True)
class SubtaskStateStats:
    """One subtask's part of one checkpoint (Flink's ``SubtaskStateStats``).

    :param task_name: the task (job vertex) name.
    :param subtask_index: the subtask.
    :param ack_timestamp: when its acknowledgement reached the coordinator, epoch ms.
    :param end_to_end_duration_ms: from the trigger to that acknowledgement.
    :param persisted_data_bytes: in-flight data the subtask stored (Flink's ``persistedData``).
    :param unaligned_checkpoint: whether the subtask took it unaligned (Flink's
        ``unalignedCheckpoint``).
    """

    task_name: str
    subtask_index: int
    ack_timestamp: int
    end_to_end_duration_ms: int
    sync_checkpoint_duration_ms: float
    async_checkpoint_duration_ms: float
    alignment_duration_ms: float
    checkpoint_start_delay_ms: float
    state_size_bytes: int
    persisted_data_bytes: int = 0
    unaligned_checkpoint: bool = False


@dataclass(frozen=True)
class CheckpointStats:
    """One checkpoint (Flink's ``AbstractCheckpointStats`` and its pending, completed and failed
    kinds in one record).

    :param end_to_end_duration_ms: trigger to completion or failure (to the latest
        acknowledgement while in progress).
    :param failure_message: why it failed (``None`` unless FAILED).
    """

    checkpoint_id: int
    status: CheckpointStatsStatus
    trigger_timestamp: int
    number_of_subtasks: int
    number_of_acknowledged_subtasks: int = 0
    latest_ack_timestamp: int = 0
    state_size_bytes: int = 0
    end_to_end_duration_ms: int = 0
    failure_message: Optional[str] = None
    external_path: Optional[str] = None
    subtask_stats: Tuple[SubtaskStateStats, ...] = ()
    #: a savepoint rather than a checkpoint (Flink's ``CheckpointProperties.isSavepoint``)
    is_savepoint: bool = False
    #: a stop-with-savepoint's synchronous savepoint (Flink's ``SavepointType.isSynchronous``)
    is_synchronous: bool = False

    @property
    def persisted_data_bytes(self) -> int:
        """In-flight data stored by all subtasks, bytes (Flink's ``getPersistedData``)."""
        return sum(s.persisted_data_bytes for s in self.subtask_stats)

    @property
    def unaligned_checkpoint(self) -> bool:
        """Whether any subtask took it unaligned (Flink's ``isUnalignedCheckpoint``)."""
        return any(s.unaligned_checkpoint for s in self.subtask_stats)

    @property
    def alignment_duration_ms(self) -> float:
        """The longest alignment of any subtask."""
        return max((s.alignment_duration_ms for s in self.subtask_stats), default=0.0)

    @property
    def sync_checkpoint_duration_ms(self) -> float:
        """The longest synchronous part of any subtask."""
        return max((s.sync_checkpoint_duration_ms for s in self.subtask_stats), default=0.0)

    @property
    def async_checkpoint_duration_ms(self) -> float:
        """The longest asynchronous part of any subtask."""
        return max((s.async_checkpoint_duration_ms for s in self.subtask_stats), default=0.0)


@dataclass(frozen=True)
class CheckpointStatsCounts:
    """Flink's ``CheckpointStatsCounts``."""

    number_of_restored_checkpoints: int = 0
    number_of_total_checkpoints: int = 0
    number_of_in_progress_checkpoints: int = 0
    number_of_completed_checkpoints: int = 0
    number_of_failed_checkpoints: int = 0


@dataclass(frozen=True)
class CheckpointStatsSnapshot:
    """The job's checkpoint statistics at one moment (Flink's ``CheckpointStatsSnapshot``).

    :param counts: :class:`CheckpointStatsCounts`.
    :param history: the latest :data:`DEFAULT_HISTORY_SIZE` checkpoints, newest first.
    :param latest_completed: the newest completed checkpoint (not a savepoint, as Flink's
        ``getLatestCompletedCheckpoint``), or ``None``.
    :param latest_savepoint: the newest completed savepoint (Flink's ``getLatestSavepoint``),
        or ``None``.
    :param latest_failed: the newest failed one, or ``None``.
    :param summary: :class:`CompletedCheckpointStatsSummary` over every completed checkpoint.
    """

    counts: CheckpointStatsCounts = field(default_factory=CheckpointStatsCounts)
    history: Tuple[CheckpointStats, ...] = ()
    latest_completed: Optional[CheckpointStats] = None
    latest_failed: Optional[CheckpointStats] = None
    summary: CompletedCheckpointStatsSummary = field(default_factory=CompletedCheckpointStatsSummary)
    latest_savepoint: Optional[CheckpointStats] = None

    def get_summary_stats(self) -> CompletedCheckpointStatsSummary:
        """Flink's ``getSummaryStats``."""
        return self.summary

    def get_counts(self) -> CheckpointStatsCounts:
        """Flink's ``getCounts``."""
        return self.counts

    def get_history(self) -> Tuple[CheckpointStats, ...]:
        """Flink's ``getHistory``: newest first."""
        return self.history


class CheckpointStatsTracker:
    """Collects the statistics as the coordinator reports them (any thread).

    :param history_size: checkpoints kept in the history (>= 1).
    """

    def __init__(self, history_size: int = DEFAULT_HISTORY_SIZE) -> None:
        self._history_size = max(1, history_size)
        self._lock = threading.Lock()
        self._stats: Dict[int, CheckpointStats] = {}  # id -> stats, kept for the history
        self._order: List[int] = []
        self._counts = CheckpointStatsCounts()
        self._latest_completed: Optional[CheckpointStats] = None
        self._latest_failed: Optional[CheckpointStats] = None
        self._latest_savepoint: Optional[CheckpointStats] = None
        # figure name -> the newest values of completed checkpoints
        self._summary_values: Dict[str, Deque[float]] = {
            f.name: collections.deque(maxlen=SUMMARY_WINDOW) for f in fields(CompletedCheckpointStatsSummary)}

    def report_pending_checkpoint(self, checkpoint_id: int, trigger_timestamp: int, number_of_subtasks: int,
                                  is_savepoint: bool = False, is_synchronous: bool = False) -> None:
        """A checkpoint (or, with ``is_savepoint``, a savepoint; ``is_synchronous`` for
        stop-with-savepoint's) was triggered."""
        with self._lock:
            self._stats[checkpoint_id] = CheckpointStats(checkpoint_id, CheckpointStatsStatus.IN_PROGRESS,
                                                         trigger_timestamp, number_of_subtasks,
                                                         is_savepoint=is_savepoint, is_synchronous=is_synchronous)
            self._order.append(checkpoint_id)
            self._trim()
            c = self._counts
            self._counts = replace(c, number_of_total_checkpoints=c.number_of_total_checkpoints + 1,
                                   number_of_in_progress_checkpoints=c.number_of_in_progress_checkpoints + 1)

    def _trim(self) -> None:
        """Under the lock: forget the oldest ended checkpoints beyond the history size (one in
        progress is kept until it ends, so its end is counted)."""
        excess = len(self._order) - self._history_size
        if excess <= 0:
            return
        kept = []
        for cid in self._order:  # oldest first
            if excess > 0 and self._stats[cid].status is not CheckpointStatsStatus.IN_PROGRESS:
                del self._stats[cid]
                excess -= 1
            else:
                kept.append(cid)
        self._order = kept

    def report_subtask_stats(self, checkpoint_id: int, task_name: str, subtask_index: int, ack_timestamp: int,
                             metrics: CheckpointMetrics) -> None:
        """A subtask acknowledged with ``metrics``."""
        with self._lock:
            s = self._stats.get(checkpoint_id)
            if s is None or s.status is not CheckpointStatsStatus.IN_PROGRESS:
                return
            sub = SubtaskStateStats(task_name, subtask_index, ack_timestamp, ack_timestamp - s.trigger_timestamp,
                                    metrics.sync_duration_ms, metrics.async_duration_ms,
                                    metrics.alignment_duration_ms, metrics.checkpoint_start_delay_ms,
                                    metrics.state_size_bytes, metrics.persisted_data_bytes, metrics.unaligned)
            self._stats[checkpoint_id] = replace(
                s, number_of_acknowledged_subtasks=s.number_of_acknowledged_subtasks + 1,
                latest_ack_timestamp=ack_timestamp, state_size_bytes=s.state_size_bytes + metrics.state_size_bytes,
                end_to_end_duration_ms=ack_timestamp - s.trigger_timestamp, subtask_stats=s.subtask_stats + (sub,))

    def report_completed_checkpoint(self, checkpoint_id: int, completion_timestamp: int,
                                    external_path: Optional[str]) -> None:
        """Every subtask acknowledged and the checkpoint was finalized."""
        self._end(checkpoint_id, CheckpointStatsStatus.COMPLETED, completion_timestamp, None, external_path)

    def report_failed_checkpoint(self, checkpoint_id: int, failure_timestamp: int, message: str) -> None:
        """The checkpoint was aborted (``message``: why)."""
        self._end(checkpoint_id, CheckpointStatsStatus.FAILED, failure_timestamp, message, None)

    def _end(self, checkpoint_id, status, timestamp, message, external_path) -> None:
        with self._lock:
            s = self._stats.get(checkpoint_id)
            if s is None or s.status is not CheckpointStatsStatus.IN_PROGRESS:
                return
            s = self._stats[checkpoint_id] = replace(
                s, status=status, failure_message=message, external_path=external_path,
                end_to_end_duration_ms=max(0, timestamp - s.trigger_timestamp))
            c = self._counts
            completed = status is CheckpointStatsStatus.COMPLETED
            self._counts = replace(
                c, number_of_in_progress_checkpoints=c.number_of_in_progress_checkpoints - 1,
                number_of_completed_checkpoints=c.number_of_completed_checkpoints + completed,
                number_of_failed_checkpoints=c.number_of_failed_checkpoints + (not completed))
            self._trim()
            if completed and s.is_savepoint:
                self._latest_savepoint = s
            elif completed:
                self._latest_completed = s
            if completed:
                values = self._summary_values
                values["end_to_end_duration_ms"].append(s.end_to_end_duration_ms)
                values["state_size_bytes"].append(s.state_size_bytes)
                values["persisted_data_bytes"].append(s.persisted_data_bytes)
                for sub in s.subtask_stats:
                    values["sync_checkpoint_duration_ms"].append(sub.sync_checkpoint_duration_ms)
                    values["async_checkpoint_duration_ms"].append(sub.async_checkpoint_duration_ms)
                    values["alignment_duration_ms"].append(sub.alignment_duration_ms)
            else:
                self._latest_failed = s

    def create_snapshot(self) -> CheckpointStatsSnapshot:
        """The statistics now (Flink's ``createSnapshot``)."""
        with self._lock:
            history = tuple(self._stats[i] for i in reversed(self._order[-self._history_size:]))
            summary = CompletedCheckpointStatsSummary(
                **{name: StatsSummary.of(list(v)) for name, v in self._summary_values.items()})
            return CheckpointStatsSnapshot(self._counts, history, self._latest_completed, self._latest_failed,
                                           summary, self._latest_savepoint)
