"""Avro files and messages (PyFlink's ``pyflink.datastream.formats.avro``; Flink's
``flink-avro``), through fastavro (install ``rill[formats]``).

Records: a generic record is a ``dict`` of the schema's field names (PyFlink hands Avro
``GenericRecord`` s to Python as dicts); the row schemas read and write ``Row`` s, a nested
record being a nested ``Row``.
"""

from __future__ import annotations

import io
import json
from typing import Any, BinaryIO, Callable, Iterator, List, Optional

import fastavro
import fastavro.write

from rill.common.io import InputFormat
from rill.common.row import Row
from rill.common.serialization import BulkWriter, BulkWriterFactory, DeserializationSchema, SerializationSchema
from rill.common.typeinfo import TypeInformation
from rill.common.connector.source import SourceReader, SourceSplit
from rill.datastream.connectors.file_system import FileEnumeratorProvider, FileSource, StreamFormat

__all__ = [
    "AvroSchema",
    "GenericRecordAvroTypeInfo",
    "AvroInputFormat",
    "AvroBulkWriters",
    "AvroRowDeserializationSchema",
    "AvroRowSerializationSchema",
]


class AvroSchema:
    """A parsed Avro schema (Flink's ``org.apache.avro.Schema``); ``str()`` is its JSON.

    :raises fastavro.schema.SchemaParseException: (from the parsers) for an invalid schema.
    """

    def __init__(self, schema: dict):
        self._json = schema
        self.parsed = fastavro.parse_schema(schema)

    @staticmethod
    def parse_string(json_schema: str) -> "AvroSchema":
        """The schema written as JSON text."""
        return AvroSchema(json.loads(json_schema))

    @staticmethod
    def parse_file(file_path: str) -> "AvroSchema":
        """The schema in a JSON file (``.avsc``)."""
        with open(file_path, "r", encoding="utf-8") as f:
            return AvroSchema(json.load(f))

    def __str__(self) -> str:
        return json.dumps(self._json, separators=(",", ":"))

    def __eq__(self, other) -> bool:
        return isinstance(other, AvroSchema) and self._json == other._json

    def __hash__(self) -> int:
        return hash(str(self))


class GenericRecordAvroTypeInfo(TypeInformation):
    """The type of generic Avro records (dicts) of ``schema`` (Flink's
    ``GenericRecordAvroTypeInfo``); declare it as the output type of the operator that feeds an
    ``AvroBulkWriters`` sink, as PyFlink requires."""

    def __init__(self, schema: AvroSchema):
        self.schema = schema

    def __repr__(self) -> str:
        return f"GenericRecordAvroTypeInfo({self.schema})"


class _AvroFileFormat(StreamFormat):
    """Records of an Avro container file, a whole file per split."""

    def __init__(self, schema: AvroSchema):
        self.schema = schema

    def get_produced_type(self) -> TypeInformation:
        return GenericRecordAvroTypeInfo(self.schema)

    def read_batches(self, stream: BinaryIO, batch_size: int) -> Iterator[List[Any]]:
        reader = fastavro.reader(stream, reader_schema=self.schema.parsed)
        batch: List[Any] = []
        for record in reader:
            batch.append(record)
            if len(batch) >= batch_size:
                yield batch
                batch = []
        if batch:
            yield batch


class AvroInputFormat(InputFormat):
    """Generic records (dicts) of the Avro files at ``path`` (a file, or every non-hidden file
    under a directory), read with the reader schema ``schema`` (Flink's ``AvroInputFormat``);
    one split per file. Use with ``env.create_input(AvroInputFormat(path, schema))``.

    :raises FileNotFoundError: naming ``path``, if it does not exist.
    """

    def __init__(self, path: str, schema: AvroSchema):
        self.schema = schema
        self._files = FileSource([path], _AvroFileFormat(schema),
                                 file_enumerator=FileEnumeratorProvider.default_non_splittable_file_enumerator())

    def get_produced_type(self) -> TypeInformation:
        return GenericRecordAvroTypeInfo(self.schema)

    def create_splits(self, parallelism: int) -> List[SourceSplit]:
        return self._files.create_splits(parallelism)

    def create_reader(self) -> SourceReader:
        return self._files.create_reader()

    def estimated_total_units(self) -> Optional[int]:
        return self._files.estimated_total_units()

    progress_units_are_bytes = True


class _AvroBulkWriter(BulkWriter):
    def __init__(self, schema: AvroSchema, stream: BinaryIO):
        self._writer = fastavro.write.Writer(stream, schema.parsed)
        self._to_record = _row_to_record(schema.parsed)

    def add_elements(self, elements: List[Any]) -> None:
        write, to_record = self._writer.write, self._to_record
        for e in elements:
            write(to_record(e))

    def flush(self) -> None:
        self._writer.flush()

    def finish(self) -> None:
        self._writer.flush()


class _AvroBulkWriterFactory(BulkWriterFactory):
    def __init__(self, schema: AvroSchema):
        super().__init__(GenericRecordAvroTypeInfo(schema))
        self.schema = schema

    def create(self, stream: BinaryIO) -> BulkWriter:
        return _AvroBulkWriter(self.schema, stream)


