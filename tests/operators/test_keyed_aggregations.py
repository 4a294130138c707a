"""sum/min/max/min_by/max_by as Flink's SumAggregator / ComparableAggregator, directly and
through StreamGroupedReduce: tuples, lists, named tuples, Rows (by index and name), scalars,
ties, errors."""

from collections import namedtuple

import pytest

from operator_harness_util import run_all_paths
from rill.common.row import Row
from rill.operators.aggregations import (
    AggregationType,
    ComparableAggregator,
    InvalidFieldReferenceError,
    MaxAggregator,
    MaxByAggregator,
    MinAggregator,
    MinByAggregator,
    SumAggregator,
    create_aggregator,
)
from rill.operators.keyed_reduce import StreamGroupedReduce
from rill.operators.testing import KeyedOneInputStreamOperatorTestHarness


def rolling(agg, values, key=lambda v: 0):
    """The outputs of KeyedStream.<agg> over ``values`` (every path must agree)."""
    out, _ = run_all_paths(lambda: KeyedOneInputStreamOperatorTestHarness(StreamGroupedReduce(agg), key), values)
    return [r.value for r in out]


T = [("a", 3, "x"), ("a", 1, "y"), ("a", 1, "z"), ("a", 5, "w")]


# -- tuples -----------------------------------------------------------------------------

def test_sum_tuples_keeps_first_elements_other_fields():
    assert rolling(SumAggregator(1), T) == [("a", 3, "x"), ("a", 4, "x"), ("a", 5, "x"), ("a", 10, "x")]


def test_sum_per_key():
    data = [("a", 1), ("b", 10), ("a", 2), ("b", 20)]
    assert rolling(SumAggregator(1), data, key=lambda v: v[0]) == [("a", 1), ("b", 10), ("a", 3), ("b", 30)]


def test_sum_position_zero_default_and_wide_tuples():
    assert rolling(SumAggregator(), [(1, "p", 9), (2, "q", 8)]) == [(1, "p", 9), (3, "p", 9)]
    assert rolling(SumAggregator(2), [(1, "p", 9), (2, "q", 8)]) == [(1, "p", 9), (1, "p", 17)]
    assert rolling(SumAggregator(0), [(1.5, "a"), (2, "b")]) == [(1.5, "a"), (3.5, "a")]


def test_min_max_replace_only_the_field():
    assert rolling(MinAggregator(1), T) == [("a", 3, "x"), ("a", 1, "x"), ("a", 1, "x"), ("a", 1, "x")]
    assert rolling(MaxAggregator(1), T) == [("a", 3, "x"), ("a", 3, "x"), ("a", 3, "x"), ("a", 5, "x")]


def test_min_on_a_tie_takes_the_new_fields_value_as_flink():
    agg = MinAggregator(0)
    assert agg.reduce((1, "first"), (1.0, "second")) == (1.0, "first")
    assert type(agg.reduce((1, "first"), (1.0, "second"))[0]) is float


def test_min_by_max_by_return_whole_elements_ties_keep_first():
    assert rolling(MinByAggregator(1), T) == [("a", 3, "x"), ("a", 1, "y"), ("a", 1, "y"), ("a", 1, "y")]
    assert rolling(MaxByAggregator(1), T) == [("a", 3, "x"), ("a", 3, "x"), ("a", 3, "x"), ("a", 5, "w")]
    ties = [("k", 2, "first"), ("k", 2, "second")]
    assert rolling(MaxByAggregator(1), ties)[-1] == ("k", 2, "first")
    assert rolling(MinByAggregator(1), ties)[-1] == ("k", 2, "first")
    assert MaxByAggregator(1, first=False).reduce(*ties) == ("k", 2, "second")
    assert MinByAggregator(1, first=False).reduce(*ties) == ("k", 2, "second")


def test_create_aggregator_and_repr():
    assert isinstance(create_aggregator(AggregationType.SUM, 1), SumAggregator)
    agg = create_aggregator(AggregationType.MAX_BY, "score", first=False)
    assert isinstance(agg, ComparableAggregator) and agg.first is False
    assert repr(agg) == "ComparableAggregator('score', MAX_BY, first=False)"
    with pytest.raises(ValueError):
        ComparableAggregator(0, AggregationType.SUM)


# -- lists, named tuples, rows -------------------------------------------------------------

def test_lists_are_copied_not_mutated():
    first = ["a", 1]
    out = rolling(SumAggregator(1), [first, ["a", 2], ["a", 3]])
    assert out == [["a", 1], ["a", 3], ["a", 6]]
    assert first == ["a", 1]
    assert all(type(v) is list for v in out)
    assert rolling(MaxAggregator(1), [["a", 1, "p"], ["b", 4, "q"]])[-1] == ["a", 4, "p"]


