"""Two-input DataStream programs end to end on the embedded runtime, at parallelism 1 and 2:
ConnectedStreams (map, flat_map, process; keyed with state per key), the broadcast state pattern
(rules reach every subtask), the interval join (against a brute-force join, boundary timestamps,
exclusive bounds), a union of several streams whose event-time timer waits for the slowest
stream's watermark, and the API's errors.

Event time comes from :class:`StampAndWatermark`, a small operator that gives each record the
timestamp in its second field and emits a watermark ``timestamp - 1`` after it (so no record of
a stream with non-decreasing timestamps is ever late): outputs are then exact, whatever the
interleaving of the inputs."""

from __future__ import annotations

import time

import pytest

from _ds_helpers import collect
from rill.datastream import (
    BroadcastConnectedStream,
    BroadcastProcessFunction,
    BroadcastStream,
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    ConnectedStreams,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    ProcessFunction,
    ProcessJoinFunction,
)
from rill.datastream.data_stream import DataStream
from rill.graph.transformations import OneInputTransformation
from rill.operators.base import AbstractStreamOperator
from rill.operators.factory import SimpleOperatorFactory
from rill.runtime.errors import JobExecutionException
from rill.common.streamrecord import MAX_TIMESTAMP, MIN_TIMESTAMP, Watermark
from rill.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor

PARALLELISMS = [1, 2]


# -- event time for the tests -------------------------------------------------------------------

class StampAndWatermark(AbstractStreamOperator):
    """Timestamp = ``value[1]``; after each record a watermark ``timestamp - 1`` (if it advances);
    upstream watermarks are dropped except the end-of-input one. ``sleep_s`` per record makes a
    slow stream."""

    def __init__(self, sleep_s: float = 0.0):
        self.sleep_s = sleep_s

    def setup(self, context, output):
        super().setup(context, output)
        self._watermark = MIN_TIMESTAMP

    def process_batch(self, values, timestamps=None):
        for v in values:
            t = v[1]
            self.output.collect(v, t)
            if t - 1 > self._watermark:
                self._watermark = t - 1
                self.output.emit_watermark(Watermark(t - 1))
            if self.sleep_s:
                time.sleep(self.sleep_s)

    def process_watermark(self, watermark):
        if watermark.timestamp == MAX_TIMESTAMP:
            self.output.emit_watermark(watermark)


def stamped(ds: DataStream, sleep_s: float = 0.0) -> DataStream:
    env = ds.get_execution_environment()
    t = OneInputTransformation(env._new_id(), "Stamp", SimpleOperatorFactory(StampAndWatermark(sleep_s)),
                               ds.get_transformation(), 1)
    env._add_operator(t)
    return DataStream(env, t)


class WithTimestamp(ProcessFunction):
    def process_element(self, value, ctx):
        yield value, ctx.timestamp()


def setup_env(env, parallelism):
    env.set_parallelism(parallelism)
    return env


# -- ConnectedStreams ---------------------------------------------------------------------------

class Tag(CoMapFunction):
    def map1(self, value):
        return ("int", value)

    def map2(self, value):
        return ("str", value)


class Split(CoFlatMapFunction):
    def flat_map1(self, value):
        return [value, -value]

    def flat_map2(self, value):
        yield from value


@pytest.mark.parametrize("parallelism", PARALLELISMS)
def test_co_map_and_co_flat_map(env, parallelism):
    setup_env(env, parallelism)
    ints = env.from_collection([1, 2, 3])
    strs = env.from_collection(["ab", "c"])
    connected = ints.connect(strs)
    assert isinstance(connected, ConnectedStreams)
    mapped = connected.map(Tag())
    flat = ints.connect(strs).flat_map(Split())
    out = collect(mapped.union(flat.map(lambda v: ("flat", v))))
    assert sorted(out, key=repr) == sorted(
        [("int", 1), ("int", 2), ("int", 3), ("str", "ab"), ("str", "c")]
        + [("flat", v) for v in (1, -1, 2, -2, 3, -3, "a", "b", "c")], key=repr)


class CountPerKey(KeyedCoProcessFunction):
    """Counts the records of each input per key and sums their numbers; a timer at 0 (fired by
    the end-of-input watermark) emits one line per key, with the subtask that holds it."""

    def open(self, ctx):
        self.counts = ctx.get_state(ValueStateDescriptor("counts"))
        self.subtask = ctx.get_index_of_this_subtask()

    def _add(self, index, value, ctx):
        c = list(self.counts.value() or (0, 0, 0))
        c[index] += 1
        c[2] += value[1]
        self.counts.update(tuple(c))
        ctx.timer_service().register_event_time_timer(0)
        assert ctx.get_current_key() == value[0]

    def process_element1(self, value, ctx):
        self._add(0, value, ctx)

    def process_element2(self, value, ctx):
        self._add(1, value, ctx)

    def on_timer(self, timestamp, ctx):
        yield (ctx.get_current_key(),) + self.counts.value() + (self.subtask,)


