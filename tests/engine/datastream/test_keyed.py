"""KeyedStream end to end: rolling reduce and aggregations (tuples and Rows), keyed state of
every kind through the RuntimeContext, processing-time and event-time timers."""

from __future__ import annotations

import os
import time
from typing import List

import pytest

from _ds_helpers import collect
from rill.common import Row, Types
from rill.datastream import KeyedProcessFunction, ReduceFunction, RuntimeContext
from rill.datastream.connectors import Source, SourceReader, SourceSplit
from rill.datastream.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from rill.operators.timer_service import TimeDomain

MIN_WATERMARK = -(2 ** 63)
MAX_TIMESTAMP = 2 ** 63 - 1

DATA = [("a", 3, "x"), ("b", 1, "y"), ("a", 1, "z"), ("b", 5, "w"), ("a", 2, "v"), ("a", 1, "u")]


def _per_key(out, key_of=lambda r: r[0]):
    """Outputs grouped by key, each in emission order (a key lives on one subtask)."""
    groups = {}
    for r in out:
        groups.setdefault(key_of(r), []).append(r)
    return groups


def _keyed(env, data=DATA):
    # one upstream subtask: the records of a key reach the keyed operator in input order
    return env.from_collection(data).key_by(lambda t: t[0])


@pytest.fixture
def env2(env):
    env.set_parallelism(2)
    return env


def test_reduce_with_a_callable(env2):
    out = collect(_keyed(env2).reduce(lambda a, b: (a[0], a[1] + b[1], a[2] + b[2])))
    assert _per_key(out) == {
        "a": [("a", 3, "x"), ("a", 4, "xz"), ("a", 6, "xzv"), ("a", 7, "xzvu")],
        "b": [("b", 1, "y"), ("b", 6, "yw")],
    }


def test_reduce_with_a_reduce_function(env2):
    class Longest(ReduceFunction):
        def reduce(self, value1, value2):
            return value2 if len(value2) > len(value1) else value1

    words = ["aa", "abc", "b", "ab", "bcd", "abcd"]
    out = collect(env2.from_collection(words).key_by(lambda w: w[0]).reduce(Longest()))
    assert _per_key(out, lambda w: w[0]) == {"a": ["aa", "abc", "abc", "abcd"], "b": ["b", "bcd"]}


def test_sum_on_tuples(env2):
    assert _per_key(collect(_keyed(env2).sum(1))) == {
        "a": [("a", 3, "x"), ("a", 4, "x"), ("a", 6, "x"), ("a", 7, "x")],
        "b": [("b", 1, "y"), ("b", 6, "y")],
    }


def test_min_and_max_replace_only_the_field(env2):
    assert _per_key(collect(_keyed(env2).min(1))) == {
        "a": [("a", 3, "x"), ("a", 1, "x"), ("a", 1, "x"), ("a", 1, "x")],
        "b": [("b", 1, "y"), ("b", 1, "y")],
    }


def test_max_on_tuples(env2):
    assert _per_key(collect(_keyed(env2).max(1))) == {
        "a": [("a", 3, "x"), ("a", 3, "x"), ("a", 3, "x"), ("a", 3, "x")],
        "b": [("b", 1, "y"), ("b", 5, "y")],
    }


def test_min_by_and_max_by_keep_whole_records(env2):
    # ties keep the first record (Flink's default first=True): ("a", 1, "u") never wins
    assert _per_key(collect(_keyed(env2).min_by(1))) == {
        "a": [("a", 3, "x"), ("a", 1, "z"), ("a", 1, "z"), ("a", 1, "z")],
        "b": [("b", 1, "y"), ("b", 1, "y")],
    }


def test_max_by_on_tuples(env2):
    assert _per_key(collect(_keyed(env2).max_by(1))) == {
        "a": [("a", 3, "x"), ("a", 3, "x"), ("a", 3, "x"), ("a", 3, "x")],
        "b": [("b", 1, "y"), ("b", 5, "w")],
    }


