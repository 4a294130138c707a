"""Snapshot files read by a real local Spark (pyspark 4.3, default settings): a type matrix of
keyed state over 40 declared types (and untyped, TTL, list and map states) written by two
subtasks, each state's directory read with ONE ``spark.read.parquet`` call, and every value
Spark returns decoded back to exactly what was written; timers and operator state files too."""

import datetime
import decimal
import math
import struct
from pathlib import Path

import pytest

from rill.common.row import Row
from rill.common.typeinfo import Types
from rill.operators.windowing.windows import TimeWindow
from rill.state.api import VOID_NAMESPACE
from rill.state.checkpoint.arrow_types import UNTYPED, column_codec
from rill.state.checkpoint.filesystem import FileSystemCheckpointStorage, state_directory_name
from rill.state.checkpoint.metadata import CheckpointMetadata, OperatorState
from rill.state.checkpoint.namespaces import decode_namespaces
from rill.state.checkpoint.operator_subtask_state import (
    ChannelStateSnapshot,
    KeyedStateSnapshot,
    OperatorSubtaskState,
    TimerServiceSnapshot,
    TimersOfKeyGroup,
)
from rill.state.checkpoint.parquet_layout import value_codec
from rill.state.descriptors import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from rill.state.key_groups import KeyGroupRange
from rill.state.ttl import StateTtlConfig, Time

pytestmark = pytest.mark.spark

OID = "00000000000000000000000000001234"  # all digits but a: no partition inference applies
JOB = "0123456789abcdef0123456789abcdef"
UTC = datetime.timezone.utc


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


D1, D2 = datetime.date(2024, 2, 29), datetime.date(1969, 7, 20)
T1, T2 = datetime.time(23, 59, 58, 999000), datetime.time(0, 0, 0, 1000)
TS1, TS2 = datetime.datetime(2024, 3, 1, 12, 30, 45, 123456), datetime.datetime(1960, 1, 1)
I1 = datetime.datetime(2024, 3, 1, 12, 30, 45, 123456, tzinfo=UTC)
I2 = datetime.datetime(2001, 9, 9, 3, 46, 40, tzinfo=datetime.timezone(datetime.timedelta(hours=2)))