def _keyed_counts_expected(lefts, rights):
    expected = {}
    for i, side in enumerate((lefts, rights)):
        for k, v in side:
            c = expected.setdefault(k, [0, 0, 0])
            c[i] += 1
            c[2] += v
    return sorted((k,) + tuple(c) for k, c in expected.items())


@pytest.mark.parametrize("parallelism", PARALLELISMS)
@pytest.mark.parametrize("how", ["connected_key_by", "key_by_each"])
def test_keyed_connect_keeps_state_per_key_across_both_inputs(env, parallelism, how):
    setup_env(env, parallelism)
    lefts = [(k, i) for i, k in enumerate("abcdefgh" * 5)]
    rights = [(k, 100 * i) for i, k in enumerate("aceg" * 7 + "xyz")]
    s1, s2 = env.from_collection(lefts), env.from_collection(rights)
    if how == "connected_key_by":
        connected = s1.connect(s2).key_by(lambda v: v[0], lambda v: v[0])
    else:
        connected = s1.key_by(lambda v: v[0]).connect(s2.key_by(lambda v: v[0]))
    out = collect(connected.process(CountPerKey()))
    assert sorted(o[:-1] for o in out) == _keyed_counts_expected(lefts, rights)
    assert {o[-1] for o in out} <= set(range(parallelism))
    if parallelism == 2:
        assert {o[-1] for o in out} == {0, 1}  # the keys are spread over both subtasks


class Describe(CoProcessFunction):
    def process_element1(self, value, ctx):
        yield ("left", value[0], ctx.timestamp())

    def process_element2(self, value, ctx):
        yield ("right", value[0], ctx.timestamp())


@pytest.mark.parametrize("parallelism", PARALLELISMS)
def test_co_process_sees_the_timestamps_of_both_inputs(env, parallelism):
    setup_env(env, parallelism)
    left = stamped(env.from_collection([("a", 1), ("b", 5)]))
    right = stamped(env.from_collection([("c", 3)]))
    out = collect(left.connect(right).process(Describe()).process(WithTimestamp()))
    assert sorted(out) == [(("left", "a", 1), 1), (("left", "b", 5), 5), (("right", "c", 3), 3)]


# -- broadcast state ------------------------------------------------------------------------------

RULES = MapStateDescriptor("rules")


class RecordRules(BroadcastProcessFunction):
    def open(self, ctx):
        self.subtask = ctx.get_index_of_this_subtask()

    def process_broadcast_element(self, value, ctx):
        rules = ctx.get_broadcast_state(RULES)
        rules.put(value[0], value[1])
        yield ("rule", self.subtask, value, len(rules.items()))

    def process_element(self, value, ctx):
        rules = ctx.get_broadcast_state(RULES)
        yield ("data", value, rules.get("mult"))


@pytest.mark.parametrize("parallelism", PARALLELISMS)
def test_broadcast_rules_reach_every_subtask(env, parallelism):
    setup_env(env, parallelism)
    rules = [("mult", 10), ("add", 1), ("mult", 3)]
    broadcast = env.from_collection(rules).broadcast(RULES)
    assert isinstance(broadcast, BroadcastStream)
    connected = env.from_sequence(1, 20).connect(broadcast)
    assert isinstance(connected, BroadcastConnectedStream)
    out = collect(connected.process(RecordRules()))
    rule_lines = sorted(o for o in out if o[0] == "rule")
    # every subtask sees every rule, in order: the state grows to the same two entries everywhere
    assert rule_lines == sorted(("rule", s, r, n) for s in range(parallelism)
                                for r, n in zip(rules, (1, 2, 2)))
    data = [o for o in out if o[0] == "data"]
    assert sorted(o[1] for o in data) == list(range(1, 21))
    assert {o[2] for o in data} <= {None, 10, 3}


class ApplyRulesAtEnd(KeyedBroadcastProcessFunction):
    """Buffers each key's values in keyed state; at the end of input (event-time timer at 0,
    fired by the final watermark, after every rule arrived) multiplies them by the key's rule."""

    def open(self, ctx):
        self.values = ctx.get_list_state(ListStateDescriptor("values"))

    def process_element(self, value, ctx):
        self.values.add(value[1])
        ctx.timer_service().register_event_time_timer(0)
        return None

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value[0], value[1])
        return None

    def on_timer(self, timestamp, ctx):
        factor = ctx.get_broadcast_state(RULES).get(ctx.get_current_key())
        for v in self.values.get():
            yield ctx.get_current_key(), v, None if factor is None else v * factor


