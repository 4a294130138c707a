"""CSV files and messages (PyFlink's ``pyflink.datastream.formats.csv``; Flink's ``flink-csv``,
which reads and writes through Jackson's ``CsvSchema``). Parsing and writing use Python's
:mod:`csv` module, a file or a batch at a time.

Rill difference: PyFlink declares column and row types with the Table API's ``DataTypes``;
Rill has no Table API, so they are declared with the DataStream ``Types`` PyFlink converts them
to (``Types.INT()`` for ``DataTypes.INT()``, ``Types.LIST(Types.STRING())`` for
``DataTypes.ARRAY(DataTypes.STRING())``, a ``Types.ROW_NAMED`` for a ``DataTypes.ROW``).

Values: a number column holds ``int`` for BYTE/SHORT/INT/LONG/BIG_INT, ``float`` for
FLOAT (rounded to float32)/DOUBLE, ``decimal.Decimal`` for BIG_DEC; a boolean column reads
``true``/``false`` (any case) and writes ``true``/``false``; an empty field, or one equal to
the null value, of a non-string column is ``None``.
"""

from __future__ import annotations

import csv
import decimal
import io
from typing import Any, BinaryIO, Callable, Iterator, List, Optional, Sequence

from rill.common.row import Row
from rill.common.serialization import BulkWriter, BulkWriterFactory, DeserializationSchema, SerializationSchema
from rill.common.type_conversion import value_converter
from rill.common.typeinfo import BasicTypeInfo, ListTypeInfo, RowTypeInfo, TypeInformation, Types
from rill.datastream.connectors.file_system import StreamFormat

__all__ = [
    "CsvSchema",
    "CsvSchemaBuilder",
    "CsvReaderFormat",
    "CsvBulkWriters",
    "CsvRowDeserializationSchema",
    "CsvRowSerializationSchema",
]

_INTEGERS = {"BYTE", "SHORT", "INT", "LONG", "BIG_INT"}
_FLOATS = {"FLOAT", "DOUBLE"}


def _parse_scalar(type_info: TypeInformation, where: str) -> Callable[[str], Any]:
    """``text -> value`` for one scalar type; raises ``ValueError`` naming ``where``."""
    name = type_info.name if isinstance(type_info, BasicTypeInfo) else None
    if name == "STRING" or name == "CHAR":
        return lambda text: text
    if name == "BOOLEAN":
        def parse_bool(text: str) -> bool:
            low = text.strip().lower()
            if low not in ("true", "false"):
                raise ValueError(f"{where}: {text!r} is not a BOOLEAN (true or false)")
            return low == "true"
        return parse_bool
    if name in _INTEGERS:
        check = value_converter(type_info, where)

        def parse_int(text: str) -> int:
            try:
                value = int(text.strip())
            except ValueError:
                raise ValueError(f"{where}: {text!r} is not an integer ({name})") from None
            return check(value) if check is not None else value
        return parse_int
    if name in _FLOATS:
        check = value_converter(type_info, where)

        def parse_float(text: str) -> float:
            try:
                value = float(text.strip())
            except ValueError:
                raise ValueError(f"{where}: {text!r} is not a number ({name})") from None
            return check(value) if check is not None else value
        return parse_float
    if name == "BIG_DEC":
        def parse_decimal(text: str) -> decimal.Decimal:
            try:
                return decimal.Decimal(text.strip())
            except decimal.InvalidOperation:
                raise ValueError(f"{where}: {text!r} is not a BIG_DEC") from None
        return parse_decimal
    raise TypeError(f"{where}: CSV columns hold STRING, BOOLEAN, numbers or a LIST of them, not {type_info!r}")