ROWS = [Row(k=k, n=n, s=s) for k, n, s in DATA]


def _row_keyed(env):
    return env.from_collection(ROWS).key_by(lambda r: r.k, key_type=Types.STRING())


def _as_tuples(rows):
    return [(r.k, r.n, r.s) for r in rows]


def test_sum_min_max_on_rows_by_name_and_position(env2):
    s = collect(_row_keyed(env2).sum("n"))
    assert all(isinstance(r, Row) for r in s)
    assert {k: _as_tuples(v) for k, v in _per_key(s, lambda r: r.k).items()} == {
        "a": [("a", 3, "x"), ("a", 4, "x"), ("a", 6, "x"), ("a", 7, "x")],
        "b": [("b", 1, "y"), ("b", 6, "y")],
    }


def test_min_on_rows(env2):
    out = collect(_row_keyed(env2).min(1))
    assert {k: _as_tuples(v) for k, v in _per_key(out, lambda r: r.k).items()} == {
        "a": [("a", 3, "x"), ("a", 1, "x"), ("a", 1, "x"), ("a", 1, "x")],
        "b": [("b", 1, "y"), ("b", 1, "y")],
    }


def test_max_on_rows(env2):
    out = collect(_row_keyed(env2).max("n"))
    assert {k: _as_tuples(v) for k, v in _per_key(out, lambda r: r.k).items()} == {
        "a": [("a", 3, "x"), ("a", 3, "x"), ("a", 3, "x"), ("a", 3, "x")],
        "b": [("b", 1, "y"), ("b", 5, "y")],
    }


def test_min_by_max_by_on_rows(env2):
    lo = collect(_row_keyed(env2).min_by("n"))
    assert {k: _as_tuples(v) for k, v in _per_key(lo, lambda r: r.k).items()} == {
        "a": [("a", 3, "x"), ("a", 1, "z"), ("a", 1, "z"), ("a", 1, "z")],
        "b": [("b", 1, "y"), ("b", 1, "y")],
    }


def test_max_by_on_rows(env2):
    hi = collect(_row_keyed(env2).max_by(1))
    assert {k: _as_tuples(v) for k, v in _per_key(hi, lambda r: r.k).items()} == {
        "a": [("a", 3, "x"), ("a", 3, "x"), ("a", 3, "x"), ("a", 3, "x")],
        "b": [("b", 1, "y"), ("b", 5, "w")],
    }


def test_sum_of_scalars(env2):
    out = collect(env2.from_collection([1, 10, 2, 20, 3, 30]).key_by(lambda x: x < 10).sum())
    assert _per_key(out, lambda x: x < 10) == {True: [1, 3, 6], False: [10, 30, 60]}


def test_keyed_aggregation_final_values_with_parallel_upstream(env):
    env.set_parallelism(3)
    out = collect(env.from_sequence(1, 3000).map(lambda x: (x % 10, x)).key_by(lambda t: t[0]).sum(1))
    assert len(out) == 3000
    final = {}
    for k, v in out:
        final[k] = max(final.get(k, 0), v)  # running sums only grow
    assert final == {k: sum(x for x in range(1, 3001) if x % 10 == k) for k in range(10)}


# -- KeyedProcessFunction with state -----------------------------------------------------------

class _Avg:
    def create_accumulator(self):
        return [0, 0]

    def add(self, value, acc):
        return [acc[0] + value, acc[1] + 1]

    def get_result(self, acc):
        return acc[0] / acc[1]

    def merge(self, a, b):
        return [a[0] + b[0], a[1] + b[1]]