#: name -> (declared type, two values)
MATRIX = {
    "byte": (Types.BYTE(), [-128, 127]),
    "short": (Types.SHORT(), [-32768, 32767]),
    "int": (Types.INT(), [-(2 ** 31), 2 ** 31 - 1]),
    "long": (Types.LONG(), [-(2 ** 63), 2 ** 63 - 1]),
    "float": (Types.FLOAT(), [f32(110.1), f32(-1e-30)]),
    "double": (Types.DOUBLE(), [math.pi, -0.0]),
    "boolean": (Types.BOOLEAN(), [True, False]),
    "string": (Types.STRING(), ["carrier UA", "ünïcødé ✓"]),
    "char": (Types.CHAR(), ["a", "€"]),
    "big_int": (Types.BIG_INT(), [2 ** 100, -(10 ** 40)]),
    "big_dec": (Types.BIG_DEC(), [decimal.Decimal("3.14159265358979323846264338327950288"),
                                  decimal.Decimal("-1E+30")]),
    "sql_date": (Types.SQL_DATE(), [D1, D2]),
    "sql_time": (Types.SQL_TIME(), [T1, T2]),
    "sql_timestamp": (Types.SQL_TIMESTAMP(), [TS1, TS2]),
    "local_date": (Types.LOCAL_DATE(), [D2, D1]),
    "local_time": (Types.LOCAL_TIME(), [T2, T1]),
    "local_date_time": (Types.LOCAL_DATE_TIME(), [TS2, TS1]),
    "instant": (Types.INSTANT(), [I1, I2]),
    "pickled": (Types.PICKLED_BYTE_ARRAY(), [{"any": {1, 2}}, frozenset({"x"})]),
    "primitive_int_array": (Types.PRIMITIVE_ARRAY(Types.INT()), [[1, 2, 3], []]),
    "primitive_float_array": (Types.PRIMITIVE_ARRAY(Types.FLOAT()), [[f32(0.1), f32(2.5)], [f32(-3.3)]]),
    "basic_string_array": (Types.BASIC_ARRAY(Types.STRING()), [["a", None, "c"], ["d"]]),
    "object_array": (Types.OBJECT_ARRAY(Types.ROW_NAMED(["x"], [Types.LONG()])), [[Row(x=1), Row(x=2)], []]),
    "list_double": (Types.LIST(Types.DOUBLE()), [[1.5, -2.25], [0.0]]),
    "list_list_long": (Types.LIST(Types.LIST(Types.LONG())), [[[1], [2, 3]], [[]]]),
    "map_string_long": (Types.MAP(Types.STRING(), Types.LONG()), [{"a": 1, "b": None}, {}]),
    "map_int_row": (Types.MAP(Types.INT(), Types.ROW_NAMED(["n", "d"], [Types.STRING(), Types.SQL_DATE()])),
                    [{1: Row(n="x", d=D1)}, {2: Row(n=None, d=None), 3: Row(n="z", d=D2)}]),
    "map_tuple_key": (Types.MAP(Types.TUPLE([Types.INT(), Types.STRING()]), Types.STRING()),
                      [{(1, "a"): "one-a"}, {(2, "b"): "two-b", (3, "c"): None}]),
    "map_string_list": (Types.MAP(Types.STRING(), Types.LIST(Types.INT())), [{"k": [1, 2]}, {"e": []}]),
    "tuple": (Types.TUPLE([Types.INT(), Types.STRING()]), [(1, "one"), (2, None)]),
    "tuple_nested": (Types.TUPLE([Types.TUPLE([Types.LONG(), Types.DOUBLE()]), Types.LIST(Types.STRING())]),
                     [((1, 0.5), ["a"]), ((-1, 2.0), [])]),
    "row": (Types.ROW([Types.INT(), Types.DOUBLE()]), [Row(1, 2.5), Row(None, -1.0)]),
    "row_named": (Types.ROW_NAMED(["carrier", "flights", "first"], [Types.STRING(), Types.LONG(), Types.SQL_TIMESTAMP()]),
                  [Row(carrier="UA", flights=58665, first=TS1), Row(carrier="AA", flights=32729, first=TS2)]),
    "row_nested": (Types.ROW_NAMED(["id", "tags", "inner"], [
        Types.INT(), Types.LIST(Types.STRING()), Types.ROW_NAMED(["at", "ok"], [Types.INSTANT(), Types.BOOLEAN()])]),
        [Row(id=1, tags=["x"], inner=Row(at=I1, ok=True)), Row(id=2, tags=[], inner=None)]),
    "row_big_types": (Types.ROW_NAMED(["i", "d", "t"], [Types.BIG_INT(), Types.BIG_DEC(), Types.SQL_TIME()]),
                      [Row(i=2 ** 70, d=decimal.Decimal("0.10"), t=T1), Row(i=0, d=decimal.Decimal("-7"), t=T2)]),
    "untyped": (None, [("a", [1, (2, b"\x00")], {"k": None}), 2 ** 64 + 1]),
}


def _ttl(descriptor):
    descriptor.enable_time_to_live(StateTtlConfig.new_builder(Time.seconds(10)).build())
    return descriptor


