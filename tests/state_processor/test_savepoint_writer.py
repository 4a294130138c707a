"""Writing savepoints with Spark (the session's real local SparkSession): SavepointWriter with
keyed, operator-list, union and broadcast bootstraps, read back with SavepointReader and
spark.read.parquet (exact values, typed columns); from_existing_savepoint with removed and
renamed operators; and the errors a user meets (unknown uid, max parallelism, a failing key
selector). A job restoring a bootstrapped savepoint is tests/e2e/test_flight_stats_bootstrap.py."""

import base64
import json
import shutil
import sys

import cloudpickle
import pytest
from pyspark import cloudpickle as spark_cloudpickle
from pyspark.sql.types import ArrayType, IntegerType, LongType, StringType, StructField, StructType

from rill.common.typeinfo import Types
from rill.graph.hashing import murmur3_128
from rill.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from rill.state.checkpoint.filesystem import keyed_state_directory
from rill.state.key_groups import assign_to_key_group, compute_operator_index_for_key_group
from rill.state_processor import (
    BootstrapError,
    BroadcastStateBootstrapFunction,
    KeyedStateBootstrapFunction,
    KeyedStateReaderFunction,
    OperatorTransformation,
    SavepointReader,
    SavepointWriter,
    StateBootstrapFunction,
)
from rill.state_processor.snapshots import OperatorIdentifier

pytestmark = pytest.mark.spark
spark_cloudpickle.register_pickle_by_value(sys.modules[__name__])
cloudpickle.register_pickle_by_value(sys.modules[__name__])

ROWS = [("UA", 10, 3), ("AA", 7, 0), ("DL", 5, 12), ("UA", 2, 40), ("B6", 1, 1), ("AA", 4, 5)]
SCHEMA = "carrier string, flights long, delay int"
TOTALS = {"UA": 12, "AA": 11, "DL": 5, "B6": 1}
DELAYS = {"UA": [3, 40], "AA": [0, 5], "DL": [12], "B6": [1]}
END = 1_000_000


class CarrierBootstrap(KeyedStateBootstrapFunction):
    def open(self, runtime_context):
        self.total = runtime_context.get_state(ValueStateDescriptor("total", Types.LONG()))
        self.delays = runtime_context.get_list_state(ListStateDescriptor("delays", Types.INT()))

    def process_element(self, value, ctx):
        self.total.update((self.total.value() or 0) + value.flights)
        self.delays.add(value.delay)
        ctx.timer_service().register_event_time_timer(END + len(ctx.get_current_key()))


class ReadCarrier(KeyedStateReaderFunction):
    def open(self, runtime_context):
        self.total = runtime_context.get_state(ValueStateDescriptor("total", Types.LONG()))
        self.delays = runtime_context.get_list_state(ListStateDescriptor("delays", Types.INT()))

    def read_key(self, key, context, out):
        out.collect((key, self.total.value(), sorted(self.delays.get()), sorted(context.registered_event_time_timers())))


class Offsets(StateBootstrapFunction):
    def initialize_state(self, context):
        store = context.get_operator_state_store()
        self.offsets = store.get_list_state(ListStateDescriptor("offsets", Types.LONG()))
        self.seen = store.get_union_list_state(ListStateDescriptor("seen", Types.STRING()))
        self.buffer = []

    def process_element(self, value, ctx):
        self.buffer.append(value.flights)

    def snapshot_state(self, context):
        self.offsets.update(self.buffer)
        self.seen.update([f"{context.get_checkpoint_id()}:{len(self.buffer)}"])


class FailingOffsets(Offsets):
    def process_element(self, value, ctx):
        if value.delay > 30:
            raise ValueError(f"a delay of {value.delay} is too long")
        super().process_element(value, ctx)


class Rules(BroadcastStateBootstrapFunction):
    def process_element(self, value, ctx):
        rules = ctx.get_broadcast_state(MapStateDescriptor("rules", Types.STRING(), Types.LONG()))
        rules.put(value.carrier, max(rules.get(value.carrier) or 0, value.flights))


def _keyed(df):
    return OperatorTransformation.bootstrap_with(df).key_by("carrier", Types.STRING()).transform(CarrierBootstrap())