class AllStates(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))
        self.seen = runtime_context.get_list_state(ListStateDescriptor("seen", Types.STRING()))
        self.by_tag = runtime_context.get_map_state(MapStateDescriptor("by_tag", Types.STRING(), Types.INT()))
        self.total = runtime_context.get_reducing_state(
            ReducingStateDescriptor("total", lambda a, b: a + b, Types.INT()))
        self.avg = runtime_context.get_aggregating_state(
            AggregatingStateDescriptor("avg", _Avg(), Types.PICKLED_BYTE_ARRAY()))

    def process_element(self, value, ctx: KeyedProcessFunction.Context):
        key, n, tag = value
        assert ctx.get_current_key() == key
        assert ctx.timestamp() is None
        assert ctx.timer_service().current_watermark() == MIN_WATERMARK
        count = (self.count.value() or 0) + 1
        self.count.update(count)
        self.seen.add(tag)
        self.by_tag.put(tag[0], (self.by_tag.get(tag[0]) or 0) + n)
        self.total.add(n)
        self.avg.add(n)
        yield key, count, list(self.seen.get()), dict(self.by_tag.items()), self.total.get(), self.avg.get()


def test_keyed_process_function_with_every_kind_of_state(env2):
    data = [("a", 4, "x1"), ("b", 1, "y1"), ("a", 2, "x2"), ("a", 6, "z1"), ("b", 3, "y2")]
    out = collect(env2.from_collection(data).key_by(lambda t: t[0]).process(AllStates()))
    assert _per_key(out) == {
        "a": [("a", 1, ["x1"], {"x": 4}, 4, 4.0),
              ("a", 2, ["x1", "x2"], {"x": 6}, 6, 3.0),
              ("a", 3, ["x1", "x2", "z1"], {"x": 6, "z": 6}, 12, 4.0)],
        "b": [("b", 1, ["y1"], {"y": 1}, 1, 1.0),
              ("b", 2, ["y1", "y2"], {"y": 4}, 4, 2.0)],
    }


def test_keyed_state_is_scoped_per_key_over_many_keys(env):
    class Count(KeyedProcessFunction):
        def open(self, runtime_context):
            self.n = runtime_context.get_state(ValueStateDescriptor("n"))

        def process_element(self, value, ctx):
            n = (self.n.value() or 0) + 1
            self.n.update(n)
            if n == 10:
                yield ctx.get_current_key()

    env.set_parallelism(3)
    out = collect(env.from_sequence(0, 999).key_by(lambda x: x % 100).process(Count()))
    assert sorted(out) == list(range(100))


# -- timers ------------------------------------------------------------------------------------

class _TailSplit(SourceSplit):
    def split_id(self) -> str:
        return "tail"


class _OpenUntilReader(SourceReader):
    def __init__(self, records, marker_dir, markers, timeout_s):
        self.records = records
        self.marker_dir, self.markers, self.timeout_s = marker_dir, markers, timeout_s

    def read(self, split):
        yield list(self.records)
        deadline = time.monotonic() + self.timeout_s
        while len(os.listdir(self.marker_dir)) < self.markers and time.monotonic() < deadline:
            time.sleep(0.002)
            yield []


class OpenUntilSource(Source):
    """Bounded: emits ``records`` at once, then stays open until ``markers`` files exist in
    ``marker_dir`` (at most ``timeout_s``): processing-time timers fire only while the job
    runs, and a file is a condition that task processes of a cluster can see too."""

    def __init__(self, records, marker_dir: str, markers: int, timeout_s: float = 30.0):
        self.records = list(records)
        self.marker_dir, self.markers, self.timeout_s = marker_dir, markers, timeout_s

    def create_splits(self, parallelism: int) -> List[SourceSplit]:
        return [_TailSplit()]

    def create_reader(self) -> SourceReader:
        return _OpenUntilReader(self.records, self.marker_dir, self.markers, self.timeout_s)


class ProcessingTimeTimers(KeyedProcessFunction):
    def __init__(self, marker_dir: str):
        self.marker_dir = marker_dir

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))
        self.registered = runtime_context.get_state(ValueStateDescriptor("registered"))

    def process_element(self, value, ctx):
        self.count.update((self.count.value() or 0) + 1)
        if self.registered.value() is None:
            t = ctx.timer_service().current_processing_time() + 50
            ctx.timer_service().register_processing_time_timer(t)
            self.registered.update(t)
        return None

    def on_timer(self, timestamp, ctx):
        assert ctx.time_domain() == TimeDomain.PROCESSING_TIME
        assert timestamp == self.registered.value()
        assert ctx.timestamp() == timestamp
        assert ctx.timer_service().current_processing_time() >= timestamp
        yield "fired", ctx.get_current_key(), self.count.value()
        open(os.path.join(self.marker_dir, ctx.get_current_key()), "w").close()


