"""Heap state objects: the live, bound implementations of the interfaces in
:mod:`rill.state.api` (Flink's ``HeapValueState``, ``HeapListState``, ``HeapMapState``,
``HeapReducingState``, ``HeapAggregatingState`` on ``AbstractHeapState``).

A state object is created by :class:`~rill.state.heap.HeapKeyedStateBackend` and holds
references to the backend (for its current key and current key-group offset) and to its
:class:`~rill.state.state_table.StateTable`'s ``key_group_maps`` list. Every access is therefore
``key_group_maps[backend._kg_offset].get(namespace)`` then ``.get(backend._current_key)``: one
list index and two dict look-ups, no allocation.

Errors on access:

- before the backend has a current key: ``RuntimeError("No key set. This method should not be
  called outside of a keyed context.")`` (Flink throws the same message);
- with an unhashable current namespace: ``TypeError`` naming the state and the namespace.

Values are stored as given, not copied (as Flink's heap backend): ``ListState.get()`` returns
the stored list itself, so mutating it mutates the state; use ``add``/``update`` instead.

A state with TTL is one of these objects storing ``(value, last_access_ms)`` TTL values, wrapped
by a TTL state of :mod:`rill.state.ttl` (reducing and aggregating states then get the TTL-aware
function through their constructor).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from rill.state.api import (
    VOID_NAMESPACE,
    AggregatingState,
    InternalKvState,
    ListState,
    MapState,
    ReducingState,
    ValueState,
)
from rill.state.descriptors import (
    AggregatingStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
)
from rill.state.state_table import StateTable

__all__ = [
    "AbstractHeapState",
    "AbstractHeapMergingState",
    "HeapValueState",
    "HeapListState",
    "HeapMapState",
    "HeapReducingState",
    "HeapAggregatingState",
]

_NO_KEY_MESSAGE = "No key set. This method should not be called outside of a keyed context."
_NULL_LIST_ELEMENT = "You cannot add null to a ListState."
_NULL_LIST = "List of values to add cannot be null."


class AbstractHeapState(InternalKvState):
    """Base of the heap state objects (Flink's ``AbstractHeapState``).

    :param backend: the owning ``HeapKeyedStateBackend`` (its ``_current_key`` and
        ``_kg_offset`` are read on every access).
    :param table: the state's ``StateTable``.
    """

    __slots__ = ("_backend", "_table", "_maps", "_namespace")

    def __init__(self, backend: Any, table: StateTable) -> None:
        self._backend = backend
        self._table = table
        self._maps = table.key_group_maps
        self._namespace: Any = VOID_NAMESPACE

    # -- namespace and introspection ----------------------------------------------------
    def set_current_namespace(self, namespace: Any) -> None:
        """Bind the state to ``namespace``; it must be hashable (checked on the next access)."""
        self._namespace = namespace

    def get_current_namespace(self) -> Any:
        return self._namespace

    @property
    def table(self) -> StateTable:
        """The state's :class:`StateTable` (for per-batch fast paths and snapshots)."""
        return self._table

    @property
    def descriptor(self) -> StateDescriptor:
        """The descriptor the state was registered with."""
        return self._table.descriptor

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self._table.name!r}, namespace={self._namespace!r})"

    # -- helpers --------------------------------------------------------------------------
    def _access_error(self) -> Exception:
        """The error to raise when ``_maps[offset].get(namespace)`` raised ``TypeError``."""
        if self._backend._kg_offset is None:
            return RuntimeError(_NO_KEY_MESSAGE)
        return TypeError(
            f"State '{self._table.name}': namespace {self._namespace!r} of type "
            f"{type(self._namespace).__name__} is unhashable"
        )

    def _current_map(self) -> Dict[Any, Dict[Any, Any]]:
        """The namespace -> {key: value} dict of the current key's key group."""
        try:
            by_namespace = self._maps[self._backend._kg_offset]
            by_namespace.get(self._namespace)
        except TypeError:
            raise self._access_error() from None
        return by_namespace

    def _get_internal(self) -> Any:
        """The stored value of the current key and namespace, or ``None``."""
        b = self._backend
        try:
            return self._maps[b._kg_offset][self._namespace].get(b._current_key)
        except KeyError:  # no entry of the namespace in this key group
            return None
        except TypeError:
            raise self._access_error() from None

    def _put_internal(self, value: Any) -> None:
        """Store ``value`` (not ``None``) for the current key and namespace."""
        b = self._backend
        try:
            self._maps[b._kg_offset][self._namespace][b._current_key] = value
        except KeyError:
            self._maps[b._kg_offset][self._namespace] = {b._current_key: value}
        except TypeError:
            raise self._access_error() from None

    def clear(self) -> None:
        """Remove the current key's entry in the current namespace (no-op if absent)."""
        b = self._backend
        try:
            by_namespace = self._maps[b._kg_offset]
            by_key = by_namespace.get(self._namespace)
        except TypeError:
            raise self._access_error() from None
        if by_key is not None and by_key.pop(b._current_key, None) is not None and not by_key:
            del by_namespace[self._namespace]


