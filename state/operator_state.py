"""Operator state: non-keyed state of one operator subtask, and its redistribution when the
parallelism changes (Flink's ``DefaultOperatorStateBackend``, ``PartitionableListState``,
``HeapBroadcastState``, ``OperatorStateHandle.Mode`` and ``RoundRobinOperatorStateRepartitioner``;
PyFlink's ``BroadcastState`` / ``ReadOnlyBroadcastState``).

Three kinds, told apart by their *redistribution mode*:

- ``SPLIT_DISTRIBUTE`` (:meth:`DefaultOperatorStateBackend.get_list_state`): a list per subtask;
  on restore with another parallelism the elements of all old subtasks, concatenated in old
  subtask order, are cut into contiguous chunks, one per new subtask (round robin over states so
  that the larger chunks do not always land on the same subtask);
- ``UNION`` (:meth:`DefaultOperatorStateBackend.get_union_list_state`): a list per subtask; on
  restore every new subtask gets the elements of all old subtasks;
- ``BROADCAST`` (:meth:`DefaultOperatorStateBackend.get_broadcast_state`): a map that must be
  the same on every subtask; on restore every new subtask gets one copy (new subtask ``i`` the
  copy of old subtask ``i % old_parallelism``).

Snapshot shape (plain Python data, so that it can be written to Parquet or msgpack): a
snapshot of one subtask is a ``dict`` ``{state_name: (mode, entries)}`` where ``mode`` is the
mode's name (``"SPLIT_DISTRIBUTE"``, ``"UNION"`` or ``"BROADCAST"``) and ``entries`` a ``list``:
the list elements, or ``(key, value)`` tuples for broadcast state. Every registered state is in
it, empty or not. :func:`redistribute` maps the snapshots of the old subtasks to one such dict
per new subtask, which :meth:`DefaultOperatorStateBackend.restore` loads.

Threading: a backend belongs to one subtask and is used from its task thread only.
"""

from __future__ import annotations

import enum
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from rill.state.api import ListState
from rill.state.backend import OperatorStateBackend
from rill.state.descriptors import ListStateDescriptor, MapStateDescriptor
from rill.state.operator_state_store import BroadcastState, OperatorStateStore, ReadOnlyBroadcastState

__all__ = [
    "OperatorStateMode",
    "OperatorStateStore",
    "ReadOnlyBroadcastState",
    "BroadcastState",
    "PartitionableListState",
    "HeapBroadcastState",
    "ReadOnlyBroadcastStateView",
    "DefaultOperatorStateBackend",
    "OperatorStateSnapshot",
    "redistribute",
]

#: The snapshot of one subtask's operator state: ``{name: (mode name, entries)}``.
OperatorStateSnapshot = Dict[str, Tuple[str, List[Any]]]

_NULL_LIST_ELEMENT = "You cannot add null to a ListState."
_NULL_LIST = "List of values to add cannot be null."


class OperatorStateMode(enum.Enum):
    """How a state is redistributed on restore (Flink's ``OperatorStateHandle.Mode``)."""

    #: split the union of all elements into contiguous chunks, one per new subtask
    SPLIT_DISTRIBUTE = "SPLIT_DISTRIBUTE"
    #: give the union of all elements to every new subtask
    UNION = "UNION"
    #: give one copy (all subtasks hold the same) to every new subtask
    BROADCAST = "BROADCAST"


# -- implementations ----------------------------------------------------------------------------

