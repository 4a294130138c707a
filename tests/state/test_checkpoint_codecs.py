"""The value encodings of snapshot files: msgpack with extension types for untyped values
(object_codec), the namespace struct (namespaces) and declared types as Arrow columns
(arrow_types)."""

import datetime
import decimal
import enum

import msgpack
import pyarrow as pa
import pytest

from rill.common.row import Row, RowKind
from rill.common.type_conversion import TypeValueError
from rill.common.typeinfo import Types
from rill.operators.windowing.windows import CountWindow, GlobalWindow, TimeWindow
from rill.state.api import VOID_NAMESPACE
from rill.state.checkpoint.arrow_types import column_codec
from rill.state.checkpoint.namespaces import decode_namespaces, encode_namespaces, register_namespace_type
from rill.state.checkpoint.object_codec import (
    EXT_BIG_INT,
    EXT_PICKLED,
    EXT_TUPLE,
    decode_object,
    decode_object_column,
    decode_objects,
    encode_object,
    encode_objects,
)


class Color(enum.IntEnum):
    RED = 1


VALUES = [None, True, False, 0, -1, 2 ** 63 - 1, -(2 ** 63), 2 ** 64 - 1, 2 ** 64, -(2 ** 100), 1.5, -0.0,
          "", "ünï", b"\x00\xff", [], (), [1, (2, [3, (4,)])], ((), []), {"a": (1, 2)}, {(1, "x"): [None]},
          {1: {2: (3,)}}, Color.RED, TimeWindow(1, 2), Row(a=1), {1, 2}, datetime.date(2024, 1, 1),
          decimal.Decimal("1.10")]


@pytest.mark.parametrize("value", VALUES, ids=[repr(v)[:30] for v in VALUES])
def test_untyped_values_round_trip_with_their_exact_types(value):
    back = decode_object(encode_object(value))
    assert back == value and type(back) is type(value)


def test_extension_types_are_the_documented_ones():
    assert msgpack.unpackb(encode_object((1, 2)), raw=False) == msgpack.ExtType(EXT_TUPLE, msgpack.packb([1, 2]))
    assert msgpack.unpackb(encode_object(2 ** 64), raw=False) == msgpack.ExtType(EXT_BIG_INT, b"18446744073709551616")
    assert msgpack.unpackb(encode_object(Color.RED), raw=False).code == EXT_PICKLED
    assert msgpack.unpackb(encode_object([1, "a"]), raw=False) == [1, "a"]  # plain msgpack stays plain
    assert encode_objects([(1,), "x"]) == [encode_object((1,)), encode_object("x")]


@pytest.mark.parametrize("length", [0, 1, 2, 3, 4, 6, 8, 14, 15, 16, 17, 250, 255, 256, 65_535, 65_536, 70_000])
def test_the_batch_encoding_of_tuples_is_the_packers_byte_for_byte(length):
    # encode_objects writes tuple headers itself: every header size msgpack can choose
    values = [("x" * length,), ("x" * length, 1, (2, ["y"])), (), ((1,),)]
    assert encode_objects(values) == [encode_object(v) for v in values]
    assert [decode_object(b) for b in encode_objects(values)] == values


def test_a_column_decodes_in_one_pass_as_value_by_value():
    encoded = pa.array(encode_objects(VALUES * 3), pa.binary())
    assert decode_object_column(encoded) == decode_objects(encoded.to_pylist()) == VALUES * 3
    assert [type(v) for v in decode_object_column(encoded)] == [type(v) for v in VALUES * 3]
    sliced = encoded.slice(5, 20)  # an offset into the data buffer
    assert decode_object_column(sliced) == (VALUES * 3)[5:25]
    chunked = pa.chunked_array([encoded.slice(0, 7), encoded.slice(7)])
    assert decode_object_column(chunked) == VALUES * 3
    assert decode_object_column(pa.array([], pa.binary())) == []


def test_a_column_with_a_bad_value_is_refused_as_that_value_is():
    good = encode_object((1, 2))
    for bad, error in [(b"\x92\x01", "incomplete input"),                           # truncated
                       (good + b"\x01", "Not a msgpack-encoded snapshot value"),   # one too many
                       (msgpack.packb(msgpack.ExtType(9, b"")), "Unknown msgpack extension type 9")]:
        with pytest.raises(ValueError, match=error):
            decode_object_column(pa.array([good, bad, good], pa.binary()))


