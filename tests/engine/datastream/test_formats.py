"""Formats end to end (``rill.datastream.formats``): real files written by each format's own
library are read by a job (FileSource / create_input), the job writes them again through
``FileSink.for_bulk_format``, and the library reads the job's files back; in both modes."""

from __future__ import annotations

import csv
import decimal
import io
import json
import os
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.orc as pa_orc
import pytest

from _ds_helpers import collect, run
from rill.common import Configuration, Encoder, Row, Types, WatermarkStrategy
from rill.common.serialization import BulkWriter, BulkWriterFactory
from rill.datastream.connectors.file_system import (
    BucketAssigner,
    BulkFormat,
    FileCompactor,
    FileCompactStrategy,
    FileEnumeratorProvider,
    FileSink,
    FileSource,
    FileSplitAssignerProvider,
    OutputFileConfig,
    RollingPolicy,
    StreamFormat,
    StreamingFileSink,
)
from rill.datastream.formats.avro import (
    AvroBulkWriters,
    AvroInputFormat,
    AvroRowDeserializationSchema,
    AvroRowSerializationSchema,
    AvroSchema,
    GenericRecordAvroTypeInfo,
)
from rill.datastream.formats.csv import (
    CsvBulkWriters,
    CsvReaderFormat,
    CsvRowDeserializationSchema,
    CsvRowSerializationSchema,
    CsvSchema,
)
from rill.datastream.formats.json import JsonRowDeserializationSchema, JsonRowSerializationSchema
from rill.datastream.formats.orc import OrcBulkWriters
from rill.runtime.errors import JobExecutionException


def part_files(directory: Path):
    """The finished part files under ``directory`` (no hidden in-progress ones), sorted."""
    return sorted(p for p in directory.rglob("*") if p.is_file() and not p.name.startswith("."))


def bulk_sink(out: Path, factory, suffix: str) -> FileSink:
    return (FileSink.for_bulk_format(str(out), factory)
            .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
            .with_output_file_config(OutputFileConfig.builder().with_part_suffix(suffix).build())
            .build())


# -- CSV ---------------------------------------------------------------------------------------

def csv_schema(**settings) -> CsvSchema:
    b = (CsvSchema.builder()
         .add_number_column("id", number_type=Types.INT())
         .add_string_column("name")
         .add_array_column("tags", ",", element_type=Types.STRING())
         .add_boolean_column("ok")
         .add_number_column("score", number_type=Types.DOUBLE())
         .set_column_separator("|"))
    if settings.get("header"):
        b = b.set_use_header().set_strict_headers()
    return b.build()


CSV_ROWS = [[1, "ann", "a,b", "true", "1.5"], [2, "bo|b", "", "false", ""], [3, 'say "hi"', "x", "TRUE", "-2"]]


