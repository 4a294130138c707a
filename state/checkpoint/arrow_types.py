"""Declared types (``rill.common.typeinfo.Types``) as Arrow / Parquet column types that Spark
reads with its default settings, and the conversions of Python values to and from them.

=================================  ===================================  =========================
Rill / PyFlink type                Arrow (Parquet)                      Spark reads
=================================  ===================================  =========================
BYTE, SHORT, INT, LONG             int8, int16, int32, int64            tinyint .. bigint
FLOAT / DOUBLE                     float32 / float64                    float / double
BOOLEAN                            bool                                 boolean
STRING, CHAR                       string                               string
BIG_INT, BIG_DEC                   string (``str(v)``: exact at any     string (``CAST`` to
                                   size and scale)                      decimal as needed)
SQL_DATE, LOCAL_DATE               date32                               date
SQL_TIME, LOCAL_TIME               int64, µs since midnight (Spark      bigint
                                   refuses Parquet time types)
SQL_TIMESTAMP, LOCAL_DATE_TIME     timestamp[us] without zone (naive    timestamp_ntz
                                   ``datetime``; Flink's TIMESTAMP)
INSTANT                            timestamp[us, UTC] (aware            timestamp
                                   ``datetime``; Flink's TIMESTAMP_LTZ)
LIST, BASIC/PRIMITIVE/OBJECT_ARRAY list<element>                        array
MAP                                map<key, value>                      map
TUPLE                              struct<f0, f1, ...> (read: tuple)    struct
ROW, ROW_NAMED                     struct<field names> (read: Row)      struct
PICKLED_BYTE_ARRAY                 binary, ``cloudpickle.dumps``        binary
no type (``None``)                 binary, :mod:`.object_codec`         binary
=================================  ===================================  =========================

Reading gives back the value written: a ``FLOAT`` is a float32 (as the typed state already
rounded it), a ROW value comes back as a :class:`~rill.common.row.Row` (as Flink's
``RowSerializer`` gives it; a ``RowKind`` other than INSERT is refused when written), a
TUPLE as a tuple, a MAP as a dict.

Conversions are built once per column (:func:`column_codec`) and return ``None`` hooks where
Arrow's own conversion is already exact, so a column of ints or strings costs one
``pa.array`` call.
"""

from __future__ import annotations

import datetime
import decimal
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Callable, List, Optional, Sequence, Tuple

import cloudpickle
import pyarrow as pa

from rill.common.row import Row, RowKind
from rill.common.type_conversion import TypeValueError
from rill.common.typeinfo import (
    BasicTypeInfo,
    ListTypeInfo,
    MapTypeInfo,
    PickledBytesTypeInfo,
    RowTypeInfo,
    TupleTypeInfo,
)
from rill.state.checkpoint.object_codec import (
    decode_object,
    decode_object_column,
    decode_objects,
    encode_object,
    encode_objects,
)

__all__ = ["ColumnCodec", "column_codec", "ttl_codec", "list_codec", "map_codec", "check_types", "nested_hook"]

Hook = Optional[Callable[[Any], Any]]