class PartitionableListState(ListState):
    """An operator list state (Flink's ``PartitionableListState``).

    :param name: the state's name.
    :param mode: ``SPLIT_DISTRIBUTE`` or ``UNION``.
    :param elements: initial (restored) elements; copied.
    """

    __slots__ = ("name", "mode", "_list")

    def __init__(self, name: str, mode: OperatorStateMode, elements: Iterable[Any] = ()) -> None:
        self.name = name
        self.mode = mode
        self._list: List[Any] = list(elements)

    def get(self) -> List[Any]:
        """The elements in insertion order (a new list; empty if there are none)."""
        return list(self._list)

    def add(self, value: Any) -> None:
        """Append ``value``.

        :raises ValueError: if ``value`` is ``None``.
        """
        if value is None:
            raise ValueError(f"{_NULL_LIST_ELEMENT} (operator state '{self.name}')")
        self._list.append(value)

    def _checked(self, values: Iterable[Any]) -> List[Any]:
        if values is None:
            raise ValueError(f"{_NULL_LIST} (operator state '{self.name}')")
        copied = list(values)
        for index, value in enumerate(copied):
            if value is None:
                raise ValueError(f"{_NULL_LIST_ELEMENT} (operator state '{self.name}', element {index})")
        return copied

    def add_all(self, values: Iterable[Any]) -> None:
        """Append every element of ``values``; nothing if one is ``None``.

        :raises ValueError: if ``values`` is ``None`` or contains ``None``.
        """
        self._list.extend(self._checked(values))

    def update(self, values: Iterable[Any]) -> None:
        """Replace the elements by ``values`` (state unchanged on error).

        :raises ValueError: if ``values`` is ``None`` or contains ``None``.
        """
        self._list = self._checked(values)

    def clear(self) -> None:
        """Remove every element."""
        self._list.clear()

    def snapshot_entries(self) -> List[Any]:
        """A copy of the elements, for a snapshot."""
        return list(self._list)

    def __repr__(self) -> str:
        return f"PartitionableListState(name={self.name!r}, mode={self.mode.name}, size={len(self._list)})"


class HeapBroadcastState(BroadcastState):
    """A broadcast state on the heap (Flink's ``HeapBroadcastState``).

    :param name: the state's name.
    :param entries: initial (restored) ``(key, value)`` pairs or a mapping; copied.
    """

    __slots__ = ("name", "_map")

    def __init__(self, name: str, entries: Any = ()) -> None:
        self.name = name
        self._map: Dict[Any, Any] = dict(entries)

    def get(self, key: Any) -> Any:
        """The value of ``key``, or ``None``."""
        return self._map.get(key)

    def contains(self, key: Any) -> bool:
        """Whether ``key`` has a mapping."""
        return key in self._map

    def items(self) -> List[Tuple[Any, Any]]:
        """The ``(key, value)`` mappings (a list taken now)."""
        return list(self._map.items())

    def keys(self) -> List[Any]:
        """The mapped keys (a list taken now)."""
        return list(self._map)

    def values(self) -> List[Any]:
        """The mapped values (a list taken now)."""
        return list(self._map.values())

    def is_empty(self) -> bool:
        """Whether there is no mapping."""
        return not self._map

    def put(self, key: Any, value: Any) -> None:
        """Map ``key`` (hashable) to ``value``."""
        self._map[key] = value

    def put_all(self, dict_value: Mapping[Any, Any]) -> None:
        """Add every mapping of ``dict_value`` (a mapping or iterable of pairs).

        :raises ValueError: if ``dict_value`` is ``None``.
        """
        if dict_value is None:
            raise ValueError(f"Broadcast state '{self.name}': put_all() needs a dict, got None")
        self._map.update(dict_value)

    def remove(self, key: Any) -> None:
        """Remove the mapping of ``key`` (no-op if absent)."""
        self._map.pop(key, None)

    def clear(self) -> None:
        """Remove every mapping."""
        self._map.clear()

    def snapshot_entries(self) -> List[Tuple[Any, Any]]:
        """The ``(key, value)`` pairs, for a snapshot."""
        return list(self._map.items())

    def read_only(self) -> "ReadOnlyBroadcastStateView":
        """A read-only view of this state (for the non-broadcast side)."""
        return ReadOnlyBroadcastStateView(self)

    def __repr__(self) -> str:
        return f"HeapBroadcastState(name={self.name!r}, size={len(self._map)})"


class ReadOnlyBroadcastStateView(ReadOnlyBroadcastState):
    """A read-only view of a :class:`HeapBroadcastState`: reads see its current mappings;
    ``clear`` raises ``TypeError`` and there is no ``put``/``remove``.

    :param state: the viewed state.
    """

    __slots__ = ("_state",)

    def __init__(self, state: HeapBroadcastState) -> None:
        self._state = state

    def get(self, key: Any) -> Any:
        """The value of ``key``, or ``None``."""
        return self._state.get(key)

    def contains(self, key: Any) -> bool:
        """Whether ``key`` has a mapping."""
        return self._state.contains(key)

    def items(self) -> List[Tuple[Any, Any]]:
        """The ``(key, value)`` mappings (a list taken now)."""
        return self._state.items()

    def keys(self) -> List[Any]:
        """The mapped keys (a list taken now)."""
        return self._state.keys()

    def values(self) -> List[Any]:
        """The mapped values (a list taken now)."""
        return self._state.values()

    def is_empty(self) -> bool:
        """Whether there is no mapping."""
        return self._state.is_empty()

    def clear(self) -> None:
        """Refused: the view is read-only.

        :raises TypeError: always.
        """
        raise TypeError(f"Broadcast state '{self._state.name}' is read-only on this side of the operator")

    def __repr__(self) -> str:
        return f"ReadOnlyBroadcastStateView({self._state!r})"


