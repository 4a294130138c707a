"""Every function base is generic, as PyFlink's (``class F(ProcessWindowFunction[tuple, tuple,
str, TimeWindow])``): each base below is subscripted with its type parameters, subclassed, and
run in one real job whose outputs are asserted exactly."""

from __future__ import annotations

import pytest

from _ds_helpers import run
from rill.common.watermark_strategy import WatermarkStrategy
from rill.datastream.connectors import CollectSink
from rill.datastream.functions import (
    AggregateFunction, AllWindowFunction, BroadcastProcessFunction, CoFlatMapFunction, CoMapFunction,
    CoProcessFunction, FilterFunction, FlatMapFunction, KeyedBroadcastProcessFunction, KeyedCoProcessFunction,
    KeyedProcessFunction, KeySelector, MapFunction, Partitioner, ProcessAllWindowFunction, ProcessFunction,
    ProcessJoinFunction, ProcessWindowFunction, ReduceFunction, SinkFunction, WindowFunction,
)
from rill.datastream.window import CountWindow
from rill.state import MapStateDescriptor


class Double(MapFunction[tuple, tuple]):
    def map(self, value):
        return value[0], value[1] * 2


class Twice(FlatMapFunction[tuple, tuple]):
    def flat_map(self, value):
        yield value
        yield value


class NotB(FilterFunction[tuple]):
    def filter(self, value):
        return value[0] != "b"


class Identity(ProcessFunction[tuple, tuple]):
    def process_element(self, value, ctx: ProcessFunction.Context):
        yield value


class First(KeySelector[tuple, str]):
    def get_key(self, value):
        return value[0]


class ToZero(Partitioner[str]):
    def partition(self, key, num_partitions):
        return 0


class Sum(ReduceFunction[tuple]):
    def reduce(self, value1, value2):
        return value1[0], value1[1] + value2[1]


class Keyed(KeyedProcessFunction[str, tuple, str]):
    def process_element(self, value, ctx: KeyedProcessFunction.Context):
        yield f"{ctx.get_current_key()}={value[1]}"


class Avg(AggregateFunction[tuple, tuple, float]):
    def create_accumulator(self):
        return 0, 0

    def add(self, value, accumulator):
        return accumulator[0] + value[1], accumulator[1] + 1

    def get_result(self, accumulator):
        return accumulator[0] / accumulator[1]

    def merge(self, acc_a, acc_b):
        return acc_a[0] + acc_b[0], acc_a[1] + acc_b[1]


class Count(WindowFunction[tuple, tuple, str, CountWindow]):
    def apply(self, key, window, inputs):
        yield key, len(list(inputs))


class CountP(ProcessWindowFunction[tuple, tuple, str, CountWindow]):
    def process(self, key, context: ProcessWindowFunction.Context[CountWindow], elements):
        yield "p", key, [e[1] for e in elements]


class All(AllWindowFunction[tuple, int, CountWindow]):
    def apply(self, window, inputs):
        yield sum(v[1] for v in inputs)


class AllP(ProcessAllWindowFunction[tuple, int, CountWindow]):
    def process(self, context: ProcessAllWindowFunction.Context[CountWindow], elements):
        yield -sum(v[1] for v in elements)


class CoMap(CoMapFunction[tuple, int, str]):
    def map1(self, value):
        return f"L{value[1]}"

    def map2(self, value):
        return f"R{value}"


class CoFlat(CoFlatMapFunction[tuple, int, str]):
    def flat_map1(self, value):
        yield f"l{value[1]}"

    def flat_map2(self, value):
        yield f"r{value}"


class CoProc(CoProcessFunction[tuple, int, str]):
    def process_element1(self, value, ctx):
        yield f"p1:{value[1]}"

    def process_element2(self, value, ctx):
        yield f"p2:{value}"


class KeyedCoProc(KeyedCoProcessFunction[str, tuple, tuple, str]):
    def process_element1(self, value, ctx):
        yield f"k1:{ctx.get_current_key()}"

    def process_element2(self, value, ctx):
        yield f"k2:{ctx.get_current_key()}"


RULES = MapStateDescriptor("rules")


class Bcast(BroadcastProcessFunction[tuple, int, str]):
    def process_element(self, value, ctx):
        yield f"b:{value[0]}"

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value, value)


