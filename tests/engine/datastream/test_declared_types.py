"""Declared types act where Flink serializes: a source's output, the network, a sink's input,
keyed state (Flink's serializers; ``Types.FLOAT()`` is float32, ``Types.INT()`` 32 bits)."""

from __future__ import annotations

import pytest

from _ds_helpers import collect
from rill.common.type_conversion import TypeValueError
from rill.common.typeinfo import Types
from rill.datastream import OutputTag
from rill.datastream.functions import KeyedProcessFunction, ProcessFunction
from rill.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor

F32_110_1 = 110.0999984741211


def test_a_typed_source_emits_float32(env):
    out = collect(env.from_collection([("a", 110.1)], type_info=Types.TUPLE([Types.STRING(), Types.FLOAT()])))
    assert out == [("a", F32_110_1)]


def test_output_type_converts_at_the_network_and_the_sink_not_inside_the_chain(env):
    ds = env.from_collection([110.1, 0.5])
    typed = ds.map(lambda v: v, output_type=Types.FLOAT())
    # chained successor (a Python operator in PyFlink too, fused): sees the unrounded value
    chained = typed.map(lambda v: ("chained", v))
    # over the network (rebalance to parallelism 2): serialized, so rounded
    networked = typed.rebalance().map(lambda v: ("network", v)).set_parallelism(2)
    out = collect(chained.union(networked))
    assert sorted(out) == [("chained", 0.5), ("chained", 110.1), ("network", 0.5), ("network", F32_110_1)]


def test_an_untyped_double_stream_is_unchanged(env):
    out = collect(env.from_collection([110.1], type_info=Types.DOUBLE()).map(lambda v: v, output_type=Types.DOUBLE()))
    assert out == [110.1]


def test_a_value_outside_int_fails_naming_operator_value_and_type(env):
    ds = env.from_collection([1, 2 ** 31]).map(lambda v: v, output_type=Types.INT()).name("Widen")
    with pytest.raises(Exception) as info:
        collect(ds.rebalance().map(lambda v: v))
    chain = [info.value]
    while chain[-1].__cause__ is not None:
        chain.append(chain[-1].__cause__)
    error = next(e for e in chain if isinstance(e, TypeValueError))
    assert str(error) == ("operator 'Widen' (output_type INT): value 2147483648 does not fit INT "
                          "(range -2147483648..2147483647)")


class Store(KeyedProcessFunction):
    def open(self, ctx):
        self.value = ctx.get_state(ValueStateDescriptor("value", Types.FLOAT()))
        self.list = ctx.get_list_state(ListStateDescriptor("list", Types.FLOAT()))
        self.map = ctx.get_map_state(MapStateDescriptor("map", Types.STRING(), Types.FLOAT()))
        self.untyped = ctx.get_state(ValueStateDescriptor("untyped"))
        self.short = ctx.get_state(ValueStateDescriptor("short", Types.SHORT()))

    def process_element(self, value, ctx):
        self.value.update(value)
        self.list.add(value)
        self.list.add_all([value])
        self.map.put("k", value)
        self.untyped.update(value)
        yield self.value.value(), list(self.list.get()), self.map.get("k"), self.untyped.value()
        self.short.update(int(value) * 1000)


def test_keyed_state_declared_float_stores_float32_and_short_is_range_checked(env):
    out = collect(env.from_collection([0.1]).key_by(lambda v: 0).process(Store()))
    f = 0.10000000149011612
    assert out == [(f, [f, f], f, 0.1)]
    with pytest.raises(Exception) as info:
        collect(env.from_collection([40.0]).key_by(lambda v: 0).process(Store()))
    chain = [info.value]
    while chain[-1].__cause__ is not None:
        chain.append(chain[-1].__cause__)
    error = next(e for e in chain if isinstance(e, TypeValueError))
    assert str(error) == "state 'short' (SHORT): value 40000 does not fit SHORT (range -32768..32767)"


class Split(ProcessFunction):
    def process_element(self, value, ctx):
        yield LOW, value
        yield value


LOW = OutputTag("low", Types.FLOAT())


def test_a_side_output_is_converted_by_its_tags_type(env):
    main = env.from_collection([110.1]).process(Split())
    side = main.get_side_output(LOW).rebalance().map(lambda v: ("side", v)).set_parallelism(2)
    out = collect(main.rebalance().map(lambda v: ("main", v)).set_parallelism(2).union(side))
    assert sorted(out) == [("main", 110.1), ("side", F32_110_1)]


def test_execute_and_collect_and_print_see_float32(env, printed):
    assert list(env.from_collection([0.1]).map(lambda v: v, output_type=Types.FLOAT()).execute_and_collect()) == \
        [0.10000000149011612]
    env.from_collection([0.1]).map(lambda v: v, output_type=Types.FLOAT()).print()
    env.execute()
    assert printed() == "0.10000000149011612\n"
