"""State descriptors: validation, accessors, equality, TTL recording."""

from __future__ import annotations

import pickle

import pytest

from rill.datastream.functions import AggregateFunction, MapFunction, ReduceFunction
from rill.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    StateType,
    ValueStateDescriptor,
)


class Max(ReduceFunction):
    def reduce(self, value1, value2):
        return max(value1, value2)


class Count(AggregateFunction):
    def create_accumulator(self):
        return 0

    def add(self, value, accumulator):
        return accumulator + 1

    def get_result(self, accumulator):
        return accumulator


class Double(MapFunction):
    def map(self, value):
        return value * 2


def _add(a, b):
    return a + b


ALL = [
    lambda name: ValueStateDescriptor(name),
    lambda name: ListStateDescriptor(name),
    lambda name: MapStateDescriptor(name),
    lambda name: ReducingStateDescriptor(name, _add),
    lambda name: AggregatingStateDescriptor(name, Count()),
]
IDS = ["value", "list", "map", "reducing", "aggregating"]


@pytest.mark.parametrize("make", ALL, ids=IDS)
def test_name_must_be_non_empty_str(make):
    cls_name = type(make("x")).__name__
    with pytest.raises(TypeError, match=f"^{cls_name}: state name must be a str, got 3 of type int$"):
        make(3)
    with pytest.raises(TypeError, match=f"^{cls_name}: state name must be a str, got None of type NoneType$"):
        make(None)
    with pytest.raises(ValueError, match=f"^{cls_name}: state name must not be empty$"):
        make("")


@pytest.mark.parametrize(
    ("make", "state_type"),
    list(zip(ALL, [StateType.VALUE, StateType.LIST, StateType.MAP, StateType.REDUCING, StateType.AGGREGATING])),
    ids=IDS,
)
def test_kind_name_and_ttl(make, state_type):
    descriptor = make("count")
    assert descriptor.state_type is state_type
    assert descriptor.get_name() == descriptor.name == "count"
    assert descriptor.get_ttl_config() is None and not descriptor.is_ttl_enabled()
    config = {"ttl_ms": 1000}
    descriptor.enable_time_to_live(config)
    assert descriptor.get_ttl_config() is config and descriptor.ttl_config is config
    assert descriptor.is_ttl_enabled()
    with pytest.raises(TypeError, match=r"ttl_config must not be None$"):
        descriptor.enable_time_to_live(None)


def test_type_infos_are_recorded():
    assert ValueStateDescriptor("v", "INT").type_info == "INT"
    list_descriptor = ListStateDescriptor("l", "STRING")
    assert list_descriptor.elem_type_info == "STRING" == list_descriptor.type_info
    map_descriptor = MapStateDescriptor("m", "STRING", "LONG")
    assert (map_descriptor.key_type_info, map_descriptor.value_type_info) == ("STRING", "LONG")
    assert ReducingStateDescriptor("r", _add, "LONG").type_info == "LONG"
    assert AggregatingStateDescriptor("a", Count(), "LONG").type_info == "LONG"


def test_reduce_function_forms():
    function = Max()
    descriptor = ReducingStateDescriptor("r", function)
    assert descriptor.get_reduce_function() is function
    assert descriptor.reduce_callable(3, 5) == 5
    lam = lambda a, b: a - b  # noqa: E731
    descriptor = ReducingStateDescriptor("r", lam)
    assert descriptor.get_reduce_function() is lam
    assert descriptor.reduce_callable(3, 5) == -2


@pytest.mark.parametrize("bad", [42, "sum", None, Double()], ids=["int", "str", "None", "MapFunction"])
def test_bad_reduce_function_names_the_descriptor(bad):
    with pytest.raises(TypeError) as info:
        ReducingStateDescriptor("totals", bad)
    assert str(info.value).startswith(
        "ReducingStateDescriptor(name='totals') expects a ReduceFunction or a callable, got "
    )
    assert type(bad).__name__ in str(info.value)


@pytest.mark.parametrize(
    ("bad", "missing"),
    [(_add, "create_accumulator"), (Max(), "create_accumulator"), (None, "create_accumulator")],
)
def test_bad_agg_function_names_the_descriptor(bad, missing):
    with pytest.raises(TypeError) as info:
        AggregatingStateDescriptor("avg", bad)
    message = str(info.value)
    assert message.startswith("AggregatingStateDescriptor(name='avg') expects an AggregateFunction, got ")
    assert message.endswith(f"without a {missing}() method")


def test_agg_function_accessor():
    function = Count()
    assert AggregatingStateDescriptor("a", function).get_agg_function() is function


def test_equality_is_class_and_name():
    assert ValueStateDescriptor("a") == ValueStateDescriptor("a", "INT")
    assert ValueStateDescriptor("a") != ValueStateDescriptor("b")
    assert ValueStateDescriptor("a") != ListStateDescriptor("a")
    assert len({ValueStateDescriptor("a"), ValueStateDescriptor("a"), ListStateDescriptor("a")}) == 2
    assert repr(MapStateDescriptor("m")) == "MapStateDescriptor(name='m')"


def test_descriptors_pickle():
    descriptor = pickle.loads(pickle.dumps(ReducingStateDescriptor("r", Max())))
    assert descriptor.name == "r" and descriptor.reduce_callable(1, 2) == 2
    assert isinstance(descriptor, StateDescriptor)