def _descriptors_and_values():
    """state name -> (descriptor, [stored value of key 0, stored value of key 1])."""
    out = {name: (ValueStateDescriptor(name, t), values) for name, (t, values) in MATRIX.items()}
    out["list_state"] = (ListStateDescriptor("list_state", Types.STRING()), [["a", "b"], ["c"]])
    out["list_untyped"] = (ListStateDescriptor("list_untyped"), [[1, "x"], [(1, 2)]])
    out["map_state"] = (MapStateDescriptor("map_state", Types.STRING(), Types.INT()), [{"a": 1}, {"b": 2, "c": 3}])
    out["map_untyped"] = (MapStateDescriptor("map_untyped"), [{(1, 2): [3]}, {"s": None}])
    out["ttl_value"] = (_ttl(ValueStateDescriptor("ttl_value", Types.LONG())), [(5, 1_000), (6, 2_000)])
    out["ttl_list"] = (_ttl(ListStateDescriptor("ttl_list", Types.DOUBLE())), [[(1.0, 10), (2.0, 11)], [(3.0, 12)]])
    out["ttl_map"] = (_ttl(MapStateDescriptor("ttl_map", Types.STRING(), Types.SQL_DATE())),
                      [{"d": (D1, 20)}, {"e": (D2, 21), "f": (None, 22)}])
    out["ttl untyped, odd name"] = (_ttl(ValueStateDescriptor("ttl untyped, odd name")), [((1, 2), 30), ([3], 31)])
    return out


