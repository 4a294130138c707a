"""Parsing and applying the task processes' garbage-collector thresholds."""

from __future__ import annotations

import gc

import pytest

from rill.runtime.taskmanager.python_gc import apply_gc_thresholds, parse_gc_thresholds


@pytest.mark.parametrize("value, expected", [
    ("10000,10,10", (10000, 10, 10)),
    (" 5000 , 7 ", (5000, 7)),
    ("0", (0,)),  # 0 disables automatic collection, as gc.set_threshold(0)
    ("default", None),
    ("DEFAULT", None),
    ((1, 2, 3), (1, 2, 3)),
])
def test_thresholds_are_parsed_as_gc_set_threshold_takes_them(value, expected):
    assert parse_gc_thresholds(value) == expected


@pytest.mark.parametrize("value", ["", "1,2,3,4", "-1", "a,b", "1.5", None, 7, ","])
def test_anything_else_is_refused_naming_the_key_and_the_value(value):
    with pytest.raises(ValueError) as info:
        parse_gc_thresholds(value, key="some.key")
    assert str(info.value) == (
        "some.key must be 'default' or one to three comma-separated ints >= 0 (generation 0, 1, 2 "
        f"thresholds, as gc.set_threshold takes them), got {value!r}")


def test_apply_sets_them_and_returns_the_previous_ones():
    before = gc.get_threshold()
    try:
        assert apply_gc_thresholds((1234, 5)) == before
        assert gc.get_threshold() == (1234, 5, before[2])
        assert apply_gc_thresholds(None) == (1234, 5, before[2])
        assert gc.get_threshold() == (1234, 5, before[2])
    finally:
        gc.set_threshold(*before)
