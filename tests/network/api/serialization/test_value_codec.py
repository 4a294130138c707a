"""The value codec: exact round trips of Python values, one msgpack call per batch."""

from __future__ import annotations

import datetime
import decimal
import math
from collections import OrderedDict, namedtuple
from fractions import Fraction
from unittest import mock
from zoneinfo import ZoneInfo

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rill.common.row import Row, RowKind
from rill.network.api.serialization import ValueSerializationError, pack_records, pack_value, unpack_records, unpack_value
from rill.network.api.serialization import value_codec
from rill.network.api.serialization.value_codec import FORMAT_COLUMNS, FORMAT_GENERAL, FORMAT_PICKLE

Pair = namedtuple("Pair", "left right")


class Opaque:
    """A user class: only picklable."""

    def __init__(self, payload) -> None:
        self.payload = payload

    def __eq__(self, other) -> bool:
        return type(other) is Opaque and same(self.payload, other.payload)


def same(a, b) -> bool:
    """Equal *and* of the same types, recursively (tuple is not list, Row keeps names/kind)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, Row):
        return (a.get_row_kind() is b.get_row_kind() and a._fields == b._fields
                and same(list(a), list(b)))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(k1, k2) and same(a[k1], b[k2]) for k1, k2 in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, datetime.datetime):
        return a == b and a.tzinfo == b.tzinfo and a.fold == b.fold and str(a.tzinfo) == str(b.tzinfo)
    if isinstance(a, decimal.Decimal) and a.is_nan():
        return b.is_nan() and str(a) == str(b)
    if isinstance(a, decimal.Decimal):
        return str(a) == str(b)
    return a == b


def round_trip(values, timestamps=None):
    payload = pack_records(values, timestamps)
    out_values, out_timestamps = unpack_records(payload)
    assert same(out_values, list(values)), (values, out_values)
    assert same(out_timestamps, timestamps)
    return payload


# ---------------------------------------------------------------------- strategies

fixed_offsets = st.builds(
    datetime.timezone,
    st.timedeltas(min_value=datetime.timedelta(hours=-23, minutes=-59),
                  max_value=datetime.timedelta(hours=23, minutes=59)),
)
named_offsets = st.builds(datetime.timezone, st.just(datetime.timedelta(hours=1)), st.sampled_from(["CET", "X"]))
timezones = st.none() | fixed_offsets | named_offsets | st.sampled_from(
    [datetime.timezone.utc, ZoneInfo("Europe/Paris"), ZoneInfo("America/New_York")]
)
scalars = (
    st.none() | st.booleans() | st.integers() | st.integers(min_value=-(2**200), max_value=2**200)
    | st.floats() | st.text() | st.binary()
    | st.datetimes(timezones=timezones) | st.dates() | st.decimals()
    | st.builds(Fraction, st.integers(), st.integers(min_value=1))
)
hashable_scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text() | st.binary()
    | st.datetimes(timezones=timezones) | st.dates() | st.decimals(allow_nan=False)
)
hashable = st.recursive(hashable_scalars,
                        lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3), max_leaves=4)


def rows(inner):
    positional = st.lists(inner, max_size=4).map(lambda values: Row(*values))

    def named(values, kind):
        row = Row(**{f"f{i}": v for i, v in enumerate(values)})
        row.set_row_kind(kind)
        return row

    return positional | st.builds(named, st.lists(inner, max_size=4), st.sampled_from(list(RowKind)))


values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(hashable, inner, max_size=4) | rows(inner)
        | st.builds(Pair, inner, inner) | st.sets(hashable, max_size=3) | st.builds(Opaque, inner)
        | st.dictionaries(st.text(max_size=3), inner, max_size=3).map(OrderedDict)
    ),
    max_leaves=12,
)
timestamps_for = lambda n: st.none() | st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1),  # noqa: E731
                                               min_size=n, max_size=n)


@st.composite
def batches(draw):
    records = draw(st.lists(values, max_size=30) | st.lists(
        st.lists(values, min_size=3, max_size=3).map(tuple), max_size=30))  # the columnar shape
    return records, draw(timestamps_for(len(records)))


# ---------------------------------------------------------------------- properties

@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches())
def test_every_batch_round_trips_with_its_exact_types(batch):
    round_trip(*batch)


@settings(max_examples=100, deadline=None)
@given(values)
def test_a_single_value_round_trips(value):
    assert same(unpack_value(pack_value(value)), value)


class _SpyPacker:
    """Wraps the codec's Packer and records what each ``pack`` call was given."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.packed = []

    def reset(self):
        self.inner.reset()

    def pack(self, obj):
        self.packed.append(type(obj))
        return self.inner.pack(obj)

    def bytes(self):
        return self.inner.bytes()


