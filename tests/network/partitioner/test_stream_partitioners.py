"""Partitioners: batch split == record-by-record selection, exactly once, Flink's semantics."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rill.datastream.functions import KeySelector, Partitioner
from rill.network.partitioner import (
    BroadcastPartitioner,
    CustomPartitionerWrapper,
    ForwardPartitioner,
    GlobalPartitioner,
    KeyGroupStreamPartitioner,
    KeySelectionError,
    RebalancePartitioner,
    RescalePartitioner,
    ShufflePartitioner,
    StreamPartitioner,
)
from rill.state.key_groups import assign_key_to_parallel_operator


class ModPartitioner(Partitioner):
    def partition(self, key, num_partitions):
        return key % num_partitions


class FirstField(KeySelector):
    def get_key(self, value):
        return value[0]


# Records are (key, sequence number) tuples, so each is unique and its key is known.
FACTORIES = {
    "FORWARD": lambda seed: ForwardPartitioner(),
    "REBALANCE": lambda seed: RebalancePartitioner(seed=seed),
    "RESCALE": lambda seed: RescalePartitioner(),
    "SHUFFLE": lambda seed: ShufflePartitioner(seed=seed),
    "GLOBAL": lambda seed: GlobalPartitioner(),
    "HASH": lambda seed: KeyGroupStreamPartitioner(FirstField(), max_parallelism=128, key_cache_size=8),
    "CUSTOM": lambda seed: CustomPartitionerWrapper(ModPartitioner(), lambda r: r[0]),
}

keys = st.one_of(st.integers(-10**6, 10**6), st.text(max_size=5), st.tuples(st.integers(0, 3), st.text(max_size=2)))


def records(draw_keys):
    return [(k, i) for i, k in enumerate(draw_keys)]


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(sorted(FACTORIES)),
    n=st.integers(1, 9),
    seed=st.integers(0, 2**32),
    batches=st.lists(st.lists(st.integers(0, 10**6) | keys, max_size=40), min_size=1, max_size=5),
    with_timestamps=st.booleans(),
)
def test_split_matches_record_by_record_selection(name, n, seed, batches, with_timestamps):
    if name == "FORWARD":
        n = 1
    if name == "CUSTOM":
        batches = [[k if isinstance(k, int) else len(str(k)) for k in b] for b in batches]
    batched = FACTORIES[name](seed)
    batched.setup(n)
    single = batched.copy()
    offset = 0
    for batch_keys in batches:
        values = [(k, offset + i) for i, k in enumerate(batch_keys)]
        timestamps = [1000 + offset + i for i in range(len(values))] if with_timestamps else None
        offset += len(values)
        expected: dict[int, list] = {}
        for value in values:
            expected.setdefault(single.select_channel(value), []).append(value)
        parts = batched.split(values, timestamps)
        channels = [c for c, _, _ in parts]
        assert channels == sorted(set(channels)), "one entry per channel, in channel order"
        assert all(0 <= c < n and vals for c, vals, _ in parts)
        assert {c: list(vals) for c, vals, _ in parts} == expected
        for _, vals, ts in parts:
            assert (ts is None) == (not with_timestamps)
            if ts is not None:
                assert ts == [1000 + v[1] for v in vals]
        # Exactly once overall.
        assert Counter(v for _, vals, _ in parts for v in vals) == Counter(values)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 8), batches=st.lists(st.lists(st.integers(), max_size=30), max_size=4))
def test_broadcast_sends_every_record_to_every_channel_in_order(n, batches):
    partitioner = BroadcastPartitioner()
    partitioner.setup(n)
    for batch in batches:
        parts = partitioner.split(batch, None)
        if not batch:
            assert parts == []
            continue
        assert [c for c, _, _ in parts] == list(range(n))
        assert all(list(vals) == batch and ts is None for _, vals, ts in parts)


@settings(max_examples=80, deadline=None)
@given(
    key=keys | st.floats(allow_nan=False) | st.none() | st.booleans() | st.binary(max_size=4),
    max_parallelism=st.integers(1, 512),
    data=st.data(),
)
def test_key_groups_agree_with_state_key_groups(key, max_parallelism, data):
    n = data.draw(st.integers(1, max_parallelism))
    partitioner = KeyGroupStreamPartitioner(lambda r: r, max_parallelism)
    partitioner.setup(n)
    expected = assign_key_to_parallel_operator(key, max_parallelism, n)
    assert partitioner.select_channel(key) == expected
    assert partitioner.select_channel(key) == expected  # cached
    [(channel, values, _)] = partitioner.split([key, key], None)
    assert (channel, values) == (expected, [key, key])


@pytest.mark.parametrize("n", [1, 3])
def test_split_keyed_carries_each_records_key_and_key_group(n):
    from rill.state.key_groups import assign_to_key_group

    partitioner = KeyGroupStreamPartitioner(lambda r: r[0], 256, key_token=9)
    partitioner.setup(n)
    records = [(f"w{i % 37}", i) for i in range(200)]
    parts = partitioner.split_keyed(records, None)
    assert sorted(v for _, values, _, _, _ in parts for v in values) == sorted(records)
    for channel, values, timestamps, keys, key_groups in parts:
        assert timestamps is None
        assert keys == [r[0] for r in values]
        assert key_groups == [assign_to_key_group(k, 256) for k in keys]
        assert {assign_key_to_parallel_operator(k, 256, n) for k in keys} == {channel}


def test_rebalance_starts_after_a_random_channel_and_continues_across_batches():
    starts = set()
    for seed in range(40):
        p = RebalancePartitioner(seed=seed)
        p.setup(5)
        starts.add(p.select_channel("x"))
    assert len(starts) > 1, "the start channel is random, not always the same"
    p = RebalancePartitioner(seed=7)
    p.setup(3)
    first = p.copy().select_channel(None)
    parts = p.split(list("abcd"))
    assert {c: v for c, v, _ in parts}[first] == ["a", "d"]
    parts = p.split(list("ef"))
    assert {c: v for c, v, _ in parts} == {(first + 1) % 3: ["e"], (first + 2) % 3: ["f"]}


def test_rescale_starts_at_channel_zero():
    p = RescalePartitioner()
    p.setup(3)
    assert [p.select_channel(i) for i in range(5)] == [0, 1, 2, 0, 1]
    p.setup(3)
    assert p.split(list("abcd")) == [(0, ["a", "d"], None), (1, ["b"], None), (2, ["c"], None)]


def test_shuffle_is_roughly_uniform_and_seeded():
    p = ShufflePartitioner(seed=1)
    p.setup(4)
    counts = Counter(p.select_channel(i) for i in range(4000))
    assert set(counts) == {0, 1, 2, 3} and min(counts.values()) > 800
    a, b = ShufflePartitioner(seed=5), ShufflePartitioner(seed=5)
    a.setup(3)
    b.setup(3)
    assert a.split(list(range(50))) == b.split(list(range(50)))


def test_names_and_connection_kinds():
    expected = {
        "FORWARD": (True, False),
        "REBALANCE": (False, False),
        "RESCALE": (True, False),
        "SHUFFLE": (False, False),
        "GLOBAL": (False, False),
        "HASH": (False, False),
        "CUSTOM": (False, False),
    }
    for name, factory in FACTORIES.items():
        p = factory(0)
        assert str(p) == name
        assert (p.is_pointwise(), p.is_broadcast()) == expected[name]
    assert str(BroadcastPartitioner()) == "BROADCAST" and BroadcastPartitioner().is_broadcast()
    p = GlobalPartitioner()
    p.setup(3)
    assert repr(p) == "GlobalPartitioner(GLOBAL, channels=3)"


def test_usage_errors():
    with pytest.raises(RuntimeError, match="REBALANCE partitioner used before setup"):
        RebalancePartitioner().split([1])
    with pytest.raises(ValueError, match="at least 1 channel"):
        GlobalPartitioner().setup(0)
    with pytest.raises(ValueError, match="equal parallelism"):
        ForwardPartitioner().setup(2)
    b = BroadcastPartitioner()
    b.setup(2)
    with pytest.raises(TypeError, match="does not support select channels"):
        b.select_channel(1)
    with pytest.raises(ValueError, match="between 1 and the maximum parallelism 4"):
        KeyGroupStreamPartitioner(lambda r: r, 4).setup(5)
    with pytest.raises(TypeError, match="KeySelector or a callable"):
        KeyGroupStreamPartitioner(42, 4)
    with pytest.raises(TypeError, match="Partitioner or a callable"):
        CustomPartitionerWrapper(42, lambda r: r)


@pytest.mark.parametrize(
    "bad_key, type_name",
    [(["a", "list"], "list"), ({"a": 1}, "dict"), ({1, 2}, "set"), (object(), "object")],
)
def test_unsupported_keys_raise_key_selection_error_naming_record_and_type(bad_key, type_name):
    p = KeyGroupStreamPartitioner(lambda r: r["key"], 128)
    p.setup(4)
    record = {"id": 17, "key": bad_key}
    for route in (lambda: p.select_channel(record), lambda: p.split([{"id": 1, "key": "fine"}, record])):
        with pytest.raises(KeySelectionError, match=rf"record .*'id': 17.*of type {type_name}") as info:
            route()
        assert isinstance(info.value, TypeError)
        assert info.value.value is record and info.value.key is bad_key


def test_hash_partitioner_built_by_key_by_is_configured_later():
    p = KeyGroupStreamPartitioner(lambda r: r, -1)  # as DataStream.key_by builds it
    with pytest.raises(ValueError, match=r"no max parallelism: configure\(max_parallelism\)"):
        p.setup(2)
    with pytest.raises(ValueError, match="Maximum parallelism must be between 1 and 32768"):
        p.configure(0)
    p.configure(256)
    p.setup(3)
    assert p.max_parallelism == 256
    assert p.select_channel("k") == assign_key_to_parallel_operator("k", 256, 3)
    with pytest.raises(ValueError, match="Maximum parallelism"):
        KeyGroupStreamPartitioner(lambda r: r, 0)


def test_key_cache_is_bounded_and_per_copy():
    p = KeyGroupStreamPartitioner(lambda r: r, 128, key_cache_size=10)
    p.setup(4)
    p.split([f"k{i}" for i in range(100)])
    assert len(p._cache) <= 10
    q = p.copy()
    q.select_channel("other")
    assert "other" not in p._cache


def test_custom_partitioner_results_are_checked():
    p = CustomPartitionerWrapper(lambda key, n: key, lambda r: r)
    p.setup(3)
    assert p.split([0, 2, 1, 2]) == [(0, [0], None), (1, [1], None), (2, [2, 2], None)]
    with pytest.raises(ValueError, match=r"returned 3 for record 3 \(key 3\): it must return an int in \[0, 3\)"):
        p.split([0, 3])
    with pytest.raises(ValueError, match=r"returned -1 .* \[0, 3\)"):
        p.select_channel(-1)
    with pytest.raises(ValueError, match=r"returned 1.5"):
        p.split([1.5])
    with pytest.raises(ValueError, match=r"returned '1'"):
        p.select_channel("1")


def test_every_partitioner_is_a_stream_partitioner():
    for factory in FACTORIES.values():
        assert isinstance(factory(0), StreamPartitioner)
