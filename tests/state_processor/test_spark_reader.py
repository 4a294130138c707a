"""Reading snapshots of real operators with Spark (the session's real local SparkSession):
SavepointReader's keyed, window and operator state readers, the rill-state data source with and
without a key filter (key-group pruning counted), its change feed between two checkpoints, and
rill-state-metadata. The snapshots are written by real operators driven by the operator test
harness, two subtasks each, through FileSystemCheckpointStorage."""

import dataclasses
import sys

import cloudpickle
import pytest
from pyspark import cloudpickle as spark_cloudpickle
from pyspark.sql import Row as SparkRow
from pyspark.sql.datasource import EqualTo, Not
from pyspark.sql.functions import col
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from rill.common.functions import AggregateFunction, KeyedProcessFunction, MapFunction
from rill.common.typeinfo import Types
from rill.datastream.checkpointed_function import CheckpointedFunction
from rill.operators.process import KeyedProcessOperator
from rill.operators.simple import StreamMap
from rill.operators.testing import KeyedOneInputStreamOperatorTestHarness, OneInputStreamOperatorTestHarness
from rill.operators.windowing import (
    EventTimeSessionWindows,
    ProcessWindowFunction,
    TumblingEventTimeWindows,
    WindowOperatorBuilder,
)
from rill.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from rill.state.checkpoint.filesystem import FileSystemCheckpointStorage
from rill.state.checkpoint.metadata import CheckpointMetadata, OperatorState
from rill.state.checkpoint.object_codec import encode_object
from rill.state.key_groups import assign_to_key_group, compute_key_group_range_for_operator_index
from rill.state_processor import (
    KeyedStateReaderFunction,
    SavepointReader,
    WindowReaderFunction,
    register_data_sources,
)
from rill.state_processor.state_data_source import RillStateDataSource

pytestmark = pytest.mark.spark
# Spark's Python workers cannot import this test module: its functions travel by value (as a
# user's __main__ script's do), to the workers and in the snapshots' pickled descriptors
spark_cloudpickle.register_pickle_by_value(sys.modules[__name__])
cloudpickle.register_pickle_by_value(sys.modules[__name__])

JOB = "0123456789abcdef0123456789abcdef"
COUNTS, WINDOWS, SESSIONS, SOURCE = ("c" * 32, "d" * 32, "e" * 32, "f" * 32)
MAX_PARALLELISM = 128
CARRIERS = ["UA", "AA", "DL", "B6", "WN", "EV", "9E", "MQ", "US", "VX", "FL", "AS", "F9", "HA", "YV", "OO"]


