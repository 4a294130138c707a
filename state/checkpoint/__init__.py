"""What a snapshot is (Flink's ``org.apache.flink.runtime.checkpoint`` and the state handles of
``org.apache.flink.runtime.state``): for now the typed in-memory record of one operator
subtask's state, :class:`~rill.state.checkpoint.operator_subtask_state.OperatorSubtaskState`,
which backends produce and the ``StreamTaskStateInitializer`` restores from. Checkpoint storage
and the Parquet layout will write and read this record."""

from rill.state.checkpoint.operator_subtask_state import (
    KeyedStateSnapshot,
    OperatorSubtaskState,
    TimerServiceSnapshot,
    TimersOfKeyGroup,
)

__all__ = ["KeyedStateSnapshot", "OperatorSubtaskState", "TimerServiceSnapshot", "TimersOfKeyGroup"]
