"""``SavepointReader``: the state of a Rill checkpoint or savepoint as Spark DataFrames (Flink's
``org.apache.flink.state.api.SavepointReader``, on PySpark).

Example::

    savepoint = SavepointReader.read(spark, "/checkpoints/<job-id>")      # newest checkpoint
    counts = savepoint.read_keyed_state("counter", ReadCounts(),
                                        out_type_info=Types.ROW_NAMED(["carrier", "flights"],
                                                                      [Types.STRING(), Types.LONG()]))
    offsets = savepoint.read_list_state("source", "offsets", Types.LONG())

Every method returns a DataFrame whose columns are typed from the output type given (Flink
requires it as ``TypeInformation``; Rill's ``Types``): a ROW / TUPLE type gives one column per
field, any other type one column ``value``. Work runs on the executors: keyed state one task per
subtask of the snapshot (its key-group range), operator state one per subtask.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence, Union

import pyarrow as pa

from rill.state.checkpoint.arrow_types import column_codec
from rill.state.checkpoint.metadata import CheckpointMetadata, OperatorState, OperatorSubtaskStateHandle
from rill.state.checkpoint.operator_subtask_state import OperatorSubtaskState
from rill.state.key_groups import KeyGroupRange
from rill.state_processor.function_readers import FunctionSplit, plan_function_splits, read_keys, to_batch
from rill.state_processor.functions import KeyedStateReaderFunction
from rill.state_processor.keyed_splits import unpickled
from rill.state_processor.snapshots import OperatorIdentifier, find_operator, resolve_snapshot
from rill.state_processor.spark_types import output_columns, spark_schema
from rill.state_processor.window_reader import WindowReader

__all__ = ["SavepointReader"]

_MODES = {"read_list_state": "SPLIT_DISTRIBUTE", "read_union_state": "UNION", "read_broadcast_state": "BROADCAST"}
_METHOD_OF_MODE = {mode: method for method, mode in _MODES.items()}


@dataclass(frozen=True)
class _OperatorStateSplit:
    handles: Sequence[OperatorSubtaskStateHandle]
    name: str


class SavepointReader:
    """Reads one snapshot (Flink's ``SavepointReader``); made by :meth:`read`.

    :ivar metadata: the snapshot's :class:`~rill.state.checkpoint.metadata.CheckpointMetadata`.
    """

    def __init__(self, spark: Any, metadata: CheckpointMetadata) -> None:
        self.spark = spark
        self.metadata = metadata

    @staticmethod
    def read(spark: Any, path: str, checkpoint_id: Optional[int] = None) -> "SavepointReader":
        """The reader of the savepoint or checkpoint at ``path``, or of the newest completed
        checkpoint (or ``checkpoint_id``) in the directory of checkpoints ``path`` (see
        :mod:`rill.state_processor.snapshots`) (Flink's ``SavepointReader.read(env, path)``).

        :param spark: the SparkSession that runs the reads.
        :raises FileNotFoundError: if there is no completed snapshot there (of that id).
        :raises ValueError: as :func:`~rill.state_processor.snapshots.resolve_snapshot`.
        """
        return SavepointReader(spark, resolve_snapshot(path, checkpoint_id))

    # -- keyed state -----------------------------------------------------------------------
    def read_keyed_state(self, uid: Union[str, OperatorIdentifier], function: KeyedStateReaderFunction,
                         key_type_info: Any = None, out_type_info: Any = None) -> Any:
        """The outputs of ``function`` over every key of the operator's keyed state (Flink's
        ``readKeyedState(identifier, function, keyTypeInfo, outTypeInfo)``).

        :param key_type_info: the key type, checked against the one the snapshot declares
            (``None``: not checked; keys come back as the job had them).
        :param out_type_info: the type of the outputs (required).
        :raises TypeError: if ``function`` is not a ``KeyedStateReaderFunction``.
        :raises ValueError: without ``out_type_info``, or if ``key_type_info`` differs from the
            declared key type.
        :raises KeyError: if the snapshot has no state of that operator.
        """
        if not isinstance(function, KeyedStateReaderFunction):
            raise TypeError(f"read_keyed_state expects a KeyedStateReaderFunction, got {function!r}")
        if key_type_info is not None:
            op = find_operator(self.metadata, uid)
            declared = _declared_key_type(op)
            if declared is not None and repr(declared) != repr(key_type_info):
                raise ValueError(f"read_keyed_state({OperatorIdentifier.of(uid)}): key_type_info {key_type_info!r} "
                                 f"is not the key type the snapshot declares, {declared!r}")
        return self._run_keyed(uid, lambda split: read_keys(split, function), out_type_info,
                               f"read_keyed_state({OperatorIdentifier.of(uid)})")

    def window(self, assigner: Any) -> WindowReader:
        """The reader of a window operator with this window assigner (Flink's
        ``window(WindowAssigner)``); then ``aggregate``, ``reduce`` or ``process``.

        :raises TypeError: if ``assigner`` is not a ``WindowAssigner``.
        """
        return WindowReader(self, assigner)

    def _run_keyed(self, uid: Any, work: Callable[[FunctionSplit], List[Any]], out_type_info: Any,
                   where: str) -> Any:
        """``work`` over each keyed split of the operator, outputs encoded as ``out_type_info``."""
        codec, _, schema = output_columns(out_type_info, where)
        op = find_operator(self.metadata, uid)
        splits = plan_function_splits(op)
        return self._dataframe(splits, lambda split: to_batch(work(split), codec, schema, where), schema)

    # -- operator state --------------------------------------------------------------------
    def read_list_state(self, uid: Union[str, OperatorIdentifier], name: str, type_info: Any) -> Any:
        """The elements of a list state (``get_list_state``) over all subtasks (Flink's
        ``readListState``): one row per element, typed by ``type_info``.

        :raises KeyError: if the operator or the state is not in the snapshot.
        :raises ValueError: if the state is a union or broadcast state, or without ``type_info``.
        """
        return self._operator_state("read_list_state", uid, name, type_info)

    def read_union_state(self, uid: Union[str, OperatorIdentifier], name: str, type_info: Any) -> Any:
        """The elements of a union list state (``get_union_list_state``): the union of every
        subtask's elements, once (what each subtask restores) (Flink's ``readUnionState``).

        :raises KeyError, ValueError: as :meth:`read_list_state`.
        """
        return self._operator_state("read_union_state", uid, name, type_info)

    def read_broadcast_state(self, uid: Union[str, OperatorIdentifier], name: str, key_type_info: Any,
                             value_type_info: Any) -> Any:
        """The entries of a broadcast state as columns ``key`` and ``value`` (Flink's
        ``readBroadcastState``, which gives ``Tuple2``); every subtask holds the same entries,
        the first subtask's are read.

        :raises KeyError, ValueError: as :meth:`read_list_state`.
        """
        if key_type_info is None or value_type_info is None:
            raise ValueError(f"read_broadcast_state({OperatorIdentifier.of(uid)}, {name!r}): key_type_info and "
                             f"value_type_info are required")
        return self._operator_state("read_broadcast_state", uid, name, (key_type_info, value_type_info))

    def _operator_state(self, method: str, uid: Any, name: str, types: Any) -> Any:
        where = f"{method}({OperatorIdentifier.of(uid)}, {name!r})"
        op = find_operator(self.metadata, uid)
        holders = _holders(op, name)
        if not holders:
            raise KeyError(f"{where}: the operator has no operator state {name!r} in "
                           f"{self.metadata.external_pointer} (it has {sorted(_operator_state_names(op))})")
        mode = holders[0][1]
        if mode != _MODES[method]:
            raise ValueError(f"{where}: {name!r} is a {mode} state; read it with {_METHOD_OF_MODE[mode]}")
        if method == "read_broadcast_state":
            key_codec, value_codec = column_codec(types[0]), column_codec(types[1])
            schema = pa.schema([pa.field("key", key_codec.arrow_type), pa.field("value", value_codec.arrow_type)])

            def encode(entries: List[Any]) -> pa.RecordBatch:
                return pa.RecordBatch.from_arrays(
                    [to_batch([k for k, _ in entries], key_codec, pa.schema([schema.field("key")]), where).column(0),
                     to_batch([v for _, v in entries], value_codec, pa.schema([schema.field("value")]), where).column(0)],
                    schema=schema)
            splits = [_OperatorStateSplit((holders[0][0],), name)]
        else:
            codec, _, schema = output_columns(types, where)

            def encode(entries: List[Any]) -> pa.RecordBatch:
                return to_batch(entries, codec, schema, where)
            handles = [h for h, _ in holders]
            splits = ([_OperatorStateSplit(tuple(handles), name)] if method == "read_union_state"
                      else [_OperatorStateSplit((h,), name) for h in handles])
        return self._dataframe(splits, lambda split: encode(_operator_state_entries(split)), schema)

    # -- running on the executors ----------------------------------------------------------
    def _dataframe(self, splits: Sequence[Any], work: Callable[[Any], pa.RecordBatch], schema: pa.Schema) -> Any:
        """A DataFrame of ``schema`` with one partition per split, each computed by ``work``
        on an executor."""
        spark_type = spark_schema(schema)
        if not splits:
            return self.spark.createDataFrame([], spark_type)
        splits = list(splits)
        indexes = self.spark.sparkContext.parallelize([(i,) for i in range(len(splits))], len(splits))

        def run(batches: Any) -> Any:
            for batch in batches:
                for i in batch.column(0).to_pylist():
                    yield work(splits[i])

        return self.spark.createDataFrame(indexes, "split int").mapInArrow(run, spark_type)

    def __repr__(self) -> str:
        return (f"SavepointReader({self.metadata.external_pointer!r}, checkpoint "
                f"{self.metadata.checkpoint_id})")


def _declared_key_type(op: OperatorState) -> Any:
    for handle in op.subtask_states.values():
        for k in handle.description["keyed_state"]:  # type: ignore[attr-defined]
            return unpickled(k["key_type"])
    return None


def _operator_state_names(op: OperatorState) -> List[str]:
    return sorted({n for h in op.subtask_states.values()
                   for n, _ in ((h.description["operator_state"] or {}).get("states") or [])})  # type: ignore[attr-defined]


def _holders(op: OperatorState, name: str) -> List[Any]:
    """``(handle, mode)`` of the subtasks whose operator state has ``name``, by subtask."""
    out = []
    for _, handle in sorted(op.subtask_states.items()):
        states = (handle.description["operator_state"] or {}).get("states") or []  # type: ignore[attr-defined]
        for state_name, mode in states:
            if state_name == name:
                out.append((handle, mode))
    return out


def _operator_state_entries(split: _OperatorStateSplit) -> List[Any]:
    entries: List[Any] = []
    for handle in split.handles:
        state: OperatorSubtaskState = handle.read(KeyGroupRange.empty())  # operator state only
        entries.extend(state.operator_state[split.name][1])
    return entries