class CountFlights(KeyedProcessFunction):
    """Per carrier: flights and the last origin; a timer 10 ms after the first flight and a
    processing-time reminder at 100; a record with origin None clears the carrier."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))
        self.last = runtime_context.get_state(ValueStateDescriptor("last", Types.STRING()))

    def process_element(self, value, ctx):
        if value[1] is None:
            self.count.clear()
            self.last.clear()
            return
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        self.last.update(value[1])
        if n == 1:
            ctx.timer_service().register_event_time_timer(ctx.timestamp() + 10)
            ctx.timer_service().register_processing_time_timer(100)


class CountAgg(AggregateFunction):
    def create_accumulator(self):
        return 0

    def add(self, value, accumulator):
        return accumulator + 1

    def get_result(self, accumulator):
        return accumulator

    def merge(self, a, b):
        return a + b


class Describe(ProcessWindowFunction):
    def process(self, key, context, elements):
        yield key


class Buffering(MapFunction, CheckpointedFunction):
    """A source-like function: a list state of offsets, a union state of its subtask's
    watermark and a broadcast state of rules."""

    def __init__(self, subtask):
        self.subtask = subtask

    def initialize_state(self, context):
        store = context.get_operator_state_store()
        self.offsets = store.get_list_state(ListStateDescriptor("offsets"))
        self.marks = store.get_union_list_state(ListStateDescriptor("marks"))
        self.rules = store.get_broadcast_state(MapStateDescriptor("rules"))
        self.buffer = []

    def snapshot_state(self, context):
        self.offsets.update(self.buffer)
        self.marks.update([1000 + self.subtask])
        self.rules.put("limit", 3)
        self.rules.put("carrier", 7)

    def map(self, value):
        self.buffer.append(value)
        return value


def _subtask_of(key):
    kg = assign_to_key_group(key, MAX_PARALLELISM)
    return 0 if compute_key_group_range_for_operator_index(MAX_PARALLELISM, 2, 0).contains(kg) else 1


def _keyed(make_operator, records, key_selector, snapshots_at):
    """Run ``records`` (value, timestamp) through two subtasks (each gets its keys); snapshot
    both after the first ``n`` records for each ``n`` in ``snapshots_at``."""
    harnesses = [KeyedOneInputStreamOperatorTestHarness(make_operator(), key_selector, parallelism=2,
                                                        subtask_index=i) for i in (0, 1)]
    for h in harnesses:
        h.open()
    taken, done = [], 0
    for n in snapshots_at:
        for value, ts in records[done:n]:
            harnesses[_subtask_of(key_selector(value))].process_element(value, ts)
        done = n
        taken.append([h.snapshot(checkpoint_id=len(taken) + 1) for h in harnesses])
    for h in harnesses:
        h.close()
    return taken


def _flights():
    """(carrier, origin) records: carrier i has i % 5 + 1 flights, origins by index."""
    records, t = [], 0
    for i, carrier in enumerate(CARRIERS):
        for j in range(i % 5 + 1):
            t += 1
            records.append(((carrier, f"O{i}-{j}"), t))
    return records


FIRST = _flights()
SECOND = [(("UA", "EWR"), 100), (("DL", None), 101), (("ZZ", "SFO"), 102)]  # UA updated, DL deleted, ZZ new


def _expected_counts(records):
    counts, last, first = {}, {}, {}
    for (carrier, origin), ts in records:
        if origin is None:
            counts.pop(carrier, None)
            last.pop(carrier, None)
            continue
        counts[carrier] = counts.get(carrier, 0) + 1
        last[carrier] = origin
        first.setdefault(carrier, ts)
    return counts, last, first


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory):
    """Checkpoints 1 and 2 of a job of four operators, two subtasks each, under <root>/<job>."""
    root = str(tmp_path_factory.mktemp("spark-reader"))
    storage = FileSystemCheckpointStorage(root, JOB)
    records = FIRST + SECOND
    counts = _keyed(lambda: KeyedProcessOperator(CountFlights()), records, lambda v: v[0], [len(FIRST), len(records)])
    windows = _keyed(lambda: WindowOperatorBuilder(TumblingEventTimeWindows.of(10)).aggregate(
        CountAgg(), accumulator_type=Types.LONG())[0], records, lambda v: v[0], [len(FIRST), len(records)])
    sessions = _keyed(lambda: WindowOperatorBuilder(EventTimeSessionWindows.with_gap(3)).process(Describe())[0],
                      records, lambda v: v[0], [len(FIRST), len(records)])
    source = []
    for cid in (1, 2):
        per_subtask = []
        for i in (0, 1):
            with OneInputStreamOperatorTestHarness(StreamMap(Buffering(i)), parallelism=2, subtask_index=i) as h:
                h.process_elements([i * 10 + k for k in range(cid + i)])
                per_subtask.append(h.snapshot(checkpoint_id=cid))
        source.append(per_subtask)
    operators = [(COUNTS, "counts", counts), (WINDOWS, "windows", windows), (SESSIONS, "sessions", sessions),
                 (SOURCE, "source", source)]
    for index, cid in enumerate((1, 2)):
        location = storage.initialize_location_for_checkpoint(cid)
        states = {}
        for oid, uid, taken in operators:
            handles = {i: location.write_operator_subtask_state(oid, i, taken[index][i], uid) for i in (0, 1)}
            states[oid] = OperatorState(oid, 2, MAX_PARALLELISM, handles, uid, uid.title())
        location.finalize(CheckpointMetadata(cid, 1000 * cid, states, job_id=JOB))
    return root, storage.job_directory, records


@pytest.fixture(scope="module")
def registered(spark):
    return register_data_sources(spark)


class ReadCounts(KeyedStateReaderFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))
        self.last = runtime_context.get_state(ValueStateDescriptor("last", Types.STRING()))

    def read_key(self, key, context, out):
        out.collect((key, self.count.value(), self.last.value(),
                     sorted(context.registered_event_time_timers()),
                     sorted(context.registered_processing_time_timers())))


COUNT_ROW = Types.ROW_NAMED(["carrier", "flights", "last", "event_timers", "processing_timers"],
                            [Types.STRING(), Types.LONG(), Types.STRING(), Types.LIST(Types.LONG()),
                             Types.LIST(Types.LONG())])


def test_read_keyed_state_gives_every_key_with_its_states_and_timers(spark, snapshots):
    root, job_dir, records = snapshots
    savepoint = SavepointReader.read(spark, job_dir, checkpoint_id=1)
    df = savepoint.read_keyed_state("counts", ReadCounts(), out_type_info=COUNT_ROW)
    assert df.schema == StructType([
        StructField("carrier", StringType()), StructField("flights", LongType()), StructField("last", StringType()),
        StructField("event_timers", ArrayType(LongType())), StructField("processing_timers", ArrayType(LongType()))])
    counts, last, first = _expected_counts(FIRST)
    assert sorted(tuple(r) for r in df.collect()) == sorted(
        (c, counts[c], last[c], [first[c] + 10], [100]) for c in counts)
    assert df.rdd.getNumPartitions() == 2  # one task per subtask of the snapshot


def test_savepoint_reader_takes_the_newest_checkpoint_by_default_and_the_root_directory(spark, snapshots):
    root, job_dir, records = snapshots
    df = SavepointReader.read(spark, root).read_keyed_state("counts", ReadCounts(), out_type_info=COUNT_ROW)
    counts, last, _ = _expected_counts(records)
    assert sorted((r.carrier, r.flights, r.last) for r in df.collect()) == sorted(
        (c, counts[c], last[c]) for c in counts)
    assert "DL" not in {r.carrier for r in df.collect()} and "ZZ" in counts


def test_registering_state_outside_open_fails_naming_the_rule(spark, snapshots):
    class Late(KeyedStateReaderFunction):
        def read_key(self, key, context, out):
            self.count = self.runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

        def open(self, runtime_context):
            self.runtime_context = runtime_context
            runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    df = SavepointReader.read(spark, snapshots[1]).read_keyed_state("counts", Late(), out_type_info=Types.LONG())
    with pytest.raises(Exception, match="may only be registered inside open"):
        df.collect()


def test_read_keyed_state_refuses_a_missing_output_type_and_an_unknown_operator(spark, snapshots):
    savepoint = SavepointReader.read(spark, snapshots[1])
    with pytest.raises(ValueError, match="output type is required"):
        savepoint.read_keyed_state("counts", ReadCounts())
    with pytest.raises(KeyError, match="no state of the operator with uid 'nope'"):
        savepoint.read_keyed_state("nope", ReadCounts(), out_type_info=COUNT_ROW)


def test_window_aggregate_reader_gives_each_key_and_window(spark, snapshots):
    records = FIRST
    df = SavepointReader.read(spark, snapshots[1], 1).window(TumblingEventTimeWindows.of(10)).aggregate(
        "windows", CountAgg(), output_type=Types.LONG())
    expected = {}
    for (carrier, _), ts in records:
        expected[(carrier, ts - ts % 10)] = expected.get((carrier, ts - ts % 10), 0) + 1
    assert df.schema == StructType([StructField("value", LongType())])
    assert sorted(r.value for r in df.collect()) == sorted(expected.values())

    class WithWindow(WindowReaderFunction):
        def read_window(self, key, context, elements, out):
            out.collect((key, context.window().start, list(elements)[0]))

    rows = SavepointReader.read(spark, snapshots[1], 1).window(TumblingEventTimeWindows.of(10)).aggregate(
        "windows", CountAgg(), WithWindow(),
        output_type=Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG()])).collect()
    assert sorted(tuple(r) for r in rows) == sorted((c, start, n) for (c, start), n in expected.items())


def test_window_process_reader_maps_session_state_windows_to_their_windows(spark, snapshots):
    class Sessions(WindowReaderFunction):
        def read_window(self, key, context, elements, out):
            yield (key, context.window().start, context.window().end, sorted(e[1] for e in elements),
                   sorted(context.registered_event_time_timers()))

    df = SavepointReader.read(spark, snapshots[1], 1).window(EventTimeSessionWindows.with_gap(3)).process(
        "sessions", Sessions(), output_type=Types.ROW_NAMED(
            ["carrier", "start", "end", "origins", "timers"],
            [Types.STRING(), Types.LONG(), Types.LONG(), Types.LIST(Types.STRING()), Types.LIST(Types.LONG())]))
    # each carrier's flights are consecutive milliseconds: one session [first, last + 3)
    expected = {}
    for (carrier, origin), ts in FIRST:
        start, end, origins = expected.get(carrier, (ts, ts, []))
        expected[carrier] = (start, ts + 3, origins + [origin])
    assert sorted(tuple(r) for r in df.collect()) == sorted(
        (c, s, e, sorted(o), [e - 1]) for c, (s, e, o) in expected.items())


def test_operator_state_readers(spark, snapshots):
    savepoint = SavepointReader.read(spark, snapshots[1], 2)
    offsets = savepoint.read_list_state("source", "offsets", Types.INT())
    assert offsets.schema == StructType([StructField("value", IntegerType())])
    assert sorted(r.value for r in offsets.collect()) == [0, 1, 10, 11, 12]
    assert offsets.rdd.getNumPartitions() == 2
    marks = savepoint.read_union_state("source", "marks", Types.LONG())
    assert sorted(r.value for r in marks.collect()) == [1000, 1001]
    rules = savepoint.read_broadcast_state("source", "rules", Types.STRING(), Types.INT())
    assert sorted(tuple(r) for r in rules.collect()) == [("carrier", 7), ("limit", 3)]
    with pytest.raises(ValueError, match="'marks' is a UNION state; read it with read_union_state"):
        savepoint.read_list_state("source", "marks", Types.LONG())
    with pytest.raises(KeyError, match="has no operator state 'nope'"):
        savepoint.read_list_state("source", "nope", Types.LONG())


def _decoded(rows):
    from rill.state.checkpoint.object_codec import decode_object
    return sorted((decode_object(r.key), r.value) for r in rows)


def test_rill_state_source_reads_one_state_with_typed_columns(registered, snapshots):
    root, job_dir, records = snapshots
    df = (registered.read.format("rill-state").option("operatorUid", "counts").option("stateName", "count")
          .option("checkpointId", 1).load(job_dir))
    assert [(f.name, f.dataType) for f in df.schema.fields][:3] == [
        ("key", BinaryType()), ("value", LongType()), ("partition_id", IntegerType())]
    assert [f.name for f in df.schema.fields] == ["key", "value", "partition_id", "namespace", "key_group",
                                                  "checkpoint_id"]
    rows = df.collect()
    counts, _, _ = _expected_counts(FIRST)
    assert _decoded(rows) == sorted(counts.items())
    assert {r.checkpoint_id for r in rows} == {1}
    for r in rows:
        from rill.state.checkpoint.object_codec import decode_object
        key = decode_object(r.key)
        assert r.key_group == assign_to_key_group(key, MAX_PARALLELISM)
        assert r.partition_id == _subtask_of(key)
        assert r.namespace.type == "VoidNamespace"
    assert df.rdd.getNumPartitions() == 2
    windows = (registered.read.format("rill-state").option("operatorUid", "windows").option("checkpointId", 1)
               .load(job_dir))
    assert {(r.namespace.type, r.namespace.end - r.namespace.start) for r in windows.collect()} == {("TimeWindow", 10)}


def test_key_filter_reads_only_the_key_group_it_hashes_to(registered, snapshots):
    root, job_dir, _ = snapshots
    key = encode_object("UA")
    df = (registered.read.format("rill-state").option("operatorUid", "counts").option("stateName", "count")
          .load(job_dir).filter(col("key") == key))
    assert [(r.value, r.key_group) for r in df.collect()] == [(2, assign_to_key_group("UA", MAX_PARALLELISM))]
    assert df.rdd.getNumPartitions() == 1
    # what is read: the reader Spark uses, planned with the pushed filter, reads one key group
    source = RillStateDataSource({"path": job_dir, "operatorUid": "counts", "stateName": "count"})
    reader = source.reader(source.schema())
    assert list(reader.pushFilters([EqualTo(("key",), key)])) == [EqualTo(("key",), key)]
    partitions = reader.partitions()
    kg = assign_to_key_group("UA", MAX_PARALLELISM)
    assert [p.value.key_group_range for p in partitions] == [(kg, kg)]
    assert sum(b.num_rows for p in partitions for b in reader.read(p)) == 1
    negated = source.reader(source.schema())
    assert list(negated.pushFilters([Not(EqualTo(("key",), key))])) == [Not(EqualTo(("key",), key))]
    assert len(negated.partitions()) == 2  # nothing pruned
    unfiltered = source.reader(source.schema())
    assert sum(b.num_rows for p in unfiltered.partitions() for b in unfiltered.read(p)) == len(
        _expected_counts(snapshots[2])[0])


def test_typed_keys_are_typed_columns_and_filter_by_value(registered, snapshots, tmp_path):
    # the same snapshot with the key type declared (key_by(..., key_type=Types.STRING()))
    root, job_dir, _ = snapshots
    taken = _keyed(lambda: KeyedProcessOperator(CountFlights()), FIRST, lambda v: v[0], [len(FIRST)])[0]
    storage = FileSystemCheckpointStorage(str(tmp_path), JOB)
    location = storage.initialize_location_for_checkpoint(5)
    handles = {}
    for i, snap in enumerate(taken):
        typed = dataclasses.replace(snap, keyed_state=tuple(dataclasses.replace(k, key_type=Types.STRING())
                                                            for k in snap.keyed_state))
        handles[i] = location.write_operator_subtask_state(COUNTS, i, typed, "counts")
    location.finalize(CheckpointMetadata(5, 0, {COUNTS: OperatorState(COUNTS, 2, MAX_PARALLELISM, handles, "counts")}))
    df = (registered.read.format("rill-state").option("operatorUid", "counts").option("stateName", "last")
          .load(location.directory))
    assert df.schema["key"].dataType == StringType() and df.schema["value"].dataType == StringType()
    _, last, _ = _expected_counts(FIRST)
    assert sorted((r.key, r.value) for r in df.collect()) == sorted(last.items())
    savepoint = SavepointReader.read(registered, location.directory)
    with pytest.raises(ValueError, match="key_type_info INT is not the key type the snapshot declares, STRING"):
        savepoint.read_keyed_state("counts", ReadCounts(), Types.INT(), COUNT_ROW)
    typed = savepoint.read_keyed_state("counts", ReadCounts(), Types.STRING(), COUNT_ROW)
    assert sorted((r.carrier, r.last) for r in typed.collect()) == sorted(last.items())
    only = df.filter(col("key").isin("AA", "WN"))
    assert sorted((r.key, r.value) for r in only.collect()) == [("AA", last["AA"]), ("WN", last["WN"])]
    groups = {assign_to_key_group(k, MAX_PARALLELISM) for k in ("AA", "WN")}
    assert only.rdd.getNumPartitions() == len(groups)


def test_change_feed_between_two_checkpoints(registered, snapshots):
    root, job_dir, _ = snapshots
    df = (registered.read.format("rill-state").option("operatorUid", "counts").option("stateName", "count")
          .option("readChangeFeed", "true").option("changeStartBatchId", 2).option("changeEndBatchId", 2)
          .load(job_dir))
    assert [f.name for f in df.schema.fields] == ["checkpoint_id", "change_type", "key", "value", "partition_id",
                                                  "namespace", "key_group"]
    from rill.state.checkpoint.object_codec import decode_object
    changes = sorted((r.checkpoint_id, r.change_type, decode_object(r.key), r.value) for r in df.collect())
    assert changes == [(2, "delete", "DL", None), (2, "update", "UA", 2), (2, "update", "ZZ", 1)]
    filtered = df.filter(col("key") == encode_object("UA"))
    assert [(r.change_type, r.value) for r in filtered.collect()] == [("update", 2)]
    with pytest.raises(Exception, match="no completed checkpoint before changeStartBatchId 1"):
        (registered.read.format("rill-state").option("operatorUid", "counts").option("readChangeFeed", "true")
         .option("stateName", "count").option("changeStartBatchId", 1).load(job_dir)).collect()


def test_state_metadata_source(registered, snapshots):
    root, job_dir, _ = snapshots
    rows = registered.read.format("rill-state-metadata").load(job_dir).collect()
    got = {(r.operator_uid, r.state_name): (r.state_kind, r.parallelism, r.max_parallelism,
                                            r.min_checkpoint_id, r.max_checkpoint_id) for r in rows}
    assert got == {
        ("counts", "count"): ("VALUE", 2, 128, 1, 2),
        ("counts", "last"): ("VALUE", 2, 128, 1, 2),
        ("counts", "user-timers"): ("TIMERS", 2, 128, 1, 2),
        ("windows", "window-contents"): ("AGGREGATING", 2, 128, 1, 2),
        ("windows", "window-timers"): ("TIMERS", 2, 128, 1, 2),
        ("sessions", "window-contents"): ("LIST", 2, 128, 1, 2),
        ("sessions", "merging-window-set"): ("LIST", 2, 128, 1, 2),
        ("sessions", "window-timers"): ("TIMERS", 2, 128, 1, 2),
        ("source", "offsets"): ("SPLIT_DISTRIBUTE", 2, 128, 1, 2),
        ("source", "marks"): ("UNION", 2, 128, 1, 2),
        ("source", "rules"): ("BROADCAST", 2, 128, 1, 2),
    }
    one = registered.read.format("rill-state-metadata").load(job_dir + "/chk-1").collect()
    assert {(r.operator_id, r.state_name, r.min_checkpoint_id, r.max_checkpoint_id) for r in one} >= {
        (COUNTS, "count", 1, 1)}
    types = {(r.state_name, r.state_type) for r in one if r.operator_uid == "counts"}
    assert types == {("count", "LONG"), ("last", "STRING"), ("user-timers", None)}


def test_rill_state_source_refuses_bad_options(registered, snapshots):
    root, job_dir, _ = snapshots
    with pytest.raises(Exception, match="has keyed states .* option stateName names one"):
        registered.read.format("rill-state").option("operatorUid", "counts").load(job_dir).collect()
    with pytest.raises(Exception, match="option operatorUid"):
        registered.read.format("rill-state").load(job_dir).collect()
    with pytest.raises(Exception, match="checkpointId must be an integer"):
        (registered.read.format("rill-state").option("operatorUid", "counts").option("checkpointId", "x")
         .load(job_dir).collect())
    with pytest.raises(Exception, match="No completed checkpoint 7"):
        (registered.read.format("rill-state").option("operatorUid", "counts").option("checkpointId", 7)
         .option("stateName", "count").load(job_dir).collect())


def test_the_readme_example_runs_as_written(spark, snapshots, capsys):
    from pathlib import Path
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("### Reading state with Spark", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    namespace = {"__name__": "__main__", "spark": spark, "path": snapshots[1]}
    exec(compile(code, "README.md", "exec"), namespace)
    counts, _, _ = _expected_counts(snapshots[2])
    assert sorted(tuple(r) for r in namespace["counts"].collect()) == sorted(counts.items())
    assert _decoded(namespace["raw"].collect()) == sorted(counts.items())
    assert "window-contents" in capsys.readouterr().out


def test_window_readers_refuse_another_kind_of_window_and_evictors(spark, snapshots):
    windows = SavepointReader.read(spark, snapshots[1], 1).window(TumblingEventTimeWindows.of(10))
    with pytest.raises(ValueError, match=r"keeps a AGGREGATING state; read it with aggregate"):
        windows.reduce("windows", lambda a, b: a, output_type=Types.LONG())
    with pytest.raises(ValueError, match=r"keeps a LIST state; read it with process"):
        windows.aggregate("sessions", CountAgg(), output_type=Types.LONG())
    with pytest.raises(KeyError, match="no window state 'window-contents'"):
        windows.aggregate("counts", CountAgg(), output_type=Types.LONG())
    with pytest.raises(NotImplementedError, match="evicting windows is not built"):
        windows.evictor()
    with pytest.raises(TypeError, match="expects a WindowAssigner"):
        SavepointReader.read(spark, snapshots[1]).window("tumbling")
