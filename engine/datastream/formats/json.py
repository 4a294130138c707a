"""JSON messages (PyFlink's ``pyflink.datastream.formats.json``; Flink's ``flink-json``):
a ``Row`` <-> one JSON object in UTF-8 bytes, through Python's :mod:`json`.

Field values follow the row type: a nested ``Types.ROW_NAMED`` is a nested object (a ``Row``
when read), ``Types.LIST`` / arrays a JSON array, ``Types.MAP`` an object, ``FLOAT`` is rounded
to float32 and integer types are range-checked as Flink's serializers do.
"""

from __future__ import annotations

import json
from typing import Any, Callable, List, Optional

from rill.common.row import Row
from rill.common.serialization import DeserializationSchema, SerializationSchema
from rill.common.type_conversion import value_converter
from rill.common.typeinfo import ListTypeInfo, MapTypeInfo, RowTypeInfo, TypeInformation

__all__ = ["JsonRowDeserializationSchema", "JsonRowSerializationSchema"]


def _to_json(type_info: TypeInformation) -> Callable[[Any], Any]:
    """``value -> JSON-ready value`` for ``type_info`` (rows become dicts of their field names)."""
    if isinstance(type_info, RowTypeInfo):
        names = type_info.get_field_names()
        fields = [_to_json(t) for t in type_info.get_field_types()]
        return lambda row: None if row is None else {n: f(v) for n, f, v in zip(names, fields, row)}
    if isinstance(type_info, ListTypeInfo):
        element = _to_json(type_info.element_type)
        return lambda v: None if v is None else [element(e) for e in v]
    if isinstance(type_info, MapTypeInfo):
        value = _to_json(type_info.value_type)
        return lambda v: None if v is None else {str(k): value(e) for k, e in v.items()}
    return lambda v: v


def _from_json(type_info: TypeInformation, fail_on_missing: bool, where: str) -> Callable[[Any], Any]:
    """``parsed JSON -> value`` of ``type_info``; raises ``ValueError`` naming ``where``."""
    if isinstance(type_info, RowTypeInfo):
        names = type_info.get_field_names()
        fields = [_from_json(t, fail_on_missing, f"{where}.{n}") for n, t in zip(names, type_info.get_field_types())]

        def to_row(obj: Any) -> Optional[Row]:
            if obj is None:
                return None
            if not isinstance(obj, dict):
                raise ValueError(f"{where}: expected a JSON object for a row, got {obj!r:.80}")
            if fail_on_missing:
                missing = [n for n in names if n not in obj]
                if missing:
                    raise ValueError(f"{where}: could not find field(s) {missing} in {obj!r:.200}")
            row = Row(*[f(obj.get(n)) for n, f in zip(names, fields)])
            row.set_field_names(names)
            return row
        return to_row
    if isinstance(type_info, ListTypeInfo):
        element = _from_json(type_info.element_type, fail_on_missing, where)
        return lambda v: None if v is None else [element(e) for e in v]
    if isinstance(type_info, MapTypeInfo):
        value = _from_json(type_info.value_type, fail_on_missing, where)
        return lambda v: None if v is None else {k: value(e) for k, e in v.items()}
    check = value_converter(type_info, where)
    return check if check is not None else (lambda v: v)