def _spy_packers():
    """Patch the codec so that the Packers it creates (with a fresh per-thread slot) are spied."""
    spies = []
    real = value_codec._new_packer

    def new_packer():
        spies.append(_SpyPacker(real()))
        return spies[-1]

    return spies, mock.patch.multiple(value_codec, _new_packer=new_packer, _thread_packer=value_codec._ThreadPacker())


def test_one_msgpack_call_per_batch_whatever_the_records():
    records = [(i, str(i), (i, [i]), Row(a=i)) for i in range(1000)] + [{"k": (1, 2)}] * 1000
    spies, patch = _spy_packers()
    with patch:
        payload = pack_records(records, None)
    # the format byte (a fixint), then the whole batch in one call: no per-record packing
    assert [spy.packed for spy in spies] == [[int, list]]
    with mock.patch.object(msgpack, "unpackb", wraps=msgpack.unpackb) as unpackb:
        decoded, _ = unpack_records(payload)
    assert unpackb.call_count == 1 and same(decoded, records)


def test_tuple_records_use_the_columnar_format_and_others_the_general_one():
    assert round_trip([(1, "a", 1.5), (2, "b", None)], [10, 20])[0] == FORMAT_COLUMNS
    assert round_trip([(1, (2, 3)), (4, (5, 6))])[0] == FORMAT_COLUMNS  # fields may be anything
    assert round_trip([(1,), (1, 2)])[0] == FORMAT_GENERAL  # ragged
    assert round_trip([(), (), ()])[0] == FORMAT_COLUMNS
    assert round_trip(["a", 1, None, [1, 2]])[0] == FORMAT_GENERAL
    assert round_trip([])[0] == FORMAT_GENERAL


def test_types_msgpack_would_lose():
    paris = ZoneInfo("Europe/Paris")
    row = Row(id=1, tags=[("a", 1)])
    row.set_row_kind(RowKind.DELETE)
    cases = [
        (1, 2), [1, 2], [(1, [2, (3,)])], {(1, 2): (3, [4])}, 2**64, -(2**63) - 1, 10**40,
        datetime.datetime(2024, 3, 31, 2, 30, tzinfo=datetime.timezone(datetime.timedelta(hours=5, minutes=30))),
        datetime.datetime(2024, 10, 27, 2, 30, fold=1, tzinfo=paris), datetime.datetime(2020, 1, 1),
        datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc),
        datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone(datetime.timedelta(hours=1), "CET")),
        datetime.date(1, 1, 1), decimal.Decimal("1.10"), decimal.Decimal("-0"), decimal.Decimal("sNaN"),
        row, Row(1, None), Pair(1, (2,)), {1, 2}, frozenset({3}), Opaque([1, (2,)]),
        OrderedDict(a=1), float("nan"), float("-inf"), -0.0, True, "\U0001F600", b"",
    ]
    round_trip(cases)
    for case in cases:
        round_trip([case])
        round_trip([(case, case)])


def test_sub_second_utc_offsets_round_trip():
    # Regression: isoformat/fromisoformat lose the microseconds of an offset on Python 3.11.
    for offset in (datetime.timedelta(microseconds=1), datetime.timedelta(hours=-3, seconds=-7)):
        value = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone(offset))
        [decoded], _ = unpack_records(pack_records([value], None))
        assert decoded == value and decoded.utcoffset() == offset


def test_bytearray_and_memoryview_arrive_as_bytes():
    # msgpack packs them natively as bin, without asking the codec (a documented limitation).
    values, _ = unpack_records(pack_records([bytearray(b"ab"), (memoryview(b"cd"),)], None))
    assert values == [b"ab", (b"cd",)] and type(values[0]) is bytes


