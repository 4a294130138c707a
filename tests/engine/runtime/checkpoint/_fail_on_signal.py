"""The pieces of the restart-from-checkpoint jobs (test_restart_from_checkpoint,
test_snapshot_encoder): a source that emits ``0 .. n-1``, waits and fails on the test's signal,
and resumes past its restored position; keyed counts; a sink writing ``key count`` lines per
attempt and subtask."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from rill.common.functions import KeyedProcessFunction, SinkFunction
from rill.datastream.connectors import Boundedness, Source, SourceReader, SourceSplit
from rill.state import ValueStateDescriptor

TIMEOUT_S = 120
BATCH = 50


@dataclass(frozen=True)
class _Whole(SourceSplit):
    def split_id(self) -> str:
        return "whole"


class _Reader(SourceReader):
    def __init__(self, markers: str, n: int):
        self.markers, self.n = markers, n

    def read(self, split):
        n = self.n
        for i in range(0, n, BATCH):
            yield list(range(i, min(i + BATCH, n)))
        fail, failed = Path(self.markers, "fail"), Path(self.markers, "failed")
        while not failed.exists():  # the first attempt waits for the test's signal
            if fail.exists():
                failed.touch()
                raise RuntimeError("injected source failure after the checkpoint")
            time.sleep(0.005)
            yield []
        for i in range(n, 2 * n, BATCH):  # a restarted attempt, past its restored position
            yield list(range(i, min(i + BATCH, 2 * n)))


class FailOnSignal(Source):
    """One split of ``0 .. n-1``; the first attempt then waits and fails when ``<markers>/fail``
    appears; a later attempt, restored past those n records, reads ``n .. 2n-1`` and ends."""

    def __init__(self, markers: str, n: int):
        self.markers, self.n = markers, n

    def create_splits(self, parallelism):
        return [_Whole()]

    def create_reader(self):
        return _Reader(self.markers, self.n)

    def get_boundedness(self):
        return Boundedness.BOUNDED


class Count(KeyedProcessFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield (ctx.get_current_key(), n)


class Lines(SinkFunction):
    """``key count`` lines into ``<dir>/attempt-<a>-subtask-<i>.txt``."""

    def __init__(self, out_dir: str):
        self.out_dir = out_dir

    def open(self, runtime_context):
        self.file = open(os.path.join(self.out_dir, f"attempt-{runtime_context.get_attempt_number()}-"
                                                    f"subtask-{runtime_context.get_index_of_this_subtask()}.txt"),
                         "a", buffering=1)

    def invoke(self, value, context):
        self.file.write(f"{value[0]} {value[1]}\n")

    def close(self):
        self.file.close()


def counts_by_attempt(out: Path):
    """attempt -> key -> the counts emitted, in order."""
    result = {}
    for f in sorted(out.iterdir()):
        attempt = int(f.name.split("-")[1])
        for line in f.read_text().splitlines():
            key, count = map(int, line.split())
            result.setdefault(attempt, {}).setdefault(key, []).append(count)
    return result


def wait_for(condition, what):
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def run_failing_once(env, tmp_path: Path, n: int, keys: int, job_name: str, **settings):
    """Run ``FailOnSignal(n) -> key_by(x % keys) -> Count -> Lines`` with checkpoints every
    100 ms and one restart (``settings``: more configuration keys); once the first attempt
    counted every record and a checkpoint taken after that completed, signal the failure and
    wait for the restarted attempt to end. Returns ``(client, out directory)``."""
    markers, out = tmp_path / "markers", tmp_path / "out"
    markers.mkdir()
    out.mkdir()
    env.enable_checkpointing(100)
    conf = env.get_configuration()
    conf.set_string("restart-strategy.type", "fixed-delay")
    conf.set_string("restart-strategy.fixed-delay.attempts", "1")
    conf.set_string("restart-strategy.fixed-delay.delay", "0 ms")
    for key, value in settings.items():
        conf.set_string(key, value)
    (env.from_source(FailOnSignal(str(markers), n), None, "signalled").set_parallelism(1)
        .key_by(lambda x: x % keys).process(Count()).uid("count").add_sink(Lines(str(out))))
    client = env.execute_async(job_name)

    def completed():
        stats = client.get_checkpoint_stats()
        return 0 if stats is None else stats.counts.number_of_completed_checkpoints

    wait_for(lambda: sum(len(c) for c in counts_by_attempt(out).get(0, {}).values()) == n,
             "the first attempt to count every record")
    # checkpoint `seen + 2` is triggered after `seen + 1` completed, i.e. after every record was
    # counted: the latest completed checkpoint holds the full counts from then on
    seen = completed()
    wait_for(lambda: completed() >= seen + 2, "a checkpoint taken after every record was counted")
    (markers / "fail").touch()
    client.get_job_execution_result().result(timeout=TIMEOUT_S)
    return client, out
