"""What a snapshot is and where it goes (Flink's ``org.apache.flink.runtime.checkpoint`` and the
state handles and storages of ``org.apache.flink.runtime.state``):

- ``operator_subtask_state``: the typed in-memory record of one operator subtask's state, which
  backends produce and the ``StreamTaskStateInitializer`` restores from;
- ``metadata``: a completed snapshot over all operators, and the handles that load a subtask's
  record;
- ``storage_api`` / ``storage``: the storage interfaces, the in-memory storage and the factory;
- ``filesystem``: checkpoint and savepoint directories on any fsspec file system, their
  ``_metadata`` JSON, resolving pointers, retention;
- ``parquet_layout`` (with ``arrow_types``, ``namespaces``, ``object_codec``): the Parquet files
  Spark reads as they are."""

from rill.state.checkpoint.operator_subtask_state import (
    KeyedStateSnapshot,
    OperatorSubtaskState,
    TimerServiceSnapshot,
    TimersOfKeyGroup,
)

__all__ = ["KeyedStateSnapshot", "OperatorSubtaskState", "TimerServiceSnapshot", "TimersOfKeyGroup"]
