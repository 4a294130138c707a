"""BATCH runtime mode end to end, in both execution modes (``env``): bounded programs whose BATCH
output equals, as a multiset, the plain Python computation of the same rules and the final
values of their STREAMING run (Flink's promise: the same final result, reached differently);
keyed operators emit final results only, timers fire at the end of each key, watermark
strategies are ignored, the broadcast side is read first; the mode is chosen by
``set_runtime_mode`` or ``execution.runtime-mode``; an unbounded source refuses BATCH.

Timestamps come from ``for_monotonous_timestamps`` over a non-parallel source whose timestamps
increase, so no record is ever late in STREAMING: the STREAMING runs are exact too."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from _ds_helpers import collect, run
from rill.common import Configuration, Types, WatermarkStrategy
from rill.datastream import (
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    OutputTag,
    ProcessFunction,
    ProcessJoinFunction,
    RuntimeExecutionMode,
    StreamExecutionEnvironment,
)
from rill.datastream.connectors import CollectSink
from rill.datastream.connectors.collection import CollectionSource
from rill.datastream.connectors.source import Boundedness
from rill.datastream.window import (
    EventTimeSessionWindows,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
)
from rill.common.streamrecord import MAX_TIMESTAMP, MIN_TIMESTAMP
from rill.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor

PARALLELISM = 2
KEYS = "abcde"
#: (key, value, timestamp ms), timestamps increasing; gaps of 12 ms every 10 records open sessions
EVENTS = [(KEYS[(i * 7 + i // 5) % 5], i % 9 + 1, i * 3 + (i // 10) * 12) for i in range(60)]
END_TIMER = 1_000_000  # after every timestamp: fires only with the final watermark in STREAMING

LINES = ["to be or not to be that is the question",
         "whether tis nobler in the mind to suffer",
         "the slings and arrows of outrageous fortune",
         "or to take arms against a sea of troubles"]


def stamped(env, events=EVENTS):
    return env.from_collection(events).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[2]))


def new_env(mode=None):
    e = StreamExecutionEnvironment.get_execution_environment()
    e.set_parallelism(PARALLELISM)
    if mode is not None:
        e.set_runtime_mode(mode)
    return e


def batch_and_streaming(env, build):
    """``build(env) -> DataStream`` run in BATCH (on the fixture's environment) and in
    STREAMING (a new one in the same execution mode); the two collected outputs."""
    env.set_parallelism(PARALLELISM)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    batch = collect(build(env))
    streaming = collect(build(new_env()))
    return batch, streaming


def last_per_key(records, key=lambda r: r[0]):
    """The final value of each key of a STREAMING run's incremental results."""
    final = {}
    for r in records:
        final[key(r)] = r
    return sorted(final.values())


def by_key(events=EVENTS):
    groups = defaultdict(list)
    for e in events:
        groups[e[0]].append(e)
    return groups


# -- reduce and aggregations: final results only ---------------------------------------------------

def word_count(env):
    return (env.from_collection(LINES).flat_map(lambda line: line.split())
            .map(lambda w: (w, 1), output_type=Types.TUPLE([Types.STRING(), Types.INT()]))
            .key_by(lambda p: p[0]).reduce(lambda a, b: (a[0], a[1] + b[1])))


def test_word_count_emits_one_final_count_per_word(env):
    batch, streaming = batch_and_streaming(env, word_count)
    expected = sorted(Counter(w for line in LINES for w in line.split()).items())
    assert sorted(batch) == expected
    assert last_per_key(streaming) == expected
    assert len(streaming) == sum(n for _, n in expected)  # STREAMING: one update per word


def test_sum_and_max_by_per_key(env):
    def build(e):
        ks = e.from_collection(EVENTS).key_by(lambda v: v[0])
        return ks.sum(1).union(ks.max_by(1).map(lambda v: ("max",) + v))

    batch, streaming = batch_and_streaming(env, build)
    groups = by_key()
    sums = [(k, sum(v for _, v, _ in g), g[0][2]) for k, g in groups.items()]
    # max_by keeps the first record with the greatest value, as Python's max does
    maxes = [("max",) + max(g, key=lambda e: e[1]) for g in groups.values()]
    assert sorted(batch) == sorted(sums + maxes)
    final = (last_per_key([r for r in streaming if r[0] != "max"])
             + last_per_key([r for r in streaming if r[0] == "max"], key=lambda r: r[1]))
    assert sorted(batch) == sorted(final)


def test_reduce_results_carry_the_end_of_time_as_timestamp(env):
    class Stamp(ProcessFunction):
        def process_element(self, value, ctx):
            yield value, ctx.timestamp()

    env.set_parallelism(PARALLELISM)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    out = collect(stamped(env).key_by(lambda e: e[0]).reduce(lambda a, b: (a[0], a[1] + b[1], b[2]))
                  .process(Stamp()))
    # Flink's BatchGroupedReduceOperator emits from a timer at Long.MAX_VALUE
    assert sorted(out) == sorted(((k, sum(e[1] for e in g), g[-1][2]), MAX_TIMESTAMP)
                                 for k, g in by_key().items())


# -- keyed process functions: timers fire at the end of each key -----------------------------------

class CountUpTo(KeyedProcessFunction):
    """Keeps every timestamp; an event-time timer 5 ms after each record emits how many of the
    key's records are at or before it."""

    def open(self, ctx):
        self.seen = ctx.get_list_state(ListStateDescriptor("seen", Types.LONG()))

    def process_element(self, value, ctx):
        self.seen.add(ctx.timestamp())
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 5)

    def on_timer(self, timestamp, ctx):
        yield ctx.get_current_key(), timestamp, sum(1 for t in self.seen.get() if t <= timestamp)


