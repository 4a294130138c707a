"""Checkpoint statistics of a job: per checkpoint and per subtask (Flink's
``CheckpointStatsTracker`` and the records of ``CheckpointStatsSnapshot``: counts, a bounded
history, the latest completed and failed checkpoint).

All durations are ms, sizes bytes, timestamps epoch ms. The records are frozen and picklable:
the cluster's JobMaster sends the snapshot with its status reports, and ``JobClient
.get_checkpoint_stats()`` returns it in both modes.
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass, field, replace
from typing import Dict, List, Optional, Tuple

from rill.runtime.checkpoint.checkpoint_options import CheckpointMetrics

__all__ = [
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
    :param latest_completed: the newest completed one, or ``None``.
    :param latest_failed: the newest failed one, or ``None``.
    """

    counts: CheckpointStatsCounts = field(default_factory=CheckpointStatsCounts)
    history: Tuple[CheckpointStats, ...] = ()
    latest_completed: Optional[CheckpointStats] = None
    latest_failed: Optional[CheckpointStats] = None

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

    def report_pending_checkpoint(self, checkpoint_id: int, trigger_timestamp: int, number_of_subtasks: int) -> None:
        """A checkpoint was triggered."""
        with self._lock:
            self._stats[checkpoint_id] = CheckpointStats(checkpoint_id, CheckpointStatsStatus.IN_PROGRESS,
                                                         trigger_timestamp, number_of_subtasks)
            self._order.append(checkpoint_id)
            for old in self._order[:-self._history_size]:
                self._stats.pop(old, None)
            del self._order[:-self._history_size]
            c = self._counts
            self._counts = replace(c, number_of_total_checkpoints=c.number_of_total_checkpoints + 1,
                                   number_of_in_progress_checkpoints=c.number_of_in_progress_checkpoints + 1)

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
                                    metrics.state_size_bytes)
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
            if completed:
                self._latest_completed = s
            else:
                self._latest_failed = s

    def create_snapshot(self) -> CheckpointStatsSnapshot:
        """The statistics now (Flink's ``createSnapshot``)."""
        with self._lock:
            history = tuple(self._stats[i] for i in reversed(self._order) if i in self._stats)
            return CheckpointStatsSnapshot(self._counts, history, self._latest_completed, self._latest_failed)