@pytest.mark.parametrize("parallelism", PARALLELISMS)
def test_keyed_broadcast_applies_every_rule_on_every_subtask(env, parallelism):
    setup_env(env, parallelism)
    data = [(k, i) for i, k in enumerate("abcdef" * 4)]
    rules = {"a": 2, "b": 3, "c": 5, "d": 7, "e": 11}  # no rule for "f"
    out = collect(env.from_collection(data).key_by(lambda v: v[0])
                  .connect(env.from_collection(sorted(rules.items())).broadcast(RULES))
                  .process(ApplyRulesAtEnd()))
    assert sorted(out) == sorted((k, v, None if k not in rules else v * rules[k]) for k, v in data)


# -- interval join --------------------------------------------------------------------------------

class PairWithTimestamps(ProcessJoinFunction):
    def process_element(self, left, right, ctx):
        yield (left, right, ctx.get_left_timestamp(), ctx.get_right_timestamp(), ctx.get_timestamp())


def _join_data():
    lefts, rights = [], []
    for i, t in enumerate([0, 0, 3, 5, 5, 8, 10, 10, 14, 20, 21, 30]):
        lefts.append(("abc"[i % 3], t, f"l{i}"))
    for i, t in enumerate([0, 1, 2, 3, 5, 6, 7, 8, 10, 12, 13, 15, 18, 20, 22, 25, 31, 33]):
        rights.append(("abc"[i % 3], t, f"r{i}"))
    return lefts, rights


def _brute_force(lefts, rights, lower, upper, lower_exclusive, upper_exclusive):
    out = []
    for lv in lefts:
        for rv in rights:
            if lv[0] != rv[0]:
                continue
            lo = rv[1] > lv[1] + lower if lower_exclusive else rv[1] >= lv[1] + lower
            hi = rv[1] < lv[1] + upper if upper_exclusive else rv[1] <= lv[1] + upper
            if lo and hi:
                out.append(((lv, rv, lv[1], rv[1], max(lv[1], rv[1])), max(lv[1], rv[1])))
    return sorted(out)


@pytest.mark.parametrize("parallelism", PARALLELISMS)
@pytest.mark.parametrize("lower, upper, lower_exclusive, upper_exclusive", [
    (-2, 3, False, False), (-2, 3, True, True), (0, 0, False, False), (-5, -1, False, True), (1, 6, True, False),
])
def test_interval_join_matches_brute_force(env, parallelism, lower, upper, lower_exclusive, upper_exclusive):
    setup_env(env, parallelism)
    lefts, rights = _join_data()
    left = stamped(env.from_collection(lefts)).key_by(lambda v: v[0])
    right = stamped(env.from_collection(rights)).key_by(lambda v: v[0])
    joined = left.interval_join(right).between(lower, upper)
    if lower_exclusive:
        joined = joined.lower_bound_exclusive()
    if upper_exclusive:
        joined = joined.upper_bound_exclusive()
    out = collect(joined.process(PairWithTimestamps()).process(WithTimestamp()))
    expected = _brute_force(lefts, rights, lower, upper, lower_exclusive, upper_exclusive)
    assert expected  # the data has joins for every case
    assert sorted(out) == expected


def test_interval_join_without_timestamps_fails_naming_the_operator(env):
    left = env.from_collection([("a", 1)]).key_by(lambda v: v[0])
    right = env.from_collection([("a", 2)]).key_by(lambda v: v[0])
    out = left.interval_join(right).between(-1, 1).process(PairWithTimestamps()).name("Orders x Clicks")
    with pytest.raises(JobExecutionException, match="operator 'Orders x Clicks'") as info:
        collect(out)
    assert isinstance(info.value.__cause__, ValueError)
    assert "has no timestamp" in str(info.value.__cause__)


# -- union of many streams: event time waits for the slowest -----------------------------------

class SeenAtTimer(KeyedProcessFunction):
    """Keeps every value of the key; an event-time timer at 100 reports what had arrived."""

    def open(self, ctx):
        self.seen = ctx.get_list_state(ListStateDescriptor("seen"))

    def process_element(self, value, ctx):
        self.seen.add(value)
        if ctx.timer_service().current_watermark() < 100:  # a timer that has fired is not set again
            ctx.timer_service().register_event_time_timer(100)
        return None

    def on_timer(self, timestamp, ctx):
        yield timestamp, ctx.timer_service().current_watermark(), sorted(self.seen.get())


