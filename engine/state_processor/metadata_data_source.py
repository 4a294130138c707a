"""``spark.read.format("rill-state-metadata").load(path)``: one row per operator and state of a
snapshot, or of every completed checkpoint in a directory of checkpoints (Spark's
``state-metadata`` source; Flink's ``SavepointMetadataTableFunction``).

Columns: ``operator_uid, operator_id, operator_name, state_name, state_kind, state_type,
parallelism, max_parallelism, min_checkpoint_id, max_checkpoint_id``. ``state_kind`` is the
keyed state's kind (``VALUE``, ``LIST``, ``MAP``, ``REDUCING``, ``AGGREGATING``; null for a
state written without descriptor), ``TIMERS`` for a timer service, or the operator state's mode
(``SPLIT_DISTRIBUTE``, ``UNION``, ``BROADCAST``); ``state_type`` the declared type as Rill
prints it (null: untyped). The checkpoint range is the first and last checkpoint holding the
state; parallelism, names and types are the last one's.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Tuple

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from rill.state.checkpoint.metadata import CheckpointMetadata
from rill.state_processor.snapshots import is_snapshot, completed_checkpoints, resolve_snapshot

__all__ = ["RillStateMetadataDataSource", "state_metadata_rows", "METADATA_SCHEMA"]

#: The columns of ``rill-state-metadata``.
METADATA_SCHEMA = StructType([
    StructField("operator_uid", StringType()), StructField("operator_id", StringType(), False),
    StructField("operator_name", StringType()), StructField("state_name", StringType(), False),
    StructField("state_kind", StringType()), StructField("state_type", StringType()),
    StructField("parallelism", IntegerType(), False), StructField("max_parallelism", IntegerType(), False),
    StructField("min_checkpoint_id", LongType(), False), StructField("max_checkpoint_id", LongType(), False),
])


def _states(metadata: CheckpointMetadata) -> Iterator[Tuple[Any, str, Any, Any]]:
    """``(operator state, state name, kind, type text)`` of every state in ``metadata``."""
    for op in metadata.operator_states.values():
        seen: Dict[str, Tuple[Any, Any]] = {}
        for _, handle in sorted(op.subtask_states.items()):
            d = handle.description  # type: ignore[attr-defined]
            for k in d["keyed_state"]:
                for s in k["states"]:
                    seen.setdefault(s["name"], (s["kind"], s["type"]))
            if d["timers"] is not None:
                for name in d["timers"]["services"]:
                    seen.setdefault(name, ("TIMERS", None))
            if d["operator_state"] is not None:
                for name, mode in d["operator_state"]["states"]:
                    seen.setdefault(name, (mode, None))
        for name, (kind, type_text) in seen.items():
            yield op, name, kind, type_text


def state_metadata_rows(path: str) -> List[Tuple[Any, ...]]:
    """The rows of ``rill-state-metadata`` for ``path`` (a snapshot or a directory of
    checkpoints), ordered by operator id and state name.

    :raises FileNotFoundError, ValueError: as :func:`~rill.state_processor.snapshots.resolve_snapshot`.
    """
    if is_snapshot(path):
        snapshots = [resolve_snapshot(path)]
    else:
        snapshots = [resolve_snapshot(d) for _, d in completed_checkpoints(path)]
    rows: Dict[Tuple[str, str], List[Any]] = {}
    for metadata in snapshots:
        cid = metadata.checkpoint_id
        for op, name, kind, type_text in _states(metadata):
            row = [op.uid, op.operator_id, op.name or None, name, kind, type_text, op.parallelism,
                   op.max_parallelism, cid, cid]
            known = rows.get((op.operator_id, name))
            if known is not None:
                row[8] = min(known[8], cid)
                row[9] = max(known[9], cid)
                if cid < known[9]:
                    row[:8] = known[:8]
            rows[(op.operator_id, name)] = row
    return [tuple(rows[k]) for k in sorted(rows)]


class _MetadataReader(DataSourceReader):
    def __init__(self, path: str) -> None:
        self.path = path

    def partitions(self) -> List[InputPartition]:
        return [InputPartition(None)]

    def read(self, partition: InputPartition) -> Iterator[Tuple[Any, ...]]:
        yield from state_metadata_rows(self.path)


class RillStateMetadataDataSource(DataSource):
    """``spark.read.format("rill-state-metadata")`` (see the module docstring).

    :raises ValueError: if no path is given; when read, as :func:`state_metadata_rows`.
    """

    @classmethod
    def name(cls) -> str:
        return "rill-state-metadata"

    def schema(self) -> StructType:
        return METADATA_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        path = {str(k).lower(): v for k, v in dict(self.options).items()}.get("path")
        if not path:
            raise ValueError("rill-state-metadata: no path: spark.read.format('rill-state-metadata')"
                             ".load(<checkpoint, savepoint or checkpoint directory>)")
        return _MetadataReader(path)
