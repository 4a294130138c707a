"""Splits of one keyed state of one operator, and reading a split as Arrow (Flink's
``KeyGroupRangeInputSplit``): a split is one subtask's file of the state and a key-group range
within it, read as the row groups that overlap the range (the file's row groups hold whole key
groups, :mod:`rill.state.checkpoint.parquet_layout`).

A split reads only Arrow columns: no per-row Python work, so a Spark task turns the Parquet
row groups into its output batches at Arrow speed.

Key pruning: an equality on the key names one key group (``assign_to_key_group(key,
max_parallelism)``); only the subtask file owning it is opened, only the row groups holding it
are read, and only its rows are kept.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, Iterable, List, Optional, Sequence, Tuple

import cloudpickle
import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from rill.state.checkpoint.arrow_types import UNTYPED, ColumnCodec, column_codec
from rill.state.checkpoint.metadata import OperatorState
from rill.state.checkpoint.parquet_layout import plan_row_groups
from rill.state.key_groups import KeyGroupRange, UnsupportedKeyError, assign_to_key_group

__all__ = ["KeyedStateSplit", "plan_keyed_state_splits", "splits_for_range", "read_keyed_state_split",
           "key_codec_of", "key_groups_of_keys", "unpickled", "KEYED_COLUMNS"]

#: Rows after which consecutive row groups of a file go to another split: a Spark task has a
#: fixed cost (a Python worker call, the reader unpickled), so splits are made large.
SPLIT_TARGET_ROWS = 256 * 1024

#: The columns a split's table has, in this order.
KEYED_COLUMNS = ("key", "value", "partition_id", "namespace", "key_group", "checkpoint_id")


@dataclass(frozen=True)
class KeyedStateSplit:
    """One subtask file of one keyed state and the key groups to read from it.

    :ivar directory: the snapshot's directory (path or URL).
    :ivar file: the file, relative to ``directory``.
    :ivar row_groups: the file's row groups as ``[first key group, last key group, rows]``.
    :ivar key_group_range: ``(first, last)`` key group to read, inclusive.
    :ivar partition_id: the subtask that wrote the file.
    :ivar keys: the keys to keep (Arrow scalars' Python values of the ``key`` column), or
        ``None`` for all.
    """

    directory: str
    file: str
    row_groups: Tuple[Tuple[int, int, int], ...]
    key_group_range: Tuple[int, int]
    partition_id: int
    keys: Optional[Tuple[Any, ...]] = None

    @property
    def rows_planned(self) -> int:
        """Rows of the row groups this split reads (before dropping other key groups)."""
        rng = KeyGroupRange(*self.key_group_range)
        return sum(self.row_groups[i][2] for i in plan_row_groups(self.row_groups, rng))


def unpickled(text: Optional[str]) -> Any:
    """A key type or descriptor as ``_metadata`` stores it (base64 cloudpickle), or ``None``."""
    return None if text is None else cloudpickle.loads(base64.b64decode(text))


def key_codec_of(op: OperatorState) -> ColumnCodec:
    """The codec of ``op``'s keys: its declared key type's, or untyped (msgpack binary)."""
    for handle in op.subtask_states.values():
        for k in handle.description["keyed_state"]:  # type: ignore[attr-defined]
            return column_codec(unpickled(k["key_type"]))
    return UNTYPED


def key_groups_of_keys(keys: Iterable[Any], codec: ColumnCodec, max_parallelism: int) -> Optional[List[int]]:
    """The key groups of the ``key`` column values ``keys`` (as Spark gives filter literals:
    the column's Python values, msgpack bytes for untyped keys), or ``None`` when a value
    cannot be turned back into a key (then nothing is pruned)."""
    groups = []
    for value in keys:
        try:
            key = value if codec.from_arrow is None or value is None else codec.from_arrow(value)
            groups.append(assign_to_key_group(key, max_parallelism))
        except (UnsupportedKeyError, ValueError, TypeError):
            return None
    return groups


def plan_keyed_state_splits(op: OperatorState, directory: str, state_name: str,
                            key_groups: Optional[Sequence[int]] = None,
                            keys: Optional[Sequence[Any]] = None) -> List[KeyedStateSplit]:
    """The splits of ``state_name`` of ``op``: runs of consecutive row groups of each subtask's
    file of up to :data:`SPLIT_TARGET_ROWS` rows (at least one row group), or, with
    ``key_groups``, one per (file, key group) for the key groups given that the file has.

    :param keys: ``key`` column values the splits keep (``None``: all rows).
    """
    splits = []
    wanted = None if key_groups is None else sorted(set(key_groups))
    for subtask, handle in sorted(op.subtask_states.items()):
        for k in handle.description["keyed_state"]:  # type: ignore[attr-defined]
            for s in k["states"]:
                if s["name"] != state_name or not s["file"]:
                    continue
                spans = tuple(tuple(span) for span in s["row_groups"])
                if wanted is None:
                    ranges = _runs(spans)
                else:
                    own = KeyGroupRange(*k["key_group_range"])
                    ranges = [(kg, kg) for kg in wanted
                              if own.contains(kg) and plan_row_groups(spans, KeyGroupRange(kg, kg))]
                splits.extend(KeyedStateSplit(directory, s["file"], spans, rng, subtask,  # type: ignore[arg-type]
                                              None if keys is None else tuple(keys)) for rng in ranges)
    return splits


def splits_for_range(op: OperatorState, directory: str, state_name: str,
                     key_group_range: KeyGroupRange) -> List[KeyedStateSplit]:
    """The splits reading the key groups of ``key_group_range`` of ``state_name`` from every
    subtask file of ``op`` that has some (one per file)."""
    splits = []
    for subtask, handle in sorted(op.subtask_states.items()):
        for k in handle.description["keyed_state"]:  # type: ignore[attr-defined]
            rng = KeyGroupRange(*k["key_group_range"]).get_intersection(key_group_range)
            for s in k["states"]:
                spans = tuple(tuple(span) for span in s["row_groups"])
                if s["name"] == state_name and s["file"] and len(rng) and plan_row_groups(spans, rng):
                    splits.append(KeyedStateSplit(directory, s["file"], spans,  # type: ignore[arg-type]
                                                  (rng.start_key_group, rng.end_key_group), subtask))
    return splits


def _runs(spans: Sequence[Tuple[int, int, int]]) -> List[Tuple[int, int]]:
    """Key-group ranges of consecutive row groups of up to :data:`SPLIT_TARGET_ROWS` rows."""
    ranges: List[Tuple[int, int]] = []
    rows = 0
    for first, last, n in spans:
        if ranges and rows + n <= SPLIT_TARGET_ROWS:
            ranges[-1] = (ranges[-1][0], last)
            rows += n
        else:
            ranges.append((first, last))
            rows = n
    return ranges


def read_keyed_state_split(split: KeyedStateSplit) -> pa.Table:
    """The rows of ``split`` with the columns :data:`KEYED_COLUMNS`.

    :raises OSError: if the file cannot be read.
    """
    rng = KeyGroupRange(*split.key_group_range)
    wanted = plan_row_groups(split.row_groups, rng)
    fs, root = fsspec.core.url_to_fs(split.directory)
    with fs.open(root.rstrip("/") + "/" + split.file, "rb") as f:
        table = pq.ParquetFile(f).read_row_groups(wanted, columns=list(KEYED_COLUMNS), use_threads=False)
    covered = (split.row_groups[wanted[0]][0], split.row_groups[wanted[-1]][1]) if wanted else None
    if covered is not None and covered != split.key_group_range:
        kg = table.column("key_group")
        table = table.filter(pc.and_(pc.greater_equal(kg, rng.start_key_group),
                                     pc.less_equal(kg, rng.end_key_group)))
    if split.keys is not None and table.num_rows:
        key = table.column("key")
        if pa.types.is_nested(key.type):
            wanted_keys = set(map(repr, split.keys))
            mask = pa.array([repr(v) in wanted_keys for v in key.to_pylist()], pa.bool_())
        else:
            mask = pc.is_in(key, value_set=pa.array(list(split.keys), key.type))
        table = table.filter(mask)
    return table.select(list(KEYED_COLUMNS))