def test_processing_time_timer_fires(env2, tmp_path):
    records = [("a", 1), ("b", 2), ("a", 3), ("c", 4), ("a", 5)]
    ds = env2.from_source(OpenUntilSource(records, str(tmp_path), markers=3), source_name="slow").set_parallelism(1)
    out = collect(ds.key_by(lambda t: t[0]).process(ProcessingTimeTimers(str(tmp_path))))
    assert sorted(out) == [("fired", "a", 3), ("fired", "b", 1), ("fired", "c", 1)]


class EndOfInputTimer(KeyedProcessFunction):
    def open(self, runtime_context):
        self.sum = runtime_context.get_reducing_state(ReducingStateDescriptor("sum", lambda a, b: a + b))

    def process_element(self, value, ctx):
        self.sum.add(value[1])
        ctx.timer_service().register_event_time_timer(MAX_TIMESTAMP)
        yield "element", value

    def on_timer(self, timestamp, ctx):
        assert timestamp == MAX_TIMESTAMP
        assert ctx.time_domain() == TimeDomain.EVENT_TIME
        assert ctx.timer_service().current_watermark() == MAX_TIMESTAMP
        yield "final", (ctx.get_current_key(), self.sum.get())


def test_event_time_timer_fires_at_the_end_of_bounded_input(env2):
    data = [("a", 1), ("b", 10), ("a", 2), ("c", 100), ("b", 20)]
    out = collect(env2.from_collection(data).key_by(lambda t: t[0]).process(EndOfInputTimer()))
    assert sorted(v for kind, v in out if kind == "final") == [("a", 3), ("b", 30), ("c", 100)]
    assert sorted(v for kind, v in out if kind == "element") == sorted(data)
    # per key, the timer's output comes after every element of the key
    for key in "abc":
        kinds = [kind for kind, v in out if (v[0] == key)]
        assert kinds[-1] == "final" and kinds.count("final") == 1


def test_timers_on_a_non_keyed_stream_are_refused(env):
    from rill.datastream import ProcessFunction
    from rill.runtime.errors import JobExecutionException

    class P(ProcessFunction):
        def process_element(self, value, ctx):
            ctx.timer_service().register_processing_time_timer(0)
            yield value

    env.from_collection([1]).process(P()).add_sink(lambda v: None)
    from _ds_helpers import run
    with pytest.raises(JobExecutionException, match="Setting timers is only supported on a keyed streams"):
        run(env)


def test_keyed_state_on_a_non_keyed_stream_is_refused(env):
    from rill.datastream import MapFunction
    from rill.runtime.errors import JobExecutionException

    class M(MapFunction):
        def open(self, runtime_context):
            runtime_context.get_state(ValueStateDescriptor("v"))

        def map(self, value):
            return value

    env.from_collection([1]).map(M()).add_sink(lambda v: None)
    from _ds_helpers import run
    with pytest.raises(JobExecutionException, match="Keyed state can only be used on a 'keyed stream'"):
        run(env)


def test_map_after_key_by_can_use_keyed_state(env2):
    from rill.datastream import MapFunction

    class Numbered(MapFunction):
        def open(self, runtime_context):
            self.n = runtime_context.get_state(ValueStateDescriptor("n"))

        def map(self, value):
            n = (self.n.value() or 0) + 1
            self.n.update(n)
            return value[0], n

    out = collect(_keyed(env2).map(Numbered()))
    assert _per_key(out) == {"a": [("a", 1), ("a", 2), ("a", 3), ("a", 4)], "b": [("b", 1), ("b", 2)]}
