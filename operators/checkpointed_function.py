"""``CheckpointedFunction``: user functions that keep operator state (or set up keyed state)
and take part in checkpoints (Flink's ``org.apache.flink.streaming.api.checkpoint
.CheckpointedFunction``, with ``FunctionInitializationContext``, ``FunctionSnapshotContext``,
``KeyedStateStore`` and the helpers of ``StreamingFunctionUtils``).

PyFlink has no Python ``CheckpointedFunction``; Rill offers Flink's (Java) interface with
Python names. A function implements it by subclassing :class:`CheckpointedFunction` (or
registering with it, as with any ABC); the operator around the function
(``AbstractUdfStreamOperator``) then calls:

1. ``initialize_state(context)`` once, during the operator's ``initialize_state`` (before
   ``open``), with a :class:`FunctionInitializationContext`: register operator state through
   ``context.get_operator_state_store()`` (``get_list_state``, ``get_union_list_state``,
   ``get_broadcast_state``) and keyed state through ``context.get_keyed_state_store()`` (on a
   keyed stream; ``None`` otherwise), and read what was restored when ``context.is_restored()``;
2. ``snapshot_state(context)`` whenever a checkpoint is taken, on the task thread between two
   records, with a :class:`FunctionSnapshotContext` (checkpoint id, checkpoint timestamp in
   epoch ms): write what must survive into the registered states; the operator then snapshots
   its operator state backend;
3. if the function is also a ``CheckpointListener`` (:mod:`rill.common.functions`):
   ``notify_checkpoint_complete(checkpoint_id)`` / ``notify_checkpoint_aborted(checkpoint_id)``
   when the checkpoint completed or was aborted (:func:`notify_function_checkpoint_complete`).

Example::

    class BufferingSink(SinkFunction, CheckpointedFunction):
        def initialize_state(self, context):
            self.state = context.get_operator_state_store().get_list_state(
                ListStateDescriptor("buffered"))
            self.buffer = list(self.state.get()) if context.is_restored() else []

        def snapshot_state(self, context):
            self.state.update(self.buffer)
"""

from __future__ import annotations

import abc
from typing import Any, Optional

from rill.common.functions import CheckpointListener
from rill.state.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from rill.state.operator_state import OperatorStateStore

__all__ = [
    "CheckpointedFunction",
    "ManagedInitializationContext",
    "FunctionInitializationContext",
    "ManagedSnapshotContext",
    "FunctionSnapshotContext",
    "KeyedStateStore",
    "DefaultKeyedStateStore",
    "StateInitializationContextImpl",
    "StateSnapshotContextSynchronousImpl",
    "restore_function_state",
    "snapshot_function_state",
    "notify_function_checkpoint_complete",
    "notify_function_checkpoint_aborted",
]


# -- contexts -----------------------------------------------------------------------------------

class KeyedStateStore(abc.ABC):
    """Registers keyed state (Flink's ``KeyedStateStore``); the states are scoped to the key of
    the record being processed, as those of the ``RuntimeContext``."""

    @abc.abstractmethod
    def get_state(self, state_descriptor: ValueStateDescriptor) -> Any:
        """The ``ValueState`` of ``state_descriptor``."""

    @abc.abstractmethod
    def get_list_state(self, state_descriptor: ListStateDescriptor) -> Any:
        """The ``ListState`` of ``state_descriptor``."""

    @abc.abstractmethod
    def get_map_state(self, state_descriptor: MapStateDescriptor) -> Any:
        """The ``MapState`` of ``state_descriptor``."""

    @abc.abstractmethod
    def get_reducing_state(self, state_descriptor: ReducingStateDescriptor) -> Any:
        """The ``ReducingState`` of ``state_descriptor``."""

    @abc.abstractmethod
    def get_aggregating_state(self, state_descriptor: AggregatingStateDescriptor) -> Any:
        """The ``AggregatingState`` of ``state_descriptor``."""