def test_csv_file_round_trip_through_a_job(env, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    with open(src / "people.csv", "w", newline="") as f:
        w = csv.writer(f, delimiter="|", lineterminator="\n")
        w.writerow(["id", "name", "tags", "ok", "score"])
        w.writerows(CSV_ROWS)
    schema = csv_schema(header=True)
    source = FileSource.for_record_stream_format(CsvReaderFormat.for_schema(schema), str(src)).build()
    ds = env.from_source(source, WatermarkStrategy.no_watermarks(), "csv-source")
    out = tmp_path / "out"
    ds.sink_to(bulk_sink(out, CsvBulkWriters.for_schema(schema), ".csv"))
    run(env)
    [part] = part_files(out)
    with open(part, newline="") as f:
        written = list(csv.reader(f, delimiter="|"))
    assert written == [["id", "name", "tags", "ok", "score"],
                       ["1", "ann", "a,b", "true", "1.5"],
                       ["2", "bo|b", "", "false", ""],
                       ["3", 'say "hi"', "x", "true", "-2.0"]]


def test_csv_reader_produces_typed_named_rows(env, tmp_path):
    path = tmp_path / "people.csv"
    with open(path, "w", newline="") as f:
        csv.writer(f, delimiter="|", lineterminator="\n").writerows(CSV_ROWS)
    source = FileSource.for_record_stream_format(CsvReaderFormat.for_schema(csv_schema()), str(path)).build()
    rows = collect(env.from_source(source, WatermarkStrategy.no_watermarks(), "csv-source"))
    assert rows == [Row(id=1, name="ann", tags=["a", "b"], ok=True, score=1.5),
                    Row(id=2, name="bo|b", tags=[], ok=False, score=None),
                    Row(id=3, name='say "hi"', tags=["x"], ok=True, score=-2.0)]
    assert rows[0].id == 1 and rows[2].name == 'say "hi"'
    assert CsvReaderFormat.for_schema(csv_schema()).get_produced_type() == Types.ROW_NAMED(
        ["id", "name", "tags", "ok", "score"],
        [Types.INT(), Types.STRING(), Types.LIST(Types.STRING()), Types.BOOLEAN(), Types.DOUBLE()])


def test_csv_line_with_the_wrong_column_count_fails_the_job_naming_the_line(env, tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("1|a||true|1\n2|b\n")
    source = FileSource.for_record_stream_format(CsvReaderFormat.for_schema(csv_schema()), str(path)).build()
    env.from_source(source, WatermarkStrategy.no_watermarks(), "csv-source").print()
    with pytest.raises(JobExecutionException) as info:
        run(env)
    assert "line 2 has 2 columns, the schema has 5" in str(info.value.__cause__ or info.value) + repr(info.value)


def test_csv_schema_builder_rejects_bad_settings():
    with pytest.raises(ValueError, match="column separator must be one character, got '||'"):
        CsvSchema.builder().set_column_separator("||")
    with pytest.raises(TypeError, match="add_number_column\\('x'\\): STRING is not a numeric type"):
        CsvSchema.builder().add_number_column("x", Types.STRING())
    assert len(csv_schema()) == 5


def test_csv_row_schemas_round_trip_messages():
    row_type = Types.ROW_NAMED(["a", "b", "c"], [Types.LONG(), Types.STRING(), Types.LIST(Types.INT())])
    ser = CsvRowSerializationSchema.Builder(row_type).set_field_delimiter(";").set_array_element_delimiter(":").build()
    de = CsvRowDeserializationSchema.Builder(row_type).set_field_delimiter(";").set_array_element_delimiter(":").build()
    rows = [Row(1, "x;y", [1, 2]), Row(2, "plain", [])]
    messages = ser.serialize_batch(rows)
    assert messages == [b'1;"x;y";1:2\n', b"2;plain;\n"]
    assert de.deserialize_batch(messages) == [Row(a=1, b="x;y", c=[1, 2]), Row(a=2, b="plain", c=[])]
    assert ser.serialize(Row(3, None, None)) == b"3;;\n"
    with pytest.raises(ValueError, match="'zz' is not an integer \\(LONG\\)"):
        de.deserialize(b"zz;a;1")
    lenient = CsvRowDeserializationSchema.Builder(row_type).set_ignore_parse_errors(True).build()
    assert lenient.deserialize(b"zz,a,1") is None


# -- JSON --------------------------------------------------------------------------------------

JSON_TYPE = Types.ROW_NAMED(["id", "name", "addr", "w"], [
    Types.INT(), Types.STRING(), Types.ROW_NAMED(["city", "zip"], [Types.STRING(), Types.LONG()]), Types.FLOAT()])


def test_json_rows_round_trip_through_a_job_and_files(env, tmp_path):
    src = tmp_path / "in.jsonl"
    records = [{"id": 1, "name": "ann", "addr": {"city": "Berlin", "zip": 10115}, "w": 0.1},
               {"id": 2, "name": "bo", "addr": None, "w": 2.5}]
    src.write_text("".join(json.dumps(r) + "\n" for r in records))
    de = JsonRowDeserializationSchema.builder().type_info(JSON_TYPE).build()
    ser = JsonRowSerializationSchema.builder().with_type_info(JSON_TYPE).build()
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(src)).build()
    ds = (env.from_source(source, WatermarkStrategy.no_watermarks(), "lines")
          .map(lambda line: de.deserialize(line.encode()), output_type=JSON_TYPE)
          .map(lambda row: ser.serialize(row).decode()))
    out = collect(ds)
    assert out == ['{"id":1,"name":"ann","addr":{"city":"Berlin","zip":10115},"w":0.10000000149011612}',
                   '{"id":2,"name":"bo","addr":null,"w":2.5}']
    assert [json.loads(line) for line in out][1] == records[1]


def test_json_deserialization_options():
    de = JsonRowDeserializationSchema.builder().type_info(JSON_TYPE).build()
    assert de.deserialize(b'{"id": 5}') == Row(id=5, name=None, addr=None, w=None)
    strict = JsonRowDeserializationSchema.builder().type_info(JSON_TYPE).fail_on_missing_field().build()
    with pytest.raises(ValueError, match="could not find field\\(s\\) \\['name', 'addr', 'w'\\]"):
        strict.deserialize(b'{"id": 5}')
    lenient = JsonRowDeserializationSchema.builder().type_info(JSON_TYPE).ignore_parse_errors().build()
    assert lenient.deserialize(b"{not json") is None
    assert lenient.deserialize(b'{"id": 3000000000}') is None  # does not fit INT
    with pytest.raises(ValueError, match="both true"):
        JsonRowDeserializationSchema.builder().type_info(JSON_TYPE).fail_on_missing_field().ignore_parse_errors().build()
    with pytest.raises(NotImplementedError, match="json_schema"):
        JsonRowDeserializationSchema.builder().json_schema("{}")


# -- Avro --------------------------------------------------------------------------------------

AVRO_SCHEMA = json.dumps({
    "type": "record", "name": "User", "fields": [
        {"name": "name", "type": "string"},
        {"name": "age", "type": ["null", "int"]},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
    ]})
AVRO_RECORDS = [{"name": "ann", "age": 31, "tags": ["a"]}, {"name": "bo", "age": None, "tags": []},
                {"name": "cy", "age": 7, "tags": ["x", "y"]}]


def test_avro_file_round_trip_through_a_job(env, tmp_path):
    src = tmp_path / "users.avro"
    schema = AvroSchema.parse_string(AVRO_SCHEMA)
    with open(src, "wb") as f:
        fastavro.writer(f, fastavro.parse_schema(json.loads(AVRO_SCHEMA)), AVRO_RECORDS)
    ds = env.create_input(AvroInputFormat(str(src), schema))
    out = tmp_path / "out"
    (ds.map(lambda r: {**r, "age": None if r["age"] is None else r["age"] + 1},
            output_type=GenericRecordAvroTypeInfo(schema))
       .sink_to(bulk_sink(out, AvroBulkWriters.for_generic_record(schema), ".avro")))
    run(env)
    [part] = part_files(out)
    with open(part, "rb") as f:
        assert list(fastavro.reader(f)) == [{"name": "ann", "age": 32, "tags": ["a"]},
                                            {"name": "bo", "age": None, "tags": []},
                                            {"name": "cy", "age": 8, "tags": ["x", "y"]}]


def test_avro_row_schemas_round_trip_messages_as_fastavro_encodes_them():
    ser = AvroRowSerializationSchema(avro_schema_string=AVRO_SCHEMA)
    de = AvroRowDeserializationSchema(avro_schema_string=AVRO_SCHEMA)
    message = ser.serialize(Row("ann", 31, ["a"]))
    expected = io.BytesIO()
    fastavro.schemaless_writer(expected, fastavro.parse_schema(json.loads(AVRO_SCHEMA)), AVRO_RECORDS[0])
    assert message == expected.getvalue()
    assert de.deserialize(message) == Row(name="ann", age=31, tags=["a"])
    assert de.deserialize_batch(ser.serialize_batch([Row(name="bo", age=None, tags=[])])) == [
        Row(name="bo", age=None, tags=[])]
    with pytest.raises(TypeError, match="record_class or avro_schema_string should be specified"):
        AvroRowSerializationSchema()
    with pytest.raises(NotImplementedError, match="record_class"):
        AvroRowDeserializationSchema(record_class="com.example.User")


def test_avro_input_format_names_a_missing_path(env, tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.avro"):
        AvroInputFormat(str(tmp_path / "nope.avro"), AvroSchema.parse_string(AVRO_SCHEMA))


# -- ORC ---------------------------------------------------------------------------------------

ORC_TYPE = Types.ROW_NAMED(["s", "i", "f", "arr"], [Types.STRING(), Types.INT(), Types.DOUBLE(), Types.LIST(Types.INT())])


def test_orc_files_written_by_a_job_read_back_with_pyarrow(env, tmp_path):
    env.set_parallelism(2)
    rows = [Row(s=f"k{i}", i=i, f=i / 4, arr=list(range(i % 3))) for i in range(50)]
    out = tmp_path / "out"
    props = Configuration().set_string("orc.compress", "ZSTD")
    (env.from_collection(rows, type_info=ORC_TYPE).rebalance().map(lambda r: r, output_type=ORC_TYPE)
        .sink_to(bulk_sink(out, OrcBulkWriters.for_row_type(ORC_TYPE, writer_properties=props), ".orc")))
    run(env)
    parts = part_files(out)
    assert len(parts) == 2  # one per sink subtask
    read = []
    for p in parts:
        f = pa_orc.ORCFile(str(p))
        assert f.compression == "ZSTD"
        assert f.schema == pa.schema([("s", pa.string()), ("i", pa.int32()), ("f", pa.float64()),
                                      ("arr", pa.list_(pa.int32()))])
        read.extend(f.read().to_pylist())
    assert sorted(read, key=lambda r: r["i"]) == [
        {"s": f"k{i}", "i": i, "f": i / 4, "arr": list(range(i % 3))} for i in range(50)]


def test_orc_writer_rejects_what_it_cannot_write():
    with pytest.raises(TypeError, match="field 'row.d' has type BIG_DEC"):
        OrcBulkWriters.for_row_type(Types.ROW_NAMED(["d"], [Types.BIG_DEC()]))
    with pytest.raises(ValueError, match="writer property 'orc.bloom.filter.columns' is not supported"):
        OrcBulkWriters.for_row_type(ORC_TYPE, Configuration().set_string("orc.bloom.filter.columns", "s"))


# -- file source/sink plumbing ----------------------------------------------------------------

class LinesPerFile(BulkFormat):
    """A user BulkFormat: a file's path and its line count, one record per file."""

    def read_batches(self, path, batch_size):
        with open(path) as f:
            yield [(os.path.basename(path), sum(1 for _ in f))]


def test_bulk_format_reads_whole_files_by_path(env, tmp_path):
    env.set_parallelism(2)
    for name, n in [("a", 3), ("b", 1), ("c", 2)]:
        (tmp_path / name).write_text("x\n" * n)
    source = (FileSource.for_bulk_file_format(LinesPerFile(), str(tmp_path))
              .set_split_assigner(FileSplitAssignerProvider.locality_aware_split_assigner()).build())
    assert sorted(collect(env.from_source(source, WatermarkStrategy.no_watermarks(), "files"))) == [
        ("a", 3), ("b", 1), ("c", 2)]


def test_non_splittable_enumerator_reads_each_text_file_in_one_split(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("line\n" * 1000)
    whole = (FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(path))
             .set_split_size(100)
             .set_file_enumerator(FileEnumeratorProvider.default_non_splittable_file_enumerator()).build())
    cut = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(path)).set_split_size(100).build()
    assert len(whole.create_splits(2)) == 1
    assert len(cut.create_splits(2)) == 50


def test_bulk_sink_only_takes_on_checkpoint_rolling(tmp_path):
    with pytest.raises(ValueError, match="a bulk format needs a rolling policy that rolls on every checkpoint"):
        FileSink.for_bulk_format(str(tmp_path), CsvBulkWriters.for_schema(csv_schema())).with_rolling_policy(
            RollingPolicy.default_rolling_policy()).build()


class FailingAfterFirst(BulkWriterFactory):
    class Writer(BulkWriter):
        def __init__(self, stream):
            self.stream = stream

        def add_elements(self, elements):
            if any(e == 3 for e in elements):
                raise ValueError("record 3 refused")
            self.stream.write(b"".join(b"%d\n" % e for e in elements))

        def finish(self):
            pass

    def create(self, stream):
        return FailingAfterFirst.Writer(stream)


def test_failed_bulk_sink_leaves_no_finished_part(env, tmp_path):
    out = tmp_path / "out"
    env.from_collection([1, 2, 3]).sink_to(bulk_sink(out, FailingAfterFirst(), ".txt"))
    with pytest.raises(JobExecutionException):
        run(env)
    assert part_files(out) == []


# -- compaction and the legacy StreamingFileSink ----------------------------------------------

def row_sink(out: Path, part_size: int, strategy=None, compactor=None, builder=FileSink.for_row_format):
    b = (builder(str(out), Encoder.simple_string_encoder())
         .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
         .with_rolling_policy(RollingPolicy.default_rolling_policy(part_size=part_size)))
    if strategy is not None:
        b = b.enable_compact(strategy, compactor)
    return b.build()


def test_compaction_concatenates_the_committed_parts_of_a_bucket(env, tmp_path):
    out = tmp_path / "out"
    strategy = FileCompactStrategy.builder().enable_compaction_on_checkpoint(1).build()
    # 5-byte parts: many small files, then one compacted file with a delimiter between parts
    env.from_collection([f"r{i}" for i in range(10)]).sink_to(
        row_sink(out, 5, strategy, FileCompactor.concat_file_compactor(b"--\n")))
    run(env)
    [compacted] = part_files(out)
    assert compacted.name.startswith("compacted-part-") and compacted.name.endswith("-0-0")
    chunks = compacted.read_bytes().split(b"--\n")
    assert len(chunks) > 1
    assert b"".join(chunks) == b"".join(f"r{i}\n".encode() for i in range(10))


def test_compaction_size_threshold_closes_groups(env, tmp_path):
    out = tmp_path / "out"
    strategy = FileCompactStrategy.builder().set_size_threshold(10).build()
    env.from_collection([f"r{i}" for i in range(10)]).sink_to(
        row_sink(out, 5, strategy, FileCompactor.concat_file_compactor()))
    run(env)
    files = part_files(out)
    # every part holds two 3-byte records (rolled once above 5 bytes): groups of two parts
    assert [len(f.read_bytes()) for f in files] == [12, 12, 6]
    assert all(f.name.startswith("compacted-") for f in files)
    assert b"".join(f.read_bytes() for f in sorted(files, key=lambda f: int(f.name.rsplit("-", 1)[1]))) == \
        b"".join(f"r{i}\n".encode() for i in range(10))


def test_compaction_settings_follow_flink():
    with pytest.raises(ValueError, match="at least one trigger condition must be configured"):
        FileCompactStrategy.builder().build()
    with pytest.raises(ValueError, match="number of checkpoints before compaction should be more than 0, got 0"):
        FileCompactStrategy.builder().enable_compaction_on_checkpoint(0)
    with pytest.raises(TypeError, match="expects a FileCompactStrategy and a FileCompactor"):
        FileSink.for_row_format("x", Encoder.simple_string_encoder()).enable_compact(None, None)


def test_streaming_file_sink_through_add_sink(env, tmp_path):
    out, bulk_out = tmp_path / "out", tmp_path / "bulk"
    env.from_collection(["a", "b"]).add_sink(row_sink(out, 1 << 20, builder=StreamingFileSink.for_row_format))
    bulk = (StreamingFileSink.for_bulk_format(str(bulk_out), CsvBulkWriters.for_schema(csv_schema()))
            .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner()).build())
    assert isinstance(bulk, StreamingFileSink)
    env.from_collection([(1, "x", ["t"], True, 0.5)]).add_sink(bulk)
    run(env)
    [part] = part_files(out)
    assert part.read_text() == "a\nb\n"
    [csv_part] = part_files(bulk_out)
    assert csv_part.read_text() == "1|x|t|true|0.5\n"