class HeapValueState(AbstractHeapState, ValueState):
    """A :class:`~rill.state.api.ValueState` on the heap (Flink's ``HeapValueState``)."""

    __slots__ = ()

    def value(self) -> Any:
        """The current key's value, or ``None``.

        :raises RuntimeError: if no key is set.
        """
        # Hot path: subscripts instead of .get() calls where a miss is rare (the namespace's
        # dict exists in the key group); try costs nothing in CPython >= 3.11.
        b = self._backend
        try:
            return self._maps[b._kg_offset][self._namespace].get(b._current_key)
        except KeyError:
            return None
        except TypeError:
            raise self._access_error() from None

    def update(self, value: Any) -> None:
        """Set the current key's value; ``None`` removes the entry.

        :raises RuntimeError: if no key is set.
        """
        if value is None:
            self.clear()
            return
        b = self._backend
        try:
            self._maps[b._kg_offset][self._namespace][b._current_key] = value
        except KeyError:
            self._maps[b._kg_offset][self._namespace] = {b._current_key: value}
        except TypeError:
            raise self._access_error() from None


class AbstractHeapMergingState(AbstractHeapState):
    """Base of the states whose namespaces can be merged (Flink's
    ``AbstractHeapMergingState`` / ``InternalMergingState``). Subclasses define
    :meth:`_merge_values`."""

    __slots__ = ()

    def _merge_values(self, target: Any, source: Any) -> Any:
        raise NotImplementedError

    def merge_namespaces(self, target: Any, sources: Iterable[Any]) -> None:
        """Merge the current key's entries of the ``sources`` namespaces into ``target`` and
        remove them (session windows merging). Absent entries are skipped; ``target`` is left
        untouched if no source has an entry.

        :raises RuntimeError: if no key is set.
        """
        by_namespace = self._current_map()
        key = self._backend._current_key
        merged = None
        for source in sources:
            if source == target:
                continue
            by_key = by_namespace.get(source)
            if by_key is None:
                continue
            value = by_key.pop(key, None)
            if not by_key:
                del by_namespace[source]
            if value is not None:
                merged = value if merged is None else self._merge_values(merged, value)
        if merged is None:
            return
        by_key = by_namespace.get(target)
        current = None if by_key is None else by_key.get(key)
        if current is not None:
            merged = self._merge_values(current, merged)
        if merged is None:
            if by_key is not None and by_key.pop(key, None) is not None and not by_key:
                del by_namespace[target]
        elif by_key is None:
            by_namespace[target] = {key: merged}
        else:
            by_key[key] = merged