def _read_carriers(spark, path, uid):
    return SavepointReader.read(spark, path).read_keyed_state(
        uid, ReadCarrier(), out_type_info=Types.ROW_NAMED(
            ["carrier", "total", "delays", "timers"],
            [Types.STRING(), Types.LONG(), Types.LIST(Types.INT()), Types.LIST(Types.LONG())]))


@pytest.fixture
def df(spark):
    return spark.createDataFrame(ROWS, SCHEMA).repartition(2)


def test_keyed_state_and_timers_round_trip_typed_with_the_checkpoint_layout(df, spark, tmp_path):
    path = str(tmp_path / "sp")
    assert SavepointWriter.new_savepoint(spark, 128).with_operator("carriers", _keyed(df)).write(path) == path

    meta = json.loads((tmp_path / "sp" / "_metadata").read_text())
    (op,) = meta["operators"]
    assert (op["uid"], op["operator_id"]) == ("carriers", murmur3_128(b"carriers").hex())
    assert (op["parallelism"], op["max_parallelism"], meta["snapshot_type"], meta["checkpoint_id"]) == (2, 128, "SAVEPOINT", 0)
    # each subtask wrote exactly the key groups of its range, and only relative paths
    for sub in op["subtasks"]:
        (keyed,) = sub["keyed_state"]
        assert keyed["key_group_range"] == [[0, 63], [64, 127]][sub["subtask_index"]]
        assert all(not s["file"].startswith("/") for s in keyed["states"])
    owner = {c: compute_operator_index_for_key_group(128, 2, assign_to_key_group(c, 128)) for c in TOTALS}

    result = _read_carriers(spark, path, "carriers")
    assert result.schema == StructType([StructField("carrier", StringType()), StructField("total", LongType()),
                                        StructField("delays", ArrayType(IntegerType())),
                                        StructField("timers", ArrayType(LongType()))])
    assert sorted(tuple(r) for r in result.collect()) == sorted(
        (c, TOTALS[c], DELAYS[c], [END + 2]) for c in TOTALS)

    plain = spark.read.parquet(keyed_state_directory(path, "carriers", "total"))
    assert dict(plain.select("key", "value").dtypes) == {"key": "string", "value": "bigint"}
    assert sorted((r.key, r.value, r.partition_id) for r in plain.collect()) == sorted(
        (c, TOTALS[c], owner[c]) for c in TOTALS)


def test_operator_list_union_and_broadcast_state_then_an_existing_savepoint_changed(df, spark, tmp_path):
    first, second = str(tmp_path / "first"), str(tmp_path / "second")
    (SavepointWriter.new_savepoint(spark, 128)
        # two partitions, max parallelism 1: one subtask (Flink caps the parallelism at the max)
        .with_operator(OperatorIdentifier.for_uid("offsets"),
                       OperatorTransformation.bootstrap_with(df).set_max_parallelism(1).transform(Offsets()))
        .with_operator("rules", OperatorTransformation.bootstrap_with(df).transform(Rules()))
        .with_operator("carriers", _keyed(df))
        .write(first))
    reader = SavepointReader.read(spark, first)
    assert [r.value for r in reader.read_union_state("offsets", "seen", Types.STRING()).collect()] == ["0:6"]
    rules = reader.read_broadcast_state("rules", "rules", Types.STRING(), Types.LONG()).collect()
    assert {r.key: r.value for r in rules} == {"UA": 10, "AA": 7, "DL": 5, "B6": 1}
    assert {op.uid: (op.parallelism, op.max_parallelism) for op in reader.metadata.operator_states.values()} == {
        "offsets": (1, 1), "rules": (1, 128), "carriers": (2, 128)}

    # a source's split enumerator state (coordinator_state) goes with its operator, kept or renamed
    meta_file = tmp_path / "first" / "_metadata"
    meta = json.loads(meta_file.read_text())
    for op in meta["operators"]:
        op["coordinator_state"] = base64.b64encode(op["uid"].encode()).decode()
    meta_file.write_text(json.dumps(meta))
    (SavepointWriter.from_existing_savepoint(spark, first)
        .remove_operator(OperatorIdentifier.for_uid_hash(murmur3_128(b"rules").hex()))
        .change_operator_identifier("carriers", OperatorIdentifier.for_uid("carrier-stats"))
        .write(second))
    shutil.rmtree(first)  # the copy stands alone
    changed = SavepointReader.read(spark, second)
    ops = {op.uid: op for op in changed.metadata.operator_states.values()}
    assert set(ops) == {"offsets", "carrier-stats"}
    assert ops["carrier-stats"].operator_id == murmur3_128(b"carrier-stats").hex()
    assert {uid: op.coordinator_state for uid, op in ops.items()} == {"offsets": b"offsets", "carrier-stats": b"carriers"}
    assert sorted(r.value for r in changed.read_list_state("offsets", "offsets", Types.LONG()).collect()) == sorted(
        f for _, f, _ in ROWS)
    assert sorted(tuple(r) for r in _read_carriers(spark, second, "carrier-stats").collect()) == sorted(
        (c, TOTALS[c], DELAYS[c], [END + 2]) for c in TOTALS)
    # the renamed operator's files are under its new id, with its new uid in every row
    plain = spark.read.parquet(keyed_state_directory(second, "carrier-stats", "total")).select("operator_uid").distinct()
    assert [r.operator_uid for r in plain.collect()] == ["carrier-stats"]