@dataclass(frozen=True)
class ColumnCodec:
    """How one declared type is written and read.

    :ivar arrow_type: the column's Arrow type.
    :ivar to_arrow: Python value -> what ``pa.array(..., arrow_type)`` takes (``None``: as is).
    :ivar from_arrow: what ``Array.to_pylist()`` gives -> the Python value (``None``: as is).
    """

    arrow_type: pa.DataType
    to_arrow: Hook = None
    from_arrow: Hook = None
    #: the top-level column's conversion of a whole batch, when one call per batch is cheaper
    #: than ``to_arrow`` / ``from_arrow`` per value (untyped values: one msgpack packer)
    batch_to_arrow: Optional[Callable[[Sequence[Any]], List[Any]]] = None
    batch_from_arrow: Optional[Callable[[Sequence[Any]], List[Any]]] = None
    #: the top-level column's decoding straight from the Arrow array, skipping ``to_pylist``
    #: (untyped values: one msgpack stream over the column's data buffer)
    column_from_arrow: Optional[Callable[[Any], List[Any]]] = None
    #: the Python types a column without ``to_arrow`` takes (subclasses too, ``bool`` only
    #: where named): Arrow's own conversion would truncate a float in an integer column and
    #: decode bytes into a string column, so the value would come back changed on restore,
    #: where Flink's serializer refuses it. ``None``: Arrow's conversion is the check.
    accepts: Optional[Tuple[type, ...]] = None
    #: the top-level column's whole-batch encoding, or ``None`` from it when the batch needs
    #: the per-value path (tuples of plain fields: one ``pa.array`` call, no dict per value)
    batch_encode: Optional[Callable[[Sequence[Any]], Optional[pa.Array]]] = None

    def encode(self, values: Sequence[Any]) -> pa.Array:
        """The Arrow array of ``values`` (``None`` elements are nulls, except in an untyped
        column, where ``None`` is a value like any other).

        :raises TypeValueError: if a value does not fit the type.
        """
        hook = self.to_arrow
        try:
            if self.batch_encode is not None:
                encoded = self.batch_encode(values)
                if encoded is not None:
                    return encoded
            if hook is None and self.accepts is not None:
                check_types(self, values)
            if self.batch_to_arrow is not None:
                return pa.array(self.batch_to_arrow(values), self.arrow_type)
            return pa.array(values if hook is None else [_or_none(hook, v) for v in values],
                            self.arrow_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError) as e:
            raise TypeValueError(f"a value does not fit the column type {self.arrow_type}: {e}") from e

    def decode(self, array: Any) -> List[Any]:
        """The Python values of ``array`` (an Arrow array or chunked array)."""
        if self.column_from_arrow is not None:
            return self.column_from_arrow(array)
        values = array.to_pylist()
        if self.batch_from_arrow is not None and array.null_count == 0:
            return self.batch_from_arrow(values)
        hook = self.from_arrow
        if hook is None:
            return values
        if array.null_count == 0:
            return [hook(v) for v in values]
        return [_or_none(hook, v) for v in values]


def _or_none(hook: Callable[[Any], Any], value: Any) -> Any:
    return None if value is None else hook(value)


_NONE_TYPE = type(None)


def _fits(codec: ColumnCodec, cls: type) -> bool:
    accepts = codec.accepts
    return cls in accepts or (issubclass(cls, accepts) and (cls is not bool or bool in accepts))


def check_types(codec: ColumnCodec, values: Sequence[Any]) -> None:
    """Check that every one of ``values`` is ``None`` or of a type ``codec.accepts``: one
    C-level pass over the values' types, then a search only for a type that does not fit.

    :raises TypeValueError: naming the first value that does not fit, its type and the column type.
    """
    accepts = codec.accepts
    if accepts is None:
        return
    types = set(map(type, values))
    types.discard(_NONE_TYPE)
    for cls in types:
        if not _fits(codec, cls):
            value = next(v for v in values if type(v) is cls)
            raise TypeValueError(f"value {value!r} of type {cls.__name__} does not fit the column type "
                                 f"{codec.arrow_type} (it takes {' or '.join(t.__name__ for t in accepts)})")


def nested_hook(codec: ColumnCodec) -> Callable[[Any], Any]:
    """What a value inside a list, map or struct goes through before ``pa.array``: the
    codec's ``to_arrow``, else its type check (:attr:`ColumnCodec.accepts`), else nothing."""
    if codec.to_arrow is not None:
        return codec.to_arrow
    if codec.accepts is None:
        return _same

    def check(value: Any) -> Any:
        if not _fits(codec, type(value)):
            check_types(codec, (value,))
        return value
    return check


def _time_to_us(value: datetime.time) -> int:
    if not isinstance(value, datetime.time):
        raise TypeValueError(f"value {value!r} is not a datetime.time")
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond


