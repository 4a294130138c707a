"""``Row``: a record of positional fields with optional names (PyFlink's ``pyflink.common.Row``)."""

from __future__ import annotations

import enum
from typing import Any, Dict, List, Optional

__all__ = ["Row", "RowKind"]


class RowKind(enum.Enum):
    """The change a row encodes (Flink's ``RowKind``), printed as its short string."""

    INSERT = "+I"
    UPDATE_BEFORE = "-U"
    UPDATE_AFTER = "+U"
    DELETE = "-D"


class Row:
    """``Row(1, "a")`` or ``Row(id=1, name="a")``; fields by index, by name (``row.name``,
    ``row["name"]``); equal to another Row with the same kind and values; hashable, so it can
    be a key.

    Also a named-row factory as PyFlink: ``Person = Row("name", "age"); Person("a", 3)``.
    """

    __slots__ = ("_values", "_fields", "_kind")
    _rill_row = True  # marks Row for the stable key hash

    def __init__(self, *args: Any, **kwargs: Any):
        if args and kwargs:
            raise ValueError("Row takes either positional or keyword arguments, not both")
        if kwargs:
            self._fields: Optional[List[str]] = list(kwargs)
            self._values = list(kwargs.values())
        else:
            self._fields = None
            self._values = list(args)
        self._kind = RowKind.INSERT

    # named-row factory: Row("name", "age")("a", 3)
    def __call__(self, *args: Any) -> "Row":
        if not all(isinstance(v, str) for v in self._values):
            raise TypeError("only a Row of field names can create rows")
        if len(args) != len(self._values):
            raise ValueError(f"expected {len(self._values)} values, got {len(args)}")
        return Row(**dict(zip(self._values, args)))

    def as_dict(self, recursive: bool = False) -> Dict[str, Any]:
        if self._fields is None:
            raise TypeError("Cannot convert a Row without field names to a dict")
        if not recursive:
            return dict(zip(self._fields, self._values))
        return {k: v.as_dict(True) if isinstance(v, Row) else v for k, v in zip(self._fields, self._values)}

    def get_fields_by_names(self, names: List[str]) -> List[Any]:
        return [self[n] for n in names]

    def set_field_names(self, field_names: List[str]) -> None:
        if len(field_names) != len(self._values):
            raise ValueError(f"Row has {len(self._values)} fields, got {len(field_names)} names")
        self._fields = list(field_names)

    def get_row_kind(self) -> RowKind:
        return self._kind

    def set_row_kind(self, row_kind: RowKind) -> None:
        self._kind = row_kind

    def _index(self, name: str) -> int:
        if self._fields is None or name not in self._fields:
            raise KeyError(name)
        return self._fields.index(name)

    def __getitem__(self, item):
        if isinstance(item, str):
            return self._values[self._index(item)]
        if isinstance(item, slice):
            return Row(*self._values[item])
        return self._values[item]

    def __setitem__(self, key, value):
        if isinstance(key, str):
            key = self._index(key)
        self._values[key] = value

    def __getattr__(self, item: str):
        if item.startswith("_"):
            raise AttributeError(item)
        try:
            return self._values[self._index(item)]
        except KeyError:
            raise AttributeError(item) from None

    def __len__(self) -> int:
        return len(self._values)

    def __iter__(self):
        return iter(self._values)

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, Row)
            and self._kind == other._kind
            and self._values == other._values
            and (self._fields is None or other._fields is None or self._fields == other._fields)
        )

    def __hash__(self) -> int:
        return hash(tuple(self._values))

    def __reduce__(self):
        return (_make_row, (self._values, self._fields, self._kind.name))

    def __repr__(self) -> str:
        if self._fields is not None:
            return "Row(" + ", ".join(f"{k}={v!r}" for k, v in zip(self._fields, self._values)) + ")"
        return "<Row(" + ", ".join(map(repr, self._values)) + ")>"

    def __str__(self) -> str:
        # Java's Row.toString, which PyFlink's print() shows: +I[1, a]
        return f"{self._kind.value}[" + ", ".join(map(_java_str, self._values)) + "]"


def _java_str(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _make_row(values, fields, kind_name) -> Row:
    r = Row(*values)
    r._fields = fields
    r._kind = RowKind[kind_name]
    return r
