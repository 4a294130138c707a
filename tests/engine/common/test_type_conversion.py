"""Flink's semantics of declared types at a serialization point (rill.common.type_conversion)."""

from __future__ import annotations

import datetime
import decimal
import random
import re

import pytest

from rill.common import Row
from rill.common.type_conversion import TypeValueError, batch_converter, value_converter
from rill.common.typeinfo import Types


def test_untyped_and_unchanged_types_have_no_converter():
    for t in (None, Types.STRING(), Types.DOUBLE(), Types.BOOLEAN(), Types.PICKLED_BYTE_ARRAY(),
              Types.TUPLE([Types.STRING(), Types.DOUBLE()]), Types.LIST(Types.STRING()),
              Types.MAP(Types.STRING(), Types.DOUBLE())):
        assert value_converter(t, "x") is None, t


def test_float_is_float32():
    f = value_converter(Types.FLOAT(), "x")
    assert f(110.1) == 110.0999984741211
    assert repr(f(0.1)) == "0.10000000149011612"
    assert f(3) == 3.0 and isinstance(f(3), float)
    assert f(None) is None
    assert f(1e300) == float("inf") and f(-1e300) == float("-inf")
    with pytest.raises(TypeValueError, match=r"^x: value 'a' of type str is not a FLOAT"):
        f("a")


@pytest.mark.parametrize("name,low,high", [("BYTE", -128, 127), ("SHORT", -32768, 32767),
                                           ("INT", -2 ** 31, 2 ** 31 - 1), ("LONG", -2 ** 63, 2 ** 63 - 1)])
def test_integer_ranges(name, low, high):
    f = value_converter(getattr(Types, name)(), "operator 'Map'")
    assert f(low) == low and f(high) == high
    with pytest.raises(TypeValueError, match=rf"^operator 'Map': value {high + 1} does not fit {name} "
                                             rf"\(range {low}..{high}\)$"):
        f(high + 1)
    with pytest.raises(TypeValueError, match=rf"value {low - 1} does not fit {name}"):
        f(low - 1)
    with pytest.raises(TypeValueError, match=rf"value 1.5 of type float is not an integer, so it is not a {name}"):
        f(1.5)


def test_composites_convert_their_fields():
    t = value_converter(Types.TUPLE([Types.STRING(), Types.FLOAT()]), "op")
    assert t(("a", 110.1)) == ("a", 110.0999984741211)
    with pytest.raises(TypeValueError, match=r"op: value \('a',\) has 1 fields, its type .* has 2"):
        t(("a",))
    with pytest.raises(TypeValueError, match=r"^op, field 1: value 300 does not fit BYTE"):
        value_converter(Types.TUPLE([Types.STRING(), Types.BYTE()]), "op")(("a", 300))
    r = value_converter(Types.ROW_NAMED(["k", "v"], [Types.STRING(), Types.FLOAT()]), "op")
    out = r(Row(k="a", v=0.1))
    assert isinstance(out, Row) and out.as_dict() == {"k": "a", "v": 0.10000000149011612}
    assert value_converter(Types.LIST(Types.FLOAT()), "op")([0.1, None]) == [0.10000000149011612, None]
    assert value_converter(Types.MAP(Types.STRING(), Types.FLOAT()), "op")({"a": 0.1}) == {"a": 0.10000000149011612}


def test_char_is_one_character():
    f = value_converter(Types.CHAR(), "op")
    assert f("a") == "a" and f(None) is None
    with pytest.raises(TypeValueError, match=r"^op: value 'ab' is not a CHAR \(a str of length 1\)$"):
        f("ab")


def test_decimal_date_time_timestamp():
    assert value_converter(Types.BIG_DEC(), "op")(decimal.Decimal("1.10")) == decimal.Decimal("1.10")
    with pytest.raises(TypeValueError, match=r"^op: value 1.1 of type float is not a BIG_DEC \(a decimal.Decimal\)$"):
        value_converter(Types.BIG_DEC(), "op")(1.1)
    date = value_converter(Types.SQL_DATE(), "op")
    assert date(datetime.date(2024, 2, 29)) == datetime.date(2024, 2, 29)
    assert date(datetime.datetime(2024, 2, 29, 13, 5)) == datetime.date(2024, 2, 29)
    with pytest.raises(TypeValueError, match=r"value '2024-02-29' of type str is not a SQL_DATE"):
        date("2024-02-29")
    time = value_converter(Types.SQL_TIME(), "op")
    assert time(datetime.time(1, 2, 3, 456789)) == datetime.time(1, 2, 3, 456000)
    stamp = value_converter(Types.SQL_TIMESTAMP(), "op")
    now = datetime.datetime(2024, 2, 29, 1, 2, 3, 456789)
    assert stamp(now) == now
    with pytest.raises(TypeValueError, match=r"is not a SQL_TIMESTAMP \(a datetime.datetime\)"):
        stamp(datetime.date(2024, 2, 29))


_BATCH_TYPES = [
    Types.INT(), Types.LONG(), Types.BYTE(), Types.TUPLE([Types.STRING(), Types.LONG()]),
    Types.TUPLE([Types.INT(), Types.SHORT(), Types.DOUBLE()]), Types.FLOAT(),
    Types.TUPLE([Types.STRING(), Types.FLOAT()]), Types.LIST(Types.INT()),
]


def _sample(rng, type_info):
    """A value of ``type_info``, sometimes one that does not fit or that a converter changes."""
    name = getattr(type_info, "name", None)
    if name in ("INT", "LONG", "BYTE", "SHORT"):
        return rng.choice([rng.randrange(-100, 100), rng.randrange(-2 ** 40, 2 ** 40), 2 ** 31, True, 1.5, None])
    if name in ("FLOAT", "DOUBLE"):
        return rng.choice([0.1, 3, 1e40, None])
    if name == "STRING":
        return rng.choice(["a", "", None])
    if hasattr(type_info, "field_types"):
        value = tuple(_sample(rng, t) for t in type_info.field_types)
        return rng.choice([value] * 8 + [list(value), value[:-1], None])
    return [rng.randrange(10) for _ in range(rng.randrange(3))]


@pytest.mark.parametrize("type_info", _BATCH_TYPES, ids=repr)
def test_a_batch_converts_as_its_values_do_one_by_one(type_info):
    """batch_converter gives what value_converter gives per value, and fails on the first value
    that does not fit with the same error, whether the batch takes the column-wise check or not
    (randomized; the batches are small so that some fit as a whole)."""
    rng = random.Random(16)
    convert = value_converter(type_info, "op")
    convert_batch = batch_converter(type_info, "op")
    fast = 0
    for _ in range(400):
        values = [_sample(rng, type_info) for _ in range(rng.randrange(0, 4))]
        try:
            expected = [convert(v) for v in values]
        except TypeValueError as e:
            with pytest.raises(TypeValueError, match=re.escape(str(e))):
                convert_batch(values)
            continue
        got = convert_batch(values)
        fast += got is values
        assert got == expected and [type(v) for v in got] == [type(v) for v in expected]
    if type_info in _BATCH_TYPES[:5]:
        assert fast > 0, "no batch took the column-wise check"


def test_types_that_change_nothing_have_no_batch_converter():
    assert batch_converter(Types.STRING(), "op") is None
    assert batch_converter(Types.TUPLE([Types.STRING(), Types.DOUBLE()]), "op") is None
