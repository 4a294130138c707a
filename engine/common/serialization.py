"""Serialization schemas, encoders and bulk writers (PyFlink's ``pyflink.common.serialization``,
Flink's ``org.apache.flink.api.common.serialization``).

A :class:`SerializationSchema` turns one record into ``bytes``, a :class:`DeserializationSchema`
turns ``bytes`` back into one record; an :class:`Encoder` writes one record of a row-format file
sink; a :class:`BulkWriterFactory` opens a :class:`BulkWriter` on a part file of a bulk-format
file sink (``FileSink.for_bulk_format``), which sees every record of the part before it writes
the file's footer (CSV, Avro, ORC).

Rill difference, for speed: schemas also have ``serialize_batch`` / ``deserialize_batch`` and bulk
writers ``add_elements``, so a sink or source crosses into the schema once per batch of records.
Their defaults loop over the single-record methods; the formats override them.
"""

from __future__ import annotations

from typing import Any, BinaryIO, List, Optional

from rill.common.typeinfo import TypeInformation, Types

__all__ = [
    "SerializationSchema",
    "DeserializationSchema",
    "SimpleStringSchema",
    "ByteArraySchema",
    "Encoder",
    "BulkWriter",
    "BulkWriterFactory",
    "RowFieldExtractorSchema",
]


class SerializationSchema:
    """Record -> ``bytes`` (Flink's ``SerializationSchema``). Subclasses implement
    :meth:`serialize`; :meth:`open` is called once before the first record."""

    def open(self, context: Any = None) -> None:
        """Initialization before the first :meth:`serialize` (Flink's ``open(InitializationContext)``)."""

    def serialize(self, element: Any) -> bytes:
        raise NotImplementedError(f"{type(self).__name__} does not implement SerializationSchema.serialize")

    def serialize_batch(self, elements: List[Any]) -> List[bytes]:
        """``[serialize(e) for e in elements]``; formats override it to amortize per batch."""
        serialize = self.serialize
        return [serialize(e) for e in elements]


class DeserializationSchema:
    """``bytes`` -> record (Flink's ``DeserializationSchema``). Subclasses implement
    :meth:`deserialize` and :meth:`get_produced_type`."""

    def open(self, context: Any = None) -> None:
        """Initialization before the first :meth:`deserialize`."""

    def deserialize(self, message: bytes) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement DeserializationSchema.deserialize")

    def deserialize_batch(self, messages: List[bytes]) -> List[Any]:
        """``[deserialize(m) for m in messages]``; formats override it to amortize per batch."""
        deserialize = self.deserialize
        return [deserialize(m) for m in messages]

    def is_end_of_stream(self, next_element: Any) -> bool:
        """Whether ``next_element`` ends the stream (Flink's default: never)."""
        return False

    def get_produced_type(self) -> TypeInformation:
        """The type of the records :meth:`deserialize` returns."""
        return Types.PICKLED_BYTE_ARRAY()


class SimpleStringSchema(SerializationSchema, DeserializationSchema):
    """``str`` <-> bytes in ``charset`` (Flink's ``SimpleStringSchema``; default UTF-8).

    :raises UnicodeDecodeError: on bytes that are not valid in ``charset``.
    :raises LookupError: (at construction) for an unknown charset name.
    """

    def __init__(self, charset: str = "UTF-8"):
        "".encode(charset)  # an unknown charset fails here, not on the first record
        self.charset = charset

    def serialize(self, element: str) -> bytes:
        return element.encode(self.charset)

    def deserialize(self, message: bytes) -> str:
        return message.decode(self.charset)

    def get_produced_type(self) -> TypeInformation:
        return Types.STRING()


class ByteArraySchema(SerializationSchema, DeserializationSchema):
    """``bytes`` passed through unchanged, both ways (Flink's ``ByteArraySchema``).

    :raises TypeError: when serializing something that is not ``bytes``/``bytearray``.
    """

    def serialize(self, element: bytes) -> bytes:
        if not isinstance(element, (bytes, bytearray)):
            raise TypeError(f"ByteArraySchema: can only serialize bytes, got {type(element).__name__} {element!r:.80}")
        return bytes(element)

    def deserialize(self, message: bytes) -> bytes:
        return bytes(message)

    def get_produced_type(self) -> TypeInformation:
        return Types.PRIMITIVE_ARRAY(Types.BYTE())


class RowFieldExtractorSchema(SerializationSchema):
    """The ``bytes`` field at ``field_index`` of a ``Row`` (Flink's ``RowFieldExtractorSchema``):
    a ``None`` row or field serializes to ``b""``.

    :raises ValueError: (at construction) for a negative ``field_index``; when serializing a row
        with no field at ``field_index``.
    :raises TypeError: when the field is not ``bytes``.
    """

    def __init__(self, field_index: int):
        if not isinstance(field_index, int) or field_index < 0:
            raise ValueError(f"RowFieldExtractorSchema: field index must be non-negative, got: {field_index!r}")
        self.field_index = field_index

    def serialize(self, element: Any) -> bytes:
        if element is None:
            return b""
        if self.field_index >= len(element):
            raise ValueError(f"RowFieldExtractorSchema: cannot access field {self.field_index} in Row "
                             f"with arity {len(element)}")
        field = element[self.field_index]
        if field is None:
            return b""
        if not isinstance(field, (bytes, bytearray)):
            raise TypeError(f"RowFieldExtractorSchema: field at index {self.field_index} must be of type "
                            f"bytes, but was {type(field).__name__}")
        return bytes(field)

    def __eq__(self, other) -> bool:
        return type(other) is RowFieldExtractorSchema and other.field_index == self.field_index

    def __hash__(self) -> int:
        return self.field_index


class Encoder:
    """Turns a record into the bytes written for it by a row-format file sink (Flink's
    ``Encoder``); the default is ``SimpleStringEncoder``: ``str(record)`` and a newline."""

    def __init__(self, charset: str = "utf-8"):
        self.charset = charset

    @staticmethod
    def simple_string_encoder(charset_name: str = "UTF-8") -> "Encoder":
        """``str(record)`` followed by a newline (Flink's ``SimpleStringEncoder``)."""
        return Encoder(charset_name.lower())

    def encode(self, element: Any) -> bytes:
        return (str(element) + "\n").encode(self.charset)


class BulkWriter:
    """Writes the records of one part file (Flink's ``BulkWriter``): :meth:`add_elements` per
    batch, then :meth:`finish` once (footers, buffered rows); the sink closes the stream."""

    def add_element(self, element: Any) -> None:
        self.add_elements([element])

    def add_elements(self, elements: List[Any]) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not implement BulkWriter.add_elements")

    def flush(self) -> None:
        """Push buffered records to the stream (not a commit: the part stays in progress)."""

    def finish(self) -> None:
        """Write everything still buffered and the format's trailer; no element follows."""
        raise NotImplementedError(f"{type(self).__name__} does not implement BulkWriter.finish")


class BulkWriterFactory:
    """Opens a :class:`BulkWriter` on a part file's binary stream (Flink's
    ``BulkWriter.Factory``; PyFlink's ``BulkWriterFactory``). ``row_type`` is the record type
    the writer expects, when it has one (PyFlink's ``RowDataBulkWriterFactory.get_row_type``)."""

    def __init__(self, row_type: Optional[TypeInformation] = None):
        self._row_type = row_type

    def create(self, stream: BinaryIO) -> BulkWriter:
        raise NotImplementedError(f"{type(self).__name__} does not implement BulkWriterFactory.create")

    def get_row_type(self) -> Optional[TypeInformation]:
        return self._row_type