class AvroBulkWriters:
    """Bulk writers of Avro container files (Flink's ``AvroWriters``; no compression codec,
    as Flink's default)."""

    @staticmethod
    def for_generic_record(schema: AvroSchema) -> BulkWriterFactory:
        """Writes generic records (dicts; ``Row`` s and tuples are written field by field, in the schema's order) of ``schema``.
        A record that does not match the schema fails the sink with fastavro's error naming the
        field."""
        return _AvroBulkWriterFactory(schema)


def _schema_of(record_class: Optional[str], avro_schema_string: Optional[str], what: str) -> AvroSchema:
    if avro_schema_string is None and record_class is None:
        raise TypeError("record_class or avro_schema_string should be specified.")
    if avro_schema_string is None:
        raise NotImplementedError(f"{what}(record_class=...) is not implemented: record_class names a Java "
                                  f"SpecificRecord class; give the schema as avro_schema_string")
    return AvroSchema.parse_string(avro_schema_string)


def _record_to_row(schema: Any) -> Callable[[Any], Any]:
    """``decoded Avro value -> Row`` (records, recursively) for a parsed schema node."""
    if isinstance(schema, dict) and schema.get("type") == "record":
        names = [f["name"] for f in schema["fields"]]
        fields = [_record_to_row(f["type"]) for f in schema["fields"]]

        def to_row(value: Any) -> Optional[Row]:
            if value is None:
                return None
            row = Row(*[f(value[n]) for n, f in zip(names, fields)])
            row.set_field_names(names)
            return row
        return to_row
    if isinstance(schema, dict) and schema.get("type") == "array":
        element = _record_to_row(schema["items"])
        return lambda v: None if v is None else [element(e) for e in v]
    if isinstance(schema, dict) and schema.get("type") == "map":
        value = _record_to_row(schema["values"])
        return lambda v: None if v is None else {k: value(e) for k, e in v.items()}
    if isinstance(schema, list):  # a union: convert records of any branch
        branches = [_record_to_row(s) for s in schema if isinstance(s, dict) and s.get("type") == "record"]
        if branches:
            return lambda v: v if not isinstance(v, dict) else branches[0](v)
    return lambda v: v


class AvroRowSerializationSchema(SerializationSchema):
    """A ``Row`` -> Avro binary encoding of one record, without a container header (Flink's
    ``AvroRowSerializationSchema``); the row's fields are the schema's, by name or in order.

    :raises TypeError: without ``record_class`` and ``avro_schema_string``.
    :raises NotImplementedError: for ``record_class`` (a Java class; Rill needs the schema).
    """

    def __init__(self, record_class: str = None, avro_schema_string: str = None):
        self.schema = _schema_of(record_class, avro_schema_string, "AvroRowSerializationSchema")
        self._to_record = _row_to_record(self.schema.parsed)

    def serialize(self, element: Any) -> bytes:
        return self.serialize_batch([element])[0]

    def serialize_batch(self, elements: List[Any]) -> List[bytes]:
        out, parsed, write, to_record = io.BytesIO(), self.schema.parsed, fastavro.schemaless_writer, self._to_record
        result = []
        for e in elements:
            write(out, parsed, to_record(e))
            result.append(out.getvalue())
            out.seek(0)
            out.truncate()
        return result


def _row_to_record(schema: Any) -> Callable[[Any], Any]:
    """``Row (or tuple) -> Avro value`` for a parsed schema node: a record's fields are taken by
    position, so rows with or without field names are written alike."""
    if isinstance(schema, dict) and schema.get("type") == "record":
        names = [f["name"] for f in schema["fields"]]
        fields = [_row_to_record(f["type"]) for f in schema["fields"]]

        def to_record(value: Any) -> Any:
            if value is None or isinstance(value, dict):
                return value
            return {n: f(v) for n, f, v in zip(names, fields, value)}
        return to_record
    if isinstance(schema, dict) and schema.get("type") == "array":
        element = _row_to_record(schema["items"])
        return lambda v: None if v is None else [element(e) for e in v]
    if isinstance(schema, dict) and schema.get("type") == "map":
        value = _row_to_record(schema["values"])
        return lambda v: None if v is None else {k: value(e) for k, e in v.items()}
    if isinstance(schema, list):
        branches = [_row_to_record(s) for s in schema if isinstance(s, dict) and s.get("type") == "record"]
        if branches:
            return lambda v: branches[0](v) if isinstance(v, (Row, tuple)) else v
    return lambda v: v


class AvroRowDeserializationSchema(DeserializationSchema):
    """Avro binary encoding of one record -> a ``Row`` (nested records nested ``Row`` s)
    (Flink's ``AvroRowDeserializationSchema``).

    :raises TypeError: without ``record_class`` and ``avro_schema_string``.
    :raises NotImplementedError: for ``record_class`` (a Java class; Rill needs the schema).
    """

    def __init__(self, record_class: str = None, avro_schema_string: str = None):
        self.schema = _schema_of(record_class, avro_schema_string, "AvroRowDeserializationSchema")
        self._to_row = _record_to_row(self.schema.parsed)

    def deserialize(self, message: bytes) -> Row:
        return self._to_row(fastavro.schemaless_reader(io.BytesIO(message), self.schema.parsed, None))

    def deserialize_batch(self, messages: List[bytes]) -> List[Row]:
        parsed, read, to_row = self.schema.parsed, fastavro.schemaless_reader, self._to_row
        return [to_row(read(io.BytesIO(m), parsed, None)) for m in messages]
