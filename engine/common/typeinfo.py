"""A small type system with PyFlink's names (``pyflink.common.typeinfo.Types``).

Types are optional everywhere (``output_type=None`` means "any Python object", PyFlink's
``PICKLED_BYTE_ARRAY``). Where given, they drive typed Parquet columns for state snapshots and
act as Flink's serializers do where Flink serializes (a source's output, network edges, a sink's
input, keyed state): ``FLOAT`` is float32, ``BYTE``/``SHORT``/``INT``/``LONG`` are range-checked,
``CHAR`` is one character (see :mod:`rill.common.type_conversion`). Untyped streams, and types
that change nothing (``STRING``, ``DOUBLE``...), cost nothing per record.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

__all__ = [
    "TypeInformation",
    "BasicTypeInfo",
    "RowTypeInfo",
    "TupleTypeInfo",
    "ListTypeInfo",
    "MapTypeInfo",
    "PickledBytesTypeInfo",
    "Types",
]


class TypeInformation:
    """Base of all type descriptions."""

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash(repr(self))


class BasicTypeInfo(TypeInformation):
    """A scalar type; ``name`` is Flink's type name (``"INT"``, ``"STRING"``...)."""

    def __init__(self, name: str, python_type: type):
        self.name = name
        self.python_type = python_type

    def __repr__(self) -> str:
        return self.name


class RowTypeInfo(TypeInformation):
    """A ``Row`` with named, typed fields (``Types.ROW`` names them ``f0, f1, ...``)."""

    def __init__(self, field_types: Sequence[TypeInformation], field_names: Optional[Sequence[str]] = None):
        self.field_types = list(field_types)
        if field_names is None:
            field_names = [f"f{i}" for i in range(len(self.field_types))]
        if len(field_names) != len(self.field_types):
            raise ValueError(
                f"Row type has {len(field_names)} field names but {len(self.field_types)} field types"
            )
        self.field_names = list(field_names)

    def get_field_names(self) -> List[str]:
        return list(self.field_names)

    def get_field_types(self) -> List[TypeInformation]:
        return list(self.field_types)

    def get_field_index(self, field_name: str) -> int:
        return self.field_names.index(field_name)

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}: {t!r}" for n, t in zip(self.field_names, self.field_types))
        return f"RowTypeInfo({fields})"


class TupleTypeInfo(TypeInformation):
    """A Python tuple with typed positions (``Types.TUPLE``)."""

    def __init__(self, field_types: Sequence[TypeInformation]):
        self.field_types = list(field_types)

    def get_field_types(self) -> List[TypeInformation]:
        return list(self.field_types)

    def __repr__(self) -> str:
        return f"TupleTypeInfo({', '.join(map(repr, self.field_types))})"


class ListTypeInfo(TypeInformation):
    """A list of one element type (``Types.LIST``, ``BASIC_ARRAY``, ``PRIMITIVE_ARRAY``)."""

    def __init__(self, element_type: TypeInformation):
        self.element_type = element_type

    def __repr__(self) -> str:
        return f"ListTypeInfo<{self.element_type!r}>"


class MapTypeInfo(TypeInformation):
    """A dict with typed keys and values (``Types.MAP``)."""

    def __init__(self, key_type: TypeInformation, value_type: TypeInformation):
        self.key_type = key_type
        self.value_type = value_type

    def __repr__(self) -> str:
        return f"MapTypeInfo<{self.key_type!r}, {self.value_type!r}>"


class PickledBytesTypeInfo(TypeInformation):
    """Any picklable Python object (PyFlink's ``PICKLED_BYTE_ARRAY``)."""

    def __repr__(self) -> str:
        return "PICKLED_BYTE_ARRAY"


def _basic(name: str, py: type):
    info = BasicTypeInfo(name, py)
    return lambda: info


class Types:
    """Factory of type descriptions with PyFlink's method names."""

    STRING = staticmethod(_basic("STRING", str))
    BYTE = staticmethod(_basic("BYTE", int))
    BOOLEAN = staticmethod(_basic("BOOLEAN", bool))
    SHORT = staticmethod(_basic("SHORT", int))
    INT = staticmethod(_basic("INT", int))
    LONG = staticmethod(_basic("LONG", int))
    FLOAT = staticmethod(_basic("FLOAT", float))
    DOUBLE = staticmethod(_basic("DOUBLE", float))
    CHAR = staticmethod(_basic("CHAR", str))
    BIG_INT = staticmethod(_basic("BIG_INT", int))
    BIG_DEC = staticmethod(_basic("BIG_DEC", object))
    SQL_DATE = staticmethod(_basic("SQL_DATE", object))
    SQL_TIME = staticmethod(_basic("SQL_TIME", object))
    SQL_TIMESTAMP = staticmethod(_basic("SQL_TIMESTAMP", object))
    LOCAL_DATE = staticmethod(_basic("LOCAL_DATE", object))
    LOCAL_TIME = staticmethod(_basic("LOCAL_TIME", object))
    LOCAL_DATE_TIME = staticmethod(_basic("LOCAL_DATE_TIME", object))
    INSTANT = staticmethod(_basic("INSTANT", object))
    PRIMITIVE_ARRAY = staticmethod(lambda element_type: ListTypeInfo(element_type))
    BASIC_ARRAY = staticmethod(lambda element_type: ListTypeInfo(element_type))
    OBJECT_ARRAY = staticmethod(lambda element_type: ListTypeInfo(element_type))
    PICKLED_BYTE_ARRAY = staticmethod(lambda: PickledBytesTypeInfo())

    @staticmethod
    def ROW(field_types: List[TypeInformation]) -> RowTypeInfo:
        return RowTypeInfo(field_types)

    @staticmethod
    def ROW_NAMED(field_names: List[str], field_types: List[TypeInformation]) -> RowTypeInfo:
        return RowTypeInfo(field_types, field_names)

    @staticmethod
    def TUPLE(field_types: List[TypeInformation]) -> TupleTypeInfo:
        return TupleTypeInfo(field_types)

    @staticmethod
    def LIST(element_type_info: TypeInformation) -> ListTypeInfo:
        return ListTypeInfo(element_type_info)

    @staticmethod
    def MAP(key_type_info: TypeInformation, value_type_info: TypeInformation) -> MapTypeInfo:
        return MapTypeInfo(key_type_info, value_type_info)
