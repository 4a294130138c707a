"""Unaligned checkpoints (FLIP-76) and the aligned-checkpoint timeout end to end, in both
execution modes (the ``env`` fixture): under backpressure from a slow sink the barrier overtakes
the in-flight data, the checkpoint completes before the sink processed it, the data is stored
with the snapshot (exactly the records between the sink's and the source's snapshot positions)
and a restore from it is exactly-once.

The sink is slow by its own per-record work (``time.sleep`` inside ``map``: load, not
synchronization); every wait on the job is a wait for its result with a deadline.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

from rill.common import Encoder
from rill.common.functions import MapFunction
from rill.datastream.connectors import FileSink
from rill.network.api.serialization.value_codec import unpack_records
from rill.operators.checkpointed_function import CheckpointedFunction
from rill.runtime.checkpoint.checkpoint_stats import CheckpointStatsStatus
from rill.state import ListStateDescriptor

_ROOT = str(Path(__file__).resolve().parents[4])
if _ROOT not in sys.path:  # bench/ is a top-level folder of the repository, not installed
    sys.path.insert(0, _ROOT)

from bench.exactly_once import KEYS, CountPerKey, InjectFailure, check_output  # noqa: E402

RESULT_TIMEOUT_S = 180


def _configure(env, interval_ms, **settings):
    conf = env.get_configuration()
    conf.set_integer("rill.source.batch-size", 10)
    conf.set_integer("taskmanager.network.records-per-buffer", 10)
    for key, value in settings.items():
        conf.set_string(key, str(value))
    env.enable_checkpointing(interval_ms)
    env.set_parallelism(1)
    return env


class Position(MapFunction, CheckpointedFunction):
    """Counts the records it passed on; at each snapshot writes ``<id> <count>`` to ``log``."""

    def __init__(self, log: str, delay_s: float = 0.0):
        self.log, self.delay_s = log, delay_s
        self.n = 0

    def initialize_state(self, context):
        self.state = context.get_operator_state_store().get_list_state(ListStateDescriptor("n"))
        self.n = sum(self.state.get() or [])

    def snapshot_state(self, context):
        self.state.update([self.n])
        with open(self.log, "a") as f:
            f.write(f"{context.get_checkpoint_id()} {self.n}\n")

    def map(self, value):
        if self.delay_s:
            time.sleep(self.delay_s)
        self.n += 1
        return value


def _positions(path: Path):
    return {int(c): int(n) for c, n in (line.split() for line in path.read_text().splitlines())}


def _source_at(source, cid, n):
    """The source's position at checkpoint ``cid``: a source that finished takes no part in the
    later checkpoints (FLIP-147): it had passed all ``n`` records."""
    if cid in source:
        return source[cid]
    assert cid > max(source, default=0), (cid, source)
    return n


def _slow_pipeline(env, n, tmp_path, sink_delay_s):
    """source -> Position (source log) -> key_by -> Position sleeping per record (sink log)."""
    (env.from_collection(list(range(n))).map(Position(str(tmp_path / "source"))).name("source position")
     .key_by(lambda v: 0).map(Position(str(tmp_path / "sink"), sink_delay_s)).name("slow sink")
     .add_sink(lambda v: None))


def _completed(stats):
    return [c for c in stats.history if c.status is CheckpointStatsStatus.COMPLETED]


def test_the_barrier_overtakes_the_backlog_which_is_stored_exactly(env, tmp_path):
    """Each completed checkpoint holds, as in-flight data, exactly the records the source had
    passed at its snapshot and the slow sink had not processed at its own: the checkpoint did
    not wait for them, and they are in the snapshot once."""
    directory = tmp_path / "checkpoints"
    _configure(env, 150, **{"execution.checkpointing.unaligned.enabled": "true",
                            "execution.checkpointing.dir": str(directory),
                            "execution.checkpointing.num-retained": 1000,
                            # read after the job ended: kept (FLIP-147 jobs end FINISHED)
                            "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION"})
    _slow_pipeline(env, 600, tmp_path, 0.004)
    client = env.execute_async("unaligned under backpressure")
    client.get_job_execution_result().result(RESULT_TIMEOUT_S)
    stats = client.get_checkpoint_stats()
    completed = _completed(stats)
    assert completed and all(c.unaligned_checkpoint for c in completed)
    source, sink = _positions(tmp_path / "source"), _positions(tmp_path / "sink")
    overtaken = 0
    for c in completed:
        chk = Path(c.external_path)
        in_flight = []
        for f in sorted(chk.glob("*/channel_state/part-*.parquet")):
            table = pq.read_table(f)
            assert table.column_names == ["checkpoint_id", "operator_uid", "operator_id", "kind",
                                          "gate_or_partition_index", "channel_or_subpartition_index",
                                          "position", "data", "partition_id"]
            for payload in table.column("data").to_pylist():
                in_flight.extend(unpack_records(payload)[0])
        cid = c.checkpoint_id
        assert sorted(in_flight) == list(range(sink[cid], _source_at(source, cid, 600))), cid
        assert c.persisted_data_bytes == sum(len(p) for f in chk.glob("*/channel_state/part-*.parquet")
                                             for p in pq.read_table(f).column("data").to_pylist())
        overtaken += _source_at(source, cid, 600) > sink[cid]
    assert overtaken, f"no checkpoint overtook in-flight data: {source} {sink}"
    assert any(c.persisted_data_bytes > 0 for c in completed)
    assert stats.summary.persisted_data_bytes.count == stats.counts.number_of_completed_checkpoints


def _in_flight(chk: Path):
    records = []
    for f in chk.glob("*/channel_state/part-*.parquet"):
        for payload in pq.read_table(f).column("data").to_pylist():
            records.extend(unpack_records(payload)[0])
    return records


def test_a_back_pressured_middle_task_stores_its_input_and_output_in_flight_data(env, tmp_path):
    """source -> Position -> key_by -> pass-through (back-pressured) -> key_by -> slow sink: over
    both exchanges, each completed checkpoint stores exactly the records the source had passed
    and the sink had not processed at their snapshots."""
    directory = tmp_path / "checkpoints"
    _configure(env, 150, **{"execution.checkpointing.unaligned.enabled": "true",
                            "execution.checkpointing.dir": str(directory),
                            "execution.checkpointing.num-retained": 1000,
                            # read after the job ended: kept (FLIP-147 jobs end FINISHED)
                            "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION"})
    (env.from_collection(list(range(500))).map(Position(str(tmp_path / "source"))).name("source position")
     .key_by(lambda v: 0).map(lambda v: v).name("middle")
     .key_by(lambda v: 0).map(Position(str(tmp_path / "sink"), 0.004)).name("slow sink")
     .add_sink(lambda v: None))
    client = env.execute_async("unaligned through a middle task")
    client.get_job_execution_result().result(RESULT_TIMEOUT_S)
    completed = _completed(client.get_checkpoint_stats())
    source, sink = _positions(tmp_path / "source"), _positions(tmp_path / "sink")
    assert completed
    for c in completed:
        assert sorted(_in_flight(Path(c.external_path))) == list(
            range(sink[c.checkpoint_id], _source_at(source, c.checkpoint_id, 500)))
    assert any(_source_at(source, c.checkpoint_id, 500) > sink[c.checkpoint_id] for c in completed)


def test_a_restore_from_unaligned_checkpoints_is_exactly_once(env, tmp_path):
    """A failure after a completed unaligned checkpoint: the restart restores keyed counts and
    in-flight data, and the exactly-once FileSink's output holds every record once with exact
    counts per key."""
    n = 40 * 60
    out, markers = tmp_path / "out", tmp_path / "markers"
    out.mkdir()
    markers.mkdir()
    _configure(env, 100, **{"execution.checkpointing.unaligned.enabled": "true",
                            "restart-strategy.type": "fixed-delay",
                            "restart-strategy.fixed-delay.attempts": "1",
                            "restart-strategy.fixed-delay.delay": "0 ms"})
    env.set_parallelism(2)
    sink = FileSink.for_row_format(str(out), Encoder.simple_string_encoder()).build()
    (env.from_collection(list(range(n))).set_parallelism(1)
     .map(InjectFailure(n // 2, "exception", str(markers))).name("inject")
     .key_by(lambda v: v % KEYS).map(Position(str(tmp_path / "slow"), 0.001)).name("slow")
     .key_by(lambda v: v % KEYS).process(CountPerKey()).name("count")
     .sink_to(sink))
    client = env.execute_async("unaligned restore")
    client.get_job_execution_result().result(RESULT_TIMEOUT_S)
    assert (markers / "failed").exists()
    assert check_output(str(out), n) is True  # exact, and the restart began from a checkpoint
    stats = client.get_checkpoint_stats()
    assert all(c.unaligned_checkpoint for c in _completed(stats))
    assert stats.summary.persisted_data_bytes.maximum > 0


def test_an_aligned_checkpoint_switches_to_unaligned_after_the_timeout(env, tmp_path):
    """With unaligned checkpoints and an aligned-checkpoint timeout, a checkpoint starts
    aligned; under backpressure the trigger and the barriers come later than 5 ms after it, so
    the checkpoints switch to unaligned and store in-flight data."""
    _configure(env, 150, **{"execution.checkpointing.unaligned.enabled": "true",
                            "execution.checkpointing.aligned-checkpoint-timeout": "5 ms"})
    _slow_pipeline(env, 500, tmp_path, 0.004)
    client = env.execute_async("aligned-checkpoint timeout")
    client.get_job_execution_result().result(RESULT_TIMEOUT_S)
    completed = _completed(client.get_checkpoint_stats())
    assert completed and all(c.unaligned_checkpoint for c in completed)
    assert any(c.persisted_data_bytes > 0 for c in completed)


def test_within_the_timeout_checkpoints_stay_aligned(env, tmp_path):
    _configure(env, 150, **{"execution.checkpointing.unaligned.enabled": "true",
                            "execution.checkpointing.aligned-checkpoint-timeout": "10 min"})
    _slow_pipeline(env, 300, tmp_path, 0.002)
    client = env.execute_async("aligned within the timeout")
    client.get_job_execution_result().result(RESULT_TIMEOUT_S)
    completed = _completed(client.get_checkpoint_stats())
    assert completed
    assert [(c.unaligned_checkpoint, c.persisted_data_bytes) for c in completed] == [(False, 0)] * len(completed)
    source, sink = _positions(tmp_path / "source"), _positions(tmp_path / "sink")
    assert all(sink[c.checkpoint_id] == source[c.checkpoint_id] for c in completed)


def _wait_for_a_completed_checkpoint(client) -> None:
    """Every task runs once a checkpoint completed (a savepoint needs them all running)."""
    deadline = time.monotonic() + RESULT_TIMEOUT_S
    while time.monotonic() < deadline:
        stats = client.get_checkpoint_stats()
        if stats is not None and _completed(stats):
            return
        assert not client.is_done(), "the job ended before its first checkpoint"
        time.sleep(0.02)
    raise AssertionError("no checkpoint completed")


def test_savepoints_of_an_unaligned_job_are_aligned(env, tmp_path):
    """Flink's savepoints are always aligned: one taken from a job with unaligned checkpoints
    under backpressure stores no in-flight data, while its checkpoints do."""
    _configure(env, 150, **{"execution.checkpointing.unaligned.enabled": "true"})
    _slow_pipeline(env, 400, tmp_path, 0.003)
    client = env.execute_async("savepoint of an unaligned job")
    _wait_for_a_completed_checkpoint(client)
    path = client.trigger_savepoint(str(tmp_path / "savepoints")).result(RESULT_TIMEOUT_S)
    client.get_job_execution_result().result(RESULT_TIMEOUT_S)
    assert os.path.isdir(path) and not list(Path(path).glob("*/channel_state"))
    assert list(Path(path).glob("*/operator_state/part-*.parquet"))
