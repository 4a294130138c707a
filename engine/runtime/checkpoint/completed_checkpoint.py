"""A checkpoint every task acknowledged (Flink's ``CompletedCheckpoint``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Optional

from rill.state.checkpoint.metadata import CheckpointMetadata
from rill.state.checkpoint.storage import CheckpointStorageLocation

__all__ = ["CompletedCheckpoint"]

_LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class CompletedCheckpoint:
    """
    :param checkpoint_id: 1, 2, ... per job.
    :param timestamp: when it was triggered, epoch ms.
    :param completion_timestamp: when the last acknowledgement arrived, epoch ms.
    :param metadata: every operator's state handles (what a restore reads).
    :param external_pointer: the checkpoint's directory when the storage writes one, else
        ``None`` (in memory).
    :param location: where it was written; :meth:`discard` disposes of it.
    """

    checkpoint_id: int
    timestamp: int
    completion_timestamp: int
    metadata: CheckpointMetadata
    external_pointer: Optional[str] = None
    location: Optional[CheckpointStorageLocation] = field(default=None, repr=False, compare=False)

    @property
    def state_size(self) -> int:
        """Bytes over all operators and subtasks."""
        return self.metadata.state_size

    def discard(self) -> None:
        """Delete what the checkpoint wrote (it was subsumed by newer ones). Errors are logged:
        a leftover directory must not fail the job (Flink's ``discardOnSubsume``)."""
        if self.location is None:
            return
        try:
            self.location.dispose()
        except Exception:  # noqa: BLE001 - as Flink: logged, the job goes on
            _LOG.exception("Could not discard completed checkpoint %d", self.checkpoint_id)
