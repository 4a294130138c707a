"""Avro generic records in Parquet files (PyFlink's ``AvroParquetReaders`` and
``AvroParquetWriters`` in ``pyflink.datastream.formats.parquet``; Flink's ``flink-parquet``
Avro support), with pyarrow.

A generic record is a ``dict`` of the schema's field names (as PyFlink hands them to Python).
The Avro schema becomes the Parquet schema: boolean, int (int32), long (int64), float,
double, bytes/fixed (binary), string/enum (string), record (struct), array (list), map
(map<string, ...>), a union of null and one type (that type, nullable), the logical types
date, timestamp-millis and timestamp-micros. Other unions are refused.
"""

from __future__ import annotations

import json
from typing import Any, BinaryIO, Callable, Dict, Iterator, List, Optional

import pyarrow as pa
import pyarrow.parquet as pq

from rill.common.serialization import BulkWriter, BulkWriterFactory
from rill.common.typeinfo import TypeInformation, Types
from rill.datastream.connectors.file_system import StreamFormat

__all__ = ["AvroParquetReaders", "AvroParquetWriters"]

_PRIMITIVE = {"boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(),
              "double": pa.float64(), "bytes": pa.binary(), "string": pa.string()}
_LOGICAL = {"date": pa.date32(), "timestamp-millis": pa.timestamp("ms", tz="UTC"),
            "timestamp-micros": pa.timestamp("us", tz="UTC")}


def _arrow_type(avro: Any, named: Dict[str, pa.DataType]) -> pa.DataType:
    """The Arrow type of Avro schema node ``avro``; ``named`` holds the record/enum/fixed types
    met so far, for references by name.

    :raises ValueError: naming the node, for a union other than null + one type, or an unknown type.
    """
    if isinstance(avro, list):
        branches = [b for b in avro if b != "null"]
        if len(branches) != 1:
            raise ValueError(f"AvroParquetWriters: union {avro} has no Parquet column; only a union of null and "
                             "one type is supported")
        return _arrow_type(branches[0], named)
    if isinstance(avro, str):
        if avro in _PRIMITIVE:
            return _PRIMITIVE[avro]
        if avro in named:
            return named[avro]
        raise ValueError(f"AvroParquetWriters: unknown Avro type {avro!r}")
    kind = avro.get("type")
    if avro.get("logicalType") in _LOGICAL:
        return _LOGICAL[avro["logicalType"]]
    if kind == "record":
        t = pa.struct([pa.field(f["name"], _arrow_type(f["type"], named), nullable=_nullable(f["type"]))
                       for f in avro["fields"]])
    elif kind == "enum":
        t = pa.string()
    elif kind == "fixed":
        t = pa.binary(avro["size"])
    elif kind == "array":
        return pa.list_(_arrow_type(avro["items"], named))
    elif kind == "map":
        return pa.map_(pa.string(), _arrow_type(avro["values"], named))
    else:
        return _arrow_type(kind, named)
    named[avro["name"]] = t
    return t


def _nullable(avro: Any) -> bool:
    return isinstance(avro, list) and "null" in avro


def _arrow_schema(schema: Any) -> pa.Schema:
    """The Parquet (Arrow) schema of an ``AvroSchema`` with a record at its top.

    :raises ValueError: if the top is not a record, or as :func:`_arrow_type`.
    """
    avro = json.loads(str(schema))
    if not isinstance(avro, dict) or avro.get("type") != "record":
        raise ValueError(f"AvroParquetWriters: the schema must be a record, got {str(schema)[:200]}")
    struct = _arrow_type(avro, {})
    return pa.schema([struct.field(i) for i in range(struct.num_fields)])


class _AvroParquetWriter(BulkWriter):
    def __init__(self, schema: pa.Schema, stream: BinaryIO):
        self._schema = schema
        self._writer = pq.ParquetWriter(stream, schema)

    def add_elements(self, elements: List[Any]) -> None:
        """Writes one row group of the records (dicts)."""
        if elements:
            self._writer.write_table(pa.Table.from_pylist(elements, schema=self._schema))

    def flush(self) -> None:
        pass  # every add_elements already wrote a row group

    def finish(self) -> None:
        self._writer.close()


class _AvroParquetWriterFactory(BulkWriterFactory):
    def __init__(self, schema: Any):
        super().__init__(None)
        self.schema = schema
        self.arrow_schema = _arrow_schema(schema)

    def create(self, stream: BinaryIO) -> BulkWriter:
        return _AvroParquetWriter(self.arrow_schema, stream)


class AvroParquetWriters:
    """Parquet bulk writers of Avro generic records (Flink's ``AvroParquetWriters``)."""

    @staticmethod
    def for_generic_record(schema: Any) -> BulkWriterFactory:
        """A ``FileSink.for_bulk_format`` factory writing records (dicts) of ``schema`` (an
        ``AvroSchema``), a row group per batch the sink hands over.

        :raises ValueError: for a schema without a Parquet equivalent (see the module docstring).
        """
        return _AvroParquetWriterFactory(schema)


def _map_fixer(t: pa.DataType) -> Optional[Callable[[Any], Any]]:
    """``value -> value with its maps as dicts`` (pyarrow reads a map as (key, value) pairs;
    an Avro map is a dict), or ``None`` when ``t`` holds no map."""
    if pa.types.is_map(t):
        inner = _map_fixer(t.item_type)
        if inner is None:
            return lambda v: None if v is None else dict(v)
        return lambda v: None if v is None else {k: inner(x) for k, x in v}
    if pa.types.is_list(t):
        inner = _map_fixer(t.value_type)
        return None if inner is None else (lambda v: None if v is None else [inner(x) for x in v])
    if pa.types.is_struct(t):
        fixers = {t.field(i).name: _map_fixer(t.field(i).type) for i in range(t.num_fields)}
        fixers = {n: f for n, f in fixers.items() if f is not None}
        if not fixers:
            return None
        return lambda v: None if v is None else {n: (fixers[n](x) if n in fixers else x) for n, x in v.items()}
    return None


class _AvroParquetRecordFormat(StreamFormat):
    def __init__(self, schema: Any):
        self.schema = schema
        self.arrow_schema = _arrow_schema(schema)
        self._fix_maps = _map_fixer(pa.struct(list(self.arrow_schema)))

    def get_produced_type(self) -> TypeInformation:
        return Types.PICKLED_BYTE_ARRAY()

    def read_batches(self, stream: BinaryIO, batch_size: int) -> Iterator[List[Any]]:
        names = self.arrow_schema.names
        with pq.ParquetFile(stream) as parquet:
            missing = sorted(set(names) - set(parquet.schema_arrow.names))
            if missing:
                raise ValueError(f"AvroParquetReaders: the file has no column for the schema's fields {missing}")
            for batch in parquet.iter_batches(batch_size=batch_size, columns=names):
                records = batch.to_pylist()
                yield records if self._fix_maps is None else [self._fix_maps(r) for r in records]


class AvroParquetReaders:
    """Reader formats of Avro records in Parquet files (Flink's ``AvroParquetReaders``)."""

    @staticmethod
    def for_generic_record(schema: Any) -> StreamFormat:
        """A ``FileSource.for_record_stream_format`` format reading the fields of ``schema`` (an
        ``AvroSchema``) as dicts, one whole file per split.

        :raises ValueError: for a schema without a Parquet equivalent; when reading, for a file
            lacking one of the schema's fields (naming them).
        """
        return _AvroParquetRecordFormat(schema)
