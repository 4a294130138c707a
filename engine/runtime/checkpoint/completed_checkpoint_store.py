"""The job's completed checkpoints, newest last, keeping ``num_retained`` (Flink's
``CompletedCheckpointStore`` / ``StandaloneCompletedCheckpointStore``).

The recovery path reads ``job_master.checkpoint_coordinator.completed_checkpoint_store
.get_latest()``. Thread-safe: the coordinator adds from whatever thread completed the checkpoint
(an acknowledging task's, in embedded mode), readers may be anywhere.
"""

from __future__ import annotations

import threading
from typing import List, Optional

from rill.runtime.checkpoint.completed_checkpoint import CompletedCheckpoint

__all__ = ["CompletedCheckpointStore"]


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
        """Drop every checkpoint, discarding what they wrote when ``discard`` (Flink discards
        on a finished or cancelled job unless checkpoints are retained externally)."""
        with self._lock:
            checkpoints, self._checkpoints = self._checkpoints, []
        if discard:
            for c in checkpoints:
                c.discard()