def _subtask_state(subtask, key_type=None):
    """Subtask 0 owns key groups [0, 63], subtask 1 [64, 127]; two keys per state."""
    base = 64 * subtask
    states = _descriptors_and_values()
    key_groups = {}
    for i, (name, (_, values)) in enumerate(states.items()):
        for k, value in enumerate(values):
            kg = base + (i * 2 + k) % 64
            key = f"key-{subtask}-{k}" if key_type is not None else (f"key-{subtask}", k)
            namespace = TimeWindow(k * 1000, k * 1000 + 1000) if name == "list_state" else VOID_NAMESPACE
            key_groups.setdefault(kg, {}).setdefault(name, []).append((key, namespace, value))
    keyed = KeyedStateSnapshot(128, KeyGroupRange(base, base + 63), {n: d for n, (d, _) in states.items()},
                               {kg: {n: tuple(e) for n, e in s.items()} for kg, s in key_groups.items()},
                               key_type=key_type)
    timer_key = f"key-{subtask}-0" if key_type is not None else ("key", subtask)
    timers = {"window-timers": TimerServiceSnapshot({
        base + 1: TimersOfKeyGroup(((999, timer_key, TimeWindow(0, 1000)),), ((5, timer_key, VOID_NAMESPACE),))})}
    operator_state = {"offsets": ("SPLIT_DISTRIBUTE", (("split", subtask, 17),)),
                      "rules": ("BROADCAST", (("limit", 3),))}
    return OperatorSubtaskState(9, operator_state, (keyed,), timers)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A finalized checkpoint of two subtasks of the type matrix operator, untyped keys."""
    root = tmp_path_factory.mktemp("spark-checkpoints")
    location = FileSystemCheckpointStorage(str(root), JOB).initialize_location_for_checkpoint(9)
    handles = {i: location.write_operator_subtask_state(OID, i, _subtask_state(i), "matrix") for i in (0, 1)}
    location.finalize(CheckpointMetadata(9, 0, {OID: OperatorState(OID, 2, 128, handles, "matrix", "Matrix")}))
    return location.directory, handles


def test_the_matrix_has_at_least_30_declared_types():
    assert len([t for t, _ in MATRIX.values() if t is not None]) >= 30


def test_every_state_file_round_trips_through_the_handle(checkpoint):
    _, handles = checkpoint
    for i, handle in handles.items():
        assert handle.read() == _subtask_state(i)


def test_spark_reads_every_keyed_state_directory_as_written(checkpoint, spark):
    directory, _ = checkpoint
    states = _descriptors_and_values()
    for name, (descriptor, _) in states.items():
        frame = spark.read.parquet(f"{directory}/{OID}/keyed/{state_directory_name(name)}")
        assert frame.columns == ["checkpoint_id", "operator_uid", "operator_id", "state_name", "key_group",
                                 "key", "namespace", "value", "partition_id"], name
        table = frame.toArrow()
        partitions = table.column("partition_id").to_pylist()
        keys = UNTYPED.decode(table.column("key"))
        namespaces = decode_namespaces(table.column("namespace"))
        values = value_codec(descriptor).decode(table.column("value"))
        read = sorted(((p, key_group, k, ns, v) for p, key_group, k, ns, v in zip(
            partitions, table.column("key_group").to_pylist(), keys, namespaces, values)),
            key=lambda r: (r[0], r[2]))
        expected = []
        for subtask in (0, 1):
            for kg, by_name in sorted(_subtask_state(subtask).keyed_state[0].key_groups.items()):
                for key, ns, value in by_name.get(name, ()):
                    expected.append((subtask, kg, key, ns, value))
        assert read == sorted(expected, key=lambda r: (r[0], r[2])), name
        assert set(table.column("state_name").to_pylist()) == {name}
        assert set(table.column("operator_id").to_pylist()) == {OID}  # a string, not a number


def test_spark_sees_plain_values_where_types_are_declared(checkpoint, spark):
    directory, _ = checkpoint
    rows = spark.read.parquet(f"{directory}/{OID}/keyed/row_named").orderBy("partition_id", "key_group").collect()
    assert [(r.partition_id, r.value.carrier, r.value.flights, r.value.first) for r in rows] == [
        (0, "UA", 58665, TS1), (0, "AA", 32729, TS2), (1, "UA", 58665, TS1), (1, "AA", 32729, TS2)]
    windows = spark.read.parquet(f"{directory}/{OID}/keyed/list_state").orderBy("partition_id", "namespace.start")
    assert [(r.namespace.type, r.namespace.start, r.namespace.end, r.value) for r in windows.collect()] == [
        ("TimeWindow", 0, 1000, ["a", "b"]), ("TimeWindow", 1000, 2000, ["c"])] * 2
    ttl = spark.read.parquet(f"{directory}/{OID}/keyed/ttl_value").orderBy("partition_id", "key_group").collect()
    assert [(r.value.user_value, r.value.last_access_timestamp_ms) for r in ttl] == [(5, 1000), (6, 2000)] * 2
    types = dict(spark.read.parquet(f"{directory}/{OID}/keyed/instant").dtypes)
    assert types["value"] == "timestamp"
    assert dict(spark.read.parquet(f"{directory}/{OID}/keyed/sql_timestamp").dtypes)["value"] == "timestamp_ntz"
    assert dict(spark.read.parquet(f"{directory}/{OID}/keyed/float").dtypes)["value"] == "float"


def test_spark_reads_timers_and_operator_state(checkpoint, spark):
    directory, _ = checkpoint
    timers = spark.read.parquet(f"{directory}/{OID}/timers").orderBy("partition_id", "time_domain").collect()
    assert [(r.partition_id, r.timer_service, r.time_domain, r.key_group, r.timestamp, r.namespace.type)
            for r in timers] == [
        (0, "window-timers", "EVENT_TIME", 1, 999, "TimeWindow"), (0, "window-timers", "PROCESSING_TIME", 1, 5, "VoidNamespace"),
        (1, "window-timers", "EVENT_TIME", 65, 999, "TimeWindow"), (1, "window-timers", "PROCESSING_TIME", 65, 5, "VoidNamespace")]
    ops = spark.read.parquet(f"{directory}/{OID}/operator_state").orderBy("partition_id", "state_name").collect()
    assert [(r.partition_id, r.state_name, r.mode, r.position, UNTYPED.from_arrow(r.key) if r.key else None,
             UNTYPED.from_arrow(r.value)) for r in ops] == [
        (0, "offsets", "SPLIT_DISTRIBUTE", 0, None, ("split", 0, 17)), (0, "rules", "BROADCAST", 0, "limit", 3),
        (1, "offsets", "SPLIT_DISTRIBUTE", 0, None, ("split", 1, 17)), (1, "rules", "BROADCAST", 0, "limit", 3)]


def test_spark_reads_typed_keys(tmp_path, spark):
    location = FileSystemCheckpointStorage(str(tmp_path), JOB).initialize_location_for_checkpoint(1)
    for i in (0, 1):
        assert location.write_operator_subtask_state(OID, i, _subtask_state(i, Types.STRING())).read() == \
            _subtask_state(i, Types.STRING())
    rows = spark.read.parquet(f"{location.directory}/{OID}/keyed/long").orderBy("key").collect()
    assert [(r.key, r.value) for r in rows] == [
        ("key-0-0", -(2 ** 63)), ("key-0-1", 2 ** 63 - 1), ("key-1-0", -(2 ** 63)), ("key-1-1", 2 ** 63 - 1)]
    assert column_codec(Types.STRING()).arrow_type == "string"


def test_the_readme_udf_decodes_untyped_keys_in_spark(tmp_path, spark):
    """The README's msgpack UDF, as written there, on a checkpoint with untyped keys."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    code = readme.split("```python\nimport msgpack\n", 1)[1].split("```", 1)[0]
    location = FileSystemCheckpointStorage(str(tmp_path), JOB).initialize_location_for_checkpoint(1)
    kg = {3: {"count": (("UA", VOID_NAMESPACE, 7), (("AA", 2), VOID_NAMESPACE, 8))},
          9: {"count": ((2 ** 70, VOID_NAMESPACE, 9),)}}
    location.write_operator_subtask_state(OID, 0, OperatorSubtaskState(1, {}, (KeyedStateSnapshot(
        128, KeyGroupRange(0, 127), {"count": ValueStateDescriptor("count", Types.LONG())}, kg),), {}))
    scope = {"spark": spark, "chk": location.directory, "operator_id": OID}
    exec("import msgpack\n" + code.replace(".show()", ".orderBy('value').collect()"), scope)
    rows = eval('counts.select(untyped("key").alias("carrier"), "value").orderBy("value").collect()', scope)
    assert [(r.carrier, r.value) for r in rows] == [("UA", 7), ("['AA', 2]", 8), (str(2 ** 70), 9)]


