"""The WindowedStream / AllWindowedStream API: the transformations it builds (operator names as
Flink shows them, keyed state selector, window_all forced to parallelism 1), the errors it
raises when the graph is built, count_window helpers, and jobs that run on the embedded
runtime (every job in both execution modes)."""

import concurrent.futures
import threading
import time

import pytest

from rill.common import Duration, WatermarkStrategy
from rill.datastream import StreamExecutionEnvironment
from rill.datastream.connectors import CollectSink
from rill.datastream.functions import AggregateFunction, ReduceFunction
from rill.datastream.window import (
    AllWindowFunction,
    CountEvictor,
    CountTrigger,
    DeltaTrigger,
    EventTimeSessionWindows,
    GlobalWindows,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    PurgingTrigger,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    WindowFunction,
)
from rill.datastream.windowed_stream import AllWindowedStream, WindowedStream, count_window, count_window_all
from rill.operators.output_tag import OutputTag
from rill.operators.watermark import WatermarkGenerator
from rill.common.streamrecord import Watermark
from rill.operators.windowing import EvictingWindowOperator, WindowOperator


@pytest.fixture
def env(env):
    """The two-mode ``env`` of tests/conftest.py at parallelism 2."""
    env.set_parallelism(2)
    return env


def add_pairs(a, b):
    return (a[0], a[1] + b[1])


class Summing(ReduceFunction):
    def reduce(self, a, b):
        return (a[0], a[1] + b[1], a[2])


class Count(AggregateFunction):
    def create_accumulator(self):
        return 0

    def add(self, value, acc):
        return acc + 1

    def get_result(self, acc):
        return acc

    def merge(self, a, b):
        return a + b


def keyed(env, data=(("a", 1, 1),)):
    return env.from_collection(list(data)).key_by(lambda r: r[0])


def operator_of(ds):
    return ds.get_transformation().operator_factory.operator


# -- building ---------------------------------------------------------------------------------------

def test_names_follow_flinks_window_operator_names(env):
    ks = keyed(env)
    ds = WindowedStream(ks, TumblingEventTimeWindows.of(5000)).reduce(Summing())
    assert ds.get_name() == "Window(TumblingEventTimeWindows(5000), EventTimeTrigger, Summing, PassThroughWindowFunction)"
    assert ds.get_transformation().state_key_selector is not None
    assert isinstance(operator_of(ds), WindowOperator)
    assert WindowedStream(ks, SlidingEventTimeWindows.of(10, 5)).sum(1).get_name() == (
        "Window(SlidingEventTimeWindows(10, 5), EventTimeTrigger, SumAggregator, PassThroughWindowFunction)")
    assert WindowedStream(ks, EventTimeSessionWindows.with_gap(7)).aggregate(Count()).get_name() == (
        "Window(EventTimeSessionWindows(7), EventTimeTrigger, Count, PassThroughWindowFunction)")
    assert WindowedStream(ks, TumblingEventTimeWindows.of(10)).reduce(add_pairs).get_name() == (
        "Window(TumblingEventTimeWindows(10), EventTimeTrigger, add_pairs, PassThroughWindowFunction)")

    class Fmt(ProcessWindowFunction):
        def process(self, key, context, elements):
            return [key]

    assert WindowedStream(ks, TumblingEventTimeWindows.of(10)).reduce(add_pairs, Fmt()).get_name() == (
        "Window(TumblingEventTimeWindows(10), EventTimeTrigger, add_pairs, Fmt)")
    assert WindowedStream(ks, TumblingEventTimeWindows.of(10)).process(Fmt()).get_name() == (
        "Window(TumblingEventTimeWindows(10), EventTimeTrigger, Fmt)")
    ds = count_window(ks, 3, 2).apply(lambda key, window, inputs: [len(list(inputs))])
    assert ds.get_name() == "Window(GlobalWindows(), CountTrigger, CountEvictor, <lambda>)"
    assert isinstance(operator_of(ds), EvictingWindowOperator)


def test_settings_reach_the_operator(env):
    tag = OutputTag("late")
    ds = (WindowedStream(keyed(env), TumblingEventTimeWindows.of(10))
          .allowed_lateness(250).side_output_late_data(tag).trigger(CountTrigger.of(2)).reduce(add_pairs))
    op = operator_of(ds)
    assert (op.allowed_lateness, op.late_data_output_tag, type(op.trigger)) == (250, tag, CountTrigger)
    assert ds.get_side_output(tag).get_transformation().output_tag == tag