def test_keyed_process_function_with_event_time_timers(env):
    batch, streaming = batch_and_streaming(env, lambda e: stamped(e).key_by(lambda v: v[0]).process(CountUpTo()))
    expected = sorted((k, t + 5, sum(1 for e in g if e[2] <= t + 5))
                      for k, g in by_key().items() for t in sorted({e[2] for e in g}))
    assert sorted(batch) == expected
    assert sorted(streaming) == expected


class SumAtProcessingTimeTimer(KeyedProcessFunction):
    """Sums the key's values; one processing-time timer an hour ahead emits the sum."""

    def open(self, ctx):
        self.total = ctx.get_state(ValueStateDescriptor("total", Types.LONG()))

    def process_element(self, value, ctx):
        if self.total.value() is None:
            ctx.timer_service().register_processing_time_timer(ctx.timer_service().current_processing_time()
                                                               + 3_600_000)
        self.total.update((self.total.value() or 0) + value[1])

    def on_timer(self, timestamp, ctx):
        yield ctx.get_current_key(), self.total.value(), ctx.time_domain().name


def test_processing_time_timers_fire_at_the_end_of_their_key(env):
    # STREAMING would not fire an hour-ahead timer at all before the bounded job ends, so this
    # program's BATCH output is compared with the plain computation only
    env.set_parallelism(PARALLELISM)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    out = collect(env.from_collection(EVENTS).key_by(lambda v: v[0]).process(SumAtProcessingTimeTimer()))
    assert sorted(out) == sorted((k, sum(e[1] for e in g), "PROCESSING_TIME") for k, g in by_key().items())


# -- windows fire once complete -----------------------------------------------------------------

class Describe(ProcessWindowFunction):
    def process(self, key, context, elements):
        values = [e[1] for e in elements]
        yield key, context.window().start, context.window().end, len(values), sum(values)


def windows_of(assign):
    """(key, start, end, count, sum) of every window ``assign(timestamp) -> [(start, end)]``
    gives each event."""
    acc = defaultdict(list)
    for k, v, t in EVENTS:
        for start, end in assign(t):
            acc[(k, start, end)].append(v)
    return sorted((k, s, e, len(vs), sum(vs)) for (k, s, e), vs in acc.items())


