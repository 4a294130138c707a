"""``spark.read.format("rill-state")``: one keyed state of one operator of a Rill checkpoint or
savepoint as a DataFrame, read on the executors (a PySpark data source, Spark 4's
``pyspark.sql.datasource``; its options mirror Spark's own state data source, ``statestore``,
where they mean the same thing).

Options (names as Spark's; case-insensitive):

=====================  ======================================================================
option                 meaning
=====================  ======================================================================
path (``load(path)``)  a snapshot, a job's checkpoint directory, or a checkpoint directory
                       of one job (:mod:`rill.state_processor.snapshots`)
operatorUid            the operator's uid (or ``operatorId``: its 32-hex id)
stateName              the keyed state's name; may be left out when the operator has one
checkpointId           the checkpoint to read in a directory of checkpoints (Spark's
                       ``batchId``); default the newest completed
readChangeFeed         ``true``: the changes between consecutive checkpoints instead
changeStartBatchId     first checkpoint whose changes are read (compared with the completed
                       checkpoint before it, which must exist)
changeEndBatchId       last one (default: the newest completed)
=====================  ======================================================================

Columns: ``key, value, partition_id, namespace, key_group, checkpoint_id`` (Spark's ``key,
value, partition_id`` first); the change feed's: ``checkpoint_id, change_type, key, value,
partition_id, namespace, key_group`` (Spark's ``batch_id, change_type, key, value,
partition_id`` with Rill's names), ``change_type`` ``"update"`` (new or changed; the new value)
or ``"delete"`` (``value`` null). Keys and values are typed as the state's declared types
(:mod:`rill.state.checkpoint.arrow_types`), untyped ones msgpack binary as in the Parquet files
(decode with :func:`rill.state.checkpoint.object_codec.decode_object`, encode a key for a
filter with :func:`~rill.state.checkpoint.object_codec.encode_object`).

Partitions: runs of row groups of each subtask's file, up to 256k rows each (row groups hold
whole key groups, :data:`~rill.state_processor.keyed_splits.SPLIT_TARGET_ROWS`). A
filter ``key = v`` or ``key IN (...)`` (or on ``key_group``) is pushed down: only the key groups
of those keys are read (one partition per key group); Spark still applies the filter. Filter
pushdown of Python data sources needs ``spark.sql.python.filterPushdown.enabled``, which
:func:`rill.state_processor.register_data_sources` sets.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, EqualTo, In, InputPartition
from pyspark.sql.types import StructType

from rill.state.checkpoint.arrow_types import UNTYPED
from rill.state.checkpoint.metadata import CheckpointMetadata, OperatorState
from rill.state.checkpoint.namespaces import NAMESPACE_TYPE
from rill.state.checkpoint.parquet_layout import value_codec
from rill.state_processor.change_feed import plan_change_splits, read_change_split, CHANGE_COLUMNS
from rill.state_processor.keyed_splits import (
    KeyedStateSplit,
    key_codec_of,
    key_groups_of_keys,
    plan_keyed_state_splits,
    read_keyed_state_split,
    unpickled,
)
from rill.state_processor.snapshots import (
    OperatorIdentifier,
    completed_checkpoints,
    find_operator,
    keyed_state_descriptions,
    resolve_snapshot,
)
from rill.state_processor.spark_types import spark_schema

__all__ = ["RillStateDataSource", "StateSourceOptions"]

_NAME = "rill-state"


def _lower(options: Any) -> Dict[str, str]:
    return {str(k).lower(): str(v) for k, v in dict(options).items()}


def _int_option(opts: Dict[str, str], name: str) -> Optional[int]:
    text = opts.get(name.lower())
    if text is None or text == "":
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{_NAME}: option {name} must be an integer, got {text!r}") from None


class StateSourceOptions:
    """The parsed options of a ``rill-state`` read (see the module docstring) and what they
    resolve to: the snapshot(s), the operator, the state and its Arrow schema.

    :raises ValueError: for a missing path or operator, a non-integer id, an unknown state, a
        state that is not keyed, or a change feed range that is empty or has no checkpoint
        before its start.
    :raises FileNotFoundError, KeyError: as :func:`~rill.state_processor.snapshots.resolve_snapshot`
        and :func:`~rill.state_processor.snapshots.find_operator`.
    """

    def __init__(self, options: Any) -> None:
        opts = _lower(options)
        self.path = opts.get("path")
        if not self.path:
            raise ValueError(f"{_NAME}: no path: spark.read.format('{_NAME}').load(<checkpoint or savepoint>)")
        if opts.get("operatoruid"):
            self.operator = OperatorIdentifier.for_uid(opts["operatoruid"])
        elif opts.get("operatorid"):
            self.operator = OperatorIdentifier.for_uid_hash(opts["operatorid"])
        else:
            raise ValueError(f"{_NAME}: option operatorUid (or operatorId, the 32-hex id) is required")
        self.change_feed = opts.get("readchangefeed", "false").lower() == "true"
        checkpoint_id = _int_option(opts, "checkpointId")
        if self.change_feed:
            if checkpoint_id is not None:
                raise ValueError(f"{_NAME}: checkpointId does not go with readChangeFeed; give "
                                 f"changeStartBatchId and changeEndBatchId")
            self.snapshots = self._change_range(_int_option(opts, "changeStartBatchId"),
                                                _int_option(opts, "changeEndBatchId"))
        else:
            self.snapshots = [resolve_snapshot(self.path, checkpoint_id)]
        self.metadata: CheckpointMetadata = self.snapshots[-1]
        self.op: OperatorState = find_operator(self.metadata, self.operator)
        states = keyed_state_descriptions(self.op)
        self.state_name = opts.get("statename") or ""
        if not self.state_name:
            if len(states) != 1:
                raise ValueError(f"{_NAME}: operator {self.operator} has keyed states {sorted(states)}: "
                                 f"option stateName names one")
            self.state_name = next(iter(states))
        if self.state_name not in states:
            raise ValueError(f"{_NAME}: operator {self.operator} has no keyed state {self.state_name!r} in "
                             f"{self.metadata.external_pointer} (keyed states: {sorted(states)}); "
                             f"operator state reads with SavepointReader.read_list_state / "
                             f"read_union_state / read_broadcast_state")
        descriptor = unpickled(states[self.state_name]["descriptor"])
        self.key_codec = key_codec_of(self.op)
        value = UNTYPED if descriptor is None else value_codec(descriptor)
        self.arrow_schema = pa.schema([
            pa.field("key", self.key_codec.arrow_type), pa.field("value", value.arrow_type),
            pa.field("partition_id", pa.int32(), nullable=False), pa.field("namespace", NAMESPACE_TYPE),
            pa.field("key_group", pa.int32(), nullable=False), pa.field("checkpoint_id", pa.int64())])
        if self.change_feed:
            self.arrow_schema = pa.schema([pa.field("checkpoint_id", pa.int64()),
                                           pa.field("change_type", pa.string(), nullable=False)]
                                          + [self.arrow_schema.field(c) for c in CHANGE_COLUMNS[2:]])

    def _change_range(self, start: Optional[int], end: Optional[int]) -> List[CheckpointMetadata]:
        if start is None:
            raise ValueError(f"{_NAME}: readChangeFeed needs option changeStartBatchId (the first "
                             f"checkpoint whose changes are read)")
        done = completed_checkpoints(self.path)
        ids = [cid for cid, _ in done]
        end = ids[-1] if end is None else end
        if end < start:
            raise ValueError(f"{_NAME}: changeEndBatchId {end} is before changeStartBatchId {start}")
        before = [cid for cid in ids if cid < start]
        if not before:
            raise ValueError(f"{_NAME}: no completed checkpoint before changeStartBatchId {start} under "
                             f"{self.path} to compare it with (completed: {ids})")
        chosen = [(cid, d) for cid, d in done if before[-1] <= cid <= end]
        if len(chosen) < 2:
            raise ValueError(f"{_NAME}: no completed checkpoint in [{start}, {end}] under {self.path} "
                             f"(completed: {ids})")
        return [resolve_snapshot(d) for _, d in chosen]


class _StateReader(DataSourceReader):
    def __init__(self, options: StateSourceOptions) -> None:
        self.options = options
        self.key_groups: Optional[List[int]] = None
        self.keys: Optional[Tuple[Any, ...]] = None

    def pushFilters(self, filters: List[Any]) -> Iterator[Any]:  # noqa: N802 - Spark's name
        max_parallelism = self.options.op.max_parallelism
        for f in filters:
            column = tuple(getattr(f, "attribute", ()))  # Not(...) has a child, no attribute
            values: Optional[Sequence[Any]] = None
            if isinstance(f, EqualTo):
                values = [f.value]
            elif isinstance(f, In):
                values = list(f.value)
            if values is not None and column == ("key",):
                groups = key_groups_of_keys(values, self.options.key_codec, max_parallelism)
                if groups is not None:
                    self._restrict(groups)
                    self.keys = tuple(values) if self.keys is None else tuple(v for v in self.keys if v in values)
            elif values is not None and column == ("key_group",) and all(type(v) is int for v in values):
                self._restrict(values)
            yield f  # Spark applies every filter again: pruning here is by key group

    def _restrict(self, groups: Sequence[int]) -> None:
        self.key_groups = sorted(set(groups) if self.key_groups is None else set(groups) & set(self.key_groups))

    def partitions(self) -> List[InputPartition]:
        o = self.options
        if o.change_feed:
            splits: List[Any] = plan_change_splits(o.snapshots, o.operator, o.state_name, self.key_groups)
        else:
            splits = plan_keyed_state_splits(o.op, o.metadata.external_pointer or o.path, o.state_name,
                                             self.key_groups, self.keys)
        return [InputPartition(s) for s in splits] or [InputPartition(None)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        split = partition.value
        if split is None:
            return
        if isinstance(split, KeyedStateSplit):
            table = read_keyed_state_split(split)
        else:
            table = read_change_split(split, self.keys)
        yield from table.cast(self.options.arrow_schema).to_batches()


class RillStateDataSource(DataSource):
    """``spark.read.format("rill-state")`` (see the module docstring; Spark's ``statestore``
    source for Rill snapshots, Flink's ``SavepointDynamicTableSource`` in spirit).

    :raises ValueError, FileNotFoundError, KeyError: when Spark plans the read, as
        :class:`StateSourceOptions`.
    """

    @classmethod
    def name(cls) -> str:
        return _NAME

    def schema(self) -> StructType:
        return spark_schema(StateSourceOptions(self.options).arrow_schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        return _StateReader(StateSourceOptions(self.options))
