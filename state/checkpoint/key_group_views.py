"""Keyed state of a snapshot as *namespace chunks* per key group: what a Parquet writer reads
column by column, without one Python tuple per entry.

A chunk is ``(namespace, keys, stored values)``: one namespace's keys and values in one key
group, as the heap state table holds them (``namespace -> {key: value}``), so a writer extends
its key and value columns with ``list.extend(by_key.keys())`` (C-level) and writes the
namespace once per chunk.

:class:`PinnedKeyGroups` is the ``key_groups`` mapping of a
:class:`~rill.state.checkpoint.operator_subtask_state.KeyedStateSnapshot` taken by the heap
backend: it keeps the pinned key-group dicts (see :mod:`rill.state.copy_on_write`) and builds
the ``(key, namespace, value)`` entries of a key group only when someone asks for them (a
restore from the in-memory storage, a test); the file writer reads its chunks instead
(:meth:`PinnedKeyGroups.chunks`). Measured (73,295 untyped entries, one state): building the
entry tuples of every key group took 35–90 ms of GIL-holding CPU per checkpoint; the chunks
cost O(key groups × namespaces).
"""

from __future__ import annotations

import itertools
import operator
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

__all__ = ["NamespaceChunk", "PinnedKeyGroups", "entry_chunks"]

#: ``(namespace, keys, stored values)`` of one namespace in one key group; ``keys`` and
#: ``values`` are sized iterables of the same length (lists or dict views)
NamespaceChunk = Tuple[Any, Sequence[Any], Sequence[Any]]

#: one state's pinned view: per key group of the range its pinned ``namespace -> {key: value}``
#: dict or ``None``, and the snapshot transformer (``stored -> stored or None``: TTL's
#: ``cleanup_full_snapshot`` leaving expired values out) or ``None``
PinnedState = Tuple[List[Optional[Dict[Any, Dict[Any, Any]]]], Optional[Callable[[Any], Any]]]

_NAMESPACE = operator.itemgetter(1)


def entry_chunks(entries: Iterable[Tuple[Any, Any, Any]]) -> List[NamespaceChunk]:
    """The chunks of ``(key, namespace, value)`` entries in their order: one chunk per run of
    consecutive entries with equal namespaces."""
    chunks: List[NamespaceChunk] = []
    for namespace, run in itertools.groupby(entries, _NAMESPACE):
        keys, _, values = zip(*run)
        chunks.append((namespace, keys, values))
    return chunks


class PinnedKeyGroups(Mapping[int, Mapping[str, Tuple[Tuple[Any, Any, Any], ...]]]):
    """key group -> state name -> ``(key, namespace, stored value)`` entries, read from pinned
    key-group dicts that nobody modifies any more (any thread). Only key groups and states
    with entries appear, as in a ``KeyedStateSnapshot``. Entries are built per access, not
    kept; pickling gives a plain ``dict`` of them (a snapshot record travelling to the
    JobMaster does not carry the transformers).

    :param start: the first key group of the range (offset 0 of every pinned list).
    :param states: state name -> :data:`PinnedState`, in registration order.
    """

    __slots__ = ("_start", "_states", "_key_groups")

    def __init__(self, start: int, states: Mapping[str, PinnedState]) -> None:
        self._start = start
        self._states = dict(states)
        self._key_groups: Optional[List[int]] = None

    def raw_args(self) -> Tuple[int, Dict[str, PinnedState]]:
        """``(start, states)``, this view's constructor arguments: what a process that writes
        the snapshot for the task needs (the pinned dicts themselves, pickled at C speed)."""
        return self._start, self._states

    def entry_count(self) -> int:
        """The pinned entries (before TTL transformers drop expired ones), O(key groups x
        namespaces)."""
        return sum(len(by_key) for pinned, _ in self._states.values() for by_namespace in pinned if by_namespace
                   for by_key in by_namespace.values())

    def state_names(self) -> List[str]:
        """Every pinned state's name, in registration order (with entries or not)."""
        return list(self._states)

    def _by_namespace(self, name: str, offset: int) -> Optional[Mapping[Any, Mapping[Any, Any]]]:
        pinned, transform = self._states[name]
        by_namespace = pinned[offset]
        if not by_namespace or transform is None:
            return by_namespace
        kept: Dict[Any, Dict[Any, Any]] = {}
        for namespace, by_key in by_namespace.items():
            live = {key: value for key, stored in by_key.items() if (value := transform(stored)) is not None}
            if live:
                kept[namespace] = live
        return kept

    def chunks(self, name: str) -> Iterator[Tuple[int, List[NamespaceChunk]]]:
        """``(key group, chunks)`` of state ``name`` in ascending key-group order, key groups
        without entries left out; the chunks' keys and values are the pinned dicts' views.

        :raises KeyError: for a state that was not pinned.
        """
        pinned, _ = self._states[name]
        for offset in range(len(pinned)):
            by_namespace = self._by_namespace(name, offset)
            if by_namespace:
                found = [(namespace, by_key.keys(), by_key.values())
                         for namespace, by_key in by_namespace.items() if by_key]
                if found:
                    yield self._start + offset, found

    def _entries(self, name: str, offset: int) -> Tuple[Tuple[Any, Any, Any], ...]:
        by_namespace = self._by_namespace(name, offset)
        if not by_namespace:
            return ()
        return tuple(itertools.chain.from_iterable(
            zip(by_key.keys(), itertools.repeat(namespace), by_key.values())
            for namespace, by_key in by_namespace.items()))

    def _present(self) -> List[int]:
        if self._key_groups is None:
            offsets = set()
            for name, (pinned, _) in self._states.items():
                offsets.update(offset for offset in range(len(pinned))
                               if pinned[offset] and any(self._by_namespace(name, offset).values()))
            self._key_groups = [self._start + offset for offset in sorted(offsets)]
        return self._key_groups

    def __getitem__(self, key_group: int) -> Mapping[str, Tuple[Tuple[Any, Any, Any], ...]]:
        offset = key_group - self._start if type(key_group) is int else -1
        out = {}
        for name, (pinned, _) in self._states.items():
            if 0 <= offset < len(pinned):
                entries = self._entries(name, offset)
                if entries:
                    out[name] = entries
        if not out:
            raise KeyError(key_group)
        return out

    def __iter__(self) -> Iterator[int]:
        return iter(self._present())

    def __len__(self) -> int:
        return len(self._present())

    def __contains__(self, key_group: object) -> bool:
        return key_group in self._present()

    def __reduce__(self):
        return dict, ({kg: self[kg] for kg in self},)

    def __repr__(self) -> str:
        return f"PinnedKeyGroups(start={self._start}, states={list(self._states)}, key_groups={len(self)})"
