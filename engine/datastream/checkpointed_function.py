"""``CheckpointedFunction`` and the contexts it is called with, where Rill's DataStream API
exports them.

Defined in :mod:`rill.operators.checkpointed_function` (the operators that call them are a
lower layer than this API; Flink keeps them in flink-streaming-java beside its operators) and
re-exported here; the operator-side helpers stay there.
"""

from rill.operators.checkpointed_function import (
    CheckpointedFunction,
    FunctionInitializationContext,
    FunctionSnapshotContext,
    KeyedStateStore,
    ManagedInitializationContext,
    ManagedSnapshotContext,
)

__all__ = [
    "CheckpointedFunction",
    "ManagedInitializationContext",
    "FunctionInitializationContext",
    "ManagedSnapshotContext",
    "FunctionSnapshotContext",
    "KeyedStateStore",
]
