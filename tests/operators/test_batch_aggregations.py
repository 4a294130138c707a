"""The per-batch loops of sum/min/max/min_by/max_by (operators/batch_aggregations.py) against
the general path (the same aggregator's ``reduce`` called per record): randomized records,
batches, positions and key selectors; same outputs (types included), same timestamps, same
stored state, same errors. Also: keys that came with a KeyedBatch are used only under the
operator's own token; key_by's FieldKeySelector."""

from __future__ import annotations

from collections import namedtuple
from operator import itemgetter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rill.common.functions import ReduceFunction
from rill.common.row import Row
from rill.network.partitioner.keyed_batch import KeyedBatch
from rill.operators.aggregations import (
    InvalidFieldReferenceError,
    MaxAggregator,
    MaxByAggregator,
    MinAggregator,
    MinByAggregator,
    SumAggregator,
)
from rill.operators.batch_aggregations import tuple_aggregation_for
from rill.operators.field_key_selector import FieldKeySelector
from rill.operators.keyed_reduce import StreamGroupedReduce
from rill.operators.testing import KeyedOneInputStreamOperatorTestHarness
from rill.state.api import VOID_NAMESPACE

Pair = namedtuple("Pair", "k v")


class Opaque(ReduceFunction):
    """The aggregator behind a class the fast path does not know: always the general path."""

    def __init__(self, aggregator):
        self.aggregator = aggregator

    def reduce(self, value1, value2):
        return self.aggregator.reduce(value1, value2)


def make_aggregators(position):
    return [SumAggregator(position), MinAggregator(position), MaxAggregator(position),
            MinByAggregator(position), MaxByAggregator(position), MinByAggregator(position, first=False),
            MaxByAggregator(position, first=False)]


def run(function, batches, key_selector, token=None):
    """(emitted [(repr(value), timestamp)], error or None, stored {key: repr(value)})."""
    h = KeyedOneInputStreamOperatorTestHarness(StreamGroupedReduce(function, key_token=token), key_selector)
    error = None
    with h:
        try:
            for values, timestamps in batches:
                h.process_batch(values, timestamps)
        except Exception as e:  # noqa: BLE001 - compared between the two paths
            error = (type(e), str(e))
        out = [(repr(r.value), r.timestamp) for r in h.get_output()]
        stored = {}
        for by_namespace in h.operator._maps:
            for key, value in by_namespace.get(VOID_NAMESPACE, {}).items():
                stored[key] = repr(value)
            assert VOID_NAMESPACE not in by_namespace or by_namespace[VOID_NAMESPACE], "empty container left"
    return out, error, stored


KEYS = st.sampled_from(["a", "b", "c", "d", "e"])
NUMBERS = st.one_of(st.integers(-5, 5), st.floats(-5, 5, allow_nan=False), st.sampled_from([2 ** 70, 1.5]))
ODD = st.sampled_from([None, "s", (1,)])  # values the fields cannot be added or compared with


def tuples(length, odd):
    field = st.one_of(NUMBERS, ODD) if odd else NUMBERS
    return st.tuples(KEYS, *[field] * (length - 1))


@st.composite
def streams(draw):
    """Records of one shape (the fast path all along), or with other shapes mixed in (the fast
    path must hand over to the general path at the right record), cut in random batches."""
    length = draw(st.integers(2, 4))
    odd = draw(st.booleans()) and draw(st.booleans())  # a quarter of the streams can fail
    record = tuples(length, odd)
    if draw(st.booleans()):
        other = st.one_of(
            tuples(draw(st.integers(2, 4)), odd),
            record.map(list),
            record.map(lambda t: Row(*t)),
            st.tuples(KEYS, NUMBERS).map(lambda t: Pair(*t)),
        )
        record = st.one_of(record, record, record, other)
    values = draw(st.lists(record, min_size=1, max_size=60))
    cuts = sorted(draw(st.lists(st.integers(0, len(values)), max_size=6)))
    bounds = [0, *cuts, len(values)]
    with_timestamps = draw(st.booleans())
    batches = []
    for start, end in zip(bounds, bounds[1:]):
        if end > start:
            chunk = values[start:end]
            batches.append((chunk, list(range(start, end)) if with_timestamps else None))
    return length, batches


