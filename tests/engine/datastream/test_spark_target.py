"""``execution.target: spark``: bounded programs run on Spark (the session-wide ``spark``
fixture, local[2]) give, as a multiset, the output of local BATCH mode and of the plain Python
computation of the same rules; the main job's output files on Spark equal its local BATCH
ones; what the target cannot run is refused before Spark starts, naming the operator.

The programs are those of ``test_batch_mode`` (its rules and plain computations), plus file
sources and sinks, rebalance and co-map. Each program is one Spark job; every job runs at
parallelism 2, so keyed exchanges really shuffle between two Spark tasks.
"""

from __future__ import annotations

import glob
import os
import threading
import time
from collections import Counter, defaultdict

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from _ds_helpers import collect, run, wait_until
from test_batch_mode import (
    EVENTS,
    FACTORS,
    LINES,
    RATES,
    RULES,
    SMALL,
    ApplyFactor,
    CountUpTo,
    Describe,
    DescribeAll,
    Multiply,
    Pair,
    Route,
    SumAtProcessingTimeTimer,
    SumBoth,
    by_key,
    sessions,
    stamped,
    windows_of,
    word_count,
)
from rill.common import Configuration, Encoder, Types
from rill.common.streamrecord import MAX_TIMESTAMP, MIN_TIMESTAMP
from rill.datastream import (
    AggregateFunction,
    AsyncDataStream,
    AsyncFunction,
    CoMapFunction,
    ProcessFunction,
    RuntimeExecutionMode,
    StreamExecutionEnvironment,
)
from rill.common.row import Row
from rill.datastream.connectors import BucketAssigner, FileSink, FileSource, OutputFileConfig, StreamFormat
from rill.datastream.formats.parquet import ParquetBulkWriters
from rill.datastream.connectors.collection import CollectionSource
from rill.datastream.connectors.source import Boundedness
from rill.datastream.formats.parquet_input import ParquetColumnarRowInputFormat
from rill.datastream.window import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
)
from rill.examples import flight_stats
from rill.examples.data import flights_csv, weather_csv
from rill.graph.states import JobStatus
from rill.runtime.errors import JobCancellationException, JobExecutionException
from rill.runtime.spark import UnsupportedOnSparkError
from rill.runtime.spark.translation import pointwise_targets

pytestmark = pytest.mark.spark

PARALLELISM = 2


@pytest.fixture(autouse=True)
def no_leaked_threads():
    """Overrides the directory's check (the session-wide SparkSession keeps Py4J threads): no
    job thread of the Spark target outlives its test."""
    yield
    left = [t.name for t in threading.enumerate() if t.name.startswith("rill-spark-") and t.is_alive()]
    assert not left, f"Spark job threads left running: {left}"


def new_env(on_spark: bool) -> StreamExecutionEnvironment:
    conf = Configuration()
    if on_spark:
        conf.set_string("execution.target", "spark")
    else:
        conf.set_string("execution.runtime-mode", "BATCH")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(PARALLELISM)
    return env


def multiset(records):
    return Counter(repr(r) for r in records)


# -- the programs: (build(env) -> DataStream, plain Python computation) ----------------------------

def sum_and_max_by(e):
    ks = e.from_collection(EVENTS).key_by(lambda v: v[0])
    return ks.sum(1).union(ks.max_by(1).map(lambda v: ("max",) + v))


def expected_sum_and_max_by():
    groups = by_key()
    return ([(k, sum(v for _, v, _ in g), g[0][2]) for k, g in groups.items()]
            + [("max",) + max(g, key=lambda e: e[1]) for g in groups.values()])


class Stamp(ProcessFunction):
    def process_element(self, value, ctx):
        yield value, ctx.timestamp()


class MeanDelay(AggregateFunction):
    def create_accumulator(self):
        return 0, 0

    def add(self, value, acc):
        return acc[0] + value[1], acc[1] + 1

    def get_result(self, acc):
        return acc[0] / acc[1]

    def merge(self, a, b):
        return a[0] + b[0], a[1] + b[1]


class Tag(CoMapFunction):
    def map1(self, value):
        return "left", value

    def map2(self, value):
        return "right", value


def count_windows(e):
    return e.from_collection(EVENTS).key_by(lambda v: v[0]).count_window(3).reduce(
        lambda a, b: (a[0], a[1] + b[1], b[2]))


