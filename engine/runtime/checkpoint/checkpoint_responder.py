"""How a task answers the checkpoint coordinator (Flink's ``CheckpointResponder``): in embedded
mode a direct call into the JobMaster's coordinator, in the cluster a message to the JobMaster
actor (``rill.runtime.cluster.stream_task_actor``).

Called from a task's asynchronous checkpoint thread (acknowledge, decline after a failed write)
or its task thread (decline).
"""

from __future__ import annotations

import abc
from typing import Mapping, Optional

from rill.runtime.checkpoint.checkpoint_options import CheckpointMetrics
from rill.state.checkpoint.metadata import OperatorSubtaskStateHandle

__all__ = ["CheckpointResponder", "CoordinatorCheckpointResponder"]


class CheckpointResponder(abc.ABC):
    """The task side's way to the coordinator."""

    @abc.abstractmethod
    def acknowledge_checkpoint(self, attempt_id: str, checkpoint_id: int, metrics: CheckpointMetrics,
                               subtask_state: Mapping[str, Optional[OperatorSubtaskStateHandle]],
                               task_finished: bool = False) -> None:
        """The task's part of ``checkpoint_id`` is written: operator id -> handle (``None``
        for an operator without state); ``task_finished``: its operators had finished (FLIP-147,
        Flink's ``TaskStateSnapshot.isTaskFinished``)."""

    @abc.abstractmethod
    def decline_checkpoint(self, attempt_id: str, checkpoint_id: int, reason: BaseException) -> None:
        """The task cannot take ``checkpoint_id`` (``reason``: a ``CheckpointException``)."""


class CoordinatorCheckpointResponder(CheckpointResponder):
    """Embedded mode: calls the coordinator the JobMaster holds (``get_coordinator()`` gives it,
    ``None`` when checkpointing is off)."""

    def __init__(self, get_coordinator) -> None:
        self._get_coordinator = get_coordinator

    def acknowledge_checkpoint(self, attempt_id, checkpoint_id, metrics, subtask_state, task_finished=False) -> None:
        coordinator = self._get_coordinator()
        if coordinator is not None:
            coordinator.receive_acknowledge_message(attempt_id, checkpoint_id, metrics, subtask_state, task_finished)

    def decline_checkpoint(self, attempt_id, checkpoint_id, reason) -> None:
        coordinator = self._get_coordinator()
        if coordinator is not None:
            coordinator.receive_decline_message(checkpoint_id, attempt_id, reason)
