"""The user-facing keyed state interfaces, with PyFlink's names and methods
(``pyflink.datastream.state``), plus the namespace API the runtime uses.

Every state object is *bound*: it reads and writes the entry of the backend's current key (set by
the operator with ``set_current_key`` before each record) in the state's current namespace
(:data:`VOID_NAMESPACE` unless a window operator set another one). No method takes the key.

Semantics follow Flink:

- an absent entry reads as ``None`` (``ValueState.value()``, ``ReducingState.get()``,
  ``AggregatingState.get()``, ``MapState.get(k)``), except ``ListState.get()``, which returns an
  empty list (Flink returns an empty iterable);
- writing "nothing" removes the entry: ``ValueState.update(None)``, ``ListState.update([])``,
  ``MapState.remove`` of its last mapping, and ``clear()`` on every kind;
- ``None`` is never a list element: ``ListState.add(None)`` raises ``ValueError``.

Implementations live in :mod:`rill.state.heap_states`.
"""

from __future__ import annotations

import abc
from typing import Any, Iterable, Iterator, List, Mapping, Optional, Tuple

__all__ = [
    "VoidNamespace",
    "VOID_NAMESPACE",
    "State",
    "ValueState",
    "AppendingState",
    "MergingState",
    "ListState",
    "ReducingState",
    "AggregatingState",
    "MapState",
    "InternalKvState",
]


class VoidNamespace:
    """The namespace of state that is not scoped by a window (Flink's ``VoidNamespace``).

    There is exactly one instance, :data:`VOID_NAMESPACE`; it survives pickling as itself.
    """

    __slots__ = ()
    _instance: Optional["VoidNamespace"] = None

    def __new__(cls) -> "VoidNamespace":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __reduce__(self):
        return (VoidNamespace, ())

    def __repr__(self) -> str:
        return "VoidNamespace"


#: The single :class:`VoidNamespace` instance (Flink's ``VoidNamespace.INSTANCE``).
VOID_NAMESPACE = VoidNamespace()


class State(abc.ABC):
    """Base of all keyed state (Flink's ``State``)."""

    __slots__ = ()

    @abc.abstractmethod
    def clear(self) -> None:
        """Remove the entry of the current key in the current namespace (no-op if absent)."""


class ValueState(State):
    """One value per key and namespace (Flink's ``ValueState``)."""

    __slots__ = ()

    @abc.abstractmethod
    def value(self) -> Any:
        """The current key's value, or ``None`` if it has none."""

    @abc.abstractmethod
    def update(self, value: Any) -> None:
        """Set the current key's value; ``None`` removes the entry (as ``clear()``)."""


class AppendingState(State):
    """State that values are added to (Flink's ``AppendingState``)."""

    __slots__ = ()

    @abc.abstractmethod
    def get(self) -> Any:
        """The current key's accumulated state (see the subclass for the empty case)."""

    @abc.abstractmethod
    def add(self, value: Any) -> None:
        """Add ``value`` to the current key's state."""


class MergingState(AppendingState):
    """An :class:`AppendingState` whose namespaces can be merged (Flink's ``MergingState``)."""

    __slots__ = ()


class ListState(MergingState):
    """A list of values per key and namespace (Flink's ``ListState``)."""

    __slots__ = ()

    @abc.abstractmethod
    def get(self) -> List[Any]:
        """The current key's elements in insertion order; an empty list if there are none."""

    @abc.abstractmethod
    def add(self, value: Any) -> None:
        """Append ``value``.

        :raises ValueError: if ``value`` is ``None`` ("You cannot add null to a ListState.").
        """

    @abc.abstractmethod
    def add_all(self, values: Iterable[Any]) -> None:
        """Append every element of ``values``; nothing is added if one of them is ``None``.

        :raises ValueError: if ``values`` is ``None`` or contains ``None``.
        """

    @abc.abstractmethod
    def update(self, values: Iterable[Any]) -> None:
        """Replace the elements by ``values``; an empty ``values`` removes the entry.

        :raises ValueError: if ``values`` is ``None`` or contains ``None`` (the state is then
            left unchanged).
        """


class ReducingState(MergingState):
    """One value per key and namespace, combined with a reduce function on ``add``
    (Flink's ``ReducingState``)."""

    __slots__ = ()


class AggregatingState(MergingState):
    """An accumulator per key and namespace, fed through an ``AggregateFunction`` on ``add``;
    ``get()`` returns ``get_result(accumulator)`` (Flink's ``AggregatingState``)."""

    __slots__ = ()


class _ReadableMap(State):
    """Read access to a map state, shared by :class:`MapState` and the operator state's
    ``ReadOnlyBroadcastState``. The iteration methods return lists taken when they are called."""

    __slots__ = ()

    @abc.abstractmethod
    def get(self, key: Any) -> Any:
        """The value mapped to ``key``, or ``None`` if there is none."""

    @abc.abstractmethod
    def contains(self, key: Any) -> bool:
        """Whether ``key`` has a mapping."""

    @abc.abstractmethod
    def items(self) -> List[Tuple[Any, Any]]:
        """The ``(key, value)`` mappings (a list taken now)."""

    @abc.abstractmethod
    def keys(self) -> List[Any]:
        """The mapped keys (a list taken now)."""

    @abc.abstractmethod
    def values(self) -> List[Any]:
        """The mapped values (a list taken now)."""

    @abc.abstractmethod
    def is_empty(self) -> bool:
        """Whether there is no mapping."""

    def __getitem__(self, key: Any) -> Any:
        return self.get(key)

    def __contains__(self, key: Any) -> bool:
        return self.contains(key)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.keys())


class _WritableMap(_ReadableMap):
    """Read and write access to a map state, shared by :class:`MapState` and the operator
    state's ``BroadcastState``."""

    __slots__ = ()

    @abc.abstractmethod
    def put(self, key: Any, value: Any) -> None:
        """Map ``key`` to ``value``."""

    @abc.abstractmethod
    def put_all(self, dict_value: Mapping[Any, Any]) -> None:
        """Add every mapping of ``dict_value``."""

    @abc.abstractmethod
    def remove(self, key: Any) -> None:
        """Remove the mapping of ``key`` (no-op if absent)."""

    def __setitem__(self, key: Any, value: Any) -> None:
        self.put(key, value)

    def __delitem__(self, key: Any) -> None:
        self.remove(key)


class MapState(_WritableMap):
    """A map of user keys to user values per key and namespace (Flink's ``MapState``).

    ``None`` is a legal user value (as in Flink); ``contains`` tells it from an absent mapping.
    The iteration methods return lists taken when they are called, so removing mappings while
    iterating over them is safe.
    """

    __slots__ = ()


class InternalKvState(abc.ABC):
    """The runtime side of a state object (Flink's ``InternalKvState``): which namespace it
    is bound to. Window operators set the namespace to the window being processed."""

    __slots__ = ()

    @abc.abstractmethod
    def set_current_namespace(self, namespace: Any) -> None:
        """Bind the state to ``namespace`` (any hashable object)."""

    @abc.abstractmethod
    def get_current_namespace(self) -> Any:
        """The namespace the state is bound to."""