def test_unknown_extension_and_garbage_are_refused():
    with pytest.raises(ValueError, match="Unknown msgpack extension type 9"):
        decode_object(msgpack.packb(msgpack.ExtType(9, b"")))
    with pytest.raises(ValueError):
        decode_object(b"\x92\x01")


def test_namespaces_are_structs_with_window_fields_and_decode_exactly():
    namespaces = [VOID_NAMESPACE, TimeWindow(-5, 10), GlobalWindow(), CountWindow(7), ("user", 1), "s"]
    column = encode_namespaces(namespaces)
    assert column.to_pylist()[:4] == [
        {"type": "VoidNamespace", "start": None, "end": None, "id": None, "value": None},
        {"type": "TimeWindow", "start": -5, "end": 10, "id": None, "value": None},
        {"type": "GlobalWindow", "start": None, "end": None, "id": None, "value": None},
        {"type": "CountWindow", "start": None, "end": None, "id": 7, "value": None}]
    assert column.to_pylist()[4]["type"] == "object"
    back = decode_namespaces(column)
    assert back == namespaces and [type(b) for b in back] == [type(n) for n in namespaces]


def test_namespace_registry_refuses_conflicts():
    with pytest.raises(ValueError, match="reserved"):
        register_namespace_type(int, "object", lambda n: {}, lambda f: 0)
    with pytest.raises(ValueError, match="already registered for another class"):
        register_namespace_type(int, "TimeWindow", lambda n: {}, lambda f: 0)
    register_namespace_type(TimeWindow, "TimeWindow", lambda w: {"start": w[0], "end": w[1]},
                            lambda f: TimeWindow(f["start"], f["end"]))  # the same again: no-op
    unknown = pa.array([{"type": "NoSuchWindow", "start": 1, "end": 2, "id": None, "value": None}],
                       encode_namespaces([]).type)
    with pytest.raises(ValueError, match="'NoSuchWindow' is not registered"):
        decode_namespaces(unknown)


@pytest.mark.parametrize("type_info, arrow_type", [
    (Types.BYTE(), pa.int8()), (Types.SHORT(), pa.int16()), (Types.INT(), pa.int32()),
    (Types.LONG(), pa.int64()), (Types.FLOAT(), pa.float32()), (Types.DOUBLE(), pa.float64()),
    (Types.BOOLEAN(), pa.bool_()), (Types.STRING(), pa.string()), (Types.CHAR(), pa.string()),
    (Types.BIG_INT(), pa.string()), (Types.BIG_DEC(), pa.string()), (Types.SQL_DATE(), pa.date32()),
    (Types.SQL_TIME(), pa.int64()), (Types.SQL_TIMESTAMP(), pa.timestamp("us")),
    (Types.LOCAL_DATE_TIME(), pa.timestamp("us")), (Types.INSTANT(), pa.timestamp("us", tz="UTC")),
    (Types.PICKLED_BYTE_ARRAY(), pa.binary()), (None, pa.binary()),
    (Types.LIST(Types.INT()), pa.list_(pa.int32())), (Types.MAP(Types.STRING(), Types.LONG()),
                                                      pa.map_(pa.string(), pa.int64())),
    (Types.TUPLE([Types.INT(), Types.STRING()]), pa.struct([("f0", pa.int32()), ("f1", pa.string())])),
    (Types.ROW_NAMED(["a", "b"], [Types.DOUBLE(), Types.BOOLEAN()]), pa.struct([("a", pa.float64()), ("b", pa.bool_())])),
])
def test_declared_types_map_to_spark_readable_arrow_types(type_info, arrow_type):
    assert column_codec(type_info).arrow_type == arrow_type