def _format_scalar(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


class _Column:
    """One column: its name, type and, for arrays, the element separator."""

    def __init__(self, name: str, type_info: TypeInformation, array_separator: Optional[str] = None):
        self.name = name
        self.type_info = type_info
        self.array_separator = array_separator


def _field_parser(column: _Column, null_value: str, where: str) -> Callable[[str], Any]:
    if isinstance(column.type_info, ListTypeInfo):
        element = _parse_scalar(column.type_info.element_type, f"{where}, column '{column.name}'")
        sep = column.array_separator

        def parse_array(text: str):
            if text == null_value and null_value != "":
                return None
            if text == "":
                return []
            parts = text.split(sep) if sep else [text]
            return [element(p) for p in parts]
        return parse_array
    scalar = _parse_scalar(column.type_info, f"{where}, column '{column.name}'")
    if column.type_info == Types.STRING():
        if null_value == "":
            return scalar
        return lambda text: None if text == null_value else text
    return lambda text: None if text == "" or text == null_value else scalar(text)


def _field_formatter(column: _Column, null_value: str) -> Callable[[Any], str]:
    if isinstance(column.type_info, ListTypeInfo):
        sep = column.array_separator or ""
        return lambda v: null_value if v is None else sep.join(_format_scalar(e) for e in v)
    return lambda v: null_value if v is None else _format_scalar(v)


class CsvSchema:
    """Columns and dialect of a CSV file (Jackson's ``CsvSchema``, as Flink uses it).
    Built with :meth:`builder`; records read through it are ``Row`` s of :attr:`row_type`.

    Defaults (Jackson's): column separator ``,``, quote char ``"``, no escape char, line
    separator ``\\n``, array element separator ``;``, null value empty, no header.
    """

    def __init__(self, columns: Sequence[_Column], column_separator: str = ",", quote_char: Optional[str] = '"',
                 escape_char: Optional[str] = None, line_separator: str = "\n", null_value: str = "",
                 use_header: bool = False, skip_first_data_row: bool = False, strict_headers: bool = False,
                 allow_comments: bool = False):
        self.columns = list(columns)
        self.column_separator = column_separator
        self.quote_char = quote_char
        self.escape_char = escape_char
        self.line_separator = line_separator
        self.null_value = null_value
        self.use_header = use_header
        self.skip_first_data_row = skip_first_data_row
        self.strict_headers = strict_headers
        self.allow_comments = allow_comments
        self.row_type = Types.ROW_NAMED([c.name for c in self.columns], [c.type_info for c in self.columns])

    @staticmethod
    def builder() -> "CsvSchemaBuilder":
        return CsvSchemaBuilder()

    def size(self) -> int:
        """The number of columns."""
        return len(self.columns)

    def __len__(self) -> int:
        return self.size()

    def _dialect(self) -> dict:
        return dict(delimiter=self.column_separator, quotechar=self.quote_char, escapechar=self.escape_char,
                    quoting=csv.QUOTE_MINIMAL if self.quote_char else csv.QUOTE_NONE,
                    lineterminator=self.line_separator, doublequote=self.escape_char is None, strict=False)

    def __str__(self) -> str:
        cols = ", ".join(f"{c.name}: {c.type_info!r}" for c in self.columns)
        return (f"CsvSchema([{cols}], column_separator={self.column_separator!r}, "
                f"use_header={self.use_header})")

    __repr__ = __str__


class CsvSchemaBuilder:
    """Builds a :class:`CsvSchema` (Jackson's ``CsvSchema.Builder``, PyFlink's method names).

    :raises ValueError: from a setter given a separator/quote/escape that is not one character.
    """

    def __init__(self):
        self._columns: List[_Column] = []
        self._settings = {}
        self._array_separator = ";"

    def build(self) -> CsvSchema:
        return CsvSchema(self._columns, **self._settings)

    def add_array_column(self, name: str, separator: str = ";",
                         element_type: Optional[TypeInformation] = None) -> "CsvSchemaBuilder":
        """An array column whose elements (``element_type``, default STRING) are separated by
        ``separator``; its values are ``list`` s."""
        self._columns.append(_Column(name, Types.LIST(element_type or Types.STRING()), separator))
        return self

    def add_boolean_column(self, name: str) -> "CsvSchemaBuilder":
        self._columns.append(_Column(name, Types.BOOLEAN()))
        return self

    def add_number_column(self, name: str, number_type: Optional[TypeInformation] = None) -> "CsvSchemaBuilder":
        """A number column of ``number_type`` (default ``Types.LONG()``, Flink's BIGINT).

        :raises TypeError: if ``number_type`` is not a numeric type.
        """
        number_type = number_type or Types.LONG()
        if getattr(number_type, "name", None) not in _INTEGERS | _FLOATS | {"BIG_DEC"}:
            raise TypeError(f"CsvSchemaBuilder.add_number_column('{name}'): {number_type!r} is not a numeric type")
        self._columns.append(_Column(name, number_type))
        return self

    def add_string_column(self, name: str) -> "CsvSchemaBuilder":
        self._columns.append(_Column(name, Types.STRING()))
        return self

    def add_columns_from(self, schema: CsvSchema) -> "CsvSchemaBuilder":
        self._columns.extend(schema.columns)
        return self

    def clear_columns(self) -> "CsvSchemaBuilder":
        self._columns = []
        return self

    def set_allow_comments(self, allow: bool = True) -> "CsvSchemaBuilder":
        """Skip lines starting with ``#``."""
        self._settings["allow_comments"] = allow
        return self

    def set_any_property_name(self, name: str) -> "CsvSchemaBuilder":
        raise NotImplementedError("CsvSchemaBuilder.set_any_property_name is not implemented: Rill's CSV "
                                  "rows have exactly the schema's columns")

    def disable_array_element_separator(self) -> "CsvSchemaBuilder":
        """Array columns added later hold one element per field."""
        return self.set_array_element_separator("")

    def remove_array_element_separator(self, index: int) -> "CsvSchemaBuilder":
        """The array column at ``index`` holds one element per field.

        :raises IndexError: if there is no column ``index``.
        """
        self._columns[index].array_separator = ""
        return self

    def set_array_element_separator(self, separator: str) -> "CsvSchemaBuilder":
        """The separator of every array column added so far."""
        for c in self._columns:
            if isinstance(c.type_info, ListTypeInfo):
                c.array_separator = separator
        return self

    def set_column_separator(self, char: str) -> "CsvSchemaBuilder":
        self._settings["column_separator"] = _one_char("column separator", char)
        return self

    def disable_escape_char(self) -> "CsvSchemaBuilder":
        self._settings["escape_char"] = None
        return self

    def set_escape_char(self, char: str) -> "CsvSchemaBuilder":
        self._settings["escape_char"] = _one_char("escape char", char)
        return self

    def set_line_separator(self, separator: str) -> "CsvSchemaBuilder":
        self._settings["line_separator"] = separator
        return self

    def set_null_value(self, null_value: str) -> "CsvSchemaBuilder":
        self._settings["null_value"] = null_value
        return self

    def disable_quote_char(self) -> "CsvSchemaBuilder":
        self._settings["quote_char"] = None
        return self

    def set_quote_char(self, char: str) -> "CsvSchemaBuilder":
        self._settings["quote_char"] = _one_char("quote char", char)
        return self

    def set_skip_first_data_row(self, skip: bool = True) -> "CsvSchemaBuilder":
        self._settings["skip_first_data_row"] = skip
        return self

    def set_strict_headers(self, strict: bool = True) -> "CsvSchemaBuilder":
        """With a header, fail on a header that does not name the schema's columns in order."""
        self._settings["strict_headers"] = strict
        return self

    def set_use_header(self, use: bool = True) -> "CsvSchemaBuilder":
        """The file's first line names the columns (skipped on read, written by writers)."""
        self._settings["use_header"] = use
        return self

    def size(self) -> int:
        return len(self._columns)

    def __len__(self) -> int:
        return self.size()


def _one_char(what: str, value: str) -> str:
    if not isinstance(value, str) or len(value) != 1:
        raise ValueError(f"CsvSchemaBuilder: the {what} must be one character, got {value!r}")
    return value


class CsvReaderFormat(StreamFormat):
    """Reads a CSV file into ``Row`` s of the schema's row type (Flink's ``CsvReaderFormat``),
    a file per split, one ``csv.reader`` pass per file.

    :raises ValueError: (while reading) for a line without the schema's number of columns, a
        value that does not parse as its column's type, or, with strict headers, a header that
        differs from the column names; the error names the file's line.
    """

    def __init__(self, schema: CsvSchema):
        self.schema = schema

    @staticmethod
    def for_schema(schema: CsvSchema) -> "CsvReaderFormat":
        return CsvReaderFormat(schema)

    def get_produced_type(self) -> TypeInformation:
        return self.schema.row_type

    def read_batches(self, stream: BinaryIO, batch_size: int) -> Iterator[List[Any]]:
        schema = self.schema
        names = [c.name for c in schema.columns]
        parsers = [_field_parser(c, schema.null_value, "CsvReaderFormat") for c in schema.columns]
        text = io.TextIOWrapper(stream, encoding="utf-8", newline="")
        lines = text
        if schema.allow_comments:
            lines = (ln for ln in text if not ln.startswith("#"))
        reader = csv.reader(lines, **schema._dialect())
        if schema.use_header:
            header = next(reader, None)
            if header is not None and schema.strict_headers and header != names:
                raise ValueError(f"CsvReaderFormat: header {header} does not match the schema's columns {names}")
        if schema.skip_first_data_row:
            next(reader, None)
        arity = len(parsers)
        batch: List[Any] = []
        for fields in reader:
            if not fields:
                continue
            if len(fields) != arity:
                raise ValueError(f"CsvReaderFormat: line {reader.line_num} has {len(fields)} columns, "
                                 f"the schema has {arity} ({names}): {fields}")
            row = Row(*[p(f) for p, f in zip(parsers, fields)])
            row.set_field_names(names)
            batch.append(row)
            if len(batch) >= batch_size:
                yield batch
                batch = []
        if batch:
            yield batch


class _CsvBulkWriter(BulkWriter):
    def __init__(self, schema: CsvSchema, stream: BinaryIO):
        self._stream = io.TextIOWrapper(stream, encoding="utf-8", newline="", write_through=True)
        self._writer = csv.writer(self._stream, **schema._dialect())
        self._formatters = [_field_formatter(c, schema.null_value) for c in schema.columns]
        if schema.use_header:
            self._writer.writerow([c.name for c in schema.columns])

    def add_elements(self, elements: List[Any]) -> None:
        formatters = self._formatters
        self._writer.writerows([[f(v) for f, v in zip(formatters, e)] for e in elements])

    def flush(self) -> None:
        self._stream.flush()

    def finish(self) -> None:
        self._stream.flush()
        self._stream.detach()  # the sink closes the underlying file


class _CsvBulkWriterFactory(BulkWriterFactory):
    def __init__(self, schema: CsvSchema):
        super().__init__(schema.row_type)
        self.schema = schema

    def create(self, stream: BinaryIO) -> BulkWriter:
        return _CsvBulkWriter(self.schema, stream)


class CsvBulkWriters:
    """Bulk writers of CSV part files (Flink's ``CsvBulkWriters``): each record (a ``Row``,
    tuple or list in column order) is one line; a header first when the schema uses one."""

    @staticmethod
    def for_schema(schema: CsvSchema) -> BulkWriterFactory:
        return _CsvBulkWriterFactory(schema)


def _row_columns(type_info: RowTypeInfo, array_delimiter: str, what: str) -> List[_Column]:
    if not isinstance(type_info, RowTypeInfo):
        raise TypeError(f"{what}: the type info must be a Types.ROW / ROW_NAMED, got {type_info!r}")
    return [_Column(n, t, array_delimiter if isinstance(t, ListTypeInfo) else None)
            for n, t in zip(type_info.get_field_names(), type_info.get_field_types())]


class CsvRowSerializationSchema(SerializationSchema):
    """A ``Row`` -> one CSV line in UTF-8 bytes (Flink's ``CsvRowSerializationSchema``; the line
    delimiter is ``\\n`` by default). Built with ``CsvRowSerializationSchema.Builder(type_info)``."""

    def __init__(self, type_info: RowTypeInfo, field_delimiter: str = ",", line_delimiter: str = "\n",
                 array_element_delimiter: str = ";", quote_character: Optional[str] = '"',
                 escape_character: Optional[str] = None, null_literal: str = ""):
        columns = _row_columns(type_info, array_element_delimiter, "CsvRowSerializationSchema")
        self._args = (type_info, field_delimiter, line_delimiter, array_element_delimiter, quote_character,
                      escape_character, null_literal)
        self.type_info = type_info
        self._schema = CsvSchema(columns, field_delimiter, quote_character, escape_character, line_delimiter,
                                 null_literal)
        self._formatters = [_field_formatter(c, null_literal) for c in columns]

    def __reduce__(self):
        return CsvRowSerializationSchema, self._args

    def serialize_batch(self, elements: List[Any]) -> List[bytes]:
        out = io.StringIO()
        writer = csv.writer(out, **self._schema._dialect())
        formatters = self._formatters
        lines = []
        for e in elements:
            writer.writerow([f(v) for f, v in zip(formatters, e)])
            lines.append(out.getvalue().encode("utf-8"))
            out.seek(0)
            out.truncate()
        return lines

    def serialize(self, element: Any) -> bytes:
        return self.serialize_batch([element])[0]

    class Builder:
        """Settings of a :class:`CsvRowSerializationSchema` (Flink's defaults)."""

        def __init__(self, type_info: RowTypeInfo):
            self._type_info = type_info
            self._kw = {}

        def set_field_delimiter(self, c: str) -> "CsvRowSerializationSchema.Builder":
            self._kw["field_delimiter"] = _one_char("field delimiter", c)
            return self

        def set_line_delimiter(self, delimiter: str) -> "CsvRowSerializationSchema.Builder":
            """:raises ValueError: unless ``\\n``, ``\\r``, ``\\r\\n`` or empty (Flink's rule)."""
            if delimiter not in ("\n", "\r", "\r\n", ""):
                raise ValueError(f"CsvRowSerializationSchema: unsupported line delimiter {delimiter!r}")
            self._kw["line_delimiter"] = delimiter
            return self

        def set_array_element_delimiter(self, delimiter: str) -> "CsvRowSerializationSchema.Builder":
            self._kw["array_element_delimiter"] = delimiter
            return self

        def disable_quote_character(self) -> "CsvRowSerializationSchema.Builder":
            self._kw["quote_character"] = None
            return self

        def set_quote_character(self, c: str) -> "CsvRowSerializationSchema.Builder":
            self._kw["quote_character"] = _one_char("quote character", c)
            return self

        def set_escape_character(self, c: str) -> "CsvRowSerializationSchema.Builder":
            self._kw["escape_character"] = _one_char("escape character", c)
            return self

        def set_null_literal(self, s: str) -> "CsvRowSerializationSchema.Builder":
            self._kw["null_literal"] = s
            return self

        def build(self) -> "CsvRowSerializationSchema":
            return CsvRowSerializationSchema(self._type_info, **self._kw)


class CsvRowDeserializationSchema(DeserializationSchema):
    """One CSV line (UTF-8 bytes) -> a ``Row`` of ``type_info`` (Flink's
    ``CsvRowDeserializationSchema``). Built with ``CsvRowDeserializationSchema.Builder(type_info)``.

    :raises ValueError: for a line with the wrong number of fields or a value that does not
        parse, unless ``set_ignore_parse_errors(True)``, which makes such a line ``None``.
    """

    def __init__(self, type_info: RowTypeInfo, field_delimiter: str = ",", allow_comments: bool = False,
                 array_element_delimiter: str = ";", quote_character: Optional[str] = '"',
                 escape_character: Optional[str] = None, null_literal: str = "",
                 ignore_parse_errors: bool = False):
        columns = _row_columns(type_info, array_element_delimiter, "CsvRowDeserializationSchema")
        self._args = (type_info, field_delimiter, allow_comments, array_element_delimiter, quote_character,
                      escape_character, null_literal, ignore_parse_errors)
        self.type_info = type_info
        self._schema = CsvSchema(columns, field_delimiter, quote_character, escape_character, "\n", null_literal,
                                 allow_comments=allow_comments)
        self._parsers = [_field_parser(c, null_literal, "CsvRowDeserializationSchema") for c in columns]
        self._names = type_info.get_field_names()
        self._ignore_parse_errors = ignore_parse_errors

    def __reduce__(self):
        # shipped by its settings: the parsers hold unpicklable float32 packers
        return CsvRowDeserializationSchema, self._args

    def get_produced_type(self) -> TypeInformation:
        return self.type_info

    def deserialize(self, message: bytes) -> Optional[Row]:
        return self.deserialize_batch([message])[0]

    def deserialize_batch(self, messages: List[bytes]) -> List[Optional[Row]]:
        out = []
        dialect = self._schema._dialect()
        for message in messages:
            text = message.decode("utf-8")
            if self._schema.allow_comments and text.startswith("#"):
                out.append(None)
                continue
            try:
                out.append(self._parse(next(csv.reader([text.rstrip("\r\n")], **dialect), [])))
            except (ValueError, csv.Error):
                if not self._ignore_parse_errors:
                    raise
                out.append(None)
        return out

    def _parse(self, fields: List[str]) -> Row:
        if len(fields) != len(self._parsers):
            raise ValueError(f"CsvRowDeserializationSchema: {len(fields)} fields in {fields}, the row type "
                             f"has {len(self._parsers)} ({self._names})")
        row = Row(*[p(f) for p, f in zip(self._parsers, fields)])
        row.set_field_names(self._names)
        return row

    class Builder:
        """Settings of a :class:`CsvRowDeserializationSchema` (Flink's defaults)."""

        def __init__(self, type_info: RowTypeInfo):
            self._type_info = type_info
            self._kw = {}

        def set_field_delimiter(self, delimiter: str) -> "CsvRowDeserializationSchema.Builder":
            self._kw["field_delimiter"] = _one_char("field delimiter", delimiter)
            return self

        def set_allow_comments(self, allow_comments: bool) -> "CsvRowDeserializationSchema.Builder":
            self._kw["allow_comments"] = allow_comments
            return self

        def set_array_element_delimiter(self, delimiter: str) -> "CsvRowDeserializationSchema.Builder":
            self._kw["array_element_delimiter"] = delimiter
            return self

        def set_quote_character(self, c: str) -> "CsvRowDeserializationSchema.Builder":
            self._kw["quote_character"] = _one_char("quote character", c)
            return self

        def set_escape_character(self, c: str) -> "CsvRowDeserializationSchema.Builder":
            self._kw["escape_character"] = _one_char("escape character", c)
            return self

        def set_null_literal(self, null_literal: str) -> "CsvRowDeserializationSchema.Builder":
            self._kw["null_literal"] = null_literal
            return self

        def set_ignore_parse_errors(self, ignore_parse_errors: bool) -> "CsvRowDeserializationSchema.Builder":
            self._kw["ignore_parse_errors"] = ignore_parse_errors
            return self

        def build(self) -> "CsvRowDeserializationSchema":
            return CsvRowDeserializationSchema(self._type_info, **self._kw)