# -- the backend --------------------------------------------------------------------------------

class DefaultOperatorStateBackend(OperatorStateBackend):
    """Operator state of one subtask, on the heap (Flink's ``DefaultOperatorStateBackend``).

    A name identifies one state across all three kinds. Restored states (:meth:`restore`) are
    returned by the getters under their name; asking for one with another mode is an error.

    :param operator_name: named in error messages.
    """

    def __init__(self, operator_name: str = "") -> None:
        self.operator_name = operator_name
        self._list_states: Dict[str, PartitionableListState] = {}
        self._broadcast_states: Dict[str, HeapBroadcastState] = {}

    # -- registration ---------------------------------------------------------------------
    def _where(self) -> str:
        return f" (operator '{self.operator_name}')" if self.operator_name else ""

    def _checked_name(self, descriptor: Any, expected: type, getter: str) -> str:
        if not isinstance(descriptor, expected):
            raise TypeError(
                f"{getter} expects a {expected.__name__}, got {descriptor!r} of type "
                f"{type(descriptor).__name__}{self._where()}"
            )
        if descriptor.get_ttl_config() is not None:
            raise ValueError(
                f"State TTL is only supported for keyed state, not for operator state "
                f"'{descriptor.name}'{self._where()}"
            )
        return descriptor.name

    def _list_state(self, descriptor: ListStateDescriptor, mode: OperatorStateMode, getter: str) -> PartitionableListState:
        name = self._checked_name(descriptor, ListStateDescriptor, getter)
        if name in self._broadcast_states:
            raise ValueError(
                f"Operator state '{name}' is registered as a broadcast state; it cannot be "
                f"accessed as a {mode.name} list state{self._where()}"
            )
        state = self._list_states.get(name)
        if state is None:
            state = self._list_states[name] = PartitionableListState(name, mode)
        elif state.mode is not mode:
            raise ValueError(
                f"Incompatible state assignment modes of operator state '{name}'. Was "
                f"[{mode.name}], registered with [{state.mode.name}].{self._where()}"
            )
        return state

    def get_list_state(self, state_descriptor: ListStateDescriptor) -> PartitionableListState:
        """The ``SPLIT_DISTRIBUTE`` list state named by ``state_descriptor``.

        :raises TypeError: if it is not a ``ListStateDescriptor``.
        :raises ValueError: if the name is registered as a union list or broadcast state, or
            the descriptor has TTL.
        """
        return self._list_state(state_descriptor, OperatorStateMode.SPLIT_DISTRIBUTE, "get_list_state")

    def get_union_list_state(self, state_descriptor: ListStateDescriptor) -> PartitionableListState:
        """The ``UNION`` list state named by ``state_descriptor``.

        :raises TypeError, ValueError: as :meth:`get_list_state`.
        """
        return self._list_state(state_descriptor, OperatorStateMode.UNION, "get_union_list_state")

    def get_broadcast_state(self, state_descriptor: MapStateDescriptor) -> HeapBroadcastState:
        """The broadcast state named by ``state_descriptor``.

        :raises TypeError: if it is not a ``MapStateDescriptor``.
        :raises ValueError: if the name is registered as a list state, or the descriptor has TTL.
        """
        name = self._checked_name(state_descriptor, MapStateDescriptor, "get_broadcast_state")
        if name in self._list_states:
            raise ValueError(
                f"Operator state '{name}' is registered as a {self._list_states[name].mode.name} "
                f"list state; it cannot be accessed as a broadcast state{self._where()}"
            )
        state = self._broadcast_states.get(name)
        if state is None:
            state = self._broadcast_states[name] = HeapBroadcastState(name)
        return state

    def get_read_only_broadcast_state(self, state_descriptor: MapStateDescriptor) -> ReadOnlyBroadcastStateView:
        """A read-only view of the broadcast state named by ``state_descriptor`` (what the
        non-broadcast side of a broadcast operator gets).

        :raises TypeError, ValueError: as :meth:`get_broadcast_state`.
        """
        return self.get_broadcast_state(state_descriptor).read_only()

    def get_registered_state_names(self) -> List[str]:
        """Names of the registered list states (split and union), in registration order."""
        return list(self._list_states)

    def get_registered_broadcast_state_names(self) -> List[str]:
        """Names of the registered broadcast states, in registration order."""
        return list(self._broadcast_states)

    # -- snapshot and restore ---------------------------------------------------------------
    def snapshot(self) -> OperatorStateSnapshot:
        """Every registered state as ``{name: (mode name, entries)}`` (see the module
        docstring); lists are copies, so later changes do not alter the snapshot."""
        result: OperatorStateSnapshot = {}
        for name, state in self._list_states.items():
            result[name] = (state.mode.value, state.snapshot_entries())
        for name, broadcast in self._broadcast_states.items():
            result[name] = (OperatorStateMode.BROADCAST.value, broadcast.snapshot_entries())
        return result

    def restore(self, snapshot: Mapping[str, Tuple[str, Sequence[Any]]]) -> None:
        """Load ``snapshot`` (one subtask's entries, as :meth:`snapshot` or
        :func:`redistribute` give them): list elements are appended to the state of that name,
        broadcast pairs put into it, states created (registered) as needed.

        :raises ValueError: for an unknown mode, a mode other than the registered one, or a
            broadcast entry that is not a pair; nothing is loaded then.
        """
        parsed = []
        for name, (mode_name, entries) in snapshot.items():
            mode = _parse_mode(mode_name, name)
            if mode is OperatorStateMode.BROADCAST:
                if name in self._list_states:
                    raise ValueError(
                        f"Cannot restore broadcast state '{name}': it is registered as a "
                        f"{self._list_states[name].mode.name} list state{self._where()}"
                    )
                pairs = _pairs(entries, name)
                parsed.append((name, mode, pairs))
            else:
                registered = self._list_states.get(name)
                if name in self._broadcast_states or (registered is not None and registered.mode is not mode):
                    was = "BROADCAST" if registered is None else registered.mode.name
                    raise ValueError(
                        f"Incompatible state assignment modes of operator state '{name}'. Was "
                        f"[{mode.name}], registered with [{was}].{self._where()}"
                    )
                parsed.append((name, mode, list(entries)))
        for name, mode, entries in parsed:
            if mode is OperatorStateMode.BROADCAST:
                state = self._broadcast_states.get(name)
                if state is None:
                    self._broadcast_states[name] = HeapBroadcastState(name, entries)
                else:
                    state.put_all(entries)
            else:
                list_state = self._list_states.get(name)
                if list_state is None:
                    self._list_states[name] = PartitionableListState(name, mode, entries)
                else:
                    list_state.add_all(entries)

    def dispose(self) -> None:
        """Drop every state."""
        self._list_states.clear()
        self._broadcast_states.clear()

    def __repr__(self) -> str:
        return (
            f"DefaultOperatorStateBackend(operator={self.operator_name!r}, "
            f"list_states={list(self._list_states)}, broadcast_states={list(self._broadcast_states)})"
        )