def test_values_that_do_not_fit_are_refused_with_the_rule():
    with pytest.raises(TypeValueError, match="has a time zone"):
        column_codec(Types.SQL_TIMESTAMP()).encode([datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc)])
    with pytest.raises(TypeValueError, match="has no time zone"):
        column_codec(Types.INSTANT()).encode([datetime.datetime(2020, 1, 1)])
    with pytest.raises(TypeValueError, match="not a decimal.Decimal"):
        column_codec(Types.BIG_DEC()).encode([1.5])
    with pytest.raises(TypeValueError, match="int32"):
        column_codec(Types.INT()).encode([2 ** 31])
    with pytest.raises(TypeValueError, match="of kind UPDATE_BEFORE"):
        row = Row(1)
        row.set_row_kind(RowKind.UPDATE_BEFORE)
        column_codec(Types.ROW([Types.INT()])).encode([row])
    with pytest.raises(TypeValueError, match="None key"):
        column_codec(Types.MAP(Types.INT(), Types.INT())).encode([{None: 1}])
    with pytest.raises(ValueError, match="no Parquet column type"):
        column_codec(object())


@pytest.mark.parametrize("type_info, value, rule", [
    (Types.LONG(), 1.5, "value 1.5 of type float does not fit the column type int64"),
    (Types.INT(), "7", "value '7' of type str does not fit the column type int32"),
    (Types.DOUBLE(), True, "value True of type bool does not fit the column type double"),
    (Types.STRING(), b"x", "value b'x' of type bytes does not fit the column type string"),
    (Types.BOOLEAN(), 1, "value 1 of type int does not fit the column type bool"),
    (Types.TUPLE([Types.STRING(), Types.LONG()]), ("a", 2.0), "field f1 of a .*value 2.0 of type float"),
    (Types.TUPLE([Types.STRING(), Types.LONG()]), (b"a", 2), "field f0 of a .*value b'a' of type bytes"),
    (Types.LIST(Types.LONG()), [1, 2.5], "value 2.5 of type float does not fit the column type int64"),
    (Types.MAP(Types.STRING(), Types.INT()), {"k": 1.0}, "value 1.0 of type float does not fit"),
    (Types.ROW([Types.LONG()]), Row(0.5), "value 0.5 of type float does not fit"),
])
def test_a_value_arrow_would_silently_change_is_refused(type_info, value, rule):
    """Arrow alone truncates 1.5 into an int64 column and decodes b'x' into a string one, so
    the restored value would differ from the snapshotted one; Flink's serializer refuses it."""
    with pytest.raises(TypeValueError, match=rule):
        column_codec(type_info).encode([None, value] if type_info.__class__.__name__ != "BasicTypeInfo" else [value])


def test_subclasses_of_the_accepted_types_are_taken_as_their_base():
    class Code(str):
        pass

    class Level(enum.IntEnum):
        HIGH = 3
    assert column_codec(Types.STRING()).encode([Code("x")]).to_pylist() == ["x"]
    assert column_codec(Types.LONG()).encode([Level.HIGH]).to_pylist() == [3]
    assert column_codec(Types.DOUBLE()).encode([1, 2.5]).to_pylist() == [1.0, 2.5]


@pytest.mark.parametrize("values", [
    [("a", 1), ("b", -2), None, ("", 2 ** 62)],
    [(f"w{i}", i) for i in range(1000)],
    [None, None],
    [],
])
def test_tuples_of_plain_fields_encode_in_one_call_as_value_by_value(values):
    """The whole-batch path of a TUPLE of fields Arrow converts itself gives the array the
    per-value path gives, and reads back as the same tuples."""
    codec = column_codec(Types.TUPLE([Types.STRING(), Types.LONG()]))
    assert codec.batch_encode is not None
    fast = codec.encode(values)
    slow = pa.array([None if v is None else codec.to_arrow(v) for v in values], codec.arrow_type)
    assert fast.equals(slow)
    assert codec.decode(fast) == values


def test_tuples_the_batch_path_cannot_take_go_value_by_value():
    codec = column_codec(Types.TUPLE([Types.STRING(), Types.LONG()]))
    # a list where a tuple is declared: converted as the per-value path always did
    assert codec.encode([["a", 1], ("b", 2)]).to_pylist() == [{"f0": "a", "f1": 1}, {"f0": "b", "f1": 2}]
    with pytest.raises(TypeValueError, match=r"value \('a',\) is not a .* of 2 fields"):
        codec.encode([("a", 1), ("a",)])
