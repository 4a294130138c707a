"""Rows/s of reading a keyed-state checkpoint through ``spark.read.format("rill-state")``.

    python -m bench.spark_state_read                       # 1,000,000 keys, local[2], 3 repetitions
    python -m bench.spark_state_read --keys 200000 --master local[1] --repeat 5

Writes one checkpoint of one operator (2 subtasks, 128 key groups) holding one ``LONG`` value
state with ``--keys`` string keys (untyped keys: msgpack binary, as ``key_by(lambda ...)``
gives) through ``FileSystemCheckpointStorage`` in a temporary directory, then reads it
``--repeat`` times with ``rill-state`` into Spark's ``noop`` sink (every row is produced and
converted; nothing is written) and once more with ``count()`` checked against ``--keys``. Prints
the median rows/s and the figures of each repetition. Needs Java 17 and pyspark (the ``spark``
extra). Not a test: timings never go into tests.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

from pyspark.sql import SparkSession

from rill.common.typeinfo import Types
from rill.state import ValueStateDescriptor
from rill.state.api import VOID_NAMESPACE
from rill.state.checkpoint.filesystem import FileSystemCheckpointStorage
from rill.state.checkpoint.metadata import CheckpointMetadata, OperatorState
from rill.state.checkpoint.operator_subtask_state import KeyedStateSnapshot, OperatorSubtaskState
from rill.state.key_groups import (
    KeyGroupRange,
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
)
from rill.state_processor import register_data_sources

OID = "ab" * 16
JOB = "cd" * 16
MAX_PARALLELISM = 128
_JAVA_17 = "/usr/lib/jvm/java-17-openjdk-amd64"


def write_checkpoint(root: str, keys: int) -> str:
    """A checkpoint of ``keys`` entries ``("key-<i>", i)`` over two subtasks; its directory."""
    descriptor = ValueStateDescriptor("count", Types.LONG())
    per_kg = {}
    for i in range(keys):
        key = f"key-{i}"
        per_kg.setdefault(assign_to_key_group(key, MAX_PARALLELISM), []).append((key, VOID_NAMESPACE, i))
    location = FileSystemCheckpointStorage(root, JOB).initialize_location_for_checkpoint(1)
    handles = {}
    for subtask in (0, 1):
        rng = compute_key_group_range_for_operator_index(MAX_PARALLELISM, 2, subtask)
        snap = KeyedStateSnapshot(MAX_PARALLELISM, KeyGroupRange(rng.start_key_group, rng.end_key_group),
                                  {"count": descriptor},
                                  {kg: {"count": tuple(e)} for kg, e in per_kg.items() if rng.contains(kg)})
        handles[subtask] = location.write_operator_subtask_state(OID, subtask, OperatorSubtaskState(1, {}, (snap,)),
                                                                 "counter")
    location.finalize(CheckpointMetadata(1, 0, {OID: OperatorState(OID, 2, MAX_PARALLELISM, handles, "counter")}))
    return location.directory


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    if os.path.isdir(_JAVA_17):
        os.environ["JAVA_HOME"] = _JAVA_17
    with tempfile.TemporaryDirectory() as root:
        started = time.perf_counter()
        chk = write_checkpoint(root, args.keys)
        print(f"wrote {args.keys} keys in {time.perf_counter() - started:.1f} s")
        spark = (SparkSession.builder.master(args.master).appName("rill-state-bench")
                 .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false").config("spark.local.dir", root).getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        try:
            register_data_sources(spark)
            df = spark.read.format("rill-state").option("operatorUid", "counter").option("stateName", "count").load(chk)
            rows = df.count()
            if rows != args.keys:
                print(f"read {rows} rows, expected {args.keys}", file=sys.stderr)
                return 1
            rates = []
            for _ in range(args.repeat):
                started = time.perf_counter()
                df.write.format("noop").mode("overwrite").save()
                rates.append(args.keys / (time.perf_counter() - started))
            print(f"rill-state on {args.master}: {args.keys} rows, {df.rdd.getNumPartitions()} partitions, "
                  f"median {statistics.median(rates):,.0f} rows/s "
                  f"(runs: {', '.join(f'{r:,.0f}' for r in rates)})")
        finally:
            spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