SELECTORS = [itemgetter(0), FieldKeySelector(0), lambda r: r[0]]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams(), st.integers(0, 4), st.integers(0, 6), st.integers(0, 2))
def test_fast_path_equals_general_path(stream, position, which, selector):
    length, batches = stream
    position = position % (length + 1)  # sometimes one past the end: the error must match too
    aggregator = make_aggregators(position)[which]
    assert tuple_aggregation_for(aggregator) is not None
    key_of = SELECTORS[selector]
    fast = run(aggregator, batches, key_of)
    general = run(Opaque(aggregator), batches, key_of)
    assert fast == general


def test_fast_path_runs_and_hands_over_for_good():
    """The loop is really taken for tuples, and a batch of another type turns it off (the
    stored values may then be anything)."""
    h = KeyedOneInputStreamOperatorTestHarness(StreamGroupedReduce(SumAggregator(1)), itemgetter(0))
    with h:
        h.process_batch([("a", 1), ("b", 2), ("a", 3)])
        assert h.operator._aggregation.enabled
        h.process_batch([("a", 1, "extra")])  # the stored pair keeps its shape, as Flink's sum
        assert h.operator._aggregation.enabled
        h.process_batch([["b", 5]])
        assert not h.operator._aggregation.enabled
        h.process_batch([("b", 1)])
        assert h.extract_output_values() == [("a", 1), ("b", 2), ("a", 4), ("a", 5), ("b", 7), ("b", 8)]


def test_a_new_key_of_another_length_mid_batch_hands_over_at_that_record():
    h = KeyedOneInputStreamOperatorTestHarness(StreamGroupedReduce(SumAggregator(1)), itemgetter(0))
    with h:
        h.process_batch([("a", 1), ("b", 2, "x"), ("b", 3, "y"), ("a", 1)])
        assert h.extract_output_values() == [("a", 1), ("b", 2, "x"), ("b", 5, "x"), ("a", 2)]
        assert not h.operator._aggregation.enabled


def test_errors_name_the_field_and_the_values_and_keep_earlier_outputs():
    h = KeyedOneInputStreamOperatorTestHarness(StreamGroupedReduce(SumAggregator(1)), itemgetter(0))
    with h:
        with pytest.raises(TypeError, match=r"sum\(1\): cannot add field 1 of \('a', 1\)"):
            h.process_batch([("a", 1), ("b", 1), ("a", "x")])
        assert h.extract_output_values() == [("a", 1), ("b", 1)]


def test_subclasses_and_names_take_the_general_path():
    class MySum(SumAggregator):
        def reduce(self, value1, value2):
            return value1

    assert tuple_aggregation_for(MySum(1)) is None
    assert tuple_aggregation_for(SumAggregator("count")) is None
    assert tuple_aggregation_for(lambda a, b: a) is None


# -- keys carried by the exchange -------------------------------------------------------------

def _sum_outputs(batch, token):
    h = KeyedOneInputStreamOperatorTestHarness(StreamGroupedReduce(SumAggregator(1), key_token=token), itemgetter(0))
    with h:
        h.operator.process_batch(batch)  # as the task hands it over (the harness would copy it)
        return h.extract_output_values()


def test_keys_of_a_keyed_batch_are_used_under_the_operators_token_only():
    # keys deliberately unlike the selector's: the operator shows which ones it used
    batch = KeyedBatch([("a", 1), ("b", 10)], keys=["k", "k"], key_token=7)
    assert _sum_outputs(batch, token=7) == [("a", 1), ("a", 11)]
    assert _sum_outputs(batch, token=8) == [("a", 1), ("b", 10)]
    assert _sum_outputs(batch, token=None) == [("a", 1), ("b", 10)]
    assert _sum_outputs(KeyedBatch([("a", 1), ("b", 10)], keys=["k", "k"]), token=None) == [("a", 1), ("b", 10)]


def test_keyed_batch_slices_keep_keys_and_pickle():
    import pickle

    batch = KeyedBatch([1, 2, 3], keys=["x", "y", "z"], key_token=3)
    part = batch.slice(1, 3)
    assert (list(part), part.keys, part.key_token) == ([2, 3], ["y", "z"], 3)
    back = pickle.loads(pickle.dumps(batch))
    assert (type(back), list(back), back.keys, back.key_token) == (KeyedBatch, [1, 2, 3], ["x", "y", "z"], 3)
    with pytest.raises(ValueError, match="2 keys for 3 values"):
        KeyedBatch([1, 2, 3], keys=["x", "y"])


