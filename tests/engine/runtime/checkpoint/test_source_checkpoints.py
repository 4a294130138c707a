"""Sources in checkpoints, end to end (issue 11; the runtime's side of replayable sources), in
both execution modes: the split enumerator's state is stored with each checkpoint (the
metadata's ``coordinator_state``, taken before the source tasks are triggered) and restored
before a restarted attempt's tasks start, so a split handed out before the checkpoint is not
handed out again; operators see whether the job checkpoints; EXACTLY_ONCE is refused over a
source that cannot replay."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from rill.common import JobStatus
from rill.common.connector.source import read_version_and_deserialize
from rill.common.functions import MapFunction, SinkFunction, SourceFunction
from rill.datastream import CheckpointingMode, StreamExecutionEnvironment
from rill.datastream.connectors import Boundedness, Source, SourceReader, SourceSplit
from rill.runtime.errors import JobExecutionException
from rill.state.checkpoint.storage import create_checkpoint_storage

TIMEOUT_S = 120
SPLIT = 100  # records per split


@dataclass(frozen=True)
class Block(SourceSplit):
    index: int

    def split_id(self) -> str:
        return str(self.index)


class _Reader(SourceReader):
    def __init__(self, markers: str, wait_in: int):
        self.markers, self.wait_in = markers, wait_in

    def read(self, split: Block):
        start = split.index * SPLIT
        yield list(range(start, start + SPLIT // 2))
        if split.index == self.wait_in:
            signal, failed = Path(self.markers, "signal"), Path(self.markers, "failed")
            Path(self.markers, "waiting").touch()
            while not failed.exists() and not Path(self.markers, "go").exists():
                if signal.exists():  # attempt 0 fails here; a restarted one reads on
                    failed.touch()
                    raise RuntimeError("injected source failure")
                time.sleep(0.005)
                yield []
        yield list(range(start + SPLIT // 2, start + SPLIT))


class Blocks(Source):
    """Splits 0, 1, 2 of 100 records each, handed out in order to one reader; the reader stops
    half-way through split ``wait_in`` until ``<markers>/signal`` (fail, once) or
    ``<markers>/go`` (read on) appears."""

    def __init__(self, markers: str, wait_in: int):
        self.markers, self.wait_in = markers, wait_in

    def create_splits(self, parallelism):
        return [Block(0), Block(1), Block(2)]

    def create_reader(self):
        return _Reader(self.markers, self.wait_in)

    def get_boundedness(self):
        return Boundedness.BOUNDED


class PerAttempt(SinkFunction):
    """Appends each record to ``<dir>/attempt-<a>.txt``."""

    def __init__(self, out_dir: str):
        self.out_dir = out_dir

    def open(self, runtime_context):
        self.file = open(os.path.join(self.out_dir, f"attempt-{runtime_context.get_attempt_number()}.txt"), "a",
                         buffering=1)

    def invoke(self, value, context):
        self.file.write(f"{value}\n")

    def close(self):
        self.file.close()


def by_attempt(out: Path):
    return {int(f.stem.split("-")[1]): [int(x) for x in f.read_text().split()] for f in out.iterdir()}


def wait_for(condition, what):
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def setup(env, tmp_path, wait_in):
    markers, out = tmp_path / "markers", tmp_path / "out"
    markers.mkdir(parents=True)
    out.mkdir()
    env.enable_checkpointing(100)
    conf = env.get_configuration()
    conf.set_string("execution.checkpointing.dir", str(tmp_path / "checkpoints"))
    conf.set_string("restart-strategy.type", "fixed-delay")
    conf.set_string("restart-strategy.fixed-delay.attempts", "1")
    conf.set_string("restart-strategy.fixed-delay.delay", "0 ms")
    source = Blocks(str(markers), wait_in)
    (env.from_source(source, None, "blocks").uid("blocks").set_parallelism(1)
        .add_sink(PerAttempt(str(out))).uid("lines").set_parallelism(1))
    return source, markers, out


def completed_checkpoints(client):
    stats = client.get_checkpoint_stats()
    return 0 if stats is None else stats.counts.number_of_completed_checkpoints


def test_the_enumerator_state_is_stored_with_the_checkpoint(env, tmp_path):
    source, markers, out = setup(env, tmp_path, wait_in=0)
    client = env.execute_async("enumerator state")
    wait_for((markers / "waiting").exists, "the reader to wait in split 0")
    seen = completed_checkpoints(client)
    wait_for(lambda: completed_checkpoints(client) >= seen + 2, "a checkpoint taken while the reader waits")
    storage = create_checkpoint_storage(str(tmp_path / "checkpoints"), str(client.get_job_id()))
    metadata = storage.resolve_checkpoint(storage.latest_completed_checkpoint())
    (state,) = [op for op in metadata.operator_states.values() if op.coordinator_state is not None]
    assert state.name == "Source: blocks"
    # split 0 was handed out before the checkpoint: the enumerator's state is the other two
    assert read_version_and_deserialize(source.get_enumerator_checkpoint_serializer(),
                                        state.coordinator_state) == [Block(1), Block(2)]
    (markers / "go").touch()
    client.get_job_execution_result().result(timeout=TIMEOUT_S)
    assert by_attempt(out) == {0: list(range(3 * SPLIT))}


def test_a_restart_does_not_hand_out_again_the_splits_the_checkpoint_had_assigned(env, tmp_path):
    _source, markers, out = setup(env, tmp_path, wait_in=2)
    client = env.execute_async("enumerator restored")
    wait_for((markers / "waiting").exists, "the reader to wait in split 2")
    seen = completed_checkpoints(client)
    wait_for(lambda: completed_checkpoints(client) >= seen + 2, "a checkpoint taken while the reader waits")
    (markers / "signal").touch()
    client.get_job_execution_result().result(timeout=TIMEOUT_S)
    assert client.get_job_status() is JobStatus.FINISHED
    written = by_attempt(out)
    assert written[0] == list(range(2 * SPLIT + SPLIT // 2))
    # restored: split 2 from its position; splits 0 and 1 are not in the enumerator's state
    assert written[1] == list(range(2 * SPLIT + SPLIT // 2, 3 * SPLIT))


class Flag(MapFunction):
    def open(self, runtime_context):
        self.enabled = runtime_context.is_checkpointing_enabled()

    def map(self, value):
        return f"{value} {self.enabled}"


class Lines(SinkFunction):
    def __init__(self, path: str):
        self.path = path

    def open(self, runtime_context):
        self.file = open(self.path, "a", buffering=1)

    def invoke(self, value, context):
        self.file.write(f"{value}\n")

    def close(self):
        self.file.close()


@pytest.mark.parametrize("checkpointing", [True, False])
def test_operators_see_whether_the_job_checkpoints(env, tmp_path, checkpointing):
    if checkpointing:
        env.enable_checkpointing(1000)
    env.from_collection([1, 2]).map(Flag()).add_sink(Lines(str(tmp_path / "out.txt")))
    env.execute("flag")
    assert (tmp_path / "out.txt").read_text().splitlines() == [f"1 {checkpointing}", f"2 {checkpointing}"]


class Once(SourceFunction):
    def run(self, ctx):
        ctx.collect(1)

    def cancel(self):
        pass


def test_exactly_once_is_refused_over_a_source_that_cannot_replay(env, tmp_path):
    env.enable_checkpointing(1000)
    env.add_source(Once(), "legacy").add_sink(Lines(str(tmp_path / "out.txt")))
    with pytest.raises(JobExecutionException, match=r"failed during deployment: Source 'Source: legacy' "
                                                    r"\(SourceFunctionSource\) cannot replay its input"):
        env.execute("refused")
    assert not (tmp_path / "out.txt").exists()


def test_at_least_once_runs_over_a_source_that_cannot_replay(env, tmp_path):
    env.enable_checkpointing(1000, CheckpointingMode.AT_LEAST_ONCE)
    env.add_source(Once(), "legacy").add_sink(Lines(str(tmp_path / "out.txt")))
    env.execute("allowed")
    assert (tmp_path / "out.txt").read_text() == "1\n"


def test_a_job_started_from_a_checkpoint_goes_on_with_its_splits_and_checkpoint_ids(env, tmp_path):
    """Job 1 stops half-way through split 1 and is cancelled after a checkpoint n; job 2 starts
    from chk-n (``execution.state-recovery.path``) with checkpointing: it reads split 1 from its
    position and split 2, not split 0 (the enumerator state of n), and numbers its own
    checkpoints after n (the restored source coordinator refuses ids up to n)."""
    checkpoints = tmp_path / "checkpoints"
    _source, markers, out = setup(env, tmp_path / "first", wait_in=1)
    env.get_configuration().set_string("execution.checkpointing.dir", str(checkpoints))
    # a cancelled job keeps its checkpoints only with RETAIN_ON_CANCELLATION, as in Flink
    env.get_configuration().set_string("execution.checkpointing.externalized-checkpoint-retention",
                                       "RETAIN_ON_CANCELLATION")
    first = env.execute_async("first")
    wait_for((markers / "waiting").exists, "the reader to wait in split 1")
    seen = completed_checkpoints(first)
    wait_for(lambda: completed_checkpoints(first) >= seen + 2, "a checkpoint taken while the reader waits")
    first.cancel()
    assert first.wait(TIMEOUT_S) is JobStatus.CANCELED
    latest = create_checkpoint_storage(str(checkpoints), str(first.get_job_id())).latest_completed_checkpoint()
    n = int(latest.rstrip("/").rsplit("chk-", 1)[1])
    assert by_attempt(out) == {0: list(range(SPLIT + SPLIT // 2))}

    env2 = StreamExecutionEnvironment.get_execution_environment()
    _source, markers2, out2 = setup(env2, tmp_path / "second", wait_in=2)
    env2.get_configuration().set_string("execution.checkpointing.dir", str(checkpoints))
    env2.get_configuration().set_string("execution.state-recovery.path", latest)
    second = env2.execute_async("second")
    wait_for((markers2 / "waiting").exists, "the reader to wait in split 2")
    wait_for(lambda: completed_checkpoints(second) >= 2, "two checkpoints of the second job")
    ids = [cid for cid, _ in create_checkpoint_storage(str(checkpoints), str(second.get_job_id())).completed_checkpoints()]
    assert ids and min(ids) > n
    (markers2 / "go").touch()
    second.get_job_execution_result().result(timeout=TIMEOUT_S)
    assert by_attempt(out2) == {0: list(range(SPLIT + SPLIT // 2, 3 * SPLIT))}