def test_tumbling_windows(env):
    batch, streaming = batch_and_streaming(
        env, lambda e: stamped(e).key_by(lambda v: v[0]).window(TumblingEventTimeWindows.of(20)).process(Describe()))
    expected = windows_of(lambda t: [(t // 20 * 20, t // 20 * 20 + 20)])
    assert sorted(batch) == expected
    assert sorted(streaming) == expected


def test_sliding_windows(env):
    batch, streaming = batch_and_streaming(
        env, lambda e: stamped(e).key_by(lambda v: v[0]).window(SlidingEventTimeWindows.of(30, 10)).process(Describe()))
    expected = windows_of(lambda t: [(s, s + 30) for s in range(t // 10 * 10 - 20, t + 1, 10) if s <= t < s + 30])
    assert sorted(batch) == expected
    assert sorted(streaming) == expected


def sessions(gap):
    out = []
    for k, g in by_key().items():
        start = last = None
        values = []
        for _, v, t in g:
            if last is not None and t >= last + gap:
                out.append((k, start, last + gap, len(values), sum(values)))
                start, values = None, []
            start = t if start is None else start
            last = t
            values.append(v)
        out.append((k, start, last + gap, len(values), sum(values)))
    return sorted(out)


def test_session_windows(env):
    batch, streaming = batch_and_streaming(
        env, lambda e: stamped(e).key_by(lambda v: v[0]).window(EventTimeSessionWindows.with_gap(25)).process(Describe()))
    expected = sessions(25)
    assert len(expected) > len(KEYS)  # the gaps open several sessions per key
    assert sorted(batch) == expected
    assert sorted(streaming) == expected


def test_count_windows(env):
    batch, streaming = batch_and_streaming(
        env, lambda e: e.from_collection(EVENTS).key_by(lambda v: v[0]).count_window(3)
        .reduce(lambda a, b: (a[0], a[1] + b[1], b[2])))
    expected = []
    for k, g in by_key().items():
        for i in range(0, len(g) - len(g) % 3, 3):  # an incomplete last window never fires
            expected.append((k, sum(e[1] for e in g[i:i + 3]), g[i + 2][2]))
    assert sorted(batch) == sorted(expected)
    assert sorted(streaming) == sorted(expected)


class DescribeAll(ProcessAllWindowFunction):
    def process(self, context, elements):
        yield context.window().start, len(elements), sum(e[1] for e in elements)


def test_window_all(env):
    batch, streaming = batch_and_streaming(
        env, lambda e: stamped(e).window_all(TumblingEventTimeWindows.of(40)).process(DescribeAll()))
    acc = defaultdict(list)
    for _, v, t in EVENTS:
        acc[t // 40 * 40].append(v)
    expected = sorted((s, len(vs), sum(vs)) for s, vs in acc.items())
    assert sorted(batch) == expected
    assert sorted(streaming) == expected


def test_watermark_strategies_are_ignored(env):
    # out of order by far more than the strategy allows: STREAMING drops the late records,
    # BATCH has no watermark before the end and so no late record
    events = [("a", 1, 100), ("a", 2, 5), ("b", 3, 200), ("a", 4, 7), ("b", 5, 12)]

    def build(e):
        return (stamped(e, events).key_by(lambda v: v[0]).window(TumblingEventTimeWindows.of(50))
                .process(Describe()))

    batch, _ = batch_and_streaming(env, build)
    assert sorted(batch) == [("a", 0, 50, 2, 6), ("a", 100, 150, 1, 1), ("b", 0, 50, 1, 5), ("b", 200, 250, 1, 3)]


# -- two inputs ---------------------------------------------------------------------------------

class SumBoth(KeyedCoProcessFunction):
    def open(self, ctx):
        self.sums = ctx.get_state(ValueStateDescriptor("sums", Types.PICKLED_BYTE_ARRAY()))

    def _add(self, i, value, ctx):
        sums = self.sums.value() or [0, 0]
        sums[i] += value[1]
        self.sums.update(sums)
        ctx.timer_service().register_event_time_timer(END_TIMER)

    def process_element1(self, value, ctx):
        self._add(0, value, ctx)

    def process_element2(self, value, ctx):
        self._add(1, value, ctx)

    def on_timer(self, timestamp, ctx):
        yield (ctx.get_current_key(), *self.sums.value())


RATES = [(k, 10 * (i + 1) + j, 1000 + j) for i, k in enumerate(KEYS[:4]) for j in range(3)]


def test_keyed_connect_and_co_process(env):
    batch, streaming = batch_and_streaming(
        env, lambda e: stamped(e).connect(stamped(e, RATES)).key_by(lambda v: v[0], lambda v: v[0]).process(SumBoth()))
    left, right = by_key(), by_key(RATES)
    expected = sorted((k, sum(e[1] for e in left.get(k, [])), sum(e[1] for e in right.get(k, [])))
                      for k in set(left) | set(right))
    assert sorted(batch) == expected
    assert sorted(streaming) == expected


def test_union_then_reduce(env):
    def build(e):
        evens = e.from_collection(EVENTS[0::2])
        odds = e.from_collection(EVENTS[1::2]).map(lambda v: (v[0], v[1] * 100, v[2]))
        return evens.union(odds).key_by(lambda v: v[0]).reduce(lambda a, b: (a[0], a[1] + b[1], max(a[2], b[2])))

    batch, streaming = batch_and_streaming(env, build)
    totals = defaultdict(lambda: [0, 0])
    for i, (k, v, t) in enumerate(EVENTS):
        totals[k][0] += v if i % 2 == 0 else v * 100
        totals[k][1] = max(totals[k][1], t)
    expected = sorted((k, s, t) for k, (s, t) in totals.items())
    assert sorted(batch) == expected
    assert last_per_key(streaming) == expected


SMALL = OutputTag("small", Types.PICKLED_BYTE_ARRAY())


class Route(ProcessFunction):
    def process_element(self, value, ctx):
        if value[1] < 4:
            yield SMALL, value
        else:
            yield value


def test_side_outputs(env):
    def build(e):
        # chained to the one source subtask: each key's records keep their order, and so
        # their first record (whose other fields a sum keeps)
        routed = e.from_collection(EVENTS).process(Route()).set_parallelism(1)
        return routed.key_by(lambda v: v[0]).sum(1), routed.get_side_output(SMALL).key_by(lambda v: v[0]).sum(1)

    def run_both(e):
        main, side = build(e)
        sinks = CollectSink(), CollectSink()
        try:
            main.map(lambda v: ("main",) + v).sink_to(sinks[0])
            side.map(lambda v: ("small",) + v).sink_to(sinks[1])
            run(e)
            return sinks[0].get_results() + sinks[1].get_results()
        finally:
            for s in sinks:
                s.close()

    env.set_parallelism(PARALLELISM)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    batch = run_both(env)
    streaming = run_both(new_env())
    expected = []
    for name, keep in (("main", lambda v: v >= 4), ("small", lambda v: v < 4)):
        for k, g in by_key([e for e in EVENTS if keep(e[1])]).items():
            expected.append((name, k, sum(e[1] for e in g), g[0][2]))
    assert sorted(batch) == sorted(expected)
    assert sorted(batch) == sorted(last_per_key(streaming, key=lambda r: r[:2]))


RULES = MapStateDescriptor("rules", Types.STRING(), Types.INT())
FACTORS = [("a", 2), ("b", 3), ("c", 5), ("d", 7)]  # no rule for "e"


class ApplyFactor(KeyedBroadcastProcessFunction):
    """Each record with its key's factor as known when it arrives; at the end (an event-time
    timer after every timestamp) the key's total times its factor."""

    def open(self, ctx):
        self.total = ctx.get_state(ValueStateDescriptor("total", Types.LONG()))

    def process_element(self, value, ctx):
        factor = ctx.get_broadcast_state(RULES).get(value[0])
        self.total.update((self.total.value() or 0) + value[1])
        ctx.timer_service().register_event_time_timer(END_TIMER)
        yield "now", value[0], value[1], factor, ctx.current_watermark()

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value[0], value[1])

    def on_timer(self, timestamp, ctx):
        factor = ctx.get_broadcast_state(RULES).get(ctx.get_current_key())
        yield "end", ctx.get_current_key(), self.total.value(), None if factor is None else self.total.value() * factor


def test_keyed_broadcast_reads_the_broadcast_side_first(env):
    batch, streaming = batch_and_streaming(
        env, lambda e: e.from_collection(EVENTS).key_by(lambda v: v[0])
        .connect(e.from_collection(FACTORS).broadcast(RULES)).process(ApplyFactor()))
    factors = dict(FACTORS)
    # every rule known before any record, and no watermark before the end for any key
    now = [("now", k, v, factors.get(k), MIN_TIMESTAMP) for k, v, _ in EVENTS]
    end = [("end", k, sum(e[1] for e in g), None if k not in factors else sum(e[1] for e in g) * factors[k])
           for k, g in by_key().items()]
    assert sorted(batch, key=repr) == sorted(now + end, key=repr)
    assert sorted((r for r in streaming if r[0] == "end"), key=repr) == sorted(end, key=repr)


class Multiply(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        yield value, ctx.get_broadcast_state(RULES).get("mult")

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value[0], value[1])


def test_non_keyed_broadcast_reads_the_broadcast_side_first(env):
    env.set_parallelism(PARALLELISM)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    out = collect(env.from_sequence(1, 50).connect(env.from_collection([("mult", 3), ("mult", 4)]).broadcast(RULES))
                  .process(Multiply()))
    assert sorted(out) == [(i, 4) for i in range(1, 51)]


# -- choosing the mode ---------------------------------------------------------------------------

class Unbounded(CollectionSource):
    def get_boundedness(self):
        return Boundedness.CONTINUOUS_UNBOUNDED


def test_batch_refuses_an_unbounded_source():
    env = new_env(RuntimeExecutionMode.BATCH)
    env.from_collection([1]).union(env.from_source(Unbounded([1, 2]), source_name="ticks")).print()
    with pytest.raises(ValueError, match=r"^Detected an UNBOUNDED source with the 'execution.runtime-mode' set to "
                                         r"'BATCH'\. This combination is not allowed, please set the "
                                         r"'execution.runtime-mode' to STREAMING or AUTOMATIC: source 'ticks' "
                                         r"\(Unbounded\) is CONTINUOUS_UNBOUNDED$"):
        env.execute()


def test_automatic_is_batch_only_when_every_source_is_bounded():
    env = new_env(RuntimeExecutionMode.AUTOMATIC)
    env.from_collection([1]).print()
    assert env.get_stream_graph().runtime_mode is RuntimeExecutionMode.BATCH
    env.from_source(Unbounded([1]), source_name="ticks").print()
    assert env.get_stream_graph().runtime_mode is RuntimeExecutionMode.STREAMING
    assert env.get_runtime_mode() is RuntimeExecutionMode.AUTOMATIC


def test_runtime_mode_from_the_configuration_key(env):
    conf = Configuration()
    conf.set_string("execution.runtime-mode", "batch")
    e = StreamExecutionEnvironment.get_execution_environment(conf)
    assert e.get_runtime_mode() is RuntimeExecutionMode.BATCH
    assert sorted(collect(word_count(e))) == sorted(Counter(w for line in LINES for w in line.split()).items())


def test_runtime_mode_from_the_environment_variable(monkeypatch):
    monkeypatch.setenv("RILL_EXECUTION_RUNTIME_MODE", "BATCH")
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection([1]).print()
    assert env.get_stream_graph().runtime_mode is RuntimeExecutionMode.BATCH


def test_bad_runtime_modes_are_refused():
    env = new_env()
    with pytest.raises(ValueError, match=r"^StreamExecutionEnvironment.set_runtime_mode: 'FAST' is not a runtime "
                                         r"execution mode; expected one of STREAMING, BATCH, AUTOMATIC$"):
        env.set_runtime_mode("FAST")
    conf = Configuration()
    conf.set_string("execution.runtime-mode", "sometimes")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.from_collection([1]).print()
    with pytest.raises(ValueError, match=r"^execution.runtime-mode: 'sometimes' is not a runtime execution mode"):
        env.get_stream_graph()


def test_checkpointing_is_disabled_in_batch_mode(env):
    env.set_parallelism(PARALLELISM)
    env.enable_checkpointing(100)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    assert env.get_checkpoint_interval() == 100
    assert sorted(collect(word_count(env))) == sorted(Counter(w for line in LINES for w in line.split()).items())
    # as Flink's configureStreamGraphBatch: disabled (and logged), not an error
    assert env.get_checkpoint_interval() == -1


# -- more keyed two-input operators, many keys per key group -----------------------------------

class Pair(ProcessJoinFunction):
    def process_element(self, left, right, ctx):
        yield left, right


def test_interval_join(env):
    left_events = [e for e in EVENTS if e[1] % 2]
    right_events = [(k, v * 10, t + 1) for k, v, t in EVENTS if not v % 2]

    def build(e):
        return (stamped(e, left_events).key_by(lambda v: v[0])
                .interval_join(stamped(e, right_events).key_by(lambda v: v[0])).between(-7, 4).process(Pair()))

    batch, streaming = batch_and_streaming(env, build)
    expected = sorted((lv, rv) for lv in left_events for rv in right_events
                      if lv[0] == rv[0] and lv[2] - 7 <= rv[2] <= lv[2] + 4)
    assert expected
    assert sorted(batch) == expected
    assert sorted(streaming) == expected


def test_many_keys_sharing_key_groups(env):
    # 300 keys in 4 key groups: the window operator's per-key-group timers fire key by key
    events = [(i % 300, i % 7, i // 3) for i in range(1500)]

    def build(e):
        e.set_max_parallelism(4)
        return (stamped(e, events).key_by(lambda v: v[0]).window(TumblingEventTimeWindows.of(100))
                .reduce(lambda a, b: (a[0], a[1] + b[1], max(a[2], b[2]))))

    batch, streaming = batch_and_streaming(env, build)
    acc = {}
    for k, v, t in events:
        w = (k, t // 100)
        s, m = acc.get(w, (0, t))
        acc[w] = (s + v, max(m, t))
    expected = sorted((k, s, m) for (k, _), (s, m) in acc.items())
    assert sorted(batch) == expected
    assert sorted(streaming) == expected


def test_keyed_inputs_spill_to_disk_beyond_the_configured_bound(env):
    def build(e):
        return (stamped(e).connect(stamped(e, RATES)).key_by(lambda v: v[0], lambda v: v[0]).process(SumBoth())
                .union(stamped(e).key_by(lambda v: v[0]).window(EventTimeSessionWindows.with_gap(25))
                       .process(Describe())))

    env.set_parallelism(PARALLELISM)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    in_memory = collect(build(env))
    conf = Configuration()
    conf.set_string("rill.batch.sorted-inputs.max-records", "4")
    spilling = StreamExecutionEnvironment.get_execution_environment(conf)
    spilling.set_parallelism(PARALLELISM)
    spilling.set_runtime_mode(RuntimeExecutionMode.BATCH)
    assert sorted(collect(build(spilling)), key=repr) == sorted(in_memory, key=repr)
    assert len(in_memory) == len(KEYS) + len(sessions(25))