def test_named_tuples_by_index_and_name_stay_named_tuples():
    P = namedtuple("P", "name score tag")
    data = [P("a", 1, "x"), P("a", 5, "y"), P("a", 2, "z")]
    assert rolling(SumAggregator("score"), data) == [P("a", 1, "x"), P("a", 6, "x"), P("a", 8, "x")]
    out = rolling(MaxAggregator(1), data)
    assert out == [P("a", 1, "x"), P("a", 5, "x"), P("a", 5, "x")] and type(out[-1]) is P
    assert rolling(MaxByAggregator("score"), data)[-1] is data[1]


def test_rows_by_name_and_index():
    rows = [Row(id="a", score=3, tag="x"), Row(id="a", score=1, tag="y"), Row(id="a", score=4, tag="z")]
    out = rolling(SumAggregator("score"), rows)
    assert out == [Row(id="a", score=3, tag="x"), Row(id="a", score=4, tag="x"), Row(id="a", score=8, tag="x")]
    assert all(isinstance(r, Row) for r in out)
    assert out[-1].as_dict() == {"id": "a", "score": 8, "tag": "x"}
    assert rows[0].score == 3  # input not mutated
    assert rolling(MinAggregator(1), rows)[-1] == Row(id="a", score=1, tag="x")
    assert rolling(MinByAggregator("score"), rows)[-1] is rows[1]
    assert rolling(MaxByAggregator(1), rows)[-1] is rows[2]
    positional = [Row("a", 1), Row("a", 2)]
    assert rolling(SumAggregator(1), positional) == [Row("a", 1), Row("a", 3)]


def test_row_like_objects_with_as_dict():
    class Rec:
        def __init__(self, **kw):
            self._d = dict(kw)

        def as_dict(self):
            return dict(self._d)

        def __getitem__(self, i):
            return list(self._d.values())[i]

        def __setitem__(self, i, v):
            self._d[list(self._d)[i]] = v

        def __len__(self):
            return len(self._d)

        def __copy__(self):
            return Rec(**self._d)

    out = SumAggregator("n").reduce(Rec(k="a", n=1), Rec(k="b", n=2))
    assert isinstance(out, Rec) and out.as_dict() == {"k": "a", "n": 3}


# -- scalars -----------------------------------------------------------------------------

def test_scalars_aggregate_directly():
    data = [3, 1, 4, 1, 5]
    assert rolling(SumAggregator(), data) == [3, 4, 8, 9, 14]
    assert rolling(MinAggregator(), data) == [3, 1, 1, 1, 1]
    assert rolling(MaxAggregator(0), data) == [3, 3, 4, 4, 5]
    assert rolling(MinByAggregator(), data) == [3, 1, 1, 1, 1]
    assert rolling(MaxByAggregator(), data) == [3, 3, 4, 4, 5]
    assert rolling(SumAggregator(), ["ab", "c"]) == ["ab", "abc"]  # strings are basic types


# -- errors --------------------------------------------------------------------------------

def test_position_out_of_range_names_position_and_value():
    with pytest.raises(InvalidFieldReferenceError, match=r"Position 2 is out of range for \('a', 1\)"):
        SumAggregator(2).reduce(("a", 1), ("a", 2))
    with pytest.raises(LookupError):
        MaxAggregator(5).reduce(["a", 1], ["a", 2])
    with pytest.raises(ValueError, match="Position 3"):
        MinByAggregator(3).reduce(Row("a", 1), Row("a", 2))


def test_missing_field_names_field_and_value():
    with pytest.raises(InvalidFieldReferenceError, match=r"Field 'nope' does not exist in Row\(id='a'"):
        SumAggregator("nope").reduce(Row(id="a", n=1), Row(id="a", n=2))
    with pytest.raises(InvalidFieldReferenceError, match="has no field names"):
        SumAggregator("n").reduce(("a", 1), ("a", 2))


def test_basic_type_with_nonzero_position():
    with pytest.raises(InvalidFieldReferenceError, match=r"The 1 field selected on a basic type \(5 of type int\)"):
        SumAggregator(1).reduce(5, 6)
    with pytest.raises(InvalidFieldReferenceError, match="basic type"):
        MaxAggregator("x").reduce(5, 6)


def test_bad_positions_rejected_at_construction():
    with pytest.raises(TypeError, match="int or str"):
        SumAggregator(1.5)
    with pytest.raises(TypeError):
        MinAggregator("")
    with pytest.raises(ValueError, match=">= 0"):
        MaxAggregator(-1)


def test_unaddable_or_incomparable_fields_raise_type_error_with_context():
    with pytest.raises(TypeError, match=r"sum\(1\): cannot add field 1"):
        SumAggregator(1).reduce(("a", 1), ("a", "x"))
    with pytest.raises(TypeError, match=r"max\(1\): cannot compare field 1"):
        MaxAggregator(1).reduce(("a", 1), ("a", None))


def test_errors_propagate_through_the_operator():
    with pytest.raises(InvalidFieldReferenceError, match="Position 4"):
        rolling(SumAggregator(4), [("a", 1), ("a", 2)])