class HeapListState(AbstractHeapMergingState, ListState):
    """A :class:`~rill.state.api.ListState` on the heap (Flink's ``HeapListState``).

    Stores a non-empty ``list``; ``get()`` returns that list itself (do not mutate it).
    """

    __slots__ = ()

    def get(self) -> List[Any]:
        """The current key's elements; an empty list if there are none.

        :raises RuntimeError: if no key is set.
        """
        stored = self._get_internal()
        return [] if stored is None else stored

    def add(self, value: Any) -> None:
        """Append ``value``.

        :raises ValueError: if ``value`` is ``None``.
        :raises RuntimeError: if no key is set.
        """
        if value is None:
            raise ValueError(f"{_NULL_LIST_ELEMENT} (state '{self._table.name}')")
        b = self._backend
        try:
            by_key = self._maps[b._kg_offset][self._namespace]
        except KeyError:
            self._maps[b._kg_offset][self._namespace] = {b._current_key: [value]}
            return
        except TypeError:
            raise self._access_error() from None
        stored = by_key.get(b._current_key)
        if stored is None:
            by_key[b._current_key] = [value]
        else:
            stored.append(value)

    def _checked_list(self, values: Iterable[Any]) -> List[Any]:
        if values is None:
            raise ValueError(f"{_NULL_LIST} (state '{self._table.name}')")
        copied = list(values)
        for index, value in enumerate(copied):
            if value is None:
                raise ValueError(f"{_NULL_LIST_ELEMENT} (state '{self._table.name}', element {index})")
        return copied

    def add_all(self, values: Iterable[Any]) -> None:
        """Append every element of ``values``; nothing is added if one is ``None``.

        :raises ValueError: if ``values`` is ``None`` or contains ``None``.
        :raises RuntimeError: if no key is set.
        """
        copied = self._checked_list(values)
        if not copied:
            return
        stored = self._get_internal()
        if stored is None:
            self._put_internal(copied)
        else:
            stored.extend(copied)

    def update(self, values: Iterable[Any]) -> None:
        """Replace the elements by (a copy of) ``values``; empty removes the entry.

        :raises ValueError: if ``values`` is ``None`` or contains ``None`` (state unchanged).
        :raises RuntimeError: if no key is set.
        """
        copied = self._checked_list(values)
        if copied:
            self._put_internal(copied)
        else:
            self.clear()

    def _merge_values(self, target: List[Any], source: List[Any]) -> List[Any]:
        target.extend(source)
        return target


class HeapMapState(AbstractHeapState, MapState):
    """A :class:`~rill.state.api.MapState` on the heap (Flink's ``HeapMapState``).

    Stores a non-empty ``dict`` of user key to user value.
    """

    __slots__ = ()

    def get(self, key: Any) -> Any:
        """The value of user key ``key``, or ``None``.

        :raises RuntimeError: if no key is set.
        """
        stored = self._get_internal()
        return None if stored is None else stored.get(key)

    def put(self, key: Any, value: Any) -> None:
        """Map user key ``key`` to ``value`` (``None`` is a legal value).

        :raises RuntimeError: if no key is set.
        """
        stored = self._get_internal()
        if stored is None:
            self._put_internal({key: value})
        else:
            stored[key] = value

    def put_all(self, dict_value: Dict[Any, Any]) -> None:
        """Add every mapping of ``dict_value`` (a mapping or an iterable of pairs).

        :raises RuntimeError: if no key is set.
        """
        if dict_value is None:
            raise ValueError(f"State '{self._table.name}': put_all() needs a dict, got None")
        additions = dict(dict_value)
        if not additions:
            return
        stored = self._get_internal()
        if stored is None:
            self._put_internal(additions)
        else:
            stored.update(additions)

    def remove(self, key: Any) -> None:
        """Remove the mapping of ``key``; the entry goes when its last mapping goes.

        :raises RuntimeError: if no key is set.
        """
        stored = self._get_internal()
        if stored is not None and key in stored:
            del stored[key]
            if not stored:
                self.clear()

    def contains(self, key: Any) -> bool:
        stored = self._get_internal()
        return stored is not None and key in stored

    def items(self) -> List[Tuple[Any, Any]]:
        stored = self._get_internal()
        return [] if stored is None else list(stored.items())

    def keys(self) -> List[Any]:
        stored = self._get_internal()
        return [] if stored is None else list(stored)

    def values(self) -> List[Any]:
        stored = self._get_internal()
        return [] if stored is None else list(stored.values())

    def is_empty(self) -> bool:
        return self._get_internal() is None