def test_count_window_helpers(env):
    tumbling = count_window(keyed(env), 5)
    assert isinstance(tumbling._builder.trigger, PurgingTrigger) and tumbling._builder.evictor is None
    assert tumbling._builder.trigger.nested_trigger.count == 5
    sliding = count_window(keyed(env), 5, 2)
    assert isinstance(sliding._builder.evictor, CountEvictor) and sliding._builder.evictor.max_count == 5
    assert isinstance(sliding._builder.trigger, CountTrigger) and sliding._builder.trigger.count == 2
    assert isinstance(count_window(keyed(env), 5, 0)._builder.trigger, PurgingTrigger)  # PyFlink's slide=0
    with pytest.raises(ValueError, match="KeyedStream.count_window: the window size must be an int >= 1 \\(elements\\), got 0"):
        count_window(keyed(env), 0)
    with pytest.raises(ValueError, match="KeyedStream.count_window: the slide must be an int >= 1 \\(elements\\), got -2"):
        count_window(keyed(env), 3, -2)
    with pytest.raises(ValueError, match="DataStream.count_window_all: the window size"):
        count_window_all(env.from_collection([1]), -1)


def test_window_all_runs_non_parallel_on_a_constant_key(env):
    ds = env.from_collection([1, 2, 3])
    out = AllWindowedStream(ds, GlobalWindows.create()).trigger(CountTrigger.of(2)).apply(
        lambda window, inputs: [sum(inputs)])
    t = out.get_transformation()
    assert (t.parallelism, t.max_parallelism, t.non_parallel) == (1, 1, True)
    assert t.state_key_selector(12345) == 0
    assert out.get_name() == "Window(GlobalWindows(), CountTrigger, <lambda>)"
    with pytest.raises(TypeError, match="AllWindowedStream.process expects a ProcessAllWindowFunction"):
        AllWindowedStream(ds, GlobalWindows.create()).process(lambda ctx, elements: [])

    class Keyed(WindowFunction):
        def apply(self, key, window, inputs):
            return []

    with pytest.raises(TypeError, match="AllWindowedStream.apply expects an AllWindowFunction"):
        AllWindowedStream(ds, GlobalWindows.create()).apply(Keyed())


@pytest.mark.parametrize("build, error, message", [
    (lambda ks: WindowedStream(ks, 5000), TypeError, "KeyedStream.window needs a WindowAssigner"),
    (lambda ks: WindowedStream(ks, TumblingEventTimeWindows.of(10)).allowed_lateness(-1), ValueError,
     "The allowed lateness cannot be negative, got -1 ms"),
    (lambda ks: WindowedStream(ks, TumblingEventTimeWindows.of(10)).allowed_lateness(1.5), TypeError,
     "WindowedStream.allowed_lateness must be an int number of milliseconds"),
    (lambda ks: WindowedStream(ks, TumblingEventTimeWindows.of(10)).side_output_late_data("late"), TypeError,
     "side_output_late_data needs an OutputTag"),
    (lambda ks: WindowedStream(ks, EventTimeSessionWindows.with_gap(10)).trigger(DeltaTrigger.of(1, lambda a, b: 0)),
     ValueError, "A merging window assigner cannot be used with a trigger that does not support merging"),
    (lambda ks: WindowedStream(ks, TumblingEventTimeWindows.of(10)).trigger("count"), TypeError,
     "WindowedStream.trigger needs a Trigger"),
    (lambda ks: WindowedStream(ks, TumblingEventTimeWindows.of(10)).evictor(3), TypeError,
     "WindowedStream.evictor needs an Evictor"),
    (lambda ks: WindowedStream(ks, TumblingEventTimeWindows.of(10)).process(lambda k, c, e: []), TypeError,
     "WindowedStream.process expects a ProcessWindowFunction"),
    (lambda ks: WindowedStream(ks, TumblingEventTimeWindows.of(10)).aggregate(lambda a, b: a), TypeError,
     "WindowedStream.aggregate expects an AggregateFunction"),
    (lambda ks: WindowedStream(ks, TumblingEventTimeWindows.of(10)).reduce(42), TypeError,
     "WindowedStream.reduce expects a ReduceFunction or a callable"),
    (lambda ks: WindowedStream(ks, TumblingEventTimeWindows.of(10)).reduce(add_pairs, window_function=3), TypeError,
     "WindowedStream.reduce expects a WindowFunction, a ProcessWindowFunction or a callable"),
])
def test_bad_input_fails_when_the_graph_is_built(env, build, error, message):
    with pytest.raises(error, match=message):
        build(keyed(env))


# -- running ----------------------------------------------------------------------------------------

def _run_and_collect(ds, timeout_s=30.0):
    sink = CollectSink()
    before = set(threading.enumerate())
    try:
        ds.sink_to(sink)
        client = ds.get_execution_environment().execute_async("window test")
        try:
            client.get_job_execution_result().result(timeout=timeout_s)
        except concurrent.futures.TimeoutError:
            client.cancel()
            pytest.fail("window job did not finish")
        results = sink.get_results()
        deadline = time.monotonic() + 5.0
        while (left := [t for t in threading.enumerate() if t not in before]) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not left, f"threads still running after the window job ended: {left}"
        return results
    finally:
        sink.close()


