"""Spark reads the checkpoint of a running job (issue 12's acceptance, on a small job: the
flight-stats job's sources end, and a finished job takes no more checkpoints): keyed counts
checkpointed by a real job, in both execution modes, read through rill-state, through plain
spark.read.parquet and through SavepointReader, equal the job's state."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark import cloudpickle as spark_cloudpickle

from rill.common import JobStatus
from rill.common.functions import KeyedProcessFunction, SinkFunction
from rill.common.typeinfo import Types
from rill.datastream.connectors import Boundedness, Source, SourceReader, SourceSplit
from rill.state import ValueStateDescriptor
from rill.state.checkpoint.filesystem import keyed_state_directory
from rill.state.checkpoint.object_codec import decode_object
from rill.state_processor import KeyedStateReaderFunction, SavepointReader, register_data_sources
from rill.state_processor.snapshots import resolve_snapshot

pytestmark = pytest.mark.spark
spark_cloudpickle.register_pickle_by_value(sys.modules[__name__])

N, KEYS = 400, 8
TIMEOUT_S = 120


@dataclass(frozen=True)
class _Whole(SourceSplit):
    def split_id(self) -> str:
        return "whole"


class _Reader(SourceReader):
    def read(self, split):
        for i in range(0, N, 50):
            yield list(range(i, i + 50))
        while True:  # then idles until the job is cancelled, so checkpoints go on
            time.sleep(0.005)
            yield []


class CountThenIdle(Source):
    def create_splits(self, parallelism):
        return [_Whole()]

    def create_reader(self):
        return _Reader()

    def get_boundedness(self):
        return Boundedness.CONTINUOUS_UNBOUNDED


class Count(KeyedProcessFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield n


class Touch(SinkFunction):
    """One empty file per record under ``<dir>``: the test counts them."""

    def __init__(self, out_dir: str):
        self.out_dir = out_dir

    def open(self, runtime_context):
        self.prefix = f"{self.out_dir}/{runtime_context.get_index_of_this_subtask()}-"
        self.n = 0

    def invoke(self, value, context):
        self.n += 1
        Path(f"{self.prefix}{self.n}").touch()


class ReadCount(KeyedStateReaderFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def read_key(self, key, context, out):
        out.collect((key, self.count.value()))


def wait_for(condition, what):
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_spark_reads_the_keyed_state_a_job_checkpointed(env, spark, tmp_path):
    out, checkpoints = tmp_path / "out", tmp_path / "checkpoints"
    out.mkdir()
    env.enable_checkpointing(100)
    env.get_configuration().set_string("execution.checkpointing.dir", str(checkpoints))
    # a cancelled job keeps its checkpoints only with RETAIN_ON_CANCELLATION, as in Flink
    env.get_configuration().set_string("execution.checkpointing.externalized-checkpoint-retention",
                                       "RETAIN_ON_CANCELLATION")
    env.set_parallelism(2)
    (env.from_source(CountThenIdle(), None, "numbers").uid("numbers").set_parallelism(1)
        .key_by(lambda x: x % KEYS).process(Count()).uid("count").add_sink(Touch(str(out))))
    client = env.execute_async("checkpointed counts")

    def completed():
        stats = client.get_checkpoint_stats()
        return 0 if stats is None else stats.counts.number_of_completed_checkpoints

    wait_for(lambda: len(list(out.iterdir())) == N, "every record counted")
    seen = completed()
    wait_for(lambda: completed() >= seen + 2, "a checkpoint taken after every record was counted")
    client.cancel()
    assert client.wait(TIMEOUT_S) is JobStatus.CANCELED
    job_dir = str(checkpoints / client.get_job_id())
    expected = {k: N // KEYS for k in range(KEYS)}

    register_data_sources(spark)
    rows = (spark.read.format("rill-state").option("operatorUid", "count").option("stateName", "count")
            .load(job_dir).collect())
    assert {decode_object(r.key): decode_object(r.value) for r in rows} == expected  # untyped: msgpack
    assert len(rows) == KEYS and {r.partition_id for r in rows} <= {0, 1}
    latest = resolve_snapshot(job_dir)
    assert {r.checkpoint_id for r in rows} == {latest.checkpoint_id}

    plain = spark.read.parquet(keyed_state_directory(latest.external_pointer, "count", "count")).collect()
    assert {decode_object(bytes(r.key)): decode_object(bytes(r.value)) for r in plain} == expected

    counts = SavepointReader.read(spark, job_dir).read_keyed_state(
        "count", ReadCount(), out_type_info=Types.TUPLE([Types.LONG(), Types.LONG()]))
    assert dict(tuple(r) for r in counts.collect()) == expected