class HeapReducingState(AbstractHeapMergingState, ReducingState):
    """A :class:`~rill.state.api.ReducingState` on the heap (Flink's ``HeapReducingState``).

    ``add(v)`` stores ``v`` for an empty entry, else ``reduce(stored, v)``. As in Flink,
    ``add(None)`` clears the entry; a reduce result of ``None`` clears it too.
    """

    __slots__ = ("_reduce",)

    def __init__(self, backend: Any, table: StateTable, reduce: Optional[Callable[[Any, Any], Any]] = None) -> None:
        """:param reduce: the ``reduce(a, b)`` to use instead of the descriptor's (the TTL
        state passes its ``TtlReduceFunction``)."""
        super().__init__(backend, table)
        descriptor = table.descriptor
        assert isinstance(descriptor, ReducingStateDescriptor)
        self._reduce: Callable[[Any, Any], Any] = descriptor.reduce_callable if reduce is None else reduce

    def get(self) -> Any:
        """The reduced value, or ``None`` if nothing was added.

        :raises RuntimeError: if no key is set.
        """
        return self._get_internal()

    def add(self, value: Any) -> None:
        """Reduce ``value`` into the current key's value; exceptions of the reduce function
        propagate and leave the state unchanged.

        :raises RuntimeError: if no key is set.
        """
        if value is None:
            self.clear()
            return
        b = self._backend
        try:
            by_key = self._maps[b._kg_offset][self._namespace]
        except KeyError:
            self._maps[b._kg_offset][self._namespace] = {b._current_key: value}
            return
        except TypeError:
            raise self._access_error() from None
        current = by_key.get(b._current_key)
        if current is not None:
            value = self._reduce(current, value)
            if value is None:
                self.clear()
                return
        by_key[b._current_key] = value

    def _merge_values(self, target: Any, source: Any) -> Any:
        return self._reduce(target, source)


class HeapAggregatingState(AbstractHeapMergingState, AggregatingState):
    """An :class:`~rill.state.api.AggregatingState` on the heap (Flink's
    ``HeapAggregatingState``). Stores the accumulator; ``get()`` returns
    ``get_result(accumulator)``. As in Flink, ``add(None)`` clears the entry. An accumulator of
    ``None`` counts as empty (it is not stored).
    """

    __slots__ = ("_create_accumulator", "_add", "_get_result", "_agg_function")

    def __init__(self, backend: Any, table: StateTable, agg_function: Any = None) -> None:
        """:param agg_function: the aggregate function to use instead of the descriptor's (the
        TTL state passes its ``TtlAggregateFunction``)."""
        super().__init__(backend, table)
        descriptor = table.descriptor
        assert isinstance(descriptor, AggregatingStateDescriptor)
        fn = descriptor.get_agg_function() if agg_function is None else agg_function
        self._agg_function = fn
        self._create_accumulator = fn.create_accumulator
        self._add = fn.add
        self._get_result = fn.get_result

    def get(self) -> Any:
        """``get_result(accumulator)``, or ``None`` if nothing was added.

        :raises RuntimeError: if no key is set.
        """
        acc = self._get_internal()
        return None if acc is None else self._get_result(acc)

    def add(self, value: Any) -> None:
        """Add ``value`` to the current key's accumulator (created with
        ``create_accumulator()`` when absent).

        :raises RuntimeError: if no key is set.
        """
        if value is None:
            self.clear()
            return
        b = self._backend
        try:
            by_key = self._maps[b._kg_offset][self._namespace]
        except KeyError:
            by_key = None
        except TypeError:
            raise self._access_error() from None
        acc = None if by_key is None else by_key.get(b._current_key)
        if acc is None:
            acc = self._create_accumulator()
        acc = self._add(value, acc)
        if acc is None:
            self.clear()
        elif by_key is None:
            self._maps[b._kg_offset][self._namespace] = {b._current_key: acc}
        else:
            by_key[b._current_key] = acc

    def get_accumulator(self) -> Any:
        """The stored accumulator, or ``None`` (for window operators and tests)."""
        return self._get_internal()

    def _merge_values(self, target: Any, source: Any) -> Any:
        return self._agg_function.merge(target, source)