class JsonRowSerializationSchema(SerializationSchema):
    """A ``Row`` of the given type -> compact JSON object bytes (Flink's
    ``JsonRowSerializationSchema``). Built with ``JsonRowSerializationSchema.builder()
    .with_type_info(Types.ROW_NAMED(...)).build()``.

    :raises TypeError: (on build) without a row type info.
    """

    def __init__(self, type_info: RowTypeInfo):
        if not isinstance(type_info, RowTypeInfo):
            raise TypeError(f"JsonRowSerializationSchema: the type info must be a Types.ROW / ROW_NAMED, "
                            f"got {type_info!r}")
        self.type_info = type_info
        self._convert = _to_json(type_info)
        self._encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)

    def serialize(self, element: Any) -> bytes:
        return self._encoder.encode(self._convert(element)).encode("utf-8")

    def serialize_batch(self, elements: List[Any]) -> List[bytes]:
        encode, convert = self._encoder.encode, self._convert
        return [encode(convert(e)).encode("utf-8") for e in elements]

    @staticmethod
    def builder() -> "JsonRowSerializationSchema.Builder":
        return JsonRowSerializationSchema.Builder()

    class Builder:
        """Builds a :class:`JsonRowSerializationSchema`."""

        def __init__(self):
            self._type_info = None

        def with_type_info(self, type_info: RowTypeInfo) -> "JsonRowSerializationSchema.Builder":
            self._type_info = type_info
            return self

        def build(self) -> "JsonRowSerializationSchema":
            return JsonRowSerializationSchema(self._type_info)


class JsonRowDeserializationSchema(DeserializationSchema):
    """JSON object bytes -> a ``Row`` of the given type (Flink's ``JsonRowDeserializationSchema``).
    A field missing from the object is ``None`` unless ``fail_on_missing_field()``; a message
    that is not valid JSON for the type raises ``ValueError`` unless ``ignore_parse_errors()``,
    which makes it ``None``. The two options exclude each other, as in Flink.

    :raises TypeError: (on build) without a row type info.
    :raises ValueError: (on build) with both ``fail_on_missing_field`` and ``ignore_parse_errors``.
    """

    def __init__(self, type_info: RowTypeInfo, fail_on_missing_field: bool = False,
                 ignore_parse_errors: bool = False):
        if not isinstance(type_info, RowTypeInfo):
            raise TypeError(f"JsonRowDeserializationSchema: the type info must be a Types.ROW / ROW_NAMED, "
                            f"got {type_info!r}")
        if fail_on_missing_field and ignore_parse_errors:
            raise ValueError("JsonRowDeserializationSchema: JSON format doesn't support failOnMissingField "
                             "and ignoreParseErrors are both true")
        self.type_info = type_info
        self._args = (type_info, fail_on_missing_field, ignore_parse_errors)
        self._convert = _from_json(type_info, fail_on_missing_field, "JsonRowDeserializationSchema")
        self._ignore = ignore_parse_errors

    def __reduce__(self):
        # shipped by its settings: the converters hold unpicklable float32 packers
        return JsonRowDeserializationSchema, self._args

    def get_produced_type(self) -> TypeInformation:
        return self.type_info

    def deserialize(self, message: bytes) -> Optional[Row]:
        try:
            return self._convert(json.loads(message))
        except ValueError:  # json.JSONDecodeError and type errors (TypeValueError) alike
            if self._ignore:
                return None
            raise

    def deserialize_batch(self, messages: List[bytes]) -> List[Optional[Row]]:
        deserialize = self.deserialize
        return [deserialize(m) for m in messages]

    @staticmethod
    def builder() -> "JsonRowDeserializationSchema.Builder":
        return JsonRowDeserializationSchema.Builder()

    class Builder:
        """Builds a :class:`JsonRowDeserializationSchema`."""

        def __init__(self):
            self._type_info = None
            self._fail_on_missing = False
            self._ignore = False

        def type_info(self, type_info: RowTypeInfo) -> "JsonRowDeserializationSchema.Builder":
            self._type_info = type_info
            return self

        def json_schema(self, json_schema: str) -> "JsonRowDeserializationSchema.Builder":
            raise NotImplementedError("JsonRowDeserializationSchema.Builder.json_schema is not implemented: "
                                      "declare the row with type_info(Types.ROW_NAMED(...))")

        def fail_on_missing_field(self) -> "JsonRowDeserializationSchema.Builder":
            self._fail_on_missing = True
            return self

        def ignore_parse_errors(self) -> "JsonRowDeserializationSchema.Builder":
            self._ignore = True
            return self

        def build(self) -> "JsonRowDeserializationSchema":
            return JsonRowDeserializationSchema(self._type_info, self._fail_on_missing, self._ignore)
