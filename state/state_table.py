"""StateTable: the storage of one registered keyed state in the heap backend, organized by
key group (Flink's ``StateTable`` / ``CopyOnWriteStateTable`` with one ``StateMap`` per key
group).

Layout (operators use it directly on their per-batch fast path; snapshots iterate it per key
group)::

    table.key_group_maps: list[dict[namespace, dict[key, value]]]
    table.key_group_maps[key_group - key_group_range.start_key_group][namespace][key] -> value

- one outer map per key group of the backend's range, always present: a plain ``dict``, or,
  after a snapshot pinned it, a :class:`~rill.state.copy_on_write.PinnedKeyGroup` placeholder
  that copies it back into a plain ``dict`` on its first access (see
  :mod:`rill.state.copy_on_write`). So index the list for each access or batch and never keep
  an outer map across mails;
- inside it, one ``dict`` per namespace that has at least one entry in that key group; an
  inner dict is removed when its last key is removed, so the layout holds no empty containers
  (windows create and drop many namespaces);
- ``value`` is the state's stored value: the value (ValueState), a non-empty ``list``
  (ListState), a non-empty ``dict`` of user key to user value (MapState), the reduced value
  (ReducingState) or the accumulator (AggregatingState). ``None`` is never stored.

Whoever writes into the layout directly must keep these invariants: the key must belong to
the key group of its slot (``assign_to_key_group``), and empty inner dicts and ``None`` values
must not be left behind.

Rill difference: Flink's ``CopyOnWriteStateMap`` is a flat hash map of (key, namespace)
entries with copy-on-write versions per entry. Rill nests namespace then key in plain dicts,
which needs no per-access tuple, and copies on write per key group (:meth:`StateTable.pin`).
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Tuple

from rill.state.copy_on_write import PinnedKeyGroup
from rill.state.descriptors import StateDescriptor
from rill.state.key_groups import KeyGroupRange

__all__ = ["StateTable"]


class StateTable:
    """The entries of one keyed state for every key group of a backend's range.

    :param descriptor: the descriptor the state was registered with.
    :param key_group_range: the backend's key-group range; must not be empty.
    :ivar key_group_maps: the per-key-group maps described in the module docstring.
    :ivar pins: how many snapshots have pinned the table (:meth:`pin`): a fast path that saw
        no pinned key group at ``pins == n`` finds none as long as ``pins`` is still ``n``.
    """

    __slots__ = ("descriptor", "key_group_range", "key_group_maps", "_start", "pins")

    def __init__(self, descriptor: StateDescriptor, key_group_range: KeyGroupRange) -> None:
        self.descriptor = descriptor
        self.key_group_range = key_group_range
        self._start = key_group_range.start_key_group
        self.key_group_maps: List[Dict[Any, Dict[Any, Any]]] = [
            {} for _ in range(key_group_range.get_number_of_key_groups())
        ]
        self.pins = 0

    @property
    def name(self) -> str:
        """The state's name."""
        return self.descriptor.name

    def _map_of(self, key_group: int) -> Dict[Any, Dict[Any, Any]]:
        """The key group's live map, for reading and writing (a pinned one is copied first)."""
        slot = self.key_group_maps[self._offset_of(key_group)]
        return slot if type(slot) is dict else slot.live()

    def _offset_of(self, key_group: int) -> int:
        offset = key_group - self._start
        if offset < 0 or offset >= len(self.key_group_maps):
            raise ValueError(f"Key group {key_group} is not in {self.key_group_range}.")
        return offset

    def _readable(self, slot: Any) -> Dict[Any, Dict[Any, Any]]:
        """A slot's map for reading only: a pinned map is read where it is, not copied."""
        return slot if type(slot) is dict else slot._current()

    # -- snapshots ------------------------------------------------------------------------
    def pin(self) -> List[Optional[Dict[Any, Dict[Any, Any]]]]:
        """The synchronous part of a snapshot: per key group of the range (in order), the
        ``namespace -> {key: value}`` dict as it is now, or ``None`` if the key group is empty.
        The returned dicts are never modified again: each slot gets a
        :class:`~rill.state.copy_on_write.PinnedKeyGroup` that copies its dict on the first
        access (Flink's ``CopyOnWriteStateTable.stateSnapshot``). O(key groups); task thread
        only. The caller may read the dicts and their values from any thread, and must not
        modify them."""
        maps = self.key_group_maps
        self.pins += 1
        pinned: List[Optional[Dict[Any, Dict[Any, Any]]]] = []
        for offset, slot in enumerate(maps):
            if type(slot) is dict:
                if not slot:
                    pinned.append(None)  # nothing to keep: later writes may go into it
                    continue
                maps[offset] = PinnedKeyGroup(maps, offset, slot)
                pinned.append(slot)
            else:  # pinned by an earlier snapshot and not accessed since: unchanged
                pinned.append(slot.pinned)
        return pinned

    def unpin(self) -> None:
        """Copy every key group that a snapshot left pinned back into its slot now, so that
        every slot is a plain ``dict`` (for per-batch fast paths that call ``dict`` methods
        unbound, as ``map(dict.get, ...)``); a no-op for a slot that is one already."""
        for slot in self.key_group_maps:
            if type(slot) is not dict:
                slot.live()

    def has_pinned(self) -> bool:
        """Whether a key group is still pinned by a snapshot (not accessed since)."""
        return any(type(slot) is not dict for slot in self.key_group_maps)

    def get(self, key: Any, key_group: int, namespace: Any) -> Any:
        """The value of ``key`` in ``namespace``, or ``None``.

        :param key_group: the key's (absolute) key group.
        :raises ValueError: if ``key_group`` is outside the table's range.
        """
        by_key = self._map_of(key_group).get(namespace)
        return None if by_key is None else by_key.get(key)

    def contains_key(self, key: Any, key_group: int, namespace: Any) -> bool:
        """Whether ``key`` has an entry in ``namespace``."""
        by_key = self._map_of(key_group).get(namespace)
        return by_key is not None and key in by_key

    def put(self, key: Any, key_group: int, namespace: Any, value: Any) -> None:
        """Store ``value`` for ``key`` in ``namespace``; ``None`` removes the entry.

        :raises ValueError: if ``key_group`` is outside the table's range.
        """
        if value is None:
            self.remove(key, key_group, namespace)
            return
        by_namespace = self._map_of(key_group)
        by_key = by_namespace.get(namespace)
        if by_key is None:
            by_namespace[namespace] = {key: value}
        else:
            by_key[key] = value

    def remove(self, key: Any, key_group: int, namespace: Any) -> Any:
        """Remove the entry of ``key`` in ``namespace`` and return its value (``None`` if absent).

        :raises ValueError: if ``key_group`` is outside the table's range.
        """
        by_namespace = self._map_of(key_group)
        by_key = by_namespace.get(namespace)
        if by_key is None:
            return None
        old = by_key.pop(key, None)
        if not by_key:
            del by_namespace[namespace]
        return old

    def iter_key_group(self, key_group: int) -> Iterator[Tuple[Any, Any, Any]]:
        """Yield ``(key, namespace, value)`` for every entry of ``key_group``.

        The table must not be modified while the iterator is in use.

        :raises ValueError: if ``key_group`` is outside the table's range.
        """
        for namespace, by_key in self._readable(self.key_group_maps[self._offset_of(key_group)]).items():
            for key, value in by_key.items():
                yield key, namespace, value

    def __iter__(self) -> Iterator[Tuple[Any, Any, Any]]:
        """Yield ``(key, namespace, value)`` for every entry, key group by key group."""
        for key_group in self.key_group_range:
            yield from self.iter_key_group(key_group)

    def get_keys(self, namespace: Any) -> Iterator[Any]:
        """Yield every key with an entry in ``namespace``, key group by key group.

        The keys of a key group are copied before they are yielded, so the caller may modify
        the table between two keys.
        """
        for slot in self.key_group_maps:
            by_key = self._readable(slot).get(namespace)
            if by_key:
                yield from list(by_key)

    def size(self) -> int:
        """Number of (key, namespace) entries (Flink's ``StateTable.size``)."""
        return sum(len(by_key) for slot in self.key_group_maps for by_key in self._readable(slot).values())

    def size_of_namespace(self, namespace: Any) -> int:
        """Number of keys with an entry in ``namespace``."""
        total = 0
        for slot in self.key_group_maps:
            by_key = self._readable(slot).get(namespace)
            if by_key is not None:
                total += len(by_key)
        return total

    def is_empty(self) -> bool:
        """Whether the table has no entry."""
        return not any(self.key_group_maps)

    def clear(self) -> None:
        """Remove every entry (the per-key-group dicts themselves are kept; a pinned one is
        replaced by an empty dict and stays as the snapshot has it)."""
        for by_namespace in self.key_group_maps:
            by_namespace.clear()

    def __repr__(self) -> str:
        return f"StateTable(name={self.name!r}, {self.key_group_range}, entries={self.size()})"
