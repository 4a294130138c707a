"""The StreamGraph of a BATCH program: which operators its nodes run (final-result reduce, keyed
operators behind a key-grouping input, broadcast-first two-input operators, sources and
timestamp assigners without watermarks), the mode AUTOMATIC picks, and what STREAMING keeps."""

from __future__ import annotations

import pytest

from rill.common import Duration, WatermarkStrategy
from rill.common.execution_options import RuntimeExecutionMode
from rill.datastream import (
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    StreamExecutionEnvironment,
)
from rill.datastream.connectors.collection import CollectionSource
from rill.datastream.window import TumblingEventTimeWindows
from rill.graph.batch_translation import batch_watermark_strategy
from rill.operators.batch_grouped_reduce import BatchGroupedReduceOperator
from rill.operators.batch_keyed_input import BatchKeyedOneInputOperator, BatchTwoInputOperator
from rill.operators.keyed_reduce import StreamGroupedReduce
from rill.state import MapStateDescriptor


class Noop(KeyedProcessFunction):
    def process_element(self, value, ctx):
        yield value


class CoNoop(KeyedCoProcessFunction):
    def process_element1(self, value, ctx):
        yield value

    def process_element2(self, value, ctx):
        yield value


class BroadcastNoop(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        yield value

    def process_broadcast_element(self, value, ctx):
        return None


class KeyedBroadcastNoop(KeyedBroadcastProcessFunction):
    def process_element(self, value, ctx):
        yield value

    def process_broadcast_element(self, value, ctx):
        return None


def program(mode):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(mode)
    strategy = (WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(5))
                .with_timestamp_assigner(lambda e, ts: e[1]).with_idleness(Duration.of_seconds(1)))
    src = env.from_source(CollectionSource([("a", 1)]), strategy, "events")
    keyed = src.key_by(lambda e: e[0])
    keyed.reduce(lambda a, b: a).name("r").print()
    keyed.process(Noop()).name("p").print()
    keyed.window(TumblingEventTimeWindows.of(10)).reduce(lambda a, b: a).name("w").print()
    keyed.connect(src.key_by(lambda e: e[0])).process(CoNoop()).name("c").print()
    src.connect(src.broadcast(MapStateDescriptor("rules"))).process(BroadcastNoop()).name("b").print()
    keyed.connect(src.broadcast(MapStateDescriptor("rules"))).process(KeyedBroadcastNoop()).name("kb").print()
    src.map(lambda e: e).name("m").print()
    return env.get_stream_graph()


def operators_by_name(graph):
    return {n.operator_name: n.operator_factory.operator for n in graph.nodes.values()}


def test_batch_nodes_run_batch_operators():
    graph = program(RuntimeExecutionMode.BATCH)
    assert graph.runtime_mode is RuntimeExecutionMode.BATCH
    ops = operators_by_name(graph)
    assert type(ops["r"]) is BatchGroupedReduceOperator
    assert type(ops["p"]) is BatchKeyedOneInputOperator and type(ops["p"].operator).__name__ == "KeyedProcessOperator"
    assert type(ops["w"]) is BatchKeyedOneInputOperator and type(ops["w"].operator).__name__ == "WindowOperator"
    assert (type(ops["c"]), ops["c"].keyed_inputs) == (BatchTwoInputOperator, (True, True))
    assert (type(ops["b"]), ops["b"].keyed_inputs) == (BatchTwoInputOperator, (False, False))
    assert (type(ops["kb"]), ops["kb"].keyed_inputs) == (BatchTwoInputOperator, (True, False))
    assert type(ops["m"]).__name__ == "StreamMap"
    source = ops["Source: events"].watermark_strategy
    assert source.is_no_watermarks and source.get_idle_timeout_ms() is None
    assert source.create_timestamp_assigner()(("a", 7), None) == 7


def test_streaming_keeps_its_operators():
    graph = program(RuntimeExecutionMode.STREAMING)
    assert graph.runtime_mode is RuntimeExecutionMode.STREAMING
    ops = operators_by_name(graph)
    assert type(ops["r"]) is StreamGroupedReduce
    assert type(ops["p"]).__name__ == "KeyedProcessOperator"
    assert not ops["Source: events"].watermark_strategy.is_no_watermarks


def test_automatic_with_bounded_sources_is_batch():
    assert program(RuntimeExecutionMode.AUTOMATIC).runtime_mode is RuntimeExecutionMode.BATCH


@pytest.mark.parametrize("strategy", [None, WatermarkStrategy.no_watermarks()])
def test_a_strategy_without_assigner_stays_without(strategy):
    batch = batch_watermark_strategy(strategy)
    assert batch is None if strategy is None else (batch.is_no_watermarks and batch.get_timestamp_assigner() is None)
