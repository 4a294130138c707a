"""Built-in aggregations on the per-batch path, end to end in both execution modes: the same
outputs (types included), per key and in order, as the general path (the same aggregators
behind a reduce function the engine does not recognise), on seeded random tuples and Rows,
keyed by ``itemgetter``, a field position and a field name, at parallelism 2; and the key
selector called once per record when the keys travel with the records (embedded)."""

from __future__ import annotations

import random
from operator import itemgetter

import pytest

from _ds_helpers import run
from rill.common import Row
from rill.datastream import ReduceFunction, StreamExecutionEnvironment
from rill.datastream.connectors import CollectSink
from rill.operators.aggregations import (
    MaxAggregator,
    MaxByAggregator,
    MinAggregator,
    MinByAggregator,
    SumAggregator,
)

WORDS = [f"w{i}" for i in range(40)]


class Opaque(ReduceFunction):
    """An aggregator behind a class the engine does not recognise: the general path."""

    def __init__(self, aggregator):
        self.aggregator = aggregator

    def reduce(self, value1, value2):
        return self.aggregator.reduce(value1, value2)


def _data(n=3000, seed=16):
    rng = random.Random(seed)
    return [(rng.choice(WORDS), rng.choice([rng.randint(-50, 50), rng.uniform(-5, 5)]), rng.randint(0, 3))
            for _ in range(n)]


def _per_key(records, key_of):
    groups = {}
    for r in records:
        groups.setdefault(key_of(r), []).append(repr(r))
    return groups


def _collect_all(env, streams):
    sinks = [CollectSink() for _ in streams]
    try:
        for stream, sink in zip(streams, sinks):
            stream.sink_to(sink)
        run(env)
        return [sink.get_results() for sink in sinks]
    finally:
        for sink in sinks:
            sink.close()


@pytest.mark.parametrize("make", [
    lambda: SumAggregator(1), lambda: MinAggregator(1), lambda: MaxAggregator(2),
    lambda: MinByAggregator(1), lambda: MaxByAggregator(2, first=False),
], ids=["sum", "min", "max", "min_by", "max_by_last"])
def test_aggregations_on_tuples_equal_the_general_path(env, make):
    env.set_parallelism(2)
    data = _data()
    source = env.from_collection(data)
    fast = source.key_by(itemgetter(0)).reduce(make())  # reduce() of a built-in aggregator: recognised too
    by_position = source.key_by(0).reduce(make())
    general = source.key_by(lambda r: r[0]).reduce(Opaque(make()))
    got_fast, got_position, got_general = _collect_all(env, [fast, by_position, general])
    assert len(got_general) == len(data)
    expected = _per_key(got_general, itemgetter(0))
    assert _per_key(got_fast, itemgetter(0)) == expected
    assert _per_key(got_position, itemgetter(0)) == expected


def test_sum_by_name_on_rows_and_word_count(env):
    env.set_parallelism(2)
    rows = [Row(k=w, n=n, s=s) for w, n, s in _data(600)]
    counted = env.from_collection(rows).key_by("k").sum("n")
    words = env.from_collection(_data(2000)).map(lambda r: (r[0], 1)).key_by(itemgetter(0)).sum(1)
    got_rows, got_words = _collect_all(env, [counted, words])
    totals = {}
    expected_rows = {}
    for r in rows:
        first = expected_rows.setdefault(r.k, [])
        totals[r.k] = totals.get(r.k, 0) + r.n
        base = rows[[x.k for x in rows].index(r.k)]
        first.append(repr(Row(k=r.k, n=totals[r.k], s=base.s)))
    assert _per_key(got_rows, lambda r: r.k) == expected_rows
    counts = {}
    expected_words = {}
    for w, _, _ in _data(2000):
        counts[w] = counts.get(w, 0) + 1
        expected_words.setdefault(w, []).append(repr((w, counts[w])))
    assert _per_key(got_words, itemgetter(0)) == expected_words


SELECTED = []


def _counting_key(record):
    SELECTED.append(record)
    return record[0]


def test_the_keyed_operator_takes_the_exchanges_keys():
    """Embedded: the key selector runs once per record (in the partitioner), not again in the
    keyed operator. (Across processes the keys are not sent: the operator keys the batch.)"""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    SELECTED.clear()
    data = _data(500)
    env.from_collection(data).key_by(_counting_key).sum(1).sink_to(sink := CollectSink())
    try:
        run(env)
        assert len(sink.get_results()) == len(data)
    finally:
        sink.close()
    assert sorted(SELECTED) == sorted(data)