def expected_count_windows():
    return [(k, sum(e[1] for e in g[i:i + 3]), g[i + 2][2])
            for k, g in by_key().items() for i in range(0, len(g) - len(g) % 3, 3)]


def keyed_co_process(e):
    return stamped(e).connect(stamped(e, RATES)).key_by(lambda v: v[0], lambda v: v[0]).process(SumBoth())


def expected_keyed_co_process():
    left, right = by_key(), by_key(RATES)
    return [(k, sum(x[1] for x in left.get(k, [])), sum(x[1] for x in right.get(k, [])))
            for k in set(left) | set(right)]


def union_then_reduce(e):
    evens = e.from_collection(EVENTS[0::2])
    odds = e.from_collection(EVENTS[1::2]).map(lambda v: (v[0], v[1] * 100, v[2]))
    return evens.union(odds).key_by(lambda v: v[0]).reduce(lambda a, b: (a[0], a[1] + b[1], max(a[2], b[2])))


def expected_union_then_reduce():
    totals = defaultdict(lambda: [0, 0])
    for i, (k, v, t) in enumerate(EVENTS):
        totals[k][0] += v if i % 2 == 0 else v * 100
        totals[k][1] = max(totals[k][1], t)
    return [(k, s, t) for k, (s, t) in totals.items()]


def side_outputs(e):
    routed = e.from_collection(EVENTS).process(Route()).set_parallelism(1)
    main = routed.key_by(lambda v: v[0]).sum(1).map(lambda v: ("main",) + v)
    return main.union(routed.get_side_output(SMALL).key_by(lambda v: v[0]).sum(1).map(lambda v: ("small",) + v))


def expected_side_outputs():
    out = []
    for name, keep in (("main", lambda v: v >= 4), ("small", lambda v: v < 4)):
        for k, g in by_key([x for x in EVENTS if keep(x[1])]).items():
            out.append((name, k, sum(x[1] for x in g), g[0][2]))
    return out


def keyed_broadcast(e):
    return (e.from_collection(EVENTS).key_by(lambda v: v[0])
            .connect(e.from_collection(FACTORS).broadcast(RULES)).process(ApplyFactor()))


def expected_keyed_broadcast():
    factors = dict(FACTORS)
    now = [("now", k, v, factors.get(k), MIN_TIMESTAMP) for k, v, _ in EVENTS]
    end = [("end", k, sum(x[1] for x in g), None if k not in factors else sum(x[1] for x in g) * factors[k])
           for k, g in by_key().items()]
    return now + end


