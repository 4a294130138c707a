"""The interfaces of state backends (Flink's ``KeyedStateBackend`` with
``CheckpointableKeyedStateBackend``, and ``OperatorStateBackend``,
``org.apache.flink.runtime.state``).

What the runtime, the operators and the ``StreamTaskStateInitializer`` call, so that a new
backend (another storage, another snapshot strategy) plugs in without touching them. The heap
backend (:class:`rill.state.heap.HeapKeyedStateBackend`) and the operator state backend
(:class:`rill.state.operator_state.DefaultOperatorStateBackend`) are the first implementations;
``tests/state/test_backend_conformance.py`` runs the same suite on every implementation.

Threading: a backend belongs to one subtask and is used from its task thread only.

Rill difference: Flink restores a backend in its builder (``HeapRestoreOperation``); here
:meth:`KeyedStateBackend.restore` loads into an empty backend after construction, which lets
the state initializer build every backend one way and restore the ones that have state.
"""

from __future__ import annotations

import abc
from typing import Any, Callable, Iterator, List, Mapping, Sequence, Tuple

from rill.state.checkpoint.operator_subtask_state import KeyedStateSnapshot
from rill.state.descriptors import StateDescriptor
from rill.state.key_groups import KeyGroupRange
from rill.state.operator_state_store import OperatorStateStore

__all__ = ["KeyedStateBackend", "KeyedSnapshotResources", "OperatorStateBackend"]


def check_namespace(namespace: Any, descriptor: Any) -> None:
    """A namespace must hash (state tables and RocksDB keys are built on it).

    :raises TypeError: naming the namespace, its type and the state, if it does not.
    """
    try:
        hash(namespace)
    except TypeError:
        raise TypeError(f"Namespace {namespace!r} of type {type(namespace).__name__} is unhashable "
                        f"(state {getattr(descriptor, 'name', descriptor)!r})") from None


def check_same_kind(registered: Any, descriptor: Any) -> None:
    """A state name keeps the kind it was registered with (Flink's ``StateMigrationException``
    for an incompatible descriptor).

    :raises ValueError: naming the state, the registered kind and the requested one.
    """
    if registered.state_type is not descriptor.state_type:
        raise ValueError(
            f"State '{descriptor.name}' is registered as a {registered.state_type.name} state "
            f"({type(registered).__name__}); it cannot be accessed as a "
            f"{descriptor.state_type.name} state ({type(descriptor).__name__})")


class KeyedSnapshotResources(abc.ABC):
    """What the synchronous part of a keyed state snapshot captured, to be turned into the
    snapshot record in the asynchronous part (Flink's ``SnapshotResources`` of a
    ``SnapshotStrategy``, with ``asyncSnapshot``'s work as :meth:`async_snapshot`).

    Threading: created on the task thread by :meth:`KeyedStateBackend.sync_prepare_resources`;
    :meth:`async_snapshot` and :meth:`release` may run on any one thread (the checkpoint's
    asynchronous part) while the task goes on using the backend.
    """

    __slots__ = ()

    @abc.abstractmethod
    def async_snapshot(self) -> KeyedStateSnapshot:
        """The snapshot record of the state as it was when the resources were prepared;
        later updates and in-place mutation of stored values on the task thread do not change
        it. May be called once.

        :raises RuntimeError: after :meth:`release`.
        """

    @abc.abstractmethod
    def release(self) -> None:
        """Drop what the resources hold (Flink's ``SnapshotResources.release``); idempotent."""


