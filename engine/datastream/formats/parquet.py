"""Parquet for ``FileSink.for_bulk_format`` (PyFlink's ``pyflink.datastream.formats.parquet``:
``ParquetBulkWriters.for_row_type``), written with pyarrow.

Files follow the Spark rules of the checkpoint format (``spark.read.parquet`` reads them with
its default settings): timestamps in microseconds, no unsigned or half-float types. Rows are
buffered and written as one row group per ``row_group_size`` rows (and at the end of the part
file, which the FileSink closes at every checkpoint).

Rill difference: PyFlink takes a Table API ``RowType`` (``DataTypes.ROW``); Rill, which has no
Table API, takes the ``RowTypeInfo`` of ``Types.ROW_NAMED`` (the stream's row type).
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, BinaryIO, Callable, List, Optional

import pyarrow as pa
import pyarrow.parquet as pq

from rill.datastream.formats.avro_parquet import AvroParquetReaders, AvroParquetWriters
from rill.datastream.formats.parquet_input import ParquetColumnarRowInputFormat
from rill.common.typeinfo import (
    BasicTypeInfo,
    ListTypeInfo,
    MapTypeInfo,
    RowTypeInfo,
    TupleTypeInfo,
    TypeInformation,
)

__all__ = ["ParquetBulkWriters", "ParquetWriterFactory", "ParquetBulkWriter", "ParquetColumnarRowInputFormat",
           "AvroParquetReaders", "AvroParquetWriters"]

_BASIC = {
    "STRING": pa.string(), "CHAR": pa.string(), "BOOLEAN": pa.bool_(), "BYTE": pa.int8(),
    "SHORT": pa.int16(), "INT": pa.int32(), "LONG": pa.int64(), "FLOAT": pa.float32(),
    "DOUBLE": pa.float64(), "SQL_DATE": pa.date32(),
}


def _arrow_type(info: TypeInformation, utc_timestamp: bool) -> pa.DataType:
    if isinstance(info, BasicTypeInfo):
        if info.name == "SQL_TIMESTAMP":
            return pa.timestamp("us", tz="UTC" if utc_timestamp else None)
        if info.name in _BASIC:
            return _BASIC[info.name]
        raise NotImplementedError(f"ParquetBulkWriters: type {info.name} has no Parquet column in Rill yet")
    if isinstance(info, RowTypeInfo):
        return pa.struct([pa.field(n, _arrow_type(t, utc_timestamp))
                          for n, t in zip(info.get_field_names(), info.get_field_types())])
    if isinstance(info, TupleTypeInfo):
        return pa.struct([pa.field(f"f{i}", _arrow_type(t, utc_timestamp))
                          for i, t in enumerate(info.get_field_types())])
    if isinstance(info, ListTypeInfo):
        return pa.list_(_arrow_type(info.element_type, utc_timestamp))
    if isinstance(info, MapTypeInfo):
        return pa.map_(_arrow_type(info.key_type, utc_timestamp), _arrow_type(info.value_type, utc_timestamp))
    raise NotImplementedError(f"ParquetBulkWriters: type {info!r} has no Parquet column in Rill yet")


def _converter(info: TypeInformation) -> Optional[Callable[[Any], Any]]:
    """Python value -> what ``pa.array`` takes for the type; ``None`` when it takes it as is."""
    if isinstance(info, (RowTypeInfo, TupleTypeInfo)):
        names = info.get_field_names() if isinstance(info, RowTypeInfo) else [
            f"f{i}" for i in range(len(info.get_field_types()))]
        convs = [_converter(t) for t in info.get_field_types()]

        def to_struct(v):
            if v is None:
                return None
            return {n: (v[i] if c is None or v[i] is None else c(v[i])) for i, (n, c) in enumerate(zip(names, convs))}
        return to_struct
    if isinstance(info, ListTypeInfo):
        c = _converter(info.element_type)
        return None if c is None else (lambda v: None if v is None else [c(x) for x in v])
    if isinstance(info, MapTypeInfo):
        kc, vc = _converter(info.key_type), _converter(info.value_type)
        if kc is None and vc is None:
            return lambda v: None if v is None else list(v.items())
        return lambda v: None if v is None else [(k if kc is None else kc(k), x if vc is None else vc(x))
                                                 for k, x in v.items()]
    if isinstance(info, BasicTypeInfo) and info.name == "SQL_TIMESTAMP":
        return lambda v: v if isinstance(v, _dt.datetime) else _dt.datetime.fromtimestamp(v / 1000, _dt.timezone.utc)
    return None


class ParquetBulkWriter:
    """Writes rows to one Parquet file (Flink's ``BulkWriter``: ``add_elements`` (Rill: a
    batch), ``flush``, ``finish``); the FileSink calls it. ``finish`` writes the footer; the
    file object is closed by the sink."""

    def __init__(self, out: BinaryIO, row_type: RowTypeInfo, schema: pa.Schema, row_group_size: int) -> None:
        self._names = row_type.get_field_names()
        self._converters = [_converter(t) for t in row_type.get_field_types()]
        self._schema = schema
        self._writer = pq.ParquetWriter(out, schema, coerce_timestamps="us", allow_truncated_timestamps=True)
        self._row_group_size = row_group_size
        self._rows: List[Any] = []

    def add_elements(self, values: List[Any]) -> None:
        """Buffer rows (``Row`` s or tuples of the row type's arity); write full row groups.

        :raises ValueError: if a row's arity differs from the row type's.
        """
        arity = len(self._names)
        for v in values:
            if len(v) != arity:
                raise ValueError(f"ParquetBulkWriter: row {v!r} has {len(v)} fields, the row type has {arity} "
                                 f"({', '.join(self._names)})")
        self._rows.extend(values)
        if len(self._rows) >= self._row_group_size:
            self.flush()

    def flush(self) -> None:
        """Write the buffered rows as a row group."""
        if not self._rows:
            return
        rows, self._rows = self._rows, []
        columns = []
        for i, (field, conv) in enumerate(zip(self._schema, self._converters)):
            col = [r[i] for r in rows]
            if conv is not None:
                col = [conv(x) if x is not None else None for x in col]
            columns.append(pa.array(col, type=field.type))
        self._writer.write_table(pa.Table.from_arrays(columns, schema=self._schema))

    def finish(self) -> None:
        """Write what is buffered and the footer."""
        self.flush()
        self._writer.close()


class ParquetWriterFactory:
    """Makes a :class:`ParquetBulkWriter` per part file (Flink's ``ParquetWriterFactory``).

    :param row_type: the rows' ``RowTypeInfo`` (named fields).
    :param utc_timestamp: ``SQL_TIMESTAMP`` columns as UTC-adjusted (``timestamp[us, UTC]``)
        instead of local (``timestamp[us]``).
    :param row_group_size: rows per row group.
    :raises TypeError: if ``row_type`` is not a ``RowTypeInfo`` with field names.
    :raises NotImplementedError: for a field type without a Parquet column yet (BIG_INT,
        BIG_DEC, SQL_TIME, PICKLED_BYTE_ARRAY).
    """

    def __init__(self, row_type: RowTypeInfo, utc_timestamp: bool = False, row_group_size: int = 65536) -> None:
        if not isinstance(row_type, RowTypeInfo):
            raise TypeError(f"ParquetBulkWriters.for_row_type expects a RowTypeInfo (Types.ROW_NAMED), got {row_type!r}")
        self.row_type = row_type
        self.schema = pa.schema([pa.field(n, _arrow_type(t, utc_timestamp))
                                 for n, t in zip(row_type.get_field_names(), row_type.get_field_types())])
        self.row_group_size = row_group_size

    def create(self, out: BinaryIO) -> ParquetBulkWriter:
        """A writer on the open binary file ``out``."""
        return ParquetBulkWriter(out, self.row_type, self.schema, self.row_group_size)


class ParquetBulkWriters:
    """PyFlink's ``ParquetBulkWriters``."""

    @staticmethod
    def for_row_type(row_type: RowTypeInfo, hadoop_config: Any = None, utc_timestamp: bool = False) -> ParquetWriterFactory:
        """A factory writing rows of ``row_type``; see :class:`ParquetWriterFactory`.

        :raises NotImplementedError: if ``hadoop_config`` is given (Rill writes with pyarrow
            and has no Hadoop configuration).
        """
        if hadoop_config is not None:
            raise NotImplementedError("ParquetBulkWriters.for_row_type: hadoop_config is not supported by Rill "
                                      "(it writes Parquet with pyarrow)")
        return ParquetWriterFactory(row_type, utc_timestamp)
