"""Builds an operator's state services from a restored snapshot or from nothing, and takes
them back into a snapshot (Flink's ``StreamTaskStateInitializerImpl`` and the snapshot half of
``StreamOperatorStateHandler``, ``org.apache.flink.streaming.api.operators``).

The one place where backends, timers and the snapshot record meet: the task
(``rill.runtime.tasks.stream_task``) and both operator test harnesses
(:mod:`rill.operators.testing`, :mod:`rill.operators.testing_two_input`) call
:meth:`StreamTaskStateInitializer.initialize` for every operator, and
:func:`snapshot_operator_state` gives the
:class:`~rill.state.checkpoint.operator_subtask_state.OperatorSubtaskState` that
``initialize`` restores from. A checkpoint takes the snapshot in two parts, as Flink's
``StreamOperatorStateHandler.snapshotState`` and ``OperatorSnapshotFinalizer``:
:func:`snapshot_operator_state_sync` on the task thread (the operator's ``snapshot_state``,
the timers and the keyed state backend's ``sync_prepare_resources``), then
:meth:`OperatorSnapshotFutures.finalize` on the checkpoint's asynchronous thread (the keyed
state's record built from the copy-on-write view).

Threading: everything but :meth:`OperatorSnapshotFutures.finalize` runs on the task thread
(the harness' thread in tests).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Optional, Tuple

from rill.operators.base import StreamOperator
from rill.operators.context import StreamOperatorContext
from rill.operators.runtime_context import StreamingRuntimeContext
from rill.operators.timer_service import InternalTimeServiceManager
from rill.state.backend import KeyedSnapshotResources, KeyedStateBackend, OperatorStateBackend
from rill.state.checkpoint.operator_subtask_state import OperatorSubtaskState
from rill.state.heap import HeapKeyedStateBackend
from rill.state.key_groups import KeyGroupRange, compute_key_group_range_for_operator_index
from rill.state.operator_state import DefaultOperatorStateBackend

__all__ = ["StreamTaskStateInitializer", "OperatorSnapshotFutures", "snapshot_operator_state",
           "snapshot_operator_state_sync"]

#: ``(key_group_range, max_parallelism) -> KeyedStateBackend``
KeyedStateBackendFactory = Callable[[KeyGroupRange, int], KeyedStateBackend]
#: ``operator_name -> OperatorStateBackend``
OperatorStateBackendFactory = Callable[[str], OperatorStateBackend]


class StreamTaskStateInitializer:
    """Gives an operator its keyed state backend and internal timer service manager (keyed
    operators only), its operator state backend and its runtime context, restored from an
    ``OperatorSubtaskState`` or empty.

    :param keyed_state_backend_factory: makes the keyed state backend of a subtask's key-group
        range (default :class:`~rill.state.heap.HeapKeyedStateBackend`).
    :param operator_state_backend_factory: makes the operator state backend from the operator's
        name (default :class:`~rill.state.operator_state.DefaultOperatorStateBackend`).
    """

    def __init__(
        self,
        keyed_state_backend_factory: KeyedStateBackendFactory = HeapKeyedStateBackend,
        operator_state_backend_factory: OperatorStateBackendFactory = DefaultOperatorStateBackend,
    ) -> None:
        self._keyed_state_backend_factory = keyed_state_backend_factory
        self._operator_state_backend_factory = operator_state_backend_factory

    def initialize(self, ctx: StreamOperatorContext,
                   restored: Optional[OperatorSubtaskState] = None) -> StreamOperatorContext:
        """Fill ``keyed_state_backend`` and ``timer_service_manager`` (when the operator has a
        state key selector: keyed), ``operator_state_backend``, ``runtime_context`` and, when
        ``restored`` is given, ``restored`` / ``restored_checkpoint_id`` of ``ctx`` in place;
        returns ``ctx``. The keyed backend covers the key groups of subtask
        ``ctx.subtask_index`` of ``ctx.parallelism`` and takes from ``restored`` only those.

        :raises ValueError: if ``restored`` holds keyed state or timers for an operator that is
            not keyed, or as the backends' ``restore`` (another max parallelism, a state
            restored as another kind or mode).
        """
        keyed = ctx.key_selector is not None or ctx.key_selector2 is not None
        if restored is not None and not keyed and (restored.keyed_state or restored.timers):
            raise ValueError(
                f"Operator '{ctx.operator_name}' is not keyed, but the state it restores from has "
                "keyed state or timers (was the key_by removed?)"
            )
        if keyed:
            key_groups = compute_key_group_range_for_operator_index(
                ctx.max_parallelism, ctx.parallelism, ctx.subtask_index)
            backend = self._keyed_state_backend_factory(key_groups, ctx.max_parallelism)
            if restored is not None:
                backend.restore(restored.keyed_state)
            ctx.keyed_state_backend = backend
            ctx.timer_service_manager = InternalTimeServiceManager(
                key_groups, backend, ctx.processing_time_service,
                None if restored is None else restored.timers)
        operator_backend = self._operator_state_backend_factory(ctx.operator_name)
        if restored is not None:
            operator_backend.restore(restored.operator_state)
            ctx.restored = True
            ctx.restored_checkpoint_id = restored.checkpoint_id
        ctx.operator_state_backend = operator_backend
        ctx.runtime_context = StreamingRuntimeContext(ctx)
        return ctx


class OperatorSnapshotFutures:
    """The synchronous part of one operator's snapshot, waiting for its asynchronous part
    (Flink's ``OperatorSnapshotFutures``, finalized as ``OperatorSnapshotFinalizer`` does).

    :param checkpoint_id: the checkpoint's id.
    :param operator_state: the operator state snapshot (``{name: (mode, entries)}``), taken.
    :param keyed_resources: the keyed state backend's prepared resources, or ``None`` for a
        non-keyed operator.
    :param timers: by timer service name, its prepared snapshot (``get()`` gives the
        ``TimerServiceSnapshot``; ``InternalTimeServiceManager.snapshot_sync``).
    """

    __slots__ = ("checkpoint_id", "_operator_state", "_keyed_resources", "_timers", "_key_type")

    def __init__(self, checkpoint_id: int, operator_state: Mapping[str, Tuple[str, Any]],
                 keyed_resources: Optional[KeyedSnapshotResources],
                 timers: Mapping[str, Any], key_type: Any = None) -> None:
        self.checkpoint_id = checkpoint_id
        self._operator_state = operator_state
        self._keyed_resources = keyed_resources
        self._timers = timers
        self._key_type = key_type

    def finalize(self) -> OperatorSubtaskState:
        """The operator's :class:`OperatorSubtaskState` (any thread, once): the keyed state's
        record is built from the resources, which are released.

        :raises RuntimeError: if called twice (the resources are released).
        """
        resources = self._keyed_resources
        keyed = ()
        if resources is not None:
            try:
                snapshot = resources.async_snapshot()
            finally:
                resources.release()
            if self._key_type is not None and snapshot.key_type is None:
                snapshot = dataclasses.replace(snapshot, key_type=self._key_type)
            keyed = (snapshot,)
        timers = {name: prepared.get() for name, prepared in self._timers.items()}
        return OperatorSubtaskState(checkpoint_id=self.checkpoint_id, operator_state=self._operator_state,
                                    keyed_state=keyed, timers=timers)


def snapshot_operator_state_sync(operator: StreamOperator, checkpoint_id: int, timestamp: int
                                 ) -> OperatorSnapshotFutures:
    """The synchronous part of the operator's snapshot (task thread): first the operator's own
    ``snapshot_state`` (a ``CheckpointedFunction`` writes its fields into its states; the
    operator state backend's snapshot), then a copy of the timers of its context
    (``InternalTimeServiceManager.snapshot_sync``: C-level dict copies, ordered later) and the
    keyed state backend's :meth:`~rill.state.backend.KeyedStateBackend.sync_prepare_resources` (O(key
    groups) for the heap backend). :meth:`OperatorSnapshotFutures.finalize` gives the record.

    :param checkpoint_id: the checkpoint's id.
    :param timestamp: when the checkpoint was triggered, epoch ms.
    :raises RuntimeError: if the keyed state backend was disposed.
    """
    operator_state = operator.snapshot_state(checkpoint_id, timestamp)
    ctx = operator.context
    keyed = ctx.keyed_state_backend
    timers = ctx.timer_service_manager
    return OperatorSnapshotFutures(
        checkpoint_id, operator_state,
        None if keyed is None else keyed.sync_prepare_resources(),
        {} if timers is None else timers.snapshot_sync(),
        ctx.key_type,
    )


def snapshot_operator_state(operator: StreamOperator, checkpoint_id: int, timestamp: int) -> OperatorSubtaskState:
    """The operator's state now, as the record :meth:`StreamTaskStateInitializer.initialize`
    restores from: both parts of :func:`snapshot_operator_state_sync` on the calling thread.

    :param checkpoint_id: the checkpoint's id.
    :param timestamp: when the checkpoint was triggered, epoch ms.
    :raises RuntimeError: if the keyed state backend was disposed.
    """
    return snapshot_operator_state_sync(operator, checkpoint_id, timestamp).finalize()