def test_keyed_batch_carries_key_groups_through_slices_and_pickle():
    import pickle

    batch = KeyedBatch([1, 2, 3], keys=["x", "y", "z"], key_token=3, key_groups=[5, 6, 7])
    part = batch.slice(1, 3)
    assert (list(part), part.keys, part.key_groups) == ([2, 3], ["y", "z"], [6, 7])
    back = pickle.loads(pickle.dumps(batch))
    assert (list(back), back.keys, back.key_groups, back.key_token) == ([1, 2, 3], ["x", "y", "z"], [5, 6, 7], 3)
    assert KeyedBatch([1], keys=["x"]).slice(0, 1).key_groups is None
    with pytest.raises(ValueError, match="2 key groups for 3 values"):
        KeyedBatch([1, 2, 3], keys=["x", "y", "z"], key_groups=[1, 2])


def _stored_groups(batch, token, parallelism=1, subtask_index=0):
    """{key: (key group the operator stored it under, value)} after one batch."""
    h = KeyedOneInputStreamOperatorTestHarness(StreamGroupedReduce(SumAggregator(1), key_token=token),
                                               itemgetter(0), parallelism=parallelism, subtask_index=subtask_index)
    with h:
        h.operator.process_batch(batch)
        start = h.operator._first_key_group
        return {key: (start + offset, value) for offset, by_namespace in enumerate(h.operator._maps)
                for key, value in by_namespace.get(VOID_NAMESPACE, {}).items()}


def test_key_groups_of_a_keyed_batch_place_the_state_and_out_of_range_ones_are_recomputed():
    from rill.state.key_groups import assign_to_key_group

    values = [("a", 1), ("b", 2), ("a", 3)]
    right = [assign_to_key_group(k, 128) for k, _ in values]
    assert _stored_groups(KeyedBatch(values, ["a", "b", "a"], 7, right), 7) == {
        "a": (right[0], ("a", 4)), "b": (right[1], ("b", 2))}
    # the operator takes the exchange's key groups as given (key group 3 is deliberately not
    # a's): they are what the partitioner routed by, and computing them again is the cost saved
    assert _stored_groups(KeyedBatch(values, ["a", "b", "a"], 7, [3, right[1], 3]), 7)["a"] == (3, ("a", 4))
    # outside the subtask's range (subtask 1 of 2 owns 64..127): computed again by the backend,
    # which raises its error for a key of another subtask
    theirs = [k for k in "abcdefgh" if assign_to_key_group(k, 128) >= 64][:2]
    batch = KeyedBatch([(k, 1) for k in theirs], theirs, 7, [0, 0])
    assert _stored_groups(batch, 7, parallelism=2, subtask_index=1) == {
        k: (assign_to_key_group(k, 128), (k, 1)) for k in theirs}
    mine = [k for k in "abcdefgh" if assign_to_key_group(k, 128) < 64][:1]
    with pytest.raises(ValueError, match="is not in"):
        _stored_groups(KeyedBatch([(mine[0], 1)], mine, 7, [0]), 7, parallelism=2, subtask_index=1)


# -- key_by(position / name) ------------------------------------------------------------------

def test_field_key_selector_on_tuples_rows_named_tuples_and_scalars():
    assert FieldKeySelector(1).get_keys([("a", 1), ["b", 2]]) == [1, 2]
    assert FieldKeySelector(1).get_keys([Row("a", 5), ("b", 2)]) == [5, 2]
    assert FieldKeySelector("v").get_keys([Pair("a", 3), Row(k="b", v=4)]) == [3, 4]
    # position 0 on a basic type is the whole value (Flink), never its first character
    assert FieldKeySelector(0).get_keys(["word", 7]) == ["word", 7]
    assert FieldKeySelector(0).get_key("word") == "word"


def test_field_key_selector_errors():
    with pytest.raises(InvalidFieldReferenceError, match=r"Position 2 is out of range for \('a', 1\)"):
        FieldKeySelector(2).get_keys([("a", 1, 0), ("a", 1)])
    with pytest.raises(InvalidFieldReferenceError, match="Field 'nope' does not exist"):
        FieldKeySelector("nope").get_key(Pair("a", 1))
    with pytest.raises(InvalidFieldReferenceError, match="must be >= 0"):
        FieldKeySelector(-1)
    with pytest.raises(TypeError, match="int position or a field name"):
        FieldKeySelector(1.5)