def test_errors_name_the_operator_the_value_and_the_rule(df, spark, tmp_path):
    with pytest.raises(ValueError, match=r"new_savepoint: max parallelism must be an int in \[1, 32768\], got 0"):
        SavepointWriter.new_savepoint(spark, 0)
    with pytest.raises(KeyError, match="key_by\\('airline'\\): the DataFrame has no column 'airline'"):
        OperatorTransformation.bootstrap_with(df).key_by("airline")
    with pytest.raises(TypeError, match="needs a keyed bootstrap"):
        OperatorTransformation.bootstrap_with(df).transform(CarrierBootstrap())
    writer = SavepointWriter.new_savepoint(spark, 128).with_operator("carriers", _keyed(df))
    with pytest.raises(ValueError, match="an operator with this identifier was already added"):
        writer.with_operator("carriers", _keyed(df))
    with pytest.raises(KeyError, match=r"remove_operator\(uid 'nope'\): the savepoint has no state of this operator"):
        writer.remove_operator("nope")
    with pytest.raises(KeyError, match=r"change_operator_identifier\(uid 'nope', uid 'x'\): the savepoint has no operator"):
        SavepointWriter.new_savepoint(spark, 128).change_operator_identifier("nope", "x").write(str(tmp_path / "a"))
    with pytest.raises(ValueError, match=r"set_max_parallelism: max parallelism must be an int in \[1, 32768\], got 40000"):
        OperatorTransformation.bootstrap_with(df).set_max_parallelism(40000)
    with pytest.raises(NotImplementedError, match="state backend 'rocksdb' is not built"):
        SavepointWriter.new_savepoint(spark, "rocksdb", 128)

    bad = OperatorTransformation.bootstrap_with(df).key_by(lambda row: 1 / (row.delay or 0)).transform(CarrierBootstrap())
    with pytest.raises(BootstrapError, match=r"with_operator\(uid 'carriers'\): writing the state on Spark failed: "
                                             r"BootstrapError: with_operator\(uid 'carriers'\): the key selector .* failed on the row Row\(carrier='AA', flights=7, "
                                             r"delay=0\): ZeroDivisionError"):
        SavepointWriter.new_savepoint(spark, 128).with_operator("carriers", bad).write(str(tmp_path / "c"))
    assert not (tmp_path / "c" / "_metadata").exists()
    failing = OperatorTransformation.bootstrap_with(df).transform(FailingOffsets())
    with pytest.raises(BootstrapError, match=r"with_operator\(uid 'offsets'\): writing the state on Spark failed: "
                                             r"BootstrapError: with_operator\(uid 'offsets'\): FailingOffsets.process_element "
                                             r"failed on the row Row\(carrier='UA', flights=2, delay=40\): "
                                             r"ValueError: a delay of 40 is too long"):
        SavepointWriter.new_savepoint(spark, 128).with_operator("offsets", failing).write(str(tmp_path / "e"))

    path = str(tmp_path / "d")
    SavepointWriter.new_savepoint(spark, 128).with_operator("carriers", _keyed(df)).write(path)
    with pytest.raises(FileExistsError, match="holds a snapshot already"):
        SavepointWriter.from_existing_savepoint(spark, path).write(path)
    with pytest.raises(ValueError, match=r"with_operator\(uid 'carriers'\): the savepoint already has state of this operator"):
        SavepointWriter.from_existing_savepoint(spark, path).with_operator("carriers", _keyed(df))