@pytest.mark.parametrize("parallelism", PARALLELISMS)
def test_union_of_many_streams_fires_timers_only_when_the_minimum_watermark_passes(env, parallelism):
    setup_env(env, parallelism)
    streams = {name: [(name, t) for t in range(0, 300, step)] for name, step in
               (("fast", 1), ("mid", 7), ("slow", 13), ("slowest", 11))}
    fast, mid, slow, slowest = (stamped(env.from_collection(streams[n]), sleep_s=0.002 if n == "slowest" else 0.0)
                                for n in ("fast", "mid", "slow", "slowest"))
    union = fast.union(mid, slow, slowest)
    out = collect(union.key_by(lambda v: 0).process(SeenAtTimer()))
    assert len(out) == 1
    timestamp, watermark, seen = out[0]
    assert timestamp == 100
    assert 100 <= watermark < MAX_TIMESTAMP  # fired by a real watermark, before the end of input
    # when it fired, every stream's watermark had passed 100, so every record at <= 100 was there
    for name, values in streams.items():
        assert [v for v in values if v[1] <= 100] == [v for v in seen if v[0] == name and v[1] <= 100], name


def _with_strategy(ds: DataStream, sleep_s: float = 0.0) -> DataStream:
    """Event time from the WatermarkStrategy API (periodic watermarks every 5 ms)."""
    from rill.common.watermark_strategy import WatermarkStrategy  # noqa: PLC0415
    if sleep_s:
        ds = ds.map(lambda v: time.sleep(sleep_s) or v)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v, _ts: v[1])
    return ds.assign_timestamps_and_watermarks(strategy)


@pytest.mark.parametrize("parallelism", PARALLELISMS)
def test_union_with_the_watermark_strategy_api_waits_for_the_slowest_stream(env, parallelism):
    setup_env(env, parallelism)
    env.get_config().set_auto_watermark_interval(5)
    streams = {name: [(name, t) for t in range(0, 200, step)] for name, step in
               (("fast", 1), ("mid", 7), ("slowest", 11))}
    fast, mid, slowest = (_with_strategy(env.from_collection(streams[n]), 0.003 if n == "slowest" else 0.0)
                          for n in ("fast", "mid", "slowest"))
    out = collect(fast.union(mid, slowest).key_by(lambda v: 0).process(SeenAtTimer()))
    assert len(out) == 1
    timestamp, watermark, seen = out[0]
    assert timestamp == 100 and watermark >= 100
    for name, values in streams.items():
        assert [v for v in values if v[1] <= 100] == [v for v in seen if v[0] == name and v[1] <= 100], name


@pytest.mark.parametrize("parallelism", PARALLELISMS)
def test_interval_join_with_the_watermark_strategy_api(env, parallelism):
    setup_env(env, parallelism)
    env.get_config().set_auto_watermark_interval(5)
    lefts, rights = _join_data()
    left = _with_strategy(env.from_collection(lefts)).key_by(lambda v: v[0])
    right = _with_strategy(env.from_collection(rights), 0.002).key_by(lambda v: v[0])
    out = collect(left.interval_join(right).between(-2, 3).upper_bound_exclusive()
                  .process(PairWithTimestamps()).process(WithTimestamp()))
    assert sorted(out) == _brute_force(lefts, rights, -2, 3, False, True)


# -- the API ----------------------------------------------------------------------------------------

def test_plan_names_partitioners_and_key_selectors(env):
    setup_env(env, 2)
    a, b = env.from_collection([("a", 1)]), env.from_collection([("b", 2)])
    keyed = a.connect(b).key_by(lambda v: v[0], lambda v: v[0]).process(CountPerKey())
    mapped = a.connect(b).map(Tag())
    bc = a.connect(b.broadcast(RULES)).process(RecordRules())
    kb = a.key_by(lambda v: v[0]).connect(b.broadcast(RULES)).process(ApplyRulesAtEnd())
    joined = a.key_by(lambda v: v[0]).interval_join(b.key_by(lambda v: v[0])).between(0, 1).process(
        PairWithTimestamps())
    graph = env.get_stream_graph()
    names = {}
    for ds in (keyed, mapped, bc, kb, joined):
        node = graph.get_stream_node(ds.get_transformation().id)
        names[node.operator_name] = sorted((e.type_number, str(e.partitioner)) for e in node.in_edges)
        assert node.job_vertex_class == "TwoInputStreamTask"
    assert names == {
        "Keyed Co-Process": [(1, "HASH"), (2, "HASH")],
        "Co-Map": [(1, "REBALANCE"), (2, "REBALANCE")],
        "Co-Process-Broadcast": [(1, "REBALANCE"), (2, "BROADCAST")],
        "Co-Process-Broadcast-Keyed": [(1, "HASH"), (2, "BROADCAST")],
        "Interval Join": [(1, "HASH"), (2, "HASH")],
    }
    node = graph.get_stream_node(keyed.get_transformation().id)
    assert node.state_key_selector(("k", 1)) == "k" and node.state_key_selector2(("j", 1)) == "j"
    node = graph.get_stream_node(kb.get_transformation().id)
    assert node.state_key_selector2 is None


