"""Copy-on-write key groups: what lets a heap snapshot's synchronous part take O(key groups)
(Flink's ``CopyOnWriteStateMap`` with its snapshot versions, per key group instead of per entry).

A :class:`~rill.state.state_table.StateTable` holds one ``namespace -> {key: value}`` dict per
key group. Taking a snapshot *pins* every non-empty one: the snapshot keeps the dict object
itself, and the table's slot gets a :class:`PinnedKeyGroup` placeholder in its place. From then
on nobody writes into the pinned dict again, so the snapshot can be read and encoded on another
thread without a lock. The first access of the key group after the snapshot (a read as well as a
write: a read hands out inner dicts and stored lists, dicts or user objects that the caller may
mutate) goes through the placeholder, which copies the pinned dict into a fresh plain dict, puts
that into the slot and forwards the access to it. Accesses after that find the plain dict: the
per-record path is the same code as without snapshots.

The copy (:func:`copy_key_group`) builds new namespace and key dicts, and copies each stored value
with :func:`copy_state_value`: immutable values (numbers, strings, bytes, ``None``, tuples of
those, ...) are shared, everything else is copied deeply, as Flink's heap backend copies a state
with its ``TypeSerializer`` on the first access after a snapshot. So neither a later ``update``
nor an in-place mutation (``ListState.add``, ``MapState.put``, a user mutating the dict that
``value()`` returned) can reach the snapshot.

A second snapshot before the key group was accessed pins the same dict again (it has not
changed); snapshots share pinned dicts and never need versions or release: a pinned dict is
garbage once the snapshots holding it and the placeholder are gone.

Rules for code that reads a table's ``key_group_maps`` directly (operators' per-batch fast
paths): index the list for each batch, never keep a key-group map across mails (a snapshot may
run in between and pin it); treat a map as a ``dict`` only through its methods and operators
(``get``, ``[]``, ``pop``, ``in``, ``items`` ...), which the placeholder forwards, or call
:meth:`~rill.state.state_table.StateTable.unpin` first (then every slot is a plain ``dict``, which
``dict.get`` and friends need).

Threading: placeholders are created and resolved on the task thread only; the snapshot side
only reads pinned dicts, which nobody writes.

Rill difference: Flink copies per entry (an entry's version older than the newest snapshot's
copies that entry on access) and versions the map's structure; Rill copies one key group at its
first access after a snapshot, which needs no per-entry version and no per-access check.
"""

from __future__ import annotations

import copy
import datetime
import decimal
import itertools
from typing import Any, Dict, Iterable, Iterator, List

__all__ = ["PinnedKeyGroup", "copy_key_group", "copy_state_value", "all_immutable"]

#: Types whose instances cannot change: shared between a snapshot and live state, never copied.
_IMMUTABLE = frozenset({
    int, float, complex, bool, str, bytes, type(None), decimal.Decimal,
    datetime.datetime, datetime.date, datetime.time, datetime.timedelta, range,
})


def all_immutable(values: Iterable[Any]) -> bool:
    """Whether every one of ``values`` (a re-iterable collection) is immutable all the way
    down: of an immutable atomic type, or a plain ``tuple`` of such values. C-level ``map`` over
    the values; tuples are looked into (recursively) only when there are some."""
    types = set(map(type, values))
    if types <= _IMMUTABLE:
        return True
    if tuple not in types or not types - {tuple} <= _IMMUTABLE:
        return False
    if len(types) == 1:
        return all_immutable(list(itertools.chain.from_iterable(values)))
    return all_immutable(list(itertools.chain.from_iterable(v for v in values if type(v) is tuple)))


def copy_state_value(value: Any) -> Any:
    """A copy of a stored state value that shares nothing mutable with it (Flink's
    ``TypeSerializer.copy`` of the state): immutable values (see :func:`all_immutable`) are
    returned as they are; lists, dicts and tuples are rebuilt with their elements copied; any
    other object goes through ``copy.deepcopy``.

    :raises: whatever ``copy.deepcopy`` raises for an object that cannot be copied (a lock, a
        file); the snapshot's ``get`` then fails on the task thread, which declines the
        checkpoint.
    """
    cls = type(value)
    if cls in _IMMUTABLE:
        return value
    if cls is list:
        return value.copy() if all_immutable(value) else [copy_state_value(v) for v in value]
    if cls is dict:
        values = value.values()
        return value.copy() if all_immutable(values) else {k: copy_state_value(v) for k, v in value.items()}
    if cls is tuple:
        return value if all_immutable(value) else tuple(copy_state_value(v) for v in value)
    return copy.deepcopy(value)


