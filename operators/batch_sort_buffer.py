"""``KeyGroupedBuffer``: the records of a keyed BATCH input grouped by key, spilled to local disk
by key group when more than a bound are held (the memory bound of Flink's sorter for sorted
inputs, ``SortingDataInput``; Rill partitions by key group where Flink sorts and merges runs).

Layout of a group: a list of ``width`` lists, values at even positions and their timestamps
(``None`` for a record without) at the odd position after them; a one-input operator uses
width 2, a two-input operator width 4 (input 1 at 0/1, input 2 at 2/3).

Spilling: when the held records exceed ``max_records_in_memory``, every group is appended
(pickled, one ``(key, group)`` per entry) to the spill file of its key group and memory is
emptied. :meth:`drain` then returns key group by key group: the spilled parts of one key group
(in spill order) merged with what is still in memory, so at most one key group's records are
loaded at a time, and each key comes out once with all its records in arrival order. Without
a spill nothing touches the disk. Spill files live in a temporary directory removed by
:meth:`close`.
"""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

__all__ = ["KeyGroupedBuffer"]


class KeyGroupedBuffer:
    """
    :param width: lists per group (2 per input, see the module docstring).
    :param key_group_of: ``key -> int``, the key's key group (offset in the subtask's range).
    :param max_records_in_memory: records held before a spill (>= 1).
    :param operator_name: named in errors.
    :raises ValueError: for ``max_records_in_memory`` below 1.
    """

    def __init__(self, width: int, key_group_of: Callable[[Any], int], max_records_in_memory: int,
                 operator_name: str) -> None:
        if not isinstance(max_records_in_memory, int) or max_records_in_memory < 1:
            raise ValueError(f"Operator '{operator_name}': the BATCH sort buffer must hold at least 1 record, "
                             f"got max_records_in_memory={max_records_in_memory!r}")
        self.width = width
        self._key_group_of = key_group_of
        self.max_records_in_memory = max_records_in_memory
        self.operator_name = operator_name
        self.groups: Dict[Any, List[list]] = {}
        self._held = 0
        self._spill_dir: Optional[str] = None
        self._spilled_key_groups: set = set()
        #: number of spills so far (statistics; tests read it)
        self.spills = 0

    def add(self, key_of: Callable[[Any], Any], values: List[Any], timestamps: Optional[List[int]],
            offset: int) -> None:
        """Append each record to its key's group, at list ``offset`` (values) and ``offset + 1``
        (timestamps); spill when over the bound."""
        groups = self.groups
        get = groups.get
        width = self.width
        if timestamps is None:
            for v in values:
                k = key_of(v)
                g = get(k)
                if g is None:
                    g = groups[k] = [[] for _ in range(width)]
                g[offset].append(v)
                g[offset + 1].append(None)
        else:
            for v, t in zip(values, timestamps):
                k = key_of(v)
                g = get(k)
                if g is None:
                    g = groups[k] = [[] for _ in range(width)]
                g[offset].append(v)
                g[offset + 1].append(t)
        self._held += len(values)
        if self._held > self.max_records_in_memory:
            self._spill()

    def _spill(self) -> None:
        if self._spill_dir is None:
            self._spill_dir = tempfile.mkdtemp(prefix="rill-batch-sort-")
        by_key_group: Dict[int, List[Tuple[Any, List[list]]]] = {}
        key_group_of = self._key_group_of
        for key, group in self.groups.items():
            by_key_group.setdefault(key_group_of(key), []).append((key, group))
        for key_group, entries in by_key_group.items():
            with open(self._path(key_group), "ab") as f:
                pickle.dump(entries, f, protocol=pickle.HIGHEST_PROTOCOL)
            self._spilled_key_groups.add(key_group)
        self.groups = {}
        self._held = 0
        self.spills += 1

    def _path(self, key_group: int) -> str:
        return os.path.join(self._spill_dir, f"key-group-{key_group}")

    def drain(self) -> Iterator[Tuple[Any, List[list]]]:
        """Every ``(key, group)`` once, emptying the buffer (see the module docstring for the
        order)."""
        groups = self.groups
        self.groups = {}
        self._held = 0
        if not self._spilled_key_groups:
            for key in list(groups):
                yield key, groups.pop(key)
            return
        in_memory: Dict[int, Dict[Any, List[list]]] = {}
        key_group_of = self._key_group_of
        for key, group in groups.items():
            in_memory.setdefault(key_group_of(key), {})[key] = group
        del groups
        for key_group in sorted(self._spilled_key_groups | set(in_memory)):
            merged = self._read_spilled(key_group) if key_group in self._spilled_key_groups else {}
            for key, group in in_memory.pop(key_group, {}).items():
                self._merge(merged, key, group)
            for key in list(merged):
                yield key, merged.pop(key)
        self._spilled_key_groups = set()

    def _read_spilled(self, key_group: int) -> Dict[Any, List[list]]:
        merged: Dict[Any, List[list]] = {}
        path = self._path(key_group)
        with open(path, "rb") as f:
            while True:
                try:
                    entries = pickle.load(f)
                except EOFError:
                    break
                for key, group in entries:
                    self._merge(merged, key, group)
        os.remove(path)
        return merged

    @staticmethod
    def _merge(merged: Dict[Any, List[list]], key: Any, group: List[list]) -> None:
        existing = merged.get(key)
        if existing is None:
            merged[key] = group
        else:
            for mine, more in zip(existing, group):
                mine.extend(more)

    def close(self) -> None:
        """Remove the spill files (idempotent)."""
        if self._spill_dir is not None:
            shutil.rmtree(self._spill_dir, ignore_errors=True)
            self._spill_dir = None