EVENTS = [("a", 1, 1), ("b", 2, 3), ("a", 3, 9), ("a", 4, 10), ("b", 5, 15), ("a", 6, 12), ("c", 7, 25)]


def _timestamped(env, events=EVENTS):
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda ev, ts: ev[2])
    return env.from_collection(list(events)).assign_timestamps_and_watermarks(strategy)


def test_tumbling_window_job(env):
    ds = WindowedStream(_timestamped(env).key_by(lambda ev: ev[0]), TumblingEventTimeWindows.of(10)).sum(1)
    assert sorted(_run_and_collect(ds)) == [("a", 4, 1), ("a", 10, 10), ("b", 2, 3), ("b", 5, 15), ("c", 7, 25)]


class Punctuated(WatermarkGenerator):
    """A watermark of ``timestamp - 1`` after every event (deterministic lateness)."""

    def on_event(self, event, event_timestamp, output):
        output.emit_watermark(Watermark(event_timestamp - 1))


def test_late_data_side_output_job(env):
    late = OutputTag("late")
    events = [("a", 1, 1), ("a", 2, 30), ("a", 3, 5), ("a", 4, 31)]  # the watermark 29 makes 5 late
    strategy = WatermarkStrategy.for_generator(Punctuated).with_timestamp_assigner(lambda ev, ts: ev[2])
    timestamped = env.from_collection(events).assign_timestamps_and_watermarks(strategy)
    result = (WindowedStream(timestamped.key_by(lambda ev: ev[0]), TumblingEventTimeWindows.of(10))
              .side_output_late_data(late).reduce(lambda a, b: (a[0], a[1] + b[1], a[2])))
    late_stream = result.get_side_output(late)
    sink = CollectSink()
    late_stream.sink_to(sink)
    try:
        assert sorted(_run_and_collect(result)) == [("a", 1, 1), ("a", 6, 30)]
        assert sink.get_results() == [("a", 3, 5)]
    finally:
        sink.close()


def test_window_all_job(env):
    class Describe(ProcessAllWindowFunction):
        def process(self, context, elements):
            yield (context.window().start, sorted(e[1] for e in elements))

    ds = AllWindowedStream(_timestamped(env), TumblingEventTimeWindows.of(10)).process(Describe())
    assert sorted(_run_and_collect(ds)) == [(0, [1, 2, 3]), (10, [4, 5, 6]), (20, [7])]


def test_count_window_all_job(env):
    class Total(AllWindowFunction):
        def apply(self, window, inputs):
            return [sum(inputs)]

    ds = count_window_all(env.from_collection(list(range(1, 8))), 3).apply(Total())
    assert sorted(_run_and_collect(ds)) == [6, 15]  # the parallel sink may reorder them


def test_keyed_stream_window_and_count_window_are_wired(env):
    ds = _timestamped(env).key_by(lambda ev: ev[0]).window(TumblingEventTimeWindows.of(10)).reduce(
        lambda a, b: (a[0], a[1] + b[1], a[2]))
    assert sorted(_run_and_collect(ds)) == [("a", 4, 1), ("a", 10, 10), ("b", 2, 3), ("b", 5, 15), ("c", 7, 25)]
    env2 = StreamExecutionEnvironment.get_execution_environment()
    env2.set_parallelism(2)
    counts = env2.from_collection([("a", i) for i in range(1, 8)]).key_by(lambda r: r[0]).count_window(3, 2).apply(
        lambda key, window, inputs: [(key, [v for _, v in inputs])])
    assert _run_and_collect(counts) == [("a", [1, 2]), ("a", [2, 3, 4]), ("a", [4, 5, 6])]
    assert isinstance(env2.from_collection([1]).window_all(GlobalWindows.create()), AllWindowedStream)


def test_session_windows_merge_three_windows_into_one_job(env):
    """Two late-arriving elements bridge three sessions of key a into one (Flink merges them
    with MergingWindowSet; the NOTES found PyFlink dropping elements on such merges)."""
    class Describe(ProcessWindowFunction):
        def process(self, key, context, elements):
            yield (key, context.window().start, context.window().end, sorted(e[2] for e in elements))

    events = [("a", 0, 1), ("a", 0, 15), ("a", 0, 29), ("a", 0, 10), ("a", 0, 24),
              ("b", 0, 100), ("b", 0, 200), ("b", 0, 205)]
    strategy = (WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(100))
                .with_timestamp_assigner(lambda ev, ts: ev[2]))
    ds = (env.from_collection(events).set_parallelism(1).assign_timestamps_and_watermarks(strategy)
          .key_by(lambda ev: ev[0]).window(EventTimeSessionWindows.with_gap(10)).process(Describe()))
    # a: [1,11) [15,25) [29,39); 10 joins the first two, 24 joins that and the third
    assert sorted(_run_and_collect(ds)) == [
        ("a", 1, 39, [1, 10, 15, 24, 29]), ("b", 100, 110, [100]), ("b", 200, 215, [200, 205])]