class DefaultKeyedStateStore(KeyedStateStore):
    """A :class:`KeyedStateStore` over a keyed state backend (Flink's ``DefaultKeyedStateStore``).

    :param backend: the subtask's ``HeapKeyedStateBackend``.
    :param operator_name: named in error messages.
    """

    def __init__(self, backend: Any, operator_name: str = "") -> None:
        self._backend = backend
        self._operator_name = operator_name

    def _state(self, descriptor: Any, expected: type, getter: str) -> Any:
        if not isinstance(descriptor, expected):
            raise TypeError(
                f"{getter} expects a {expected.__name__}, got {descriptor!r} of type "
                f"{type(descriptor).__name__} (operator '{self._operator_name}')"
            )
        return self._backend.get_or_create_keyed_state(descriptor)

    def get_state(self, state_descriptor: ValueStateDescriptor) -> Any:
        """The ``ValueState`` of ``state_descriptor``.

        :raises TypeError: for another kind of descriptor.
        :raises ValueError: if the name is registered with another kind of state.
        """
        return self._state(state_descriptor, ValueStateDescriptor, "get_state")

    def get_list_state(self, state_descriptor: ListStateDescriptor) -> Any:
        """The ``ListState`` of ``state_descriptor``; errors as :meth:`get_state`."""
        return self._state(state_descriptor, ListStateDescriptor, "get_list_state")

    def get_map_state(self, state_descriptor: MapStateDescriptor) -> Any:
        """The ``MapState`` of ``state_descriptor``; errors as :meth:`get_state`."""
        return self._state(state_descriptor, MapStateDescriptor, "get_map_state")

    def get_reducing_state(self, state_descriptor: ReducingStateDescriptor) -> Any:
        """The ``ReducingState`` of ``state_descriptor``; errors as :meth:`get_state`."""
        return self._state(state_descriptor, ReducingStateDescriptor, "get_reducing_state")

    def get_aggregating_state(self, state_descriptor: AggregatingStateDescriptor) -> Any:
        """The ``AggregatingState`` of ``state_descriptor``; errors as :meth:`get_state`."""
        return self._state(state_descriptor, AggregatingStateDescriptor, "get_aggregating_state")


class ManagedInitializationContext(abc.ABC):
    """What a function gets to register its managed state (Flink's
    ``ManagedInitializationContext``)."""

    @abc.abstractmethod
    def is_restored(self) -> bool:
        """Whether the task was restored from a checkpoint or savepoint (also when this
        subtask received no state)."""

    @abc.abstractmethod
    def get_restored_checkpoint_id(self) -> Optional[int]:
        """The id of the checkpoint restored from, or ``None`` (not restored, or unknown)."""

    @abc.abstractmethod
    def get_operator_state_store(self) -> OperatorStateStore:
        """Where to register operator state (list, union list, broadcast)."""

    @abc.abstractmethod
    def get_keyed_state_store(self) -> Optional[KeyedStateStore]:
        """Where to register keyed state; ``None`` on a non-keyed stream (as Flink)."""


class FunctionInitializationContext(ManagedInitializationContext):
    """The context of :meth:`CheckpointedFunction.initialize_state` (Flink's
    ``FunctionInitializationContext``)."""


class ManagedSnapshotContext(abc.ABC):
    """Facts about the checkpoint being taken (Flink's ``ManagedSnapshotContext``)."""

    @abc.abstractmethod
    def get_checkpoint_id(self) -> int:
        """The checkpoint's id (increasing)."""

    @abc.abstractmethod
    def get_checkpoint_timestamp(self) -> int:
        """When the checkpoint was triggered, in epoch ms."""


class FunctionSnapshotContext(ManagedSnapshotContext):
    """The context of :meth:`CheckpointedFunction.snapshot_state` (Flink's
    ``FunctionSnapshotContext``)."""


class StateInitializationContextImpl(FunctionInitializationContext):
    """The initialization context an operator builds (Flink's ``StateInitializationContextImpl``).

    :param restored: whether the task restores from a checkpoint.
    :param operator_state_store: the operator's operator state backend.
    :param keyed_state_store: a :class:`KeyedStateStore`, or ``None`` if not keyed.
    :param restored_checkpoint_id: the restored checkpoint's id, if known.
    """

    def __init__(
        self,
        restored: bool,
        operator_state_store: OperatorStateStore,
        keyed_state_store: Optional[KeyedStateStore],
        restored_checkpoint_id: Optional[int] = None,
    ) -> None:
        self._restored = restored
        self._operator_state_store = operator_state_store
        self._keyed_state_store = keyed_state_store
        self._restored_checkpoint_id = restored_checkpoint_id

    def is_restored(self) -> bool:
        """Whether the task restores from a checkpoint."""
        return self._restored

    def get_restored_checkpoint_id(self) -> Optional[int]:
        """The restored checkpoint's id, or ``None``."""
        return self._restored_checkpoint_id

    def get_operator_state_store(self) -> OperatorStateStore:
        """The operator's operator state backend."""
        return self._operator_state_store

    def get_keyed_state_store(self) -> Optional[KeyedStateStore]:
        """The keyed state store, or ``None`` on a non-keyed stream."""
        return self._keyed_state_store

    def __repr__(self) -> str:
        return f"StateInitializationContextImpl(restored={self._restored}, checkpoint_id={self._restored_checkpoint_id})"