def test_broadcast_without_descriptors_stays_the_partitioner(env):
    ds = env.from_collection([1]).broadcast()
    assert isinstance(ds, DataStream)
    assert str(ds.get_transformation().partitioner) == "BROADCAST"


def test_api_errors(env):
    a, b = env.from_collection([("a", 1)]), env.from_collection([("b", 2)])
    with pytest.raises(TypeError, match="DataStream.connect expects a DataStream or a BroadcastStream, got list"):
        a.connect([1])
    with pytest.raises(TypeError, match="ConnectedStreams.map expects a CoMapFunction"):
        a.connect(b).map(lambda v: v)
    with pytest.raises(TypeError, match="ConnectedStreams.flat_map expects a CoFlatMapFunction"):
        a.connect(b).flat_map(Tag())
    with pytest.raises(TypeError, match="KeyedCoProcessFunction, which needs keyed connected streams"):
        a.connect(b).process(CountPerKey())
    with pytest.raises(TypeError, match="KeyedCoProcessFunction, which needs keyed connected streams"):
        a.key_by(lambda v: v[0]).connect(b).process(CountPerKey())
    with pytest.raises(TypeError, match="MapStateDescriptors, got .*ValueStateDescriptor"):
        b.broadcast(ValueStateDescriptor("v"))
    with pytest.raises(TypeError, match="A BroadcastProcessFunction can only be used on a non-keyed stream"):
        a.key_by(lambda v: v[0]).connect(b.broadcast(RULES)).process(RecordRules())
    with pytest.raises(TypeError, match="A KeyedBroadcastProcessFunction can only be used on a keyed stream"):
        a.connect(b.broadcast(RULES)).process(ApplyRulesAtEnd())
    with pytest.raises(TypeError, match="BroadcastConnectedStream.process expects"):
        a.connect(b.broadcast(RULES)).process(Describe())
    with pytest.raises(TypeError, match="needs two KeyedStreams: key_by\\(\\) the right stream"):
        a.key_by(lambda v: v[0]).interval_join(b)
    with pytest.raises(ValueError, match="lowerBound <= upperBound must be fulfilled"):
        a.key_by(lambda v: v[0]).interval_join(b.key_by(lambda v: v[0])).between(2, 1)
    with pytest.raises(TypeError, match="upper_bound must be an int number of milliseconds"):
        a.key_by(lambda v: v[0]).interval_join(b.key_by(lambda v: v[0])).between(0, "1s")
    with pytest.raises(TypeError, match="IntervalJoined.process expects a ProcessJoinFunction"):
        a.key_by(lambda v: v[0]).interval_join(b.key_by(lambda v: v[0])).between(0, 1).process(Describe())
    other_env = type(env).get_execution_environment()
    with pytest.raises(ValueError, match="same environment"):
        a.connect(other_env.from_collection([1]))


def test_interval_join_bounds_accept_timedelta(env):
    import datetime  # noqa: PLC0415
    a, b = env.from_collection([("a", 1)]), env.from_collection([("b", 2)])
    joined = a.key_by(lambda v: v[0]).interval_join(b.key_by(lambda v: v[0])).between(
        datetime.timedelta(seconds=-1), datetime.timedelta(milliseconds=500))
    assert (joined.lower_bound, joined.upper_bound) == (-1000, 500)


def test_new_names_are_exported():
    import rill.datastream as ds  # noqa: PLC0415
    for name in ("ConnectedStreams", "BroadcastStream", "BroadcastConnectedStream", "IntervalJoin", "IntervalJoined",
                 "CoMapFunction", "CoFlatMapFunction", "CoProcessFunction", "KeyedCoProcessFunction",
                 "BroadcastProcessFunction", "KeyedBroadcastProcessFunction", "ProcessJoinFunction"):
        assert name in ds.__all__
        assert getattr(ds, name).__name__ == name

