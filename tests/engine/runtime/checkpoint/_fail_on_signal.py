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
