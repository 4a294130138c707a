"""What a declared type does to a value where Flink serializes it (``rill.common.type_conversion``).

In Flink a declared ``TypeInformation`` picks the serializer, and a value that crosses a
serialization point comes back as that type says: ``Types.FLOAT()`` is Java's 32-bit ``float``,
so ``110.1`` comes back as ``110.0999984741211``; ``Types.INT()`` is a 32-bit ``int``, and a
value outside its range fails. PyFlink serializes where a value leaves Python: keyed state,
the network, a Java source or sink (``from_collection(..., type_info)``, ``print()``).

Rill keeps Python objects everywhere and applies a declared type only at those points, through
the converter :func:`value_converter` builds once per operator or state:

- ``FLOAT``: rounded to the nearest float32 (``struct`` ``'f'``; beyond float32's range it
  becomes ``inf``, as Java's ``(float)`` cast); ints are accepted and become floats.
- ``BYTE``, ``SHORT``, ``INT``, ``LONG``: the value must be an ``int`` in the type's range.
- ``CHAR``: the value must be a ``str`` of length 1 (Java's ``char``).
- ``BIG_DEC``: a ``decimal.Decimal``; ``SQL_DATE``: a ``datetime.date`` (a ``datetime`` becomes
  its date, as PyFlink's date coder keeps only the day); ``SQL_TIME``: a ``datetime.time``,
  cut to milliseconds (PyFlink's time coder keeps milliseconds of the day, ``java.sql.Time``);
  ``SQL_TIMESTAMP``: a ``datetime.datetime``.
- ``TUPLE``, ``ROW`` / ``ROW_NAMED``, ``LIST`` / arrays, ``MAP``: their fields, elements, keys and
  values, by the same rules.
- Every other type (``STRING``, ``DOUBLE``, ``BOOLEAN``, ``PICKLED_BYTE_ARRAY``...) passes the
  value unchanged. ``None`` passes unchanged (a nullable field).

When no field of a type changes or checks anything, :func:`value_converter` returns ``None`` and
the caller adds no per-record work at all. :func:`batch_converter` converts a whole batch, and
for the common case of types that only *check* (integers in range, tuples of such fields and
unchecked ones) it checks the batch column-wise in C and hands the same list on.
"""

from __future__ import annotations

import datetime
import decimal
import struct
from operator import itemgetter
from typing import Any, Callable, List, Optional

from rill.common.row import Row
from rill.common.typeinfo import BasicTypeInfo, ListTypeInfo, MapTypeInfo, RowTypeInfo, TupleTypeInfo

__all__ = ["TypeValueError", "value_converter", "batch_converter", "INTEGER_RANGES"]

Converter = Callable[[Any], Any]

#: Java's ranges of Flink's integer types (inclusive).
INTEGER_RANGES = {
    "BYTE": (-(1 << 7), (1 << 7) - 1),
    "SHORT": (-(1 << 15), (1 << 15) - 1),
    "INT": (-(1 << 31), (1 << 31) - 1),
    "LONG": (-(1 << 63), (1 << 63) - 1),
}

_F32 = struct.Struct("<f")


class TypeValueError(ValueError):
    """A value does not fit the type declared for it (Flink fails such a record when it
    serializes it). The message names where (operator or state), the value and the rule."""


def value_converter(type_info: Any, where: str) -> Optional[Converter]:
    """The function a declared type applies to each value at a serialization point, or ``None``
    when the type leaves every value unchanged (then the caller does nothing per record).

    :param type_info: a ``TypeInformation`` of :mod:`rill.common.typeinfo`, or ``None``.
    :param where: what the value belongs to, for errors (``"operator 'Map' (output_type)"``).
    :returns: ``convert(value) -> value`` raising :class:`TypeValueError` for a value that
        does not fit, or ``None``.
    """
    if type_info is None:
        return None
    if isinstance(type_info, BasicTypeInfo):
        return _basic(type_info.name, where)
    if isinstance(type_info, TupleTypeInfo):
        return _tuple(type_info, where)
    if isinstance(type_info, RowTypeInfo):
        return _row(type_info, where)
    if isinstance(type_info, ListTypeInfo):
        element = value_converter(type_info.element_type, where)
        if element is None:
            return None
        return lambda value: value if value is None else [element(v) for v in value]
    if isinstance(type_info, MapTypeInfo):
        key = value_converter(type_info.key_type, where) or _identity
        val = value_converter(type_info.value_type, where) or _identity
        if key is _identity and val is _identity:
            return None
        return lambda value: value if value is None else {key(k): val(v) for k, v in value.items()}
    return None


def _identity(value: Any) -> Any:
    return value