def copy_key_group(pinned: Dict[Any, Dict[Any, Any]]) -> Dict[Any, Dict[Any, Any]]:
    """A copy of a key group's ``namespace -> {key: value}`` map for live use: new dicts, values
    copied by :func:`copy_state_value` (keys and namespaces are hashable, so immutable by
    contract, and shared)."""
    out = {}
    for namespace, by_key in pinned.items():
        values = by_key.values()
        out[namespace] = (by_key.copy() if all_immutable(values)
                          else {k: copy_state_value(v) for k, v in by_key.items()})
    return out


class PinnedKeyGroup:
    """The placeholder a snapshot leaves in a state table's key-group slot: it stands for the
    pinned ``namespace -> {key: value}`` dict, and on its first use copies it into the slot
    (:func:`copy_key_group`) and forwards the operation to that copy. Every operation
    of a ``dict`` that the state code uses is forwarded; a placeholder that was resolved
    (someone still holds it) forwards to whatever the slot holds now, resolving again if a newer
    snapshot pinned it in the meantime.

    :param maps: the table's ``key_group_maps`` list.
    :param offset: the slot's index in it.
    :param pinned: the dict the snapshot keeps; never modified afterwards.
    """

    __slots__ = ("_maps", "_offset", "pinned")

    def __init__(self, maps: List[Any], offset: int, pinned: Dict[Any, Dict[Any, Any]]) -> None:
        self._maps = maps
        self._offset = offset
        self.pinned = pinned

    def live(self) -> Dict[Any, Dict[Any, Any]]:
        """The slot's plain dict, copying the pinned one into the slot if this placeholder
        is still there (task thread only)."""
        maps = self._maps
        slot = maps[self._offset]
        if slot is self:
            slot = maps[self._offset] = copy_key_group(self.pinned)
        elif type(slot) is not dict:
            return slot.live()
        return slot

    def _current(self) -> Dict[Any, Dict[Any, Any]]:
        """What the slot holds now, for reading only (no copy while this placeholder is there)."""
        slot = self._maps[self._offset]
        if slot is self:
            return self.pinned
        return slot if type(slot) is dict else slot._current()

    # -- reads that hand nothing out: answered without copying ----------------------------
    def __len__(self) -> int:
        return len(self._current())

    def __bool__(self) -> bool:
        return bool(self._current())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PinnedKeyGroup):
            other = other._current()
        return self._current() == other

    __hash__ = None  # type: ignore[assignment]  # a mutable mapping, as dict

    def __contains__(self, namespace: Any) -> bool:
        return namespace in self._current()

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._current()))

    def keys(self):
        return self.live().keys()

    # -- everything else resolves the slot first -------------------------------------------
    def __getitem__(self, namespace: Any) -> Dict[Any, Any]:
        return self.live()[namespace]

    def __setitem__(self, namespace: Any, by_key: Dict[Any, Any]) -> None:
        self.live()[namespace] = by_key

    def __delitem__(self, namespace: Any) -> None:
        del self.live()[namespace]

    def get(self, namespace: Any, default: Any = None) -> Any:
        return self.live().get(namespace, default)

    def pop(self, namespace: Any, *default: Any) -> Any:
        return self.live().pop(namespace, *default)

    def setdefault(self, namespace: Any, default: Any = None) -> Any:
        return self.live().setdefault(namespace, default)

    def items(self):
        return self.live().items()

    def values(self):
        return self.live().values()

    def update(self, *args: Any, **kwargs: Any) -> None:
        self.live().update(*args, **kwargs)

    def clear(self) -> None:
        # nothing to copy: the slot gets an empty dict, the pinned one stays as it is
        maps = self._maps
        slot = maps[self._offset]
        if slot is self:
            maps[self._offset] = {}
        else:
            slot.clear()

    def copy(self) -> Dict[Any, Dict[Any, Any]]:
        return dict(self.live())

    def __repr__(self) -> str:
        return f"PinnedKeyGroup({self._current()!r})"
