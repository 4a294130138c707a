"""Chained Map/Filter runs fused into one loop (rill.runtime.tasks.fused_chain): the same
records, the same error attribution and the same prefix on failure as the operators one by one,
on real operators set up as a chain (operator test harnesses, wired by ChainingOutputs)."""

from __future__ import annotations

import random

import pytest

from rill.common.functions import FilterFunction, FlatMapFunction, MapFunction, wrap
from rill.common.streamrecord import StreamRecord
from rill.operators.simple import StreamFilter, StreamFlatMap, StreamMap
from rill.operators.testing import OneInputStreamOperatorTestHarness
from rill.runtime.tasks.fused_chain import FusedChainingOutput, chaining_output
from rill.runtime.tasks.outputs import ChainingOutput, TaggedOutput


def _op(kind, fn):
    if kind == "map":
        return StreamMap(wrap(fn, MapFunction, "map"))
    if kind == "filter":
        return StreamFilter(wrap(fn, FilterFunction, "filter"))
    raise AssertionError(kind)


def _chain(stages):
    """Open the operators of ``stages`` (``[(kind, fn, name)]``) as a chain, tail first; returns
    ``(head output as the predecessor would get it, collected tail output, harnesses)``."""
    harnesses = []
    successor = None
    for kind, fn, name in reversed(stages):
        h = OneInputStreamOperatorTestHarness(_op(kind, fn), task_name=name)
        if successor is not None:
            h.output = TaggedOutput(chaining_output(*successor), {})
        h.open()
        harnesses.append(h)
        successor = (h.operator, name)
    collected = harnesses[0].output
    return chaining_output(*successor), collected, harnesses


def _values(output):
    return [(e.value, e.timestamp) for e in output.elements if isinstance(e, StreamRecord)]


def triple(x):
    return x * 3


def odd(x):
    return x % 2 == 1


def plus_one_tuple(x):
    return (x, x + 1)


def first_div_5(t):
    return t[0] % 5 != 0


STAGES = [("map", triple, "Triple"), ("filter", odd, "Odd"), ("map", plus_one_tuple, "Pair"),
          ("filter", first_div_5, "NotFive")]


def _expected(values):
    return [(x * 3, x * 3 + 1) for x in values if (x * 3) % 2 == 1 and (x * 3) % 5 != 0]


def test_a_run_with_a_filter_is_fused_and_gives_the_records_of_the_operators():
    head, out, _ = _chain(STAGES)
    assert type(head) is FusedChainingOutput
    assert [name for _k, _f, name in head.stages] == ["Triple", "Odd", "Pair", "NotFive"]
    rng = random.Random(7)
    batches = [[rng.randrange(-1000, 1000) for _ in range(rng.randrange(0, 300))] for _ in range(20)]
    for b in batches:
        head.collect_batch(b, None)
    assert _values(out) == [(v, None) for b in batches for v in _expected(b)]


def test_timestamped_batches_and_single_records_go_through_the_operators():
    head, out, _ = _chain(STAGES)
    head.collect_batch([1, 2, 3, 5, 7], [10, 20, 30, 50, 70])
    head.collect(9, 90)
    head.collect(15, 150)  # 45: divisible by 5, dropped
    assert _values(out) == [((3, 4), 10), ((9, 10), 30), ((21, 22), 70), ((27, 28), 90)]


def test_runs_without_a_filter_or_of_one_operator_are_not_fused():
    head, _, _ = _chain([("map", triple, "A"), ("map", triple, "B")])
    assert type(head) is ChainingOutput
    head, _, _ = _chain([("filter", odd, "F")])
    assert type(head) is ChainingOutput


def _opened(operator, successor=None):
    """``operator`` set up and opened, its main output a ChainingOutput to ``successor``
    (``(operator, name)``) or collected."""
    h = OneInputStreamOperatorTestHarness(operator)
    if successor is not None:
        h.output = TaggedOutput(chaining_output(*successor), {})
    h.open()
    return h


def test_a_run_stops_at_an_operator_that_is_not_a_map_or_filter():
    twice = _opened(StreamFlatMap(wrap(lambda x: [x, x], FlatMapFunction, "flat_map")))
    odd_ = _opened(_op("filter", odd), (twice.operator, "Twice"))
    head = chaining_output(_opened(_op("map", triple), (odd_.operator, "Odd")).operator, "Triple")
    assert type(head) is FusedChainingOutput
    assert [name for _k, _f, name in head.stages] == ["Triple", "Odd"]
    assert head.tail is odd_.operator.output
    head.collect_batch([1, 2, 3], None)
    assert _values(twice.output) == [(3, None), (3, None), (9, None), (9, None)]


class Boom(Exception):
    pass


@pytest.mark.parametrize("failing", ["Triple", "Odd", "Pair", "NotFive"])
def test_an_error_names_the_operator_whose_function_raised_after_the_prefix(failing):
    calls = []

    def failing_at(fn, name):
        def f(x):
            calls.append(name)
            if calls.count(name) == 4:  # its fourth record
                raise Boom(name)
            return fn(x)
        return f

    stages = [(k, failing_at(fn, name) if name == failing else fn, name) for k, fn, name in STAGES]
    head, out, _ = _chain(stages)
    values = [1, 3, 7, 9, 11, 13, 17]  # every one passes both filters
    with pytest.raises(Boom) as info:
        head.collect_batch(values, None)
    assert info.value._rill_operator == failing
    # the fourth record reaching the failing operator failed; the three before it went through
    assert _values(out) == [(v, None) for v in _expected(values[:3])]


def test_an_error_of_the_operator_after_the_run_is_its_own():
    def explode(x):
        raise Boom("after")

    after = _opened(StreamFlatMap(wrap(explode, FlatMapFunction, "flat_map")))
    odd_ = _opened(_op("filter", odd), (after.operator, "Explode"))
    head = chaining_output(_opened(_op("map", triple), (odd_.operator, "Odd")).operator, "Triple")
    with pytest.raises(Boom) as info:
        head.collect_batch([2, 1], None)
    assert info.value._rill_operator == "Explode"
