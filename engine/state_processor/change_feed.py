"""The change feed of one keyed state between consecutive checkpoints (Spark's state data
source ``readChangeFeed``; Flink has none): for each checkpoint of a range, every (key,
namespace) entry that is new or whose value changed since the completed checkpoint before it
(``"update"``, with the new value) or that is gone (``"delete"``, value null).

A split is one key-group range of one checkpoint (the ranges of that checkpoint's subtasks, or
single key groups under a key filter) with the splits reading the same range from the
checkpoint before, so checkpoints of different parallelism compare key group by key group.
Comparing is per entry in Python (Arrow values as Python values): a change feed reads two
checkpoints and is not the bulk path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import pyarrow as pa

from rill.state.checkpoint.metadata import CheckpointMetadata, OperatorState
from rill.state.key_groups import KeyGroupRange
from rill.state_processor.keyed_splits import KeyedStateSplit, read_keyed_state_split, splits_for_range
from rill.state_processor.snapshots import OperatorIdentifier, find_operator

__all__ = ["ChangeSplit", "plan_change_splits", "read_change_split", "CHANGE_COLUMNS"]

#: The columns of a change split's table, in this order.
CHANGE_COLUMNS = ("checkpoint_id", "change_type", "key", "value", "partition_id", "namespace", "key_group")


@dataclass(frozen=True)
class ChangeSplit:
    """The changes of one key-group range made by checkpoint ``checkpoint_id``.

    :ivar current: the splits reading the range from that checkpoint.
    :ivar previous: the splits reading it from the completed checkpoint before.
    :ivar partition_id: the subtask of checkpoint ``checkpoint_id`` owning the range.
    """

    checkpoint_id: int
    key_group_range: Tuple[int, int]
    current: Tuple[KeyedStateSplit, ...]
    previous: Tuple[KeyedStateSplit, ...]
    partition_id: int


def _operator(metadata: CheckpointMetadata, operator: OperatorIdentifier) -> Optional[OperatorState]:
    try:
        return find_operator(metadata, operator)
    except KeyError:
        return None  # the operator has no state in that checkpoint: every entry is new / gone


def _ranges(op: OperatorState) -> List[Tuple[int, KeyGroupRange]]:
    return [(subtask, KeyGroupRange(*k["key_group_range"]))
            for subtask, handle in sorted(op.subtask_states.items())
            for k in handle.description["keyed_state"]]  # type: ignore[attr-defined]


def plan_change_splits(snapshots: Sequence[CheckpointMetadata], operator: Union[str, OperatorIdentifier],
                       state_name: str, key_groups: Optional[Sequence[int]] = None) -> List[ChangeSplit]:
    """The splits of the changes made by ``snapshots[1:]``, each compared with the one before.

    :param key_groups: only these key groups (a key filter), else all.
    """
    ident = OperatorIdentifier.of(operator)
    splits = []
    for prev, cur in zip(snapshots, snapshots[1:]):
        cur_op, prev_op = _operator(cur, ident), _operator(prev, ident)
        owner = cur_op if cur_op is not None else prev_op
        if owner is None:
            continue
        ranges = _ranges(owner)
        if key_groups is not None:
            ranges = [(subtask, KeyGroupRange(kg, kg)) for kg in sorted(set(key_groups))
                      for subtask, rng in ranges if rng.contains(kg)]
        for subtask, rng in ranges:
            current = () if cur_op is None else tuple(
                splits_for_range(cur_op, cur.external_pointer or "", state_name, rng))
            previous = () if prev_op is None else tuple(
                splits_for_range(prev_op, prev.external_pointer or "", state_name, rng))
            if current or previous:
                splits.append(ChangeSplit(cur.checkpoint_id, (rng.start_key_group, rng.end_key_group),
                                          current, previous, subtask))
    return splits


def _table(splits: Sequence[KeyedStateSplit]) -> Optional[pa.Table]:
    tables = [read_keyed_state_split(s) for s in splits]
    return pa.concat_tables(tables) if tables else None


def _entries(table: Optional[pa.Table], keys: Optional[Sequence[Any]]) -> Dict[str, Tuple[int, Any]]:
    """``repr((key, namespace))`` -> (row, value) of the rows of ``table`` (keys: only those)."""
    if table is None:
        return {}
    wanted = None if keys is None else {repr(k) for k in keys}
    out = {}
    for i, (key, ns, value) in enumerate(zip(table.column("key").to_pylist(), table.column("namespace").to_pylist(),
                                             table.column("value").to_pylist())):
        if wanted is None or repr(key) in wanted:
            out[repr((key, ns))] = (i, value)
    return out


def read_change_split(split: ChangeSplit, keys: Optional[Sequence[Any]] = None) -> pa.Table:
    """The changes of ``split`` with the columns :data:`CHANGE_COLUMNS`: updates in the order
    of the current checkpoint's rows, then deletes in the order of the previous one's.

    :param keys: only entries of these ``key`` column values (``None``: all).
    :raises ValueError: if the state's column types differ between the two checkpoints.
    """
    current, previous = _table(split.current), _table(split.previous)
    now, before = _entries(current, keys), _entries(previous, keys)
    updates = [i for ident, (i, value) in now.items() if ident not in before or before[ident][1] != value]
    deletes = [i for ident, (i, _) in before.items() if ident not in now]
    parts = []
    if updates and current is not None:
        parts.append(_with_change(current.take(updates), split, "update"))
    if deletes and previous is not None:
        gone = previous.take(deletes)
        gone = gone.set_column(gone.schema.get_field_index("value"), "value",
                               pa.nulls(gone.num_rows, gone.schema.field("value").type))
        parts.append(_with_change(gone, split, "delete"))
    if not parts:
        template = current if current is not None else previous
        return _with_change(template.slice(0, 0), split, "update")  # type: ignore[union-attr]
    try:
        return pa.concat_tables(parts)
    except pa.ArrowInvalid as e:
        raise ValueError(f"Checkpoint {split.checkpoint_id} and the one before store the state with "
                         f"different column types; a change feed compares one type: {e}") from e


def _with_change(table: pa.Table, split: ChangeSplit, change_type: str) -> pa.Table:
    n = table.num_rows
    return pa.table({
        "checkpoint_id": pa.array([split.checkpoint_id] * n, pa.int64()),
        "change_type": pa.array([change_type] * n, pa.string()),
        "key": table.column("key"),
        "value": table.column("value"),
        "partition_id": pa.array([split.partition_id] * n, pa.int32()),
        "namespace": table.column("namespace"),
        "key_group": table.column("key_group"),
    })
