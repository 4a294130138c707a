"""The job's completed checkpoints, newest last, keeping ``num_retained`` (Flink's
``CompletedCheckpointStore`` / ``StandaloneCompletedCheckpointStore``).

The recovery path reads ``job_master.checkpoint_coordinator.completed_checkpoint_store
.get_latest()``. Thread-safe: the coordinator adds from whatever thread completed the checkpoint
(an acknowledging task's, in embedded mode), readers may be anywhere.
"""

from __future__ import annotations

import threading
from typing import List, Optional

from rill.common.checkpointing_options import ExternalizedCheckpointRetention
from rill.graph.states import JobStatus
from rill.runtime.checkpoint.completed_checkpoint import CompletedCheckpoint

__all__ = ["CompletedCheckpointStore", "discard_on_shutdown"]


def discard_on_shutdown(retention: ExternalizedCheckpointRetention, job_status: JobStatus) -> bool:
    """Whether a job that ended in ``job_status`` discards its completed checkpoints (Flink's
    ``CheckpointProperties.forCheckpoint`` with ``CompletedCheckpoint.shouldBeDiscardedOnShutdown``):

    ==============================  ========  ========  ======
    retention                       FINISHED  CANCELED  FAILED
    ==============================  ========  ========  ======
    NO_EXTERNALIZED_CHECKPOINTS     discard   discard   discard
    DELETE_ON_CANCELLATION          discard   discard   keep
    RETAIN_ON_CANCELLATION          keep      keep      keep
    ==============================  ========  ========  ======

    One cell differs from Flink, whose properties discard on FINISHED whatever the setting:
    with RETAIN_ON_CANCELLATION a finished job keeps its checkpoints, so that the last one of
    a bounded job can be read (``spark.read.parquet``, ``rill.state_processor``) or resumed.

    :raises ValueError: if ``job_status`` is not globally terminal (a restarting job keeps
        its checkpoints: it restores from them).
    """
    if not job_status.is_globally_terminal_state():
        raise ValueError(f"Checkpoints are discarded only when a job ends, not when it is {job_status.name}")
    if retention is ExternalizedCheckpointRetention.NO_EXTERNALIZED_CHECKPOINTS:
        return True
    if retention is ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION:
        return False
    return job_status is not JobStatus.FAILED  # DELETE_ON_CANCELLATION


class CompletedCheckpointStore:
    """
    :param max_retained: how many completed checkpoints to keep (>= 1,
        ``execution.checkpointing.num-retained``); older ones are discarded through their
        location when a newer one is added (subsumed).
    :raises ValueError: if ``max_retained < 1``.
    """

    def __init__(self, max_retained: int = 1) -> None:
        if max_retained < 1:
            raise ValueError(f"execution.checkpointing.num-retained must be >= 1, got {max_retained}")
        self.max_retained = max_retained
        self._checkpoints: List[CompletedCheckpoint] = []
        self._lock = threading.Lock()

    def add(self, checkpoint: CompletedCheckpoint) -> List[CompletedCheckpoint]:
        """Add ``checkpoint`` (the newest) and discard the oldest beyond ``max_retained``;
        returns the discarded ones (Flink's ``addCheckpointAndSubsumeOldestOne``).

        :raises ValueError: if its id is not greater than the latest one's.
        """
        with self._lock:
            if self._checkpoints and checkpoint.checkpoint_id <= self._checkpoints[-1].checkpoint_id:
                raise ValueError(f"Completed checkpoint {checkpoint.checkpoint_id} is not newer than "
                                 f"{self._checkpoints[-1].checkpoint_id}")
            self._checkpoints.append(checkpoint)
            subsumed = self._checkpoints[:-self.max_retained]
            del self._checkpoints[:-self.max_retained]
        for old in subsumed:
            old.discard()
        return subsumed

    def get_latest(self) -> Optional[CompletedCheckpoint]:
        """The newest completed checkpoint, or ``None`` if there is none (Flink's
        ``getLatestCheckpoint``)."""
        with self._lock:
            return self._checkpoints[-1] if self._checkpoints else None

    def get_all(self) -> List[CompletedCheckpoint]:
        """The retained checkpoints, oldest first (Flink's ``getAllCheckpoints``)."""
        with self._lock:
            return list(self._checkpoints)

    def get_number_of_retained_checkpoints(self) -> int:
        """How many are retained now."""
        with self._lock:
            return len(self._checkpoints)

    def shutdown(self, discard: bool = True) -> None:
        """The job ended: with ``discard`` drop every checkpoint and delete what it wrote (see
        :func:`discard_on_shutdown`); without, they stay (listed here, and on disk)."""
        if not discard:
            return
        with self._lock:
            checkpoints, self._checkpoints = self._checkpoints, []
        for c in checkpoints:
            c.discard()
