"""StateTable: the storage of one registered keyed state in the heap backend, organized by
key group (Flink's ``StateTable`` / ``CopyOnWriteStateTable`` with one ``StateMap`` per key
group).

Layout (operators use it directly on their per-batch fast path; snapshots iterate it per key
group)::

    table.key_group_maps: list[dict[namespace, dict[key, value]]]
    table.key_group_maps[key_group - key_group_range.start_key_group][namespace][key] -> value

- one outer ``dict`` per key group of the backend's range, always present (never replaced, so
  a reference to it stays valid for the life of the table);
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
entries with copy-on-write versions for asynchronous snapshots. Rill nests namespace then key
in plain dicts, which needs no per-access tuple, and snapshots on the task thread.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Tuple

from rill.state.descriptors import StateDescriptor
from rill.state.key_groups import KeyGroupRange

__all__ = ["StateTable"]


class StateTable:
    """The entries of one keyed state for every key group of a backend's range.

    :param descriptor: the descriptor the state was registered with.
    :param key_group_range: the backend's key-group range; must not be empty.
    :ivar key_group_maps: the per-key-group maps described in the module docstring.
    """

    __slots__ = ("descriptor", "key_group_range", "key_group_maps", "_start")

    def __init__(self, descriptor: StateDescriptor, key_group_range: KeyGroupRange) -> None:
        self.descriptor = descriptor
        self.key_group_range = key_group_range
        self._start = key_group_range.start_key_group
        self.key_group_maps: List[Dict[Any, Dict[Any, Any]]] = [
            {} for _ in range(key_group_range.get_number_of_key_groups())
        ]

    @property
    def name(self) -> str:
        """The state's name."""
        return self.descriptor.name

    def _map_of(self, key_group: int) -> Dict[Any, Dict[Any, Any]]:
        offset = key_group - self._start
        if offset < 0 or offset >= len(self.key_group_maps):
            raise ValueError(f"Key group {key_group} is not in {self.key_group_range}.")
        return self.key_group_maps[offset]

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
        for namespace, by_key in self._map_of(key_group).items():
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
        for by_namespace in self.key_group_maps:
            by_key = by_namespace.get(namespace)
            if by_key:
                yield from list(by_key)

    def size(self) -> int:
        """Number of (key, namespace) entries (Flink's ``StateTable.size``)."""
        return sum(len(by_key) for by_namespace in self.key_group_maps for by_key in by_namespace.values())

    def size_of_namespace(self, namespace: Any) -> int:
        """Number of keys with an entry in ``namespace``."""
        total = 0
        for by_namespace in self.key_group_maps:
            by_key = by_namespace.get(namespace)
            if by_key is not None:
                total += len(by_key)
        return total

    def is_empty(self) -> bool:
        """Whether the table has no entry."""
        return not any(self.key_group_maps)

    def clear(self) -> None:
        """Remove every entry (the per-key-group dicts themselves are kept)."""
        for by_namespace in self.key_group_maps:
            by_namespace.clear()

    def __repr__(self) -> str:
        return f"StateTable(name={self.name!r}, {self.key_group_range}, entries={self.size()})"