def _parse_mode(mode_name: Any, name: str) -> OperatorStateMode:
    if isinstance(mode_name, OperatorStateMode):
        return mode_name
    try:
        return OperatorStateMode(mode_name)
    except ValueError:
        raise ValueError(
            f"Operator state '{name}' has unknown redistribution mode {mode_name!r} "
            f"(expected one of {[m.value for m in OperatorStateMode]})"
        ) from None


def _pairs(entries: Iterable[Any], name: str) -> List[Tuple[Any, Any]]:
    pairs = []
    for entry in entries:
        if not isinstance(entry, (tuple, list)) or len(entry) != 2:
            raise ValueError(f"Broadcast state '{name}': entry {entry!r} is not a (key, value) pair")
        pairs.append((entry[0], entry[1]))
    return pairs


# -- redistribution -----------------------------------------------------------------------------

def redistribute(
    snapshots: Sequence[Optional[Mapping[str, Tuple[str, Sequence[Any]]]]],
    new_parallelism: int,
) -> List[OperatorStateSnapshot]:
    """The operator state each of ``new_parallelism`` new subtasks restores, from the
    snapshots of the old subtasks (index = old subtask index; ``None`` for a subtask without
    state) (Flink's ``RoundRobinOperatorStateRepartitioner``).

    Every new subtask gets every state name that appears in any snapshot, possibly with an
    empty list:

    - ``SPLIT_DISTRIBUTE``: unchanged parallelism keeps each subtask's own elements; otherwise
      the elements of all old subtasks, concatenated in old subtask order, are cut into
      contiguous chunks of ``total // new_parallelism`` elements, the first
      ``total % new_parallelism`` chunks one larger. States are handled in name order (Flink:
      hash map order); chunk ``0`` of a state goes to subtask ``start``, chunk ``1`` to
      ``start + 1`` … (mod ``new_parallelism``), and the next state's ``start`` is the first
      subtask of this state that got a smaller chunk, so larger chunks rotate over subtasks;
    - ``UNION``: every new subtask gets the elements of all old subtasks, in old subtask order;
    - ``BROADCAST``: new subtask ``i`` gets the pairs of the ``i % n``-th of the ``n`` old
      subtasks that hold the state (each old subtask's own copy when the parallelism is
      unchanged).

    The result's lists are new; their elements are shared with ``snapshots``.

    :raises ValueError: if ``new_parallelism < 1``, ``snapshots`` is empty, a name has
        different modes in different snapshots, or a mode is unknown.
    """
    if type(new_parallelism) is not int or new_parallelism < 1:
        raise ValueError(f"new_parallelism must be an int >= 1, got {new_parallelism!r}")
    if not snapshots:
        raise ValueError("redistribute() needs the snapshots of at least one old subtask")
    old_parallelism = len(snapshots)
    modes: Dict[str, OperatorStateMode] = {}
    per_name: Dict[str, List[Optional[List[Any]]]] = {}  # name -> entries per old subtask (None: absent)
    for index, snapshot in enumerate(snapshots):
        for name, (mode_name, entries) in (snapshot or {}).items():
            mode = _parse_mode(mode_name, name)
            known = modes.setdefault(name, mode)
            if known is not mode:
                raise ValueError(
                    f"Operator state '{name}' has mode {known.name} in one snapshot and {mode.name} "
                    f"in that of old subtask {index}"
                )
            per_name.setdefault(name, [None] * old_parallelism)[index] = list(entries)

    result: List[OperatorStateSnapshot] = [{} for _ in range(new_parallelism)]
    start = 0
    for name in sorted(per_name):
        mode = modes[name]
        by_old = per_name[name]
        if mode is OperatorStateMode.BROADCAST:
            copies = [entries for entries in by_old if entries is not None]
            for i in range(new_parallelism):
                result[i][name] = (mode.value, list(copies[i % len(copies)]))
        elif mode is OperatorStateMode.UNION:
            union = [e for entries in by_old if entries for e in entries]
            for i in range(new_parallelism):
                result[i][name] = (mode.value, list(union))
        elif new_parallelism == old_parallelism:
            for i in range(new_parallelism):
                result[i][name] = (mode.value, list(by_old[i] or ()))
        else:
            start = _split(name, by_old, new_parallelism, start, result)
    return result


def _split(
    name: str,
    by_old: List[Optional[List[Any]]],
    new_parallelism: int,
    start: int,
    result: List[OperatorStateSnapshot],
) -> int:
    """Cut one SPLIT_DISTRIBUTE state as ``RoundRobinOperatorStateRepartitioner
    .repartitionSplitState`` does; returns the next state's start subtask."""
    elements = [e for entries in by_old if entries for e in entries]
    base, remainder = divmod(len(elements), new_parallelism)
    next_start = start
    position = 0
    mode = OperatorStateMode.SPLIT_DISTRIBUTE.value
    for i in range(new_parallelism):
        subtask = (i + start) % new_parallelism
        size = base
        if remainder > 0:
            size += 1
            remainder -= 1
        elif remainder == 0:
            next_start = subtask  # the first subtask with a smaller chunk starts the next state
            remainder -= 1
        result[subtask][name] = (mode, elements[position:position + size])
        position += size
    return next_start
