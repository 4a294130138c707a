"""What a restoring task gets from the JobMaster (Flink's ``JobManagerTaskRestore`` with its
``TaskStateSnapshot``): the checkpoint it restores from and, per operator of its chain, the
state to restore, as a handle the task reads itself or as the record already read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional, Union

from rill.state.checkpoint.metadata import OperatorSubtaskStateHandle
from rill.state.checkpoint.operator_subtask_state import ChannelStateSnapshot, OperatorSubtaskState

__all__ = ["JobManagerTaskRestore"]

#: what a task restores one operator from: a handle it reads, or the record itself
SubtaskStateOrHandle = Union[OperatorSubtaskState, OperatorSubtaskStateHandle]


@dataclass(frozen=True)
class JobManagerTaskRestore:
    """The restore of one subtask (Flink's ``JobManagerTaskRestore``).

    Small and picklable: it travels in the ``TaskDeploymentDescriptor``; the state itself is
    read on the task thread (:meth:`read_operator_state`), not by the JobMaster.

    :param restore_checkpoint_id: the checkpoint or savepoint restored from.
    :param task_state_snapshot: generated operator id (32 hex) -> that operator's state, as an
        :class:`OperatorSubtaskState` or a handle; operators of the chain that are absent
        start empty.
    :param finished_on_restore: every operator of the task was fully finished in the snapshot
        (FLIP-147, Flink's ``TaskStateSnapshot.isTaskDeployedAsFinished``): the task runs none
        of them and ends its outputs at once.
    """

    restore_checkpoint_id: int
    task_state_snapshot: Mapping[str, SubtaskStateOrHandle] = field(default_factory=dict)
    finished_on_restore: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "task_state_snapshot", dict(self.task_state_snapshot))

    def read_operator_state(self, operator_id: str) -> Optional[OperatorSubtaskState]:
        """The state operator ``operator_id`` restores from, read now; ``None`` if it has none.

        :raises OSError: if a handle's files cannot be read.
        :raises ValueError: if they are not a snapshot this version of Rill can read.
        """
        state = self.task_state_snapshot.get(operator_id)
        if state is None or isinstance(state, OperatorSubtaskState):
            return state
        return state.read()

    def read_channel_state(self, operator_id: str) -> ChannelStateSnapshot:
        """The in-flight data of an unaligned checkpoint that operator ``operator_id`` (the head
        of the task's chain) stored, read now; empty when it has none.

        :raises OSError: if a handle's files cannot be read.
        """
        state = self.task_state_snapshot.get(operator_id)
        if state is None:
            return ChannelStateSnapshot()
        if isinstance(state, OperatorSubtaskState):
            return state.channel_state
        return state.read_channel_state()