class KeyedStateBackend(abc.ABC):
    """Keyed state of one subtask over its key-group range (Flink's ``KeyedStateBackend``).

    A backend has a *current key*: every state object it hands out reads and writes the entry
    of that key (and of the namespace the state object is bound to).
    """

    __slots__ = ()

    # -- key context ------------------------------------------------------------------------
    @abc.abstractmethod
    def set_current_key(self, key: Any) -> None:
        """Make ``key`` current for every state object of this backend.

        :raises UnsupportedKeyError: if ``key`` has no stable hash; the previous key stays.
        :raises ValueError: if the key's group is outside the backend's range (the record was
            routed to the wrong subtask); the previous key stays.
        """

    @abc.abstractmethod
    def get_current_key(self) -> Any:
        """The current key (``None`` before the first :meth:`set_current_key`)."""

    @abc.abstractmethod
    def get_current_key_group_index(self) -> int:
        """The current key's key group.

        :raises RuntimeError: if no key was set.
        """

    @abc.abstractmethod
    def get_key_group_range(self) -> KeyGroupRange:
        """The key groups this backend owns (Flink's ``getKeyGroupRange``)."""

    @abc.abstractmethod
    def get_number_of_key_groups(self) -> int:
        """The operator's number of key groups, i.e. its max parallelism."""

    @abc.abstractmethod
    def register_key_selection_listener(self, listener: Callable[[Any], None]) -> None:
        """Call ``listener(key)`` after every successful :meth:`set_current_key`.

        :raises TypeError: if ``listener`` is not callable.
        """

    # -- state ------------------------------------------------------------------------------
    @abc.abstractmethod
    def get_or_create_keyed_state(self, descriptor: StateDescriptor) -> Any:
        """The state of ``descriptor``, created on first use, in the default namespace.

        :raises TypeError: if ``descriptor`` is not a ``StateDescriptor``.
        :raises ValueError: if its name is registered with another kind of state.
        :raises RuntimeError: after :meth:`dispose`.
        """

    @abc.abstractmethod
    def get_partitioned_state(self, namespace: Any, descriptor: StateDescriptor) -> Any:
        """As :meth:`get_or_create_keyed_state`, bound to ``namespace`` (windows use the window).

        :raises TypeError: if ``namespace`` is unhashable, or as :meth:`get_or_create_keyed_state`.
        :raises ValueError, RuntimeError: as :meth:`get_or_create_keyed_state`.
        """

    @abc.abstractmethod
    def get_registered_state_names(self) -> List[str]:
        """Names of the registered states, in registration order."""

    @abc.abstractmethod
    def get_keys(self, state_name: str, namespace: Any) -> Iterator[Any]:
        """Every key with an entry of ``state_name`` in ``namespace`` (Flink's ``getKeys``)."""

    @abc.abstractmethod
    def apply_to_all_keys(self, namespace: Any, descriptor: StateDescriptor,
                          function: Callable[[Any, Any], None]) -> None:
        """Call ``function(key, state)`` for every key with an entry of ``descriptor``'s state in
        ``namespace``, with that key current (Flink's ``applyToAllKeys``)."""

    @abc.abstractmethod
    def num_key_value_state_entries(self) -> int:
        """Number of (key, namespace) entries over all states."""

    # -- snapshot, restore, disposal --------------------------------------------------------
    @abc.abstractmethod
    def sync_prepare_resources(self) -> KeyedSnapshotResources:
        """The synchronous part of a snapshot (Flink's ``SnapshotStrategy.syncPrepareResources``):
        capture a consistent view of every registered state, as cheaply as the backend can
        (the heap backend: O(key groups), copy-on-write), for
        :meth:`KeyedSnapshotResources.async_snapshot` to turn into the record off the task
        thread. Task thread only.

        :raises RuntimeError: after :meth:`dispose`.
        """

    def snapshot(self) -> KeyedStateSnapshot:
        """Every registered state, key group by key group, as it is now: later updates and
        in-place mutation of stored values do not change the returned record. Both parts of
        a snapshot on the calling thread (:meth:`sync_prepare_resources`, then
        ``async_snapshot``).

        :raises RuntimeError: after :meth:`dispose`.
        """
        resources = self.sync_prepare_resources()
        try:
            return resources.async_snapshot()
        finally:
            resources.release()

    @abc.abstractmethod
    def restore(self, snapshots: Sequence[KeyedStateSnapshot]) -> None:
        """Load the key groups of ``snapshots`` that lie in this backend's range into it (one
        snapshot of the same range, or several old subtasks' after rescaling); states are
        registered with the snapshot's descriptors.

        :raises ValueError: if a snapshot's max parallelism differs from the backend's, or a
            state is registered here with another kind of state.
        :raises RuntimeError: after :meth:`dispose`.
        """

    @abc.abstractmethod
    def dispose(self) -> None:
        """Drop all state; the backend must not be used afterwards."""


class OperatorStateBackend(OperatorStateStore):
    """Operator (non-keyed) state of one operator subtask (Flink's ``OperatorStateBackend``):
    the :class:`~rill.state.operator_state_store.OperatorStateStore` a function registers its
    list, union list and broadcast state with, plus snapshot, restore and disposal.

    A snapshot is plain data, ``{name: (mode name, entries)}`` (see
    :mod:`rill.state.operator_state`).
    """

    __slots__ = ()

    @abc.abstractmethod
    def snapshot(self) -> Mapping[str, Tuple[str, List[Any]]]:
        """Every registered state as ``{name: (mode name, entries)}``; later changes to the
        states do not change the returned data."""

    @abc.abstractmethod
    def restore(self, snapshot: Mapping[str, Tuple[str, Sequence[Any]]]) -> None:
        """Load one subtask's share of operator state (as :meth:`snapshot` or
        ``rill.state.operator_state.redistribute`` give it).

        :raises ValueError: for an unknown mode or a mode other than the registered one;
            nothing is loaded then.
        """

    @abc.abstractmethod
    def dispose(self) -> None:
        """Drop every state."""