def test_orc_nested_rows_and_maps_and_a_value_that_does_not_fit():
    row_type = Types.ROW_NAMED(["a", "r", "m"], [
        Types.INT(), Types.ROW_NAMED(["x", "y"], [Types.STRING(), Types.LONG()]), Types.MAP(Types.STRING(), Types.INT())])
    factory = OrcBulkWriters.for_row_type(row_type)
    out = io.BytesIO()
    writer = factory.create(out)
    writer.add_elements([Row(a=1, r=Row(x="q", y=2), m={"k": 3}), (2, None, None)])
    writer.finish()
    assert pa_orc.ORCFile(io.BytesIO(out.getvalue())).read().to_pylist() == [
        {"a": 1, "r": {"x": "q", "y": 2}, "m": [("k", 3)]}, {"a": 2, "r": None, "m": None}]
    with pytest.raises(TypeError, match="field 'a' does not fit its ORC type int32"):
        factory.create(io.BytesIO()).add_elements([("x", None, None)])


def test_compaction_with_checkpoints_compacts_what_each_checkpoint_commits(env, tmp_path):
    out = tmp_path / "out"
    env.enable_checkpointing(20)
    strategy = FileCompactStrategy.builder().enable_compaction_on_checkpoint(1).build()
    env.from_sequence(1, 3000).map(str).sink_to(row_sink(out, 64, strategy, FileCompactor.concat_file_compactor()))
    run(env)
    files = part_files(out)
    assert files and all(f.name.startswith("compacted-part-") for f in files)
    lines = [ln for f in files for ln in f.read_text().splitlines()]
    assert sorted(lines, key=int) == [str(i) for i in range(1, 3001)]
    assert not [p for p in out.rglob(".*")]  # nothing left in progress or half compacted