def _basic(name: str, where: str) -> Optional[Converter]:
    if name == "FLOAT":
        pack, unpack = _F32.pack, _F32.unpack

        def to_float32(value: Any) -> Any:
            if value is None:
                return None
            if not isinstance(value, (float, int)):
                raise TypeValueError(f"{where}: value {value!r} of type {type(value).__name__} "
                                     f"is not a FLOAT (a float or int)")
            try:
                return unpack(pack(value))[0]
            except OverflowError:  # beyond float32's range: Java's (float) cast gives infinity
                return float("inf") if value > 0 else float("-inf")
        return to_float32
    if name == "CHAR":
        def check_char(value: Any) -> Any:
            if value is None or (isinstance(value, str) and len(value) == 1):
                return value
            raise TypeValueError(f"{where}: value {value!r} is not a CHAR (a str of length 1)")
        return check_char
    if name in _TEMPORAL:
        return _temporal(name, where)
    bounds = INTEGER_RANGES.get(name)
    if bounds is None:
        return None
    low, high = bounds

    def check_range(value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeValueError(f"{where}: value {value!r} of type {type(value).__name__} is not "
                                 f"an integer, so it is not a {name}")
        if value < low or value > high:
            raise TypeValueError(f"{where}: value {value!r} does not fit {name} "
                                 f"(range {low}..{high})")
        return value
    return check_range


_TEMPORAL = {
    "BIG_DEC": (decimal.Decimal, "a decimal.Decimal"),
    "SQL_DATE": (datetime.date, "a datetime.date"),
    "SQL_TIME": (datetime.time, "a datetime.time"),
    "SQL_TIMESTAMP": (datetime.datetime, "a datetime.datetime"),
}


def _temporal(name: str, where: str) -> Converter:
    python_type, what = _TEMPORAL[name]

    def convert(value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, python_type):
            raise TypeValueError(f"{where}: value {value!r} of type {type(value).__name__} is not "
                                 f"a {name} ({what})")
        if name == "SQL_DATE" and isinstance(value, datetime.datetime):
            return value.date()
        if name == "SQL_TIME" and value.microsecond % 1000:
            return value.replace(microsecond=value.microsecond - value.microsecond % 1000)
        return value
    return convert


def _fields(field_types, where: str):
    converters = [value_converter(t, f"{where}, field {i}") for i, t in enumerate(field_types)]
    if all(c is None for c in converters):
        return None
    return [c or _identity for c in converters]


def _check_arity(value: Any, arity: int, type_info: Any, where: str) -> None:
    """:raises TypeValueError: if ``value`` has not the ``arity`` fields its tuple/row type has."""
    if len(value) != arity:
        raise TypeValueError(f"{where}: value {value!r} has {len(value)} fields, its type "
                             f"{type_info!r} has {arity}")


def _tuple(type_info: TupleTypeInfo, where: str) -> Optional[Converter]:
    converters = _fields(type_info.field_types, where)
    if converters is None:
        return None
    arity = len(converters)

    def convert(value: Any) -> Any:
        if value is None:
            return None
        _check_arity(value, arity, type_info, where)
        return tuple(c(v) for c, v in zip(converters, value))
    return convert


def _row(type_info: RowTypeInfo, where: str) -> Optional[Converter]:
    converters = _fields(type_info.field_types, where)
    if converters is None:
        return None
    arity = len(converters)

    def convert(value: Any) -> Any:
        if value is None:
            return None
        _check_arity(value, arity, type_info, where)
        values = [c(v) for c, v in zip(converters, value)]
        if not isinstance(value, Row):
            return tuple(values)
        row = Row(*values)
        if value._fields is not None:
            row.set_field_names(value._fields)
        row.set_row_kind(value.get_row_kind())
        return row
    return convert


BatchConverter = Callable[[List[Any]], List[Any]]


def batch_converter(type_info: Any, where: str) -> Optional[BatchConverter]:
    """:func:`value_converter` for a whole batch: ``convert(values) -> values``, or ``None``
    when the type leaves every value unchanged.

    For an integer type, and a TUPLE whose fields are integers or unchecked types, a batch
    whose values all fit is recognised column-wise in C (the values' types, tuple arities and
    each integer column's minimum and maximum) and returned as it is, unconverted; any other
    batch, and every other type, goes value by value through :func:`value_converter`, which
    also raises the error that names the first value that does not fit.

    :raises TypeValueError: from ``convert`` for a value that does not fit.
    """
    convert = value_converter(type_info, where)
    if convert is None:
        return None
    fits = _batch_check(type_info)

    def convert_each(values: List[Any]) -> List[Any]:
        return [convert(v) for v in values]
    if fits is None:
        return convert_each

    def convert_batch(values: List[Any]) -> List[Any]:
        return values if fits(values) else convert_each(values)
    return convert_batch


def _integer_check(name: str) -> Optional[Callable[[List[Any]], bool]]:
    bounds = INTEGER_RANGES.get(name)
    if bounds is None:
        return None
    low, high = bounds

    def fits(column: List[Any]) -> bool:
        # exactly int (not bool, not a subclass that the per-value path would judge): then
        # the range by C-level min / max
        return not column or (set(map(type, column)) == {int} and min(column) >= low and max(column) <= high)
    return fits


def _batch_check(type_info: Any) -> Optional[Callable[[List[Any]], bool]]:
    """``fits(values) -> bool``: every value is one the per-value converter returns unchanged
    (and equal), judged without a Python call per value; ``None`` if the type has no such check."""
    if isinstance(type_info, BasicTypeInfo):
        return _integer_check(type_info.name)
    if not isinstance(type_info, TupleTypeInfo):
        return None
    checks = []
    for i, field_type in enumerate(type_info.field_types):
        if value_converter(field_type, "") is None:
            continue
        check = _integer_check(field_type.name) if isinstance(field_type, BasicTypeInfo) else None
        if check is None:
            return None
        checks.append((itemgetter(i), check))
    arity = len(type_info.field_types)

    def fits(values: List[Any]) -> bool:
        if not values:
            return True
        if set(map(type, values)) != {tuple} or set(map(len, values)) != {arity}:
            return False
        return all(check(list(map(get, values))) for get, check in checks)
    return fits
