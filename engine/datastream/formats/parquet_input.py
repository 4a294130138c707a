"""Parquet for ``FileSource.for_bulk_file_format`` (PyFlink's
``pyflink.datastream.formats.parquet.ParquetColumnarRowInputFormat``; Flink's
``ParquetColumnarRowInputFormat``), read with pyarrow one record batch at a time.

Rill difference, as for ``ParquetBulkWriters``: the row type is the ``RowTypeInfo`` of
``Types.ROW_NAMED`` (Rill has no Table API ``RowType``).
"""

from __future__ import annotations

from typing import Any, Iterator, List, Optional

import pyarrow.parquet as pq

from rill.common.row import Row
from rill.common.typeinfo import BasicTypeInfo, RowTypeInfo, TypeInformation
from rill.datastream.connectors.file_system import BulkFormat

__all__ = ["ParquetColumnarRowInputFormat"]


class ParquetColumnarRowInputFormat(BulkFormat):
    """Reads the columns of ``row_type`` from Parquet files as named ``Row`` s (a column the
    file lacks reads as ``None``, as Flink).

    :param row_type: ``Types.ROW_NAMED``: the fields read, by name; primitive types only (as Flink).
    :param hadoop_config: must be ``None`` (Rill reads with pyarrow, without Hadoop).
    :param batch_size: rows per batch read (and emitted), at most.
    :param is_utc_timestamp: timestamps of UTC-adjusted columns read as aware UTC datetimes;
        otherwise every timestamp is read as a naive datetime.
    :param is_case_sensitive: match field names to columns case-sensitively.
    :raises TypeError: if ``row_type`` is not a ``RowTypeInfo``.
    :raises ValueError: for a composite field type (naming the field) or a batch size under 1.
    :raises NotImplementedError: for a ``hadoop_config``.
    """

    def __init__(self, row_type: RowTypeInfo, hadoop_config: Any = None, batch_size: int = 2048,
                 is_utc_timestamp: bool = False, is_case_sensitive: bool = True) -> None:
        if not isinstance(row_type, RowTypeInfo):
            raise TypeError(f"ParquetColumnarRowInputFormat expects a RowTypeInfo (Types.ROW_NAMED), got {row_type!r}")
        if hadoop_config is not None:
            raise NotImplementedError("ParquetColumnarRowInputFormat: hadoop_config is not supported by Rill "
                                      "(it reads Parquet with pyarrow)")
        for name, info in zip(row_type.get_field_names(), row_type.get_field_types()):
            if not isinstance(info, BasicTypeInfo):
                raise ValueError(f"ParquetColumnarRowInputFormat: field {name!r} has type {info!r}; only primitive "
                                 "types are supported for a column (as Flink)")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"ParquetColumnarRowInputFormat: batch_size must be a positive int, got {batch_size!r}")
        self.row_type = row_type
        self.batch_size = batch_size
        self.is_utc_timestamp = is_utc_timestamp
        self.is_case_sensitive = is_case_sensitive

    def get_produced_type(self) -> TypeInformation:
        return self.row_type

    def _columns(self, file_columns: List[str]) -> List[Optional[str]]:
        """For each field, the file's column that holds it, or ``None``."""
        if self.is_case_sensitive:
            present = set(file_columns)
            return [n if n in present else None for n in self.row_type.get_field_names()]
        lowered = {c.lower(): c for c in file_columns}
        return [lowered.get(n.lower()) for n in self.row_type.get_field_names()]

    def split_points(self, path: str) -> List[int]:
        """The byte offset where each row group of the file at ``path`` starts (Flink's
        Parquet reader splits a file by row groups: a row group belongs to the split holding
        its start)."""
        with pq.ParquetFile(path) as parquet:
            meta = parquet.metadata
            return [_row_group_start(meta.row_group(i)) for i in range(meta.num_row_groups)]

    def read_split(self, path: str, batch_size: int, offset: int, length: int) -> Iterator[List[Row]]:
        """Rows of the row groups of ``path`` that start in ``[offset, offset + length)`` (the
        first row group counts as starting at 0)."""
        with pq.ParquetFile(path) as parquet:
            meta = parquet.metadata
            groups = [i for i in range(meta.num_row_groups)
                      if offset <= (0 if i == 0 else _row_group_start(meta.row_group(i))) < offset + length]
        if groups:
            yield from self._read(path, batch_size, groups)

    def read_batches(self, path: str, batch_size: int) -> Iterator[List[Row]]:
        """Rows of the file at ``path``, in lists of at most ``min(batch_size, self.batch_size)``."""
        return self._read(path, batch_size, None)

    def _read(self, path: str, batch_size: int, row_groups: Optional[List[int]]) -> Iterator[List[Row]]:
        names = list(self.row_type.get_field_names())
        with pq.ParquetFile(path) as parquet:
            columns = self._columns(parquet.schema_arrow.names)
            read = sorted({c for c in columns if c is not None})
            for batch in parquet.iter_batches(batch_size=min(batch_size, self.batch_size), columns=read,
                                              row_groups=row_groups):
                values = {name: self._values(batch.column(name)) for name in read}
                empty = [None] * batch.num_rows
                rows = []
                for fields in zip(*(values[c] if c is not None else empty for c in columns)):
                    row = Row(*fields)
                    row.set_field_names(names)
                    rows.append(row)
                yield rows

    def _values(self, column: Any) -> List[Any]:
        values = column.to_pylist()
        if not self.is_utc_timestamp and getattr(column.type, "tz", None) is not None:
            return [v.replace(tzinfo=None) if v is not None else None for v in values]
        return values


def _row_group_start(row_group: Any) -> int:
    """The file offset of a row group's first page (its columns' dictionary or data pages)."""
    starts = []
    for j in range(row_group.num_columns):
        column = row_group.column(j)
        first = column.dictionary_page_offset if column.has_dictionary_page else None
        starts.append(first if first is not None and first > 0 else column.data_page_offset)
    return min(starts)
