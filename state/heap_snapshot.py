"""The two parts of a heap keyed state snapshot (Flink's ``HeapSnapshotStrategy`` with its
``HeapSnapshotResources``).

Synchronous part, on the task thread (:func:`sync_prepare_heap_resources`): every state table
pins its key groups (:meth:`~rill.state.state_table.StateTable.pin`, O(key groups), see
:mod:`rill.state.copy_on_write`) and the TTL snapshot transformers read the clock. Nothing is
copied: the task goes on at once, and copies a key group when it first touches it.

Asynchronous part, on any thread (:meth:`HeapSnapshotResources.async_snapshot`): the pinned
dicts, which nobody modifies any more, become the
:class:`~rill.state.checkpoint.operator_subtask_state.KeyedStateSnapshot` record, whose
``key_groups`` reads them key group by key group
(:class:`~rill.state.checkpoint.key_group_views.PinnedKeyGroups`), with expired TTL values left
out (``cleanup_full_snapshot``).

The record's stored values are the pinned objects themselves (not copies): the live state
copies what it touches after the snapshot, so they stay as they were. A restore copies them in.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from rill.state.backend import KeyedSnapshotResources
from rill.state.checkpoint.key_group_views import PinnedKeyGroups
from rill.state.checkpoint.operator_subtask_state import KeyedStateSnapshot
from rill.state.descriptors import StateDescriptor
from rill.state.key_groups import KeyGroupRange

__all__ = ["HeapSnapshotResources", "PinnedTable"]

#: one state's pinned view: its descriptor, per key group of the range its pinned dict or
#: ``None``, and its snapshot transformer (``stored -> stored or None``) or ``None``
PinnedTable = Tuple[StateDescriptor, List[Optional[Dict[Any, Dict[Any, Any]]]], Optional[Callable[[Any], Any]]]


class HeapSnapshotResources(KeyedSnapshotResources):
    """The pinned views of one heap backend's states.

    :param max_parallelism: the backend's number of key groups.
    :param key_group_range: the backend's key groups.
    :param tables: state name -> :data:`PinnedTable`, in registration order.
    """

    __slots__ = ("_max_parallelism", "_key_group_range", "_tables")

    def __init__(self, max_parallelism: int, key_group_range: KeyGroupRange,
                 tables: Mapping[str, PinnedTable]) -> None:
        self._max_parallelism = max_parallelism
        self._key_group_range = key_group_range
        self._tables: Optional[Dict[str, PinnedTable]] = dict(tables)

    def async_snapshot(self) -> KeyedStateSnapshot:
        """The :class:`KeyedStateSnapshot` of the pinned views (only key groups and states with
        entries appear). Its ``key_groups`` is a
        :class:`~rill.state.checkpoint.key_group_views.PinnedKeyGroups` over the pinned dicts:
        O(states) here, the entries are read when the snapshot is written (column by column)
        or asked for. Reads the pinned dicts only, so any thread may call it while the task
        runs on.

        :raises RuntimeError: after :meth:`release`.
        """
        tables = self._tables
        if tables is None:
            raise RuntimeError("The heap snapshot resources were released")
        return KeyedStateSnapshot(
            max_parallelism=self._max_parallelism,
            key_group_range=self._key_group_range,
            descriptors={name: descriptor for name, (descriptor, _, _) in tables.items()},
            key_groups=PinnedKeyGroups(self._key_group_range.start_key_group, {
                name: (pinned, transform) for name, (_, pinned, transform) in tables.items()}),
        )

    def release(self) -> None:
        """Drop this object's references to the pinned dicts (the snapshot record keeps its
        own until it is written; they are freed once the live state has copied every key
        group away from them)."""
        self._tables = None