def test_spark_reads_the_in_flight_data_of_an_unaligned_checkpoint(tmp_path, spark):
    """The channel-state file of a subtask (FLIP-76): one row per stored buffer, in stream order
    per channel, and the handle reads it back."""
    channel = ChannelStateSnapshot([(0, 1, b"\x01in-a"), (0, 1, b"\x01in-b"), (1, 0, b"\x01in-c")],
                                   [(0, 2, b"\x01out-a")])
    location = FileSystemCheckpointStorage(str(tmp_path), JOB).initialize_location_for_checkpoint(3)
    handle = location.write_operator_subtask_state(OID, 1, OperatorSubtaskState(3, channel_state=channel), "head")
    assert handle.has_channel_state() and handle.read_channel_state() == channel
    assert handle.description["channel_state"] == {
        "file": f"{OID}/channel_state/part-00001.parquet", "input_buffers": 3, "output_buffers": 1,
        "persisted_data_bytes": channel.persisted_data_bytes}
    rows = spark.read.parquet(f"{location.directory}/{OID}/channel_state").orderBy(
        "kind", "gate_or_partition_index", "position").collect()
    assert [(r.checkpoint_id, r.operator_uid, r.kind, r.gate_or_partition_index, r.channel_or_subpartition_index,
             r.position, bytes(r.data), r.partition_id) for r in rows] == [
        (3, "head", "INPUT_CHANNEL", 0, 1, 0, b"\x01in-a", 1), (3, "head", "INPUT_CHANNEL", 0, 1, 1, b"\x01in-b", 1),
        (3, "head", "INPUT_CHANNEL", 1, 0, 0, b"\x01in-c", 1),
        (3, "head", "RESULT_SUBPARTITION", 0, 2, 0, b"\x01out-a", 1)]