class StateSnapshotContextSynchronousImpl(FunctionSnapshotContext):
    """The snapshot context an operator builds (Flink's ``StateSnapshotContextSynchronousImpl``).

    :param checkpoint_id: the checkpoint's id.
    :param checkpoint_timestamp: when it was triggered, epoch ms.
    """

    def __init__(self, checkpoint_id: int, checkpoint_timestamp: int) -> None:
        self._checkpoint_id = checkpoint_id
        self._checkpoint_timestamp = checkpoint_timestamp

    def get_checkpoint_id(self) -> int:
        """The checkpoint's id."""
        return self._checkpoint_id

    def get_checkpoint_timestamp(self) -> int:
        """When the checkpoint was triggered, epoch ms."""
        return self._checkpoint_timestamp

    def __repr__(self) -> str:
        return f"FunctionSnapshotContext(checkpoint_id={self._checkpoint_id}, timestamp={self._checkpoint_timestamp})"


# -- the interface ------------------------------------------------------------------------------

class CheckpointedFunction(abc.ABC):
    """A function with managed state that takes part in checkpoints (Flink's
    ``CheckpointedFunction``); see the module docstring for when each method is called.
    Exceptions raised by either method fail the task (the checkpoint, for ``snapshot_state``)."""

    @abc.abstractmethod
    def snapshot_state(self, context: FunctionSnapshotContext) -> None:
        """Write what must survive into the registered states; called for every checkpoint."""

    @abc.abstractmethod
    def initialize_state(self, context: FunctionInitializationContext) -> None:
        """Register the function's states (and read the restored ones); called once, before
        ``open``."""


# -- operator side (Flink's StreamingFunctionUtils) ---------------------------------------------

def restore_function_state(operator: Any, user_function: Any) -> None:
    """Call ``user_function.initialize_state`` if it is a :class:`CheckpointedFunction`
    (Flink's ``StreamingFunctionUtils.restoreFunctionState``), with a context built from
    ``operator``: its ``is_restored()``, ``restored_checkpoint_id``, ``operator_state_backend``
    and ``keyed_state_backend`` (a keyed state store only if that is not ``None``)."""
    if not isinstance(user_function, CheckpointedFunction):
        return
    keyed_backend = operator.keyed_state_backend
    name = operator.context.operator_name
    context = StateInitializationContextImpl(
        operator.is_restored(),
        operator.operator_state_backend,
        None if keyed_backend is None else DefaultKeyedStateStore(keyed_backend, name),
        operator.restored_checkpoint_id,
    )
    user_function.initialize_state(context)


def snapshot_function_state(user_function: Any, checkpoint_id: int, checkpoint_timestamp: int) -> None:
    """Call ``user_function.snapshot_state`` if it is a :class:`CheckpointedFunction` (Flink's
    ``StreamingFunctionUtils.snapshotFunctionState``).

    :param checkpoint_id: the checkpoint's id.
    :param checkpoint_timestamp: when it was triggered, epoch ms.
    """
    if isinstance(user_function, CheckpointedFunction):
        user_function.snapshot_state(StateSnapshotContextSynchronousImpl(checkpoint_id, checkpoint_timestamp))


def notify_function_checkpoint_complete(user_function: Any, checkpoint_id: int) -> None:
    """Call ``user_function.notify_checkpoint_complete`` if it is a ``CheckpointListener``
    (:class:`rill.common.functions.CheckpointListener`), as Flink's
    ``AbstractUdfStreamOperator`` does."""
    if isinstance(user_function, CheckpointListener):
        user_function.notify_checkpoint_complete(checkpoint_id)


def notify_function_checkpoint_aborted(user_function: Any, checkpoint_id: int) -> None:
    """Call ``user_function.notify_checkpoint_aborted`` if it is a ``CheckpointListener``."""
    if isinstance(user_function, CheckpointListener):
        user_function.notify_checkpoint_aborted(checkpoint_id)