def test_lone_surrogates_fall_back_to_pickling_the_batch():
    payload = round_trip(["\ud800", (1, "\udfff")])
    assert payload[0] == FORMAT_PICKLE


def test_nesting_deeper_than_msgpack_and_pickle_allow_is_a_clear_error():
    deep: list = []
    node = deep
    for _ in range(1100):
        node.append([])
        node = node[0]
    with pytest.raises(ValueSerializationError, match="batch of 1 records: msgpack refused it and pickling failed"):
        pack_records([deep], None)


def test_an_unpicklable_value_is_a_clear_error():
    with pytest.raises(ValueSerializationError, match="type builtins.generator.*pickling it failed"):
        pack_records([(1, (x for x in []))], None)


@pytest.mark.parametrize("payload", [b"", b"\x09abc", b"\x02\xc1", b"\x01\x93\x05\x91\x90\xc0", b"\x03not a pickle"])
def test_corrupt_payloads_are_a_clear_error(payload):
    with pytest.raises(ValueSerializationError, match="Corrupt records payload"):
        unpack_records(payload)


class _PacksItselfWhenPickled:
    """A value whose pickling packs another batch (a nested call on the same thread)."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def __reduce__(self):
        return (_unpack_inner, (pack_records([self.inner, "nested"], None),))

    def __eq__(self, other) -> bool:
        return type(other) is _PacksItselfWhenPickled and same(self.inner, other.inner)


def _unpack_inner(payload):
    values, _ = unpack_records(payload)
    return _PacksItselfWhenPickled(values[0])


def test_the_per_thread_packer_is_reused_and_not_shared_with_nested_calls():
    spies, patch = _spy_packers()
    with patch:
        first = pack_records([(1, "a")], None)
        second = pack_records([(2, "b")], None)
        assert len(spies) == 1  # reused
        nested = [(1, _PacksItselfWhenPickled((7, "x"))), (2, _PacksItselfWhenPickled((8, "y")))]
        payload = pack_records(nested, [5, 6])
        assert len(spies) == 3  # the nested calls got their own Packers
        assert same(unpack_records(payload), (nested, [5, 6]))
        with pytest.raises(ValueSerializationError):
            pack_records([lambda: None], None)  # a failed batch leaves the Packer clean
        assert unpack_records(pack_records([(3, "c")], None))[0] == [(3, "c")]
    assert unpack_records(first)[0] == [(1, "a")] and unpack_records(second)[0] == [(2, "b")]


def test_a_huge_payload_does_not_stay_in_the_thread_packer():
    with mock.patch.object(value_codec, "_thread_packer", value_codec._ThreadPacker()) as local:
        pack_records([b"x" * 10], None)
        kept = local.packer
        assert kept is not None and pack_records([b"y"], None) and local.packer is kept
        big = pack_records([b"z" * (value_codec._PACKER_KEEP_BYTES + 1)], None)
        assert local.packer is None and unpack_records(big)[0] == [b"z" * (value_codec._PACKER_KEEP_BYTES + 1)]


def test_threads_pack_concurrently_with_their_own_packers():
    import threading

    errors = []

    def work(n):
        try:
            for i in range(200):
                batch = [(n, i, "v" * (i % 50))] * (i % 7 + 1)
                assert unpack_records(pack_records(batch, None))[0] == batch
        except Exception as error:  # noqa: BLE001
            errors.append(error)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_a_keyed_batch_crosses_the_wire_as_its_values_without_keys():
    from rill.network.api.serialization.value_codec import pack_records, unpack_records
    from rill.network.partitioner.keyed_batch import KeyedBatch

    for values in ([("a", 1), ("b", 2)], ["a", 1, None]):
        batch = KeyedBatch(values, keys=["k"] * len(values), key_token=1)
        payload = pack_records(batch, [5] * len(values))
        assert payload == pack_records(list(values), [5] * len(values))
        back, timestamps = unpack_records(payload)
        assert (type(back), back, timestamps) == (list, list(values), [5] * len(values))
