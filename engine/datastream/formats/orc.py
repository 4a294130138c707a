"""ORC files (PyFlink's ``pyflink.datastream.formats.orc``; Flink's ``flink-orc``), written
through ``pyarrow.orc``.

Rill difference: PyFlink declares the row with the Table API's ``DataTypes.ROW``; Rill has no
Table API, so the row is a ``Types.ROW_NAMED`` (field types: STRING, CHAR, BOOLEAN, BYTE,
SHORT, INT, LONG, FLOAT, DOUBLE, SQL_DATE, SQL_TIMESTAMP, LIST / arrays, MAP, nested rows),
mapped to ORC's types as Flink's ``OrcSplitReaderUtil.logicalTypeToOrcType`` does.
"""

from __future__ import annotations

from typing import Any, BinaryIO, Callable, List, Optional

import pyarrow as pa
import pyarrow.orc as pa_orc

from rill.common.configuration import Configuration
from rill.common.serialization import BulkWriter, BulkWriterFactory
from rill.common.typeinfo import BasicTypeInfo, ListTypeInfo, MapTypeInfo, RowTypeInfo, TypeInformation

__all__ = ["OrcBulkWriters"]

_ARROW_TYPES = {
    "STRING": pa.string(), "CHAR": pa.string(), "BOOLEAN": pa.bool_(), "BYTE": pa.int8(), "SHORT": pa.int16(),
    "INT": pa.int32(), "LONG": pa.int64(), "FLOAT": pa.float32(), "DOUBLE": pa.float64(),
    "SQL_DATE": pa.date32(), "SQL_TIMESTAMP": pa.timestamp("ns"),
}


def _arrow_type(type_info: TypeInformation, where: str) -> pa.DataType:
    """:raises TypeError: for a type ORC cannot hold here, naming ``where``."""
    if isinstance(type_info, BasicTypeInfo) and type_info.name in _ARROW_TYPES:
        return _ARROW_TYPES[type_info.name]
    if isinstance(type_info, ListTypeInfo):
        return pa.list_(_arrow_type(type_info.element_type, where))
    if isinstance(type_info, MapTypeInfo):
        return pa.map_(_arrow_type(type_info.key_type, where), _arrow_type(type_info.value_type, where))
    if isinstance(type_info, RowTypeInfo):
        return pa.struct([pa.field(n, _arrow_type(t, f"{where}.{n}"))
                          for n, t in zip(type_info.get_field_names(), type_info.get_field_types())])
    raise TypeError(f"OrcBulkWriters: field '{where}' has type {type_info!r}, which Rill cannot write to ORC")


def _orc_options(writer_properties: Optional[Configuration]) -> dict:
    """pyarrow ORCWriter options from ORC's writer properties (``orc.compress``,
    ``orc.stripe.size``, ``orc.row.index.stride``); others are rejected by name."""
    if writer_properties is None:
        return {}
    props = writer_properties.to_dict()
    options = {}
    for key, value in props.items():
        if key == "orc.compress":
            options["compression"] = str(value).upper()
        elif key == "orc.stripe.size":
            options["stripe_size"] = int(value)
        elif key == "orc.row.index.stride":
            options["row_index_stride"] = int(value)
        else:
            raise ValueError(f"OrcBulkWriters: writer property '{key}' is not supported (supported: "
                             f"orc.compress, orc.stripe.size, orc.row.index.stride)")
    return options


def _nested_rows_to_dicts(type_info: TypeInformation) -> Optional[Callable[[Any], Any]]:
    """``value -> value with nested Rows as dicts`` (Arrow reads a struct from a dict), or
    ``None`` when the type holds no row, so flat columns cost nothing extra."""
    if isinstance(type_info, RowTypeInfo):
        names = type_info.get_field_names()
        fields = [_nested_rows_to_dicts(t) or _identity for t in type_info.get_field_types()]
        return lambda v: None if v is None else {n: f(x) for n, f, x in zip(names, fields, v)}
    if isinstance(type_info, ListTypeInfo):
        element = _nested_rows_to_dicts(type_info.element_type)
        return None if element is None else (lambda v: None if v is None else [element(e) for e in v])
    if isinstance(type_info, MapTypeInfo):
        value = _nested_rows_to_dicts(type_info.value_type)
        return None if value is None else (lambda v: None if v is None else {k: value(e) for k, e in v.items()})
    return None


def _identity(value: Any) -> Any:
    return value


class _OrcBulkWriter(BulkWriter):
    def __init__(self, schema: pa.Schema, converters: List[Optional[Callable[[Any], Any]]], options: dict,
                 stream: BinaryIO):
        self._schema = schema
        self._converters = converters
        self._writer = pa_orc.ORCWriter(stream, **options)

    def add_elements(self, elements: List[Any]) -> None:
        # one row group per batch: columns built from the batch, not record by record
        arrays = []
        for column, field, convert in zip(zip(*elements), self._schema, self._converters):
            values = list(column) if convert is None else [convert(v) for v in column]
            try:
                arrays.append(pa.array(values, type=field.type))
            except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
                raise TypeError(f"OrcBulkWriters: a value of field '{field.name}' does not fit its ORC type "
                                f"{field.type}: {e}") from None
        self._writer.write(pa.Table.from_arrays(arrays, schema=self._schema))

    def finish(self) -> None:
        self._writer.close()  # writes the footer; the sink closes the file itself


class _OrcBulkWriterFactory(BulkWriterFactory):
    def __init__(self, row_type: RowTypeInfo, options: dict):
        super().__init__(row_type)
        self._options = options
        self._schema = pa.schema(list(_arrow_type(row_type, "row")))
        self._converters = [_nested_rows_to_dicts(t) for t in row_type.get_field_types()]

    def create(self, stream: BinaryIO) -> BulkWriter:
        return _OrcBulkWriter(self._schema, self._converters, self._options, stream)


class OrcBulkWriters:
    """Bulk writers of ORC part files (Flink's ``OrcBulkWriters``)."""

    @staticmethod
    def for_row_type(row_type: RowTypeInfo, writer_properties: Optional[Configuration] = None,
                     hadoop_config: Optional[Configuration] = None) -> BulkWriterFactory:
        """Writes ``Row`` s (or tuples) of ``row_type``, one ORC column per field.

        :param writer_properties: ORC writer properties (``orc.compress``: NONE/ZLIB/SNAPPY/LZ4/
            ZSTD, ``orc.stripe.size`` in bytes, ``orc.row.index.stride`` in rows).
        :param hadoop_config: accepted for PyFlink compatibility; Rill writes without Hadoop, so
            a non-empty one is rejected.
        :raises TypeError: if ``row_type`` is not a ``Types.ROW_NAMED``/``ROW`` or has a field ORC
            cannot hold here.
        :raises ValueError: for an unsupported writer property or a non-empty Hadoop config.
        """
        if not isinstance(row_type, RowTypeInfo):
            raise TypeError(f"OrcBulkWriters.for_row_type expects a row type (Types.ROW_NAMED), got {row_type!r}")
        if hadoop_config is not None and hadoop_config.to_dict():
            raise ValueError(f"OrcBulkWriters: Rill writes ORC without Hadoop; hadoop_config "
                             f"{sorted(hadoop_config.to_dict())} cannot be applied")
        return _OrcBulkWriterFactory(row_type, _orc_options(writer_properties))