LEFT = [x for x in EVENTS if x[1] % 2]
RIGHT = [(k, v * 10, t + 1) for k, v, t in EVENTS if not v % 2]
MANY = [(i % 300, i % 7, i // 3) for i in range(1500)]


def many_keys(e):
    e.set_max_parallelism(4)
    return (stamped(e, MANY).key_by(lambda v: v[0]).window(TumblingEventTimeWindows.of(100))
            .reduce(lambda a, b: (a[0], a[1] + b[1], max(a[2], b[2]))))


def expected_many_keys():
    acc = {}
    for k, v, t in MANY:
        s, m = acc.get((k, t // 100), (0, t))
        acc[(k, t // 100)] = (s + v, max(m, t))
    return [(k, s, m) for (k, _), (s, m) in acc.items()]


def rebalanced_sum(e):
    return (e.from_sequence(1, 1000).rebalance().map(lambda x: (x % 10, x)).filter(lambda p: p[1] % 3)
            .key_by(lambda p: p[0]).sum(1))


def expected_rebalanced_sum():
    sums = defaultdict(int)
    for x in range(1, 1001):
        if x % 3:
            sums[x % 10] += x
    return list(sums.items())


class Subtask(ProcessFunction):
    """Tags each record with the subtask that processed it."""

    def open(self, runtime_context):
        self.index = runtime_context.get_index_of_this_subtask()

    def process_element(self, value, ctx):
        yield self.index, value


def exchanges(e):
    # FORWARD between two vertices (own partition), RESCALE 2 -> 4, SHUFFLE, GLOBAL, custom
    return (e.from_sequence(1, 200).map(lambda x: x * 2).start_new_chain().rescale().map(lambda x: x + 1)
            .set_parallelism(4).shuffle().filter(lambda x: x % 3).partition_custom(lambda k, n: k % n, lambda x: x)
            .map(lambda x: x - 1).global_().process(Subtask()))


def expected_exchanges():
    return [(0, x * 2) for x in range(1, 201) if (x * 2 + 1) % 3]


def expected_windows_all():
    acc = defaultdict(list)
    for _, v, t in EVENTS:
        acc[t // 40 * 40].append(v)
    return [(s, len(vs), sum(vs)) for s, vs in acc.items()]


def expected_aggregate_windows():
    acc = defaultdict(list)
    for k, v, t in EVENTS:
        acc[(k, t // 50)].append(v)
    return [sum(vs) / len(vs) for vs in acc.values()]


PROGRAMS = {
    "word_count": (word_count, lambda: Counter(w for line in LINES for w in line.split()).items()),
    "sum_and_max_by": (sum_and_max_by, expected_sum_and_max_by),
    "reduce_at_end_of_time": (
        lambda e: stamped(e).key_by(lambda x: x[0]).reduce(lambda a, b: (a[0], a[1] + b[1], b[2])).process(Stamp()),
        lambda: [((k, sum(x[1] for x in g), g[-1][2]), MAX_TIMESTAMP) for k, g in by_key().items()]),
    "event_time_timers": (
        lambda e: stamped(e).key_by(lambda v: v[0]).process(CountUpTo()),
        lambda: [(k, t + 5, sum(1 for x in g if x[2] <= t + 5)) for k, g in by_key().items()
                 for t in sorted({x[2] for x in g})]),
    "processing_time_timers": (
        lambda e: e.from_collection(EVENTS).key_by(lambda v: v[0]).process(SumAtProcessingTimeTimer()),
        lambda: [(k, sum(x[1] for x in g), "PROCESSING_TIME") for k, g in by_key().items()]),
    "tumbling_windows": (
        lambda e: stamped(e).key_by(lambda v: v[0]).window(TumblingEventTimeWindows.of(20)).process(Describe()),
        lambda: windows_of(lambda t: [(t // 20 * 20, t // 20 * 20 + 20)])),
    "sliding_windows": (
        lambda e: stamped(e).key_by(lambda v: v[0]).window(SlidingEventTimeWindows.of(30, 10)).process(Describe()),
        lambda: windows_of(lambda t: [(s, s + 30) for s in range(t // 10 * 10 - 20, t + 1, 10) if s <= t < s + 30])),
    "session_windows": (
        lambda e: stamped(e).key_by(lambda v: v[0]).window(EventTimeSessionWindows.with_gap(25)).process(Describe()),
        lambda: sessions(25)),
    "count_windows": (count_windows, expected_count_windows),
    "window_all": (
        lambda e: stamped(e).window_all(TumblingEventTimeWindows.of(40)).process(DescribeAll()),
        expected_windows_all),
    "aggregate_windows": (
        lambda e: stamped(e).key_by(lambda v: v[0]).window(TumblingEventTimeWindows.of(50)).aggregate(MeanDelay()),
        expected_aggregate_windows),
    "keyed_co_process": (keyed_co_process, expected_keyed_co_process),
    "co_map": (
        lambda e: e.from_sequence(1, 20).connect(e.from_collection(["x", "y"])).map(Tag()),
        lambda: [("left", i) for i in range(1, 21)] + [("right", "x"), ("right", "y")]),
    "union_then_reduce": (union_then_reduce, expected_union_then_reduce),
    "side_outputs": (side_outputs, expected_side_outputs),
    "keyed_broadcast": (keyed_broadcast, expected_keyed_broadcast),
    "non_keyed_broadcast": (
        lambda e: e.from_sequence(1, 50).connect(e.from_collection([("mult", 3), ("mult", 4)]).broadcast(RULES))
        .process(Multiply()),
        lambda: [(i, 4) for i in range(1, 51)]),
    "interval_join": (
        lambda e: stamped(e, LEFT).key_by(lambda v: v[0]).interval_join(stamped(e, RIGHT).key_by(lambda v: v[0]))
        .between(-7, 4).process(Pair()),
        lambda: [(lv, rv) for lv in LEFT for rv in RIGHT if lv[0] == rv[0] and lv[2] - 7 <= rv[2] <= lv[2] + 4]),
    "many_keys_in_few_key_groups": (many_keys, expected_many_keys),
    "rebalance_then_sum": (rebalanced_sum, expected_rebalanced_sum),
    "forward_rescale_shuffle_custom_global": (exchanges, expected_exchanges),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_gives_the_local_batch_output_on_spark(spark, name):
    build, expected = PROGRAMS[name]
    on_spark = collect(build(new_env(True)))
    local = collect(build(new_env(False)))
    assert multiset(on_spark) == multiset(expected())
    assert multiset(local) == multiset(expected())


def test_there_are_at_least_twenty_programs():
    assert len(PROGRAMS) >= 20


def test_pointwise_edges_connect_as_flink_does():
    assert pointwise_targets(2, 2) == [[0], [1]]
    assert pointwise_targets(4, 2) == [[0], [0], [1], [1]]
    assert pointwise_targets(2, 4) == [[0, 1], [2, 3]]
    assert pointwise_targets(2, 3) == [[0], [1, 2]]


# -- files: text and Parquet sources, FileSink -----------------------------------------------------

def test_text_files_word_count_into_a_file_sink(spark, tmp_path):
    data = tmp_path / "in"
    data.mkdir()
    for i in range(3):  # several files, several splits each
        (data / f"part-{i}.txt").write_text("\n".join(f"{LINES[(i + j) % 4]}" for j in range(40)) + "\n")
    out = tmp_path / "out"
    env = new_env(True)
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(data)).set_split_size(512).build()
    (env.from_source(source, source_name="lines").flat_map(lambda l: l.split()).map(lambda w: (w, 1))
     .key_by(lambda p: p[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).map(lambda p: f"{p[0]},{p[1]}")
     .sink_to(FileSink.for_row_format(str(out), Encoder.simple_string_encoder()).build()))
    run(env)
    written = [line for p in glob.glob(f"{out}/**/*", recursive=True) if os.path.isfile(p)
               and not os.path.basename(p).startswith(".") for line in open(p).read().splitlines()]
    words = Counter(w for i in range(3) for j in range(40) for w in LINES[(i + j) % 4].split())
    assert sorted(written) == sorted(f"{w},{n}" for w, n in words.items())


def test_parquet_files_in_and_out(spark, tmp_path):
    source_dir, out_dir = tmp_path / "in", tmp_path / "out"
    source_dir.mkdir()
    for i in range(3):
        pq.write_table(pa.table({"carrier": [f"C{j % 4}" for j in range(i * 50, i * 50 + 50)],
                                 "delay": list(range(i * 50, i * 50 + 50))}), source_dir / f"f{i}.parquet")
    row_type = Types.ROW_NAMED(["carrier", "delay"], [Types.STRING(), Types.LONG()])
    env = new_env(True)
    source = FileSource.for_bulk_file_format(ParquetColumnarRowInputFormat(row_type), str(source_dir)).build()
    sink = (FileSink.for_bulk_format(str(out_dir), ParquetBulkWriters.for_row_type(row_type))
            .with_output_file_config(OutputFileConfig("part", ".parquet"))
            .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner()).build())
    (env.from_source(source, source_name="parquet").key_by(lambda r: r.carrier)
     .reduce(lambda a, b: Row(carrier=a.carrier, delay=a.delay + b.delay)).sink_to(sink))
    run(env)
    written = [row for f in sorted(out_dir.glob("part-*.parquet")) for row in pq.read_table(f).to_pylist()]
    sums = defaultdict(int)
    for j in range(150):
        sums[f"C{j % 4}"] += j
    assert sorted((r["carrier"], r["delay"]) for r in written) == sorted(sums.items())


# -- the main job ---------------------------------------------------------------------------------

def _slice(path, lines, target):
    with open(path) as src, open(target, "w") as dst:
        for _ in range(lines):
            dst.write(src.readline())
    return str(target)


def _outputs(directory):
    return {part: sorted(line for p in glob.glob(f"{directory}/{part}/*.csv") for line in open(p).read().splitlines())
            for part in ("stats", "hourly", "late")}


def test_the_main_job_on_spark_writes_its_local_batch_output(spark, tmp_path):
    flights = _slice(flights_csv(), 3001, tmp_path / "flights.csv")
    weather = _slice(weather_csv(), 301, tmp_path / "weather.csv")
    results = {}
    for on_spark in (True, False):
        env = new_env(on_spark)
        out = tmp_path / ("spark" if on_spark else "local")
        flight_stats.configure(env, ["--input", flights, "--weather", weather, "--output", str(out)])
        run(env, "Flight statistics", timeout_s=120)
        results[on_spark] = _outputs(out)
    assert results[True] == results[False]
    carriers = Counter(flight_stats.parse_flight(line)[0] for line in open(flights).read().splitlines()[1:])
    stats = [line.split(",") for line in results[True]["stats"] if line.startswith("carrier,")]
    assert {s[1]: int(s[2]) for s in stats} == dict(carriers)
    assert len(results[True]["hourly"]) > 100


# -- failures and refusals ------------------------------------------------------------------------

class Boom(ValueError):
    pass


def explode(x):
    if x == 17:
        raise Boom(f"record {x} is bad")
    return x


def test_an_operator_failure_reaches_the_caller_as_its_own_exception(spark):
    env = new_env(True)
    env.from_sequence(1, 40).map(explode).name("Explode").key_by(lambda x: x % 2).sum(0).print()
    with pytest.raises(JobExecutionException, match=r"failed on Spark in operator 'Explode': Boom: record 17 is "
                                                    r"bad$") as info:
        env.execute("failing")
    # the exception itself, its class shipped by value from this (not installed) test module
    cause = info.value.__cause__
    assert isinstance(cause, ValueError) and type(cause).__name__ == "Boom" and str(cause) == "record 17 is bad"


class Unbounded(CollectionSource):
    def get_boundedness(self):
        return Boundedness.CONTINUOUS_UNBOUNDED


def test_unsupported_operators_are_refused_before_spark_starts(monkeypatch):
    # no SparkSession is asked for: the refusal comes from the JobGraph alone
    monkeypatch.setattr("rill.runtime.spark.runner.spark_session", lambda conf: pytest.fail("Spark was started"))

    class Echo(AsyncFunction):  # async I/O has no Spark translation
        async def async_invoke(self, value):
            return [value]

    env = new_env(True)
    AsyncDataStream.unordered_wait(env.from_sequence(1, 3), Echo(), 1000).name("Lookup").print()
    with pytest.raises(UnsupportedOnSparkError, match=r"^execution.target 'spark' cannot run operator 'Lookup' "
                                                      r"\(AsyncWaitOperator\): no Spark translation"):
        env.execute()

    env = new_env(True)
    env.from_collection([1]).add_sink(lambda v: None)
    with pytest.raises(UnsupportedOnSparkError, match=r"cannot run operator 'Sink: Unnamed' \(StreamSink\)"):
        env.execute()


def test_streaming_and_unbounded_sources_are_refused_on_spark():
    conf = Configuration()
    conf.set_string("execution.target", "spark")
    conf.set_string("execution.runtime-mode", "STREAMING")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.from_collection([1]).print()
    with pytest.raises(ValueError, match=r"^execution.target 'spark' runs bounded programs in BATCH mode; "
                                         r"'execution.runtime-mode' is set to STREAMING"):
        env.execute()
    env = new_env(True)
    env.from_source(Unbounded([1]), source_name="ticks").print()
    with pytest.raises(ValueError, match=r"Detected an UNBOUNDED source .* source 'ticks'"):
        env.execute()


def test_the_target_comes_from_the_environment_variable(spark, monkeypatch):
    monkeypatch.setenv("RILL_EXECUTION_TARGET", "spark")
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(PARALLELISM)
    counts = word_count(env)
    assert env.get_stream_graph().runtime_mode is RuntimeExecutionMode.BATCH  # an unset mode: BATCH
    assert sorted(counts.execute_and_collect()) == sorted(Counter(w for line in LINES for w in line.split()).items())


def test_cancel_stops_the_spark_job(spark, tmp_path):
    started, release = tmp_path / "started", tmp_path / "release"

    def hold(x):
        # the user function waits for the test's release (or the cancellation that kills its task)
        started.touch()
        while not release.exists():
            time.sleep(0.01)
        return x

    env = new_env(True)
    env.from_sequence(1, 10).map(hold).print()
    client = env.execute_async("held")
    try:
        assert wait_until(started.exists, timeout_s=60), "the job's task did not start"
        assert client.get_job_status() is JobStatus.RUNNING
        client.cancel().result(timeout=60)
        assert client.get_job_status() is JobStatus.CANCELED
        with pytest.raises(JobCancellationException, match=r"^Job 'held' \(\w{32}\) was cancelled\.$"):
            client.get_job_execution_result().result(timeout=0)
    finally:
        release.touch()
