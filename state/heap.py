"""The heap keyed state backend (Flink's ``HeapKeyedStateBackend``).

Keyed state lives in Python dicts on the task's heap, organized by key group so that snapshots
and rescaling can move whole key groups. One :class:`~rill.state.state_table.StateTable` per
registered state; its layout (``key_group_maps[kg - start][namespace][key] -> value``) is
documented in :mod:`rill.state.state_table`.

Threading: a backend belongs to one subtask and is used only from its task thread (the
mailbox loop), so nothing here takes a lock. The one exception is a snapshot's asynchronous
part (:meth:`HeapKeyedStateBackend.sync_prepare_resources`): it reads key-group dicts that the
synchronous part pinned, which the task no longer writes (copy-on-write per key group,
:mod:`rill.state.copy_on_write`).

Per-record cost: the operator calls :meth:`HeapKeyedStateBackend.set_current_key` once per
record; it finds the key's group through a bounded cache (a dict look-up on a hit) and stores the
key and the offset of its key group in the range. State objects read both fields directly.

State TTL: a descriptor with an enabled ``StateTtlConfig`` gets a TTL state
(:mod:`rill.state.ttl`) around a heap state storing ``(value, last_access_ms)`` TTL values; the
backend's ``ttl_time_provider`` (a callable returning epoch ms) is its clock. States without TTL
are the plain heap states, with nothing added to their access path.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from rill.state.api import VOID_NAMESPACE
from rill.state.backend import KeyedStateBackend, check_namespace, check_same_kind
from rill.state.checkpoint.operator_subtask_state import KeyedStateSnapshot
from rill.state.heap_snapshot import HeapSnapshotResources
from rill.state.descriptors import StateDescriptor, StateType
from rill.state.heap_states import (
    AbstractHeapState,
    HeapAggregatingState,
    HeapListState,
    HeapMapState,
    HeapReducingState,
    HeapValueState,
)
from rill.state.key_groups import (
    UPPER_BOUND_MAX_PARALLELISM,
    KeyGroupRange,
    UnsupportedKeyError,
    assign_to_key_group,
)
from rill.state.state_table import StateTable
from rill.state.typed_state import apply_declared_type
from rill.state.ttl import (
    AbstractTtlState,
    StateTtlConfig,
    TtlTimeProvider,
    create_ttl_state,
    default_ttl_time_provider,
)

__all__ = ["HeapKeyedStateBackend", "DEFAULT_KEY_GROUP_CACHE_SIZE"]

#: Entries of the key -> key-group cache before it is cleared.
DEFAULT_KEY_GROUP_CACHE_SIZE = 1 << 18

_ALL_NAMESPACES: Any = object()

_STATE_CLASSES = {
    StateType.VALUE: HeapValueState,
    StateType.LIST: HeapListState,
    StateType.MAP: HeapMapState,
    StateType.REDUCING: HeapReducingState,
    StateType.AGGREGATING: HeapAggregatingState,
}


class HeapKeyedStateBackend(KeyedStateBackend):
    """Keyed state of one subtask, on the heap (Flink's ``HeapKeyedStateBackend``).

    :param key_group_range: the key groups this subtask owns
        (``compute_key_group_range_for_operator_index``); must not be empty.
    :param max_parallelism: the operator's number of key groups, ``1..32768``; the range must
        lie inside ``[0, max_parallelism - 1]``.
    :param key_group_cache_size: entries of the key -> key-group cache before it is cleared.
    :param ttl_time_provider: the clock of state TTL, a callable returning epoch ms (Flink's
        ``TtlTimeProvider``); default wall-clock time. Tests inject a manual clock.
    :raises TypeError: if ``key_group_range`` is not a ``KeyGroupRange`` or
        ``ttl_time_provider`` is not callable.
    :raises ValueError: for an empty range, a bad ``max_parallelism`` or a range outside it.
    """

    __slots__ = (
        "_current_key",
        "_kg_offset",
        "_key_group_cache",
        "_key_group_cache_size",
        "key_group_range",
        "max_parallelism",
        "_start",
        "_num_key_groups",
        "_tables",
        "_states",
        "_disposed",
        "_ttl_time_provider",
        "_key_selection_listeners",
    )

    def __init__(
        self,
        key_group_range: KeyGroupRange,
        max_parallelism: int,
        key_group_cache_size: int = DEFAULT_KEY_GROUP_CACHE_SIZE,
        ttl_time_provider: Optional[TtlTimeProvider] = None,
    ) -> None:
        if ttl_time_provider is not None and not callable(ttl_time_provider):
            raise TypeError(f"ttl_time_provider must be callable (returning epoch ms), got {ttl_time_provider!r}")
        if not isinstance(key_group_range, KeyGroupRange):
            raise TypeError(
                f"key_group_range must be a KeyGroupRange, got {type(key_group_range).__name__}"
            )
        if type(max_parallelism) is not int or not 0 < max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
            raise ValueError(
                f"Maximum parallelism must be an int between 1 and {UPPER_BOUND_MAX_PARALLELISM}, "
                f"got {max_parallelism!r}"
            )
        if key_group_range.get_number_of_key_groups() == 0:
            raise ValueError(f"A keyed state backend needs key groups, got the empty {key_group_range}")
        if key_group_range.end_key_group >= max_parallelism:
            raise ValueError(
                f"{key_group_range} does not fit into max parallelism {max_parallelism} "
                f"(key groups 0..{max_parallelism - 1})"
            )
        if key_group_cache_size < 1:
            raise ValueError(f"key_group_cache_size must be >= 1, got {key_group_cache_size}")
        self.key_group_range = key_group_range
        self.max_parallelism = max_parallelism
        self._start = key_group_range.start_key_group
        self._num_key_groups = key_group_range.get_number_of_key_groups()
        self._current_key: Any = None
        #: offset of the current key's group in the range; ``None`` until a key is set
        self._kg_offset: Optional[int] = None
        self._key_group_cache: Dict[Any, int] = {}
        self._key_group_cache_size = key_group_cache_size
        self._tables: Dict[str, StateTable] = {}
        self._states: Dict[str, Union[AbstractHeapState, AbstractTtlState]] = {}
        self._disposed = False
        self._ttl_time_provider: TtlTimeProvider = (
            default_ttl_time_provider if ttl_time_provider is None else ttl_time_provider
        )
        self._key_selection_listeners: List[Callable[[Any], None]] = []

    # -- key context ------------------------------------------------------------------------
    def set_current_key(self, key: Any) -> None:
        """Make ``key`` the key that every state object of this backend reads and writes.

        :raises UnsupportedKeyError: if ``key`` has no stable hash (list, dict, set, arbitrary
            objects); the previous key stays current.
        :raises ValueError: if the key's group is not in this backend's range (the record was
            routed to the wrong subtask); the previous key stays current.
        """
        try:
            self._kg_offset = self._key_group_cache[key]
        except (KeyError, TypeError):
            self._kg_offset = self._compute_key_group_offset(key)
        self._current_key = key

    @property
    def key_group_cache(self) -> Dict[Any, int]:
        """The key → key-group-offset cache behind :meth:`set_current_key`, for operators'
        per-batch fast paths: read it, never write it; on a miss call
        :meth:`compute_key_group_offset`, which fills it. The same dict for the backend's life
        (it is cleared, not replaced, when full)."""
        return self._key_group_cache

    def compute_key_group_offset(self, key: Any) -> int:
        """Index of ``key``'s group in this backend's range, i.e. the index into
        ``StateTable.key_group_maps`` (through the same cache as :meth:`set_current_key`).

        For operators that write ``key_group_maps`` directly on a per-batch fast path.

        :raises UnsupportedKeyError: as :meth:`set_current_key`.
        :raises ValueError: as :meth:`set_current_key`.
        """
        try:
            return self._key_group_cache[key]
        except (KeyError, TypeError):
            return self._compute_key_group_offset(key)

    def _compute_key_group_offset(self, key: Any) -> int:
        key_group = assign_to_key_group(key, self.max_parallelism)
        offset = key_group - self._start
        if not 0 <= offset < self._num_key_groups:
            raise ValueError(
                f"Key group {key_group} is not in {self.key_group_range}. Unless you're directly "
                "using low level state access APIs, this is most likely caused by "
                "non-deterministic shuffle key (hashCode and equals implementation)."
            )
        cache = self._key_group_cache
        if len(cache) >= self._key_group_cache_size:
            cache.clear()
        try:
            cache[key] = offset
        except TypeError:
            raise UnsupportedKeyError(
                f"key of type {type(key).__name__} is unhashable: it cannot key a state table"
            ) from None
        return offset

    def register_key_selection_listener(self, listener: Callable[[Any], None]) -> None:
        """Call ``listener(key)`` after every successful :meth:`set_current_key` (Flink's
        ``registerKeySelectionListener``; TTL's ``run_cleanup_for_every_record`` uses it).

        Rill difference, for speed: a backend without listeners keeps the plain
        ``set_current_key``; the first listener switches the instance to a subclass whose
        ``set_current_key`` also calls the listeners. Operators that cached the bound
        ``set_current_key`` before (they look it up per batch) call the listeners from their
        next batch on.

        :raises TypeError: if ``listener`` is not callable.
        """
        if not callable(listener):
            raise TypeError(f"A key selection listener must be callable, got {listener!r}")
        self._key_selection_listeners.append(listener)
        if type(self) is HeapKeyedStateBackend:
            self.__class__ = _ListeningHeapKeyedStateBackend

    def get_current_key(self) -> Any:
        """The current key (``None`` before the first :meth:`set_current_key`)."""
        return self._current_key

    def get_current_key_group_index(self) -> int:
        """The current key's (absolute) key group (Flink's ``getCurrentKeyGroupIndex``).

        :raises RuntimeError: if no key was set.
        """
        if self._kg_offset is None:
            raise RuntimeError("No key set. This method should not be called outside of a keyed context.")
        return self._kg_offset + self._start

    def get_key_group_range(self) -> KeyGroupRange:
        """The key groups this backend owns."""
        return self.key_group_range

    def get_number_of_key_groups(self) -> int:
        """The total number of key groups, i.e. the max parallelism (as Flink)."""
        return self.max_parallelism

    # -- state registration -----------------------------------------------------------------
    def get_or_create_keyed_state(self, descriptor: StateDescriptor) -> Any:
        """The state registered under ``descriptor.name``, created on first use, bound to the
        backend's current key and to :data:`~rill.state.api.VOID_NAMESPACE` (the namespace is
        reset on every call, as Flink's ``RuntimeContext.getState`` does).

        :raises TypeError: if ``descriptor`` is not a ``StateDescriptor``.
        With an enabled TTL configuration (``descriptor.enable_time_to_live``) the state is a
        TTL state of :mod:`rill.state.ttl`; a ``Disabled`` update type means no TTL (as Flink).
        The first registration of a name decides; later descriptors of the same name and kind
        get that state whatever their TTL setting.

        :raises TypeError: if ``descriptor`` is not a ``StateDescriptor``, or its TTL
            configuration is not a ``StateTtlConfig``.
        :raises ValueError: if the name is registered with another kind of state.
        :raises RuntimeError: after :meth:`dispose`.
        """
        state = self._get_or_create(descriptor)
        state.set_current_namespace(VOID_NAMESPACE)
        return state

    def get_partitioned_state(self, namespace: Any, descriptor: StateDescriptor) -> Any:
        """As :meth:`get_or_create_keyed_state`, with the state bound to ``namespace`` (any
        hashable object; windows use the window) (Flink's ``getPartitionedState``).

        :raises TypeError: if ``namespace`` is unhashable or ``descriptor`` is not a descriptor.
        :raises ValueError, RuntimeError: as :meth:`get_or_create_keyed_state`.
        """
        check_namespace(namespace, descriptor)
        state = self._get_or_create(descriptor)
        state.set_current_namespace(namespace)
        return state

    def _get_or_create(self, descriptor: StateDescriptor) -> Any:
        if self._disposed:
            raise RuntimeError("The keyed state backend has been disposed")
        if not isinstance(descriptor, StateDescriptor):
            raise TypeError(f"Expected a StateDescriptor, got {descriptor!r} of type {type(descriptor).__name__}")
        name = descriptor.name
        state = self._states.get(name)
        if state is not None:
            check_same_kind(self._tables[name].descriptor, descriptor)
            return state
        table = StateTable(descriptor, self.key_group_range)
        ttl_config = descriptor.get_ttl_config()
        if ttl_config is None or not _ttl_enabled(ttl_config, name):
            state = _STATE_CLASSES[descriptor.state_type](self, table)
        else:
            state = create_ttl_state(self, table, ttl_config, self._ttl_time_provider)
        # a declared FLOAT / INT ... type acts on writes as Flink's state serializer does
        state = apply_declared_type(state, descriptor)
        self._tables[name] = table
        self._states[name] = state
        return state

    def get_state_table(self, state_name: str) -> StateTable:
        """The :class:`StateTable` of a registered state.

        :raises KeyError: if no state of that name is registered.
        """
        try:
            return self._tables[state_name]
        except KeyError:
            raise KeyError(
                f"No keyed state named {state_name!r} is registered (registered: {sorted(self._tables)})"
            ) from None

    def get_ttl_time_provider(self) -> TtlTimeProvider:
        """The clock of state TTL (a callable returning epoch ms)."""
        return self._ttl_time_provider

    # -- snapshot support -------------------------------------------------------------------
    def get_snapshot_transformer(self, state_name: str) -> Optional[Callable[[Any], Any]]:
        """For snapshot writers: ``None`` if the state's stored values are written as they
        are, else a function ``stored -> stored or None`` that leaves out what has expired
        (a TTL state with ``cleanup_full_snapshot()``; Flink's ``StateSnapshotTransformer``).
        The time is read once, when this is called. Live state is not modified.

        :raises KeyError: if no state of that name is registered.
        """
        self.get_state_table(state_name)  # raises the KeyError
        state = self._states[state_name]
        if isinstance(state, AbstractTtlState) and state.ttl_config.get_cleanup_strategies().in_full_snapshot():
            return state.create_snapshot_transformer()
        return None

    def iter_snapshot_entries(self, state_name: str, key_group: int) -> Iterator[Tuple[Any, Any, Any]]:
        """Yield ``(key, namespace, stored_value)`` of one key group of a state as a snapshot
        must write them: after :meth:`get_snapshot_transformer` (expired TTL values left out
        with ``cleanup_full_snapshot()``). TTL states yield TTL-layout values (see
        :mod:`rill.state.ttl`). The table must not be modified while the iterator is in use.

        :raises KeyError: if no state of that name is registered.
        :raises ValueError: if ``key_group`` is outside the backend's range.
        """
        table = self.get_state_table(state_name)
        transform = self.get_snapshot_transformer(state_name)
        if transform is None:
            yield from table.iter_key_group(key_group)
            return
        for key, namespace, stored in table.iter_key_group(key_group):
            kept = transform(stored)
            if kept is not None:
                yield key, namespace, kept

    def get_registered_state_names(self) -> List[str]:
        """Names of the registered states, in registration order."""
        return list(self._tables)

    def sync_prepare_resources(self) -> HeapSnapshotResources:
        """The synchronous part of a snapshot (Flink's ``HeapSnapshotStrategy
        .syncPrepareResources``): every state table pins its key groups (copy-on-write, see
        :mod:`rill.state.copy_on_write`) and the TTL snapshot transformers read the clock.
        O(states × key groups), independent of the number of entries. The returned
        :class:`~rill.state.heap_snapshot.HeapSnapshotResources` give the
        :class:`~rill.state.checkpoint.operator_subtask_state.KeyedStateSnapshot` on any thread;
        later updates and in-place mutation of values on the task thread do not reach it.
        Expired TTL values are left out as :meth:`iter_snapshot_entries` does.

        :raises RuntimeError: after :meth:`dispose`.
        """
        if self._disposed:
            raise RuntimeError("The keyed state backend has been disposed")
        return HeapSnapshotResources(self.max_parallelism, self.key_group_range, {
            name: (table.descriptor, table.pin(), self.get_snapshot_transformer(name))
            for name, table in self._tables.items()})

    def restore(self, snapshots: Sequence[KeyedStateSnapshot]) -> None:
        """Load the entries of ``snapshots`` whose key groups lie in this backend's range
        (others are skipped: after rescaling they belong to another subtask), registering each
        snapshot's states with its descriptors. Stored values are deep-copied in, so the
        snapshots stay as they were, except values nothing can mutate (see
        :func:`_unshared`: a restore of 10^6 string values spent most of its time in
        ``deepcopy``); keys and namespaces are hashable and shared. Existing entries of the
        same key and namespace are replaced.

        :raises ValueError: if a snapshot's max parallelism differs from the backend's, or a
            state name is registered here with another kind of state; nothing is loaded then.
        :raises RuntimeError: after :meth:`dispose`.
        """
        if self._disposed:
            raise RuntimeError("The keyed state backend has been disposed")
        for snap in snapshots:
            if snap.max_parallelism != self.max_parallelism:
                raise ValueError(
                    f"Cannot restore keyed state of max parallelism {snap.max_parallelism} into a "
                    f"backend of max parallelism {self.max_parallelism} (the key groups differ)"
                )
            for name, descriptor in snap.descriptors.items():
                table = self._tables.get(name)
                if table is not None and table.descriptor.state_type is not descriptor.state_type:
                    raise ValueError(
                        f"Cannot restore state '{name}' as a {descriptor.state_type.name} state: "
                        f"it is registered as a {table.descriptor.state_type.name} state"
                    )
        for snap in snapshots:
            for descriptor in snap.descriptors.values():
                self._get_or_create(descriptor)
            for key_group, states in snap.key_groups.items():
                if not self.key_group_range.contains(key_group):
                    continue
                for name, entries in states.items():
                    table = self._tables[name]
                    by_namespace = table.key_group_maps[key_group - table.key_group_range.start_key_group]
                    for key, namespace, stored in entries:
                        if stored is None:
                            table.remove(key, key_group, namespace)
                            continue
                        by_key = by_namespace.get(namespace)
                        if by_key is None:
                            by_key = by_namespace[namespace] = {}
                        by_key[key] = _unshared(stored)

    # -- whole-backend access ---------------------------------------------------------------
    def get_keys(self, state_name: str, namespace: Any) -> Iterator[Any]:
        """Every key with an entry of ``state_name`` in ``namespace``, key group by key group
        (Flink's ``getKeys``); empty if no such state is registered. The keys of each key group
        are copied before they are yielded, so the caller may modify state meanwhile."""
        table = self._tables.get(state_name)
        if table is None:
            return iter(())
        return table.get_keys(namespace)

    def apply_to_all_keys(
        self,
        namespace: Any,
        descriptor: StateDescriptor,
        function: Callable[[Any, AbstractHeapState], None],
    ) -> None:
        """Call ``function(key, state)`` for every key with an entry of ``descriptor``'s state
        in ``namespace``, with that key current (Flink's ``applyToAllKeys``). The function may
        read, update or clear the state. The previous current key and the state's namespace
        are restored afterwards (Flink leaves the last key current).

        :raises: whatever :meth:`get_partitioned_state` or ``function`` raises.
        """
        previous = self._states.get(getattr(descriptor, "name", None))
        previous_namespace = VOID_NAMESPACE if previous is None else previous.get_current_namespace()
        saved_key, saved_offset = self._current_key, self._kg_offset
        state = self.get_partitioned_state(namespace, descriptor)
        try:
            for key in self._tables[descriptor.name].get_keys(namespace):
                self.set_current_key(key)
                function(key, state)
        finally:
            self._current_key, self._kg_offset = saved_key, saved_offset
            state.set_current_namespace(previous_namespace)

    def num_key_value_state_entries(self, namespace: Any = _ALL_NAMESPACES) -> int:
        """Number of (key, namespace) entries over all states (Flink's
        ``numKeyValueStateEntries``); with ``namespace``, only that namespace's entries."""
        if namespace is _ALL_NAMESPACES:
            return sum(table.size() for table in self._tables.values())
        return sum(table.size_of_namespace(namespace) for table in self._tables.values())

    def dispose(self) -> None:
        """Drop all state and registrations. The backend and its state objects must not be
        used afterwards (registration then raises ``RuntimeError``)."""
        for table in self._tables.values():
            table.clear()
        self._tables.clear()
        self._states.clear()
        self._key_selection_listeners.clear()
        self._key_group_cache.clear()
        self._current_key = None
        self._kg_offset = None
        self._disposed = True

    def __repr__(self) -> str:
        return (
            f"HeapKeyedStateBackend({self.key_group_range}, max_parallelism={self.max_parallelism}, "
            f"states={list(self._tables)})"
        )


class _ListeningHeapKeyedStateBackend(HeapKeyedStateBackend):
    """A :class:`HeapKeyedStateBackend` with key selection listeners (see
    :meth:`HeapKeyedStateBackend.register_key_selection_listener`); same slots, so an instance
    can switch to it in place."""

    __slots__ = ()

    def set_current_key(self, key: Any) -> None:
        """As :meth:`HeapKeyedStateBackend.set_current_key`, then call every key selection
        listener with ``key``."""
        HeapKeyedStateBackend.set_current_key(self, key)
        for listener in self._key_selection_listeners:
            listener(key)


def _ttl_enabled(ttl_config: Any, state_name: str) -> bool:
    """Whether ``ttl_config`` switches TTL on (``StateTtlConfig.is_enabled``).

    :raises TypeError: if it is not a ``StateTtlConfig``.
    """
    if not isinstance(ttl_config, StateTtlConfig):
        raise TypeError(
            f"State '{state_name}': enable_time_to_live() needs a StateTtlConfig, got {ttl_config!r} "
            f"of type {type(ttl_config).__name__}"
        )
    return ttl_config.is_enabled()


#: Types whose values cannot change: a restore shares them instead of copying.
_IMMUTABLE_TYPES = frozenset({type(None), bool, int, float, complex, str, bytes})


def _unshared(value: Any) -> Any:
    """``value`` itself when nothing can mutate it (an instance of exactly one of
    :data:`_IMMUTABLE_TYPES`, or a ``tuple`` of such), else a deep copy: the restored backend
    must not share a mutable value with the snapshot it came from (an in-memory snapshot
    restores every attempt of a job)."""
    kind = type(value)
    if kind in _IMMUTABLE_TYPES:
        return value
    if kind is tuple and all(type(v) in _IMMUTABLE_TYPES for v in value):
        return value
    return copy.deepcopy(value)
