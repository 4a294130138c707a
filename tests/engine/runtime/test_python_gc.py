"""Parsing and applying the task processes' garbage-collector thresholds."""

from __future__ import annotations

import gc

import pytest

from rill.runtime.taskmanager.python_gc import apply_gc_thresholds, parse_gc_thresholds


@pytest.mark.parametrize("value, expected", [
    ("10000,10,10", (10000, 10, 10)),
    (" 5000 , 7 ", (5000, 7)),
    ("0", (0,)),  # 0 disables automatic collection, as gc.set_threshold(0)
    (str(2**31 - 1), (2**31 - 1,)),  # the largest C int gc.set_threshold takes
    ("default", (700, 10, 10)),
    ("DEFAULT", (700, 10, 10)),
    ((1, 2, 3), (1, 2, 3)),
    (10000, (10000,)),  # conf.set(option, 10000)
])
def test_thresholds_are_parsed_as_gc_set_threshold_takes_them(value, expected):
    assert parse_gc_thresholds(value) == expected


@pytest.mark.parametrize("value", ["", "1,2,3,4", "-1", "a,b", "1.5", None, 7.0, True, ",", (1.5,), str(2**31)])
def test_anything_else_is_refused_naming_the_key_and_the_value(value):
    with pytest.raises(ValueError) as info:
        parse_gc_thresholds(value, key="some.key")
    assert str(info.value) == (
        "some.key must be 'default' or one to three comma-separated ints in [0, 2147483647] (generation "
        f"0, 1, 2 thresholds, as gc.set_threshold takes them), got {value!r}")


def test_whatever_is_accepted_the_collector_accepts():
    before = gc.get_threshold()
    try:
        for value in ("0", str(2**31 - 1), "2147483647,2147483647,2147483647", "default"):
            parsed = parse_gc_thresholds(value)
            apply_gc_thresholds(parsed)
            # the collector took every parsed threshold as given (unparsed generations unchanged)
            assert gc.get_threshold()[:len(parsed)] == parsed
    finally:
        gc.set_threshold(*before)


def test_apply_sets_them_and_returns_the_previous_ones():
    before = gc.get_threshold()
    try:
        assert apply_gc_thresholds((1234, 5)) == before
        assert gc.get_threshold() == (1234, 5, before[2])
        assert apply_gc_thresholds((700, 10, 10)) == (1234, 5, before[2])
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        gc.set_threshold(*before)