def _us_to_time(us: int) -> datetime.time:
    seconds, micro = divmod(us, 1_000_000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return datetime.time(hour, minute, second, micro)


def _naive(value: Any) -> Any:
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        raise TypeValueError(f"value {value!r} has a time zone: a wall-clock timestamp "
                             f"(SQL_TIMESTAMP, LOCAL_DATE_TIME) is a naive datetime; use INSTANT")
    return value


def _aware(value: Any) -> Any:
    if isinstance(value, datetime.datetime) and value.tzinfo is None:
        raise TypeValueError(f"value {value!r} has no time zone: an INSTANT is an aware datetime")
    return value


def _big_int(value: Any) -> str:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeValueError(f"value {value!r} is not an int (BIG_INT)")
    return str(value)


def _big_dec(value: Any) -> str:
    if not isinstance(value, decimal.Decimal):
        raise TypeValueError(f"value {value!r} is not a decimal.Decimal (BIG_DEC)")
    return str(value)


_BASIC = {
    "BYTE": ColumnCodec(pa.int8(), accepts=(int,)),
    "SHORT": ColumnCodec(pa.int16(), accepts=(int,)),
    "INT": ColumnCodec(pa.int32(), accepts=(int,)),
    "LONG": ColumnCodec(pa.int64(), accepts=(int,)),
    "FLOAT": ColumnCodec(pa.float32(), accepts=(float, int)),
    "DOUBLE": ColumnCodec(pa.float64(), accepts=(float, int)),
    "BOOLEAN": ColumnCodec(pa.bool_(), accepts=(bool,)),
    "STRING": ColumnCodec(pa.string(), accepts=(str,)),
    "CHAR": ColumnCodec(pa.string(), accepts=(str,)),
    "BIG_INT": ColumnCodec(pa.string(), _big_int, int),
    "BIG_DEC": ColumnCodec(pa.string(), _big_dec, decimal.Decimal),
    "SQL_DATE": ColumnCodec(pa.date32()),
    "LOCAL_DATE": ColumnCodec(pa.date32()),
    "SQL_TIME": ColumnCodec(pa.int64(), _time_to_us, _us_to_time),
    "LOCAL_TIME": ColumnCodec(pa.int64(), _time_to_us, _us_to_time),
    "SQL_TIMESTAMP": ColumnCodec(pa.timestamp("us"), _naive),
    "LOCAL_DATE_TIME": ColumnCodec(pa.timestamp("us"), _naive),
    "INSTANT": ColumnCodec(pa.timestamp("us", tz="UTC"), _aware),
}

#: The column of untyped values.
UNTYPED = ColumnCodec(pa.binary(), encode_object, decode_object, encode_objects, decode_objects,
                      decode_object_column)
_PICKLED = ColumnCodec(pa.binary(), cloudpickle.dumps, cloudpickle.loads)


def column_codec(type_info: Any) -> ColumnCodec:
    """The codec of values of ``type_info`` (``None``: untyped, msgpack binary).

    :raises ValueError: for a type with no Arrow mapping, or a ROW type whose field names
        differ only in case (Spark refuses such structs).
    """
    if type_info is None:
        return UNTYPED
    if isinstance(type_info, BasicTypeInfo):
        codec = _BASIC.get(type_info.name)
        if codec is None:
            raise ValueError(f"Type {type_info!r} has no Parquet column type")
        return codec
    if isinstance(type_info, PickledBytesTypeInfo):
        return _PICKLED
    if isinstance(type_info, ListTypeInfo):
        return list_codec(column_codec(type_info.element_type))
    if isinstance(type_info, MapTypeInfo):
        return map_codec(column_codec(type_info.key_type), column_codec(type_info.value_type))
    if isinstance(type_info, TupleTypeInfo):
        return _struct_codec([f"f{i}" for i in range(len(type_info.field_types))],
                             type_info.field_types, as_row=False, type_info=type_info)
    if isinstance(type_info, RowTypeInfo):
        return _struct_codec(type_info.field_names, type_info.field_types, as_row=True,
                             type_info=type_info)
    raise ValueError(f"Type {type_info!r} ({type(type_info).__name__}) has no Parquet column type")


def list_codec(element: ColumnCodec) -> ColumnCodec:
    """A ``list<element>`` column whose Python values are lists."""
    to, back = nested_hook(element), element.from_arrow
    return ColumnCodec(
        pa.list_(element.arrow_type),
        None if to is _same else (lambda v: [_or_none(to, e) for e in v]),
        None if back is None else (lambda v: [_or_none(back, e) for e in v]))


def map_codec(key: ColumnCodec, value: ColumnCodec) -> ColumnCodec:
    """A ``map<key, value>`` column whose Python values are dicts."""
    to_k, to_v = nested_hook(key), nested_hook(value)
    back_k, back_v = key.from_arrow or _same, value.from_arrow or _same

    def to_arrow(d: Any) -> Any:
        if not isinstance(d, dict):
            raise TypeValueError(f"value {d!r} is not a dict (MAP)")
        if None in d:
            raise TypeValueError(f"map {d!r} has a None key (Parquet map keys are not null)")
        return [(to_k(k), _or_none(to_v, v)) for k, v in d.items()]

    return ColumnCodec(pa.map_(key.arrow_type, value.arrow_type), to_arrow,
                       lambda pairs: {back_k(k): _or_none(back_v, v) for k, v in pairs})


def _same(value: Any) -> Any:
    return value


def _struct_codec(names: Sequence[str], types: Sequence[Any], as_row: bool, type_info: Any) -> ColumnCodec:
    lowered = [n.lower() for n in names]
    if len(set(lowered)) != len(lowered):
        raise ValueError(f"Type {type_info!r} has field names that differ only in case; Spark "
                         f"cannot read such a struct")
    fields = [column_codec(t) for t in types]
    names = list(names)
    arity = len(names)
    pairs = list(zip(names, fields))
    hooks = [nested_hook(c) for c in fields]

    def to_arrow(value: Any) -> Any:
        if as_row and isinstance(value, Row) and value.get_row_kind() is not RowKind.INSERT:
            raise TypeValueError(f"row {value!r} is of kind {value.get_row_kind().name}: typed "
                                 f"snapshots store INSERT rows only")
        if not isinstance(value, (tuple, list, Row)) or len(value) != arity:
            raise TypeValueError(f"value {value!r} is not a {type_info!r} of {arity} fields")
        return {n: _or_none(h, v) for n, h, v in zip(names, hooks, value)}

    def from_arrow(value: Any) -> Any:
        items = [_or_none(c.from_arrow or _same, value[n]) for n, c in pairs]
        if as_row:
            return Row(**dict(zip(names, items)))
        return tuple(items)

    arrow_type = pa.struct([pa.field(n, c.arrow_type) for n, c in pairs])
    plain = not as_row and all(c.to_arrow is None for c in fields)

    def encode_tuples(values: Sequence[Any]) -> Optional[pa.Array]:
        # a TUPLE of fields Arrow converts itself (ints, strings...), given as plain tuples:
        # types and arity checked per field column in C, then one pa.array call (Arrow reads
        # the tuples as structs); anything else goes through to_arrow per value
        types = set(map(type, values))
        if not types <= {tuple, _NONE_TYPE}:
            return None
        present = [v for v in values if v is not None] if _NONE_TYPE in types else values
        if present:
            if set(map(len, present)) != {arity}:
                return None
            for i, (name, codec) in enumerate(pairs):
                if codec.accepts is None:
                    continue
                try:
                    check_types(codec, list(map(itemgetter(i), present)))
                except TypeValueError as e:
                    raise TypeValueError(f"field {name} of a {type_info!r}: {e}") from e
        return pa.array(values, arrow_type)

    return ColumnCodec(arrow_type, to_arrow, from_arrow, batch_encode=encode_tuples if plain else None)


def ttl_codec(user_value: ColumnCodec) -> ColumnCodec:
    """The stored value of a TTL state, ``(user_value, last_access_ms)`` (Flink's ``TtlValue``):
    ``struct<user_value, last_access_timestamp_ms: bigint>``, read back as that tuple."""
    to = nested_hook(user_value)
    back = user_value.from_arrow or _same
    return ColumnCodec(
        pa.struct([pa.field("user_value", user_value.arrow_type),
                   pa.field("last_access_timestamp_ms", pa.int64(), nullable=False)]),
        lambda tv: {"user_value": _or_none(to, tv[0]), "last_access_timestamp_ms": tv[1]},
        lambda d: (_or_none(back, d["user_value"]), d["last_access_timestamp_ms"]))