class KeyedBcast(KeyedBroadcastProcessFunction[str, tuple, int, str]):
    def process_element(self, value, ctx):
        yield f"kb:{ctx.get_current_key()}"

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value, value)


class Join(ProcessJoinFunction[tuple, tuple, str]):
    def process_element(self, left, right, ctx):
        yield f"{left[0]}:{left[1]}+{right[1]}"


class Remember(SinkFunction[str]):
    def __init__(self, sink):
        self.sink = sink

    def invoke(self, value, context):
        pass


def test_the_type_parameter_counts_are_pyflinks():
    # PyFlink 2.3's Generic bases, in its order; a wrong count is typing's TypeError
    assert len(ProcessWindowFunction.__parameters__) == 4
    assert len(WindowFunction.__parameters__) == 4
    assert len(ProcessAllWindowFunction.__parameters__) == 3
    assert len(AllWindowFunction.__parameters__) == 3
    assert len(BroadcastProcessFunction.__parameters__) == 3
    assert len(KeyedBroadcastProcessFunction.__parameters__) == 4
    assert len(ProcessWindowFunction.Context.__parameters__) == 1
    with pytest.raises(TypeError, match="Too few arguments|Too few parameters"):
        ProcessWindowFunction[tuple, tuple]


def test_every_generic_base_runs_in_a_job(env):
    data = [("a", 1), ("b", 2), ("a", 3), ("c", 4)]
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v, _ts: v[1])
    src = env.from_collection(data).assign_timestamps_and_watermarks(strategy)
    sinks = {name: CollectSink() for name in (
        "chain", "keyed", "windows", "all", "agg", "co", "keyed_co", "bcast", "join", "partition")}
    try:
        chain = src.map(Double()).flat_map(Twice()).filter(NotB()).process(Identity())
        chain.sink_to(sinks["chain"])
        chain.key_by(First()).reduce(Sum()).key_by(First()).process(Keyed()).sink_to(sinks["keyed"])
        keyed = src.key_by(First())
        keyed.count_window(2).apply(Count()).union(keyed.count_window(2).process(CountP())) \
            .sink_to(sinks["windows"])
        src.count_window_all(2).apply(All()).union(src.count_window_all(4).process(AllP())) \
            .sink_to(sinks["all"])
        keyed.count_window(2).aggregate(Avg()).sink_to(sinks["agg"])
        nums = env.from_collection([7, 8])
        src.connect(nums).map(CoMap()).union(src.connect(nums).flat_map(CoFlat()),
                                             src.connect(nums).process(CoProc())).sink_to(sinks["co"])
        keyed.connect(src.key_by(First())).process(KeyedCoProc()).sink_to(sinks["keyed_co"])
        src.connect(nums.broadcast(RULES)).process(Bcast()).union(
            keyed.connect(nums.broadcast(RULES)).process(KeyedBcast())).sink_to(sinks["bcast"])
        keyed.interval_join(src.key_by(First())).between(0, 0).process(Join()).sink_to(sinks["join"])
        src.partition_custom(ToZero(), First()).sink_to(sinks["partition"])
        src.add_sink(Remember(None))
        run(env, "generic functions")
        out = {name: sorted(sink.get_results(), key=repr) for name, sink in sinks.items()}
    finally:
        for sink in sinks.values():
            sink.close()
    assert out["chain"] == [("a", 2), ("a", 2), ("a", 6), ("a", 6), ("c", 8), ("c", 8)]
    assert out["keyed"] == ["a=10", "a=16", "a=2", "a=4", "c=16", "c=8"]
    assert out["windows"] == [("a", 2), ("p", "a", [1, 3])]
    assert out["all"] == [-10, 3, 7]
    assert out["agg"] == [2.0]
    assert out["co"] == sorted(["L1", "L2", "L3", "L4", "R7", "R8", "l1", "l2", "l3", "l4", "r7", "r8",
                                "p1:1", "p1:2", "p1:3", "p1:4", "p2:7", "p2:8"], key=repr)
    assert out["keyed_co"] == sorted([f"k{i}:{k}" for i in (1, 2) for k in "abac"], key=repr)
    assert out["bcast"] == sorted([f"b:{k}" for k in "abac"] + [f"kb:{k}" for k in "abac"], key=repr)
    assert out["join"] == ["a:1+1", "a:3+3", "b:2+2", "c:4+4"]
    assert out["partition"] == sorted(data, key=repr)
