"""FileSink.for_bulk_format with ParquetBulkWriters.for_row_type: typed columns read back with
pyarrow, a part file per checkpoint committed on notify, a crash before notify restored once,
and a job (no checkpointing) in both execution modes."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from _ds_helpers import run
from rill.common import Row
from rill.common.typeinfo import Types
from rill.datastream.connectors.file_system import BucketAssigner, FileSink, OutputFileConfig
from rill.datastream.formats.parquet import ParquetBulkWriters
from rill.operators.file_sink import FileSinkOperator
from rill.operators.testing import OneInputStreamOperatorTestHarness

ROW_TYPE = Types.ROW_NAMED(
    ["id", "name", "score", "ratio", "ok", "at", "tags", "attrs", "point"],
    [Types.LONG(), Types.STRING(), Types.INT(), Types.FLOAT(), Types.BOOLEAN(), Types.SQL_TIMESTAMP(),
     Types.LIST(Types.STRING()), Types.MAP(Types.STRING(), Types.INT()),
     Types.ROW_NAMED(["x", "y"], [Types.DOUBLE(), Types.DOUBLE()])])


def _row(i):
    return Row(i, f"n{i}", i * 10, 0.5, i % 2 == 0, dt.datetime(2024, 1, 1, 0, 0, i), [f"t{i}"], {"k": i},
               Row(float(i), -float(i)))


def _sink(tmp_path):
    return (FileSink.for_bulk_format(str(tmp_path), ParquetBulkWriters.for_row_type(ROW_TYPE))
            .with_output_file_config(OutputFileConfig("part", ".parquet"))
            .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
            .build())


def _harness(sink, restored=None):
    h = OneInputStreamOperatorTestHarness(FileSinkOperator(sink))
    h.context.checkpointing_enabled = True
    h.initialize_state(restored)
    h.open()
    return h


def _ids(tmp_path):
    files = sorted(Path(tmp_path).glob("part-*.parquet"))
    return [i for f in files for i in pq.read_table(f).column("id").to_pylist()]


def test_schema_and_values_round_trip(tmp_path):
    h = _harness(_sink(tmp_path))
    h.process_batch([_row(1), _row(2)])
    h.snapshot(1)
    h.operator.notify_checkpoint_complete(1)
    [f] = Path(tmp_path).glob("part-*.parquet")
    table = pq.read_table(f)
    assert table.schema.field("score").type == pa.int32()
    assert table.schema.field("ratio").type == pa.float32()
    assert table.schema.field("at").type == pa.timestamp("us")
    assert table.schema.field("attrs").type == pa.map_(pa.string(), pa.int32())
    assert table.to_pylist()[1] == {
        "id": 2, "name": "n2", "score": 20, "ratio": 0.5, "ok": True, "at": dt.datetime(2024, 1, 1, 0, 0, 2),
        "tags": ["t2"], "attrs": [("k", 2)], "point": {"x": 2.0, "y": -2.0}}
    h.close()


def test_a_part_per_checkpoint_and_a_crash_before_notify(tmp_path):
    sink = _sink(tmp_path)
    h = _harness(sink)
    h.process_batch([_row(1)])
    h.snapshot(1)
    h.operator.notify_checkpoint_complete(1)
    h.process_batch([_row(2), _row(3)])
    snap = h.snapshot(2)  # always rolls: a second part, pending
    h.process_batch([_row(4)])  # lost with the crash
    h._close_without_finish()
    assert _ids(tmp_path) == [1]
    h2 = _harness(sink, restored=snap)
    assert _ids(tmp_path) == [1, 2, 3]
    assert [p.name for p in Path(tmp_path).iterdir() if p.name.startswith(".")] == []
    h2.process_batch([_row(4)])
    h2.finish()
    h2.snapshot(3)
    h2.operator.notify_checkpoint_complete(3)
    h2.close()
    assert sorted(_ids(tmp_path)) == [1, 2, 3, 4]


def test_row_arity_and_unsupported_types_are_named():
    with pytest.raises(NotImplementedError, match="type BIG_DEC has no Parquet column"):
        ParquetBulkWriters.for_row_type(Types.ROW_NAMED(["d"], [Types.BIG_DEC()]))
    with pytest.raises(TypeError, match="expects a RowTypeInfo"):
        ParquetBulkWriters.for_row_type(Types.LONG())
    writer = ParquetBulkWriters.for_row_type(Types.ROW_NAMED(["a", "b"], [Types.INT(), Types.INT()])).create(
        pa.BufferOutputStream())
    with pytest.raises(ValueError, match=r"row \(1,\) has 1 fields, the row type has 2 \(a, b\)"):
        writer.add_elements([(1,)])


def test_job_without_checkpointing_writes_parquet(env, tmp_path):
    env.set_parallelism(1)
    env.from_collection([(i, f"n{i}") for i in range(5)],
                        type_info=Types.ROW_NAMED(["id", "name"], [Types.LONG(), Types.STRING()])).sink_to(
        FileSink.for_bulk_format(str(tmp_path), ParquetBulkWriters.for_row_type(
            Types.ROW_NAMED(["id", "name"], [Types.LONG(), Types.STRING()])))
        .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner()).build())
    run(env)
    [f] = Path(tmp_path).glob("part-*")
    assert pq.read_table(f).to_pylist() == [{"id": i, "name": f"n{i}"} for i in range(5)]


def test_a_job_reads_back_what_a_job_wrote_with_parquet_columnar_row_input_format(env, tmp_path):
    from rill.common import WatermarkStrategy
    from rill.datastream.connectors.file_system import FileSource
    from rill.datastream.formats.parquet import ParquetColumnarRowInputFormat
    from _ds_helpers import collect

    written = Types.ROW_NAMED(["id", "name", "at"], [Types.LONG(), Types.STRING(), Types.SQL_TIMESTAMP()])
    rows = [Row(i, f"n{i}", dt.datetime(2024, 1, 1, 0, 0, i)) for i in range(50)]
    env.set_parallelism(1)
    env.from_collection(rows, type_info=written).sink_to(
        FileSink.for_bulk_format(str(tmp_path / "out"), ParquetBulkWriters.for_row_type(written))
        .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner()).build())
    run(env)
    # fields by name, in another order, case-insensitively, one missing from the file
    read = Types.ROW_NAMED(["AT", "ID", "missing"], [Types.SQL_TIMESTAMP(), Types.LONG(), Types.INT()])
    fmt = ParquetColumnarRowInputFormat(read, batch_size=7, is_case_sensitive=False)
    source = FileSource.for_bulk_file_format(fmt, str(tmp_path / "out")).build()
    result = collect(env.from_source(source, WatermarkStrategy.no_watermarks(), "parquet-source"))
    assert sorted((r[1], r[0], r[2]) for r in result) == [(i, dt.datetime(2024, 1, 1, 0, 0, i), None)
                                                          for i in range(50)]
    assert result[0].as_dict().keys() == {"AT", "ID", "missing"}


def test_parquet_columnar_row_input_format_refuses_what_flink_refuses():
    from rill.datastream.formats.parquet import ParquetColumnarRowInputFormat

    with pytest.raises(ValueError, match=r"field 'tags' has type .*; only primitive types are supported"):
        ParquetColumnarRowInputFormat(Types.ROW_NAMED(["tags"], [Types.LIST(Types.STRING())]))
    with pytest.raises(TypeError, match="expects a RowTypeInfo"):
        ParquetColumnarRowInputFormat(Types.LONG())
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        ParquetColumnarRowInputFormat(Types.ROW_NAMED(["a"], [Types.INT()]), batch_size=0)


AVRO_SCHEMA = {
    "type": "record", "name": "User", "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": ["null", "string"]},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "scores", "type": {"type": "map", "values": "int"}},
        {"name": "address", "type": {"type": "record", "name": "Address",
                                     "fields": [{"name": "city", "type": "string"}]}},
    ]}


def test_avro_generic_records_round_trip_through_parquet_files_in_jobs(env, tmp_path):
    import json

    from rill.common import WatermarkStrategy
    from rill.datastream.connectors.file_system import FileSource
    from rill.datastream.formats.avro import AvroSchema
    from rill.datastream.formats.parquet import AvroParquetReaders, AvroParquetWriters
    from _ds_helpers import collect

    schema = AvroSchema.parse_string(json.dumps(AVRO_SCHEMA))
    records = [{"id": i, "name": None if i % 3 == 0 else f"n{i}", "tags": [f"t{i}"] * (i % 3),
                "scores": {"a": i}, "address": {"city": f"c{i % 4}"}} for i in range(40)]
    env.set_parallelism(1)
    env.from_collection(records).sink_to(
        FileSink.for_bulk_format(str(tmp_path / "out"), AvroParquetWriters.for_generic_record(schema))
        .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner()).build())
    run(env)
    [f] = Path(tmp_path / "out").glob("part-*")
    assert pq.read_schema(f).field("scores").type == pa.map_(pa.string(), pa.int32())
    source = FileSource.for_record_stream_format(AvroParquetReaders.for_generic_record(schema),
                                                 str(tmp_path / "out")).build()
    result = collect(env.from_source(source, WatermarkStrategy.no_watermarks(), "avro-parquet"))
    assert sorted(result, key=lambda r: r["id"]) == records  # maps come back as dicts


def test_avro_schemas_without_a_parquet_column_are_refused():
    from rill.datastream.formats.avro import AvroSchema
    from rill.datastream.formats.parquet import AvroParquetWriters

    with pytest.raises(ValueError, match=r"union \['int', 'string'\] has no Parquet column"):
        AvroParquetWriters.for_generic_record(AvroSchema(
            {"type": "record", "name": "R", "fields": [{"name": "u", "type": ["int", "string"]}]}))


def test_a_parquet_file_is_split_by_row_groups_and_each_row_is_read_once(env, tmp_path):
    """Flink's Parquet source splits a file by row groups: a split holds the row groups that
    start in its byte range; read at parallelism 2, every row comes once."""
    from rill.common import WatermarkStrategy
    from rill.datastream.connectors.file_system import FileSource, FileSourceSplit
    from rill.datastream.formats.parquet import ParquetColumnarRowInputFormat
    from _ds_helpers import collect

    path = tmp_path / "groups.parquet"
    pq.write_table(pa.table({"id": list(range(1000)), "name": [f"n{i}" for i in range(1000)]}), path,
                   row_group_size=100)  # 10 row groups
    fmt = ParquetColumnarRowInputFormat(Types.ROW_NAMED(["id"], [Types.LONG()]), batch_size=64)
    starts = fmt.split_points(str(path))
    assert len(starts) == 10 and starts == sorted(starts)
    source = FileSource.for_bulk_file_format(fmt, str(path)).set_split_size(1).build()
    splits = source.create_splits(2)
    # one split per row group, the first from byte 0, the last to the end of the file
    assert [s.offset for s in splits] == [0] + starts[1:]
    assert splits[-1].offset + splits[-1].length == path.stat().st_size
    per_split = [[r[0] for batch in fmt.read_split(s.path, 64, s.offset, s.length) for r in batch] for s in splits]
    assert per_split == [list(range(100 * i, 100 * i + 100)) for i in range(10)]
    # a larger split size groups neighbouring row groups
    halves = FileSource.for_bulk_file_format(fmt, str(path)).build().create_splits(2)
    assert len(halves) == 2 and isinstance(halves[0], FileSourceSplit)
    env.set_parallelism(2)
    result = collect(env.from_source(source, WatermarkStrategy.no_watermarks(), "parquet-row-groups"))
    assert sorted(r[0] for r in result) == list(range(1000))
