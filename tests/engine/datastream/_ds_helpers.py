"""Helpers (imported as ``_ds_helpers``) for the end-to-end tests of the DataStream API, which
run in both execution modes (tests/conftest.py's ``env``).

Every job runs on the real runtime: the embedded MiniCluster (tasks on threads, local network
stack) or the session's shared cluster (task processes, TCP between them).
Every job is bounded in time: :func:`run` submits it with ``execute_async`` and waits at most
``JOB_TIMEOUT_S`` for its result; a job that hangs is cancelled and fails the test.
After every test, :func:`no_leaked_threads` checks that every thread started during the test
(task threads are named after their task, timer threads ``"Time Trigger for <task>"``) has
ended within ``THREAD_GRACE_S``.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from typing import Any, Iterable, List, Optional

import pytest

from rill.datastream import StreamExecutionEnvironment
from rill.datastream.connectors import CollectSink

JOB_TIMEOUT_S = 120.0
THREAD_GRACE_S = 5.0


def run(env: StreamExecutionEnvironment, job_name: Optional[str] = None, timeout_s: float = JOB_TIMEOUT_S):
    """``env.execute(job_name)`` bounded by ``timeout_s``: returns the JobExecutionResult,
    raises what the job raised; a job still running after ``timeout_s`` is cancelled and the
    test fails."""
    client = env.execute_async(job_name)
    try:
        return client.get_job_execution_result().result(timeout=timeout_s)
    except concurrent.futures.TimeoutError:
        client.cancel()
        pytest.fail(f"job {job_name or ''!r} did not finish within {timeout_s} s (cancelled)")


def collect(ds, job_name: Optional[str] = None) -> List[Any]:
    """Run the job with a ``CollectSink`` on ``ds`` and return every record it received."""
    sink = CollectSink()
    try:
        ds.sink_to(sink)
        run(ds.get_execution_environment(), job_name)
        return sink.get_results()
    finally:
        sink.close()


def wait_until(predicate, timeout_s: float = THREAD_GRACE_S, interval_s: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)


def threads_named(fragments: Iterable[str]) -> List[str]:
    """Names of live threads whose name contains one of ``fragments``."""
    fragments = list(fragments)
    return [t.name for t in threading.enumerate() if any(f in t.name for f in fragments)]


def assert_threads_gone(fragments: Iterable[str], timeout_s: float = THREAD_GRACE_S) -> None:
    fragments = list(fragments)
    if not wait_until(lambda: not threads_named(fragments), timeout_s):
        pytest.fail(f"threads still alive {timeout_s} s after the job ended: {threads_named(fragments)}")


def task_names(client) -> List[str]:
    """The task (JobVertex) names of a submitted job, from its JobClient's metrics."""
    return sorted({m.task_name for m in client.get_metrics()})


# -- a source whose subtasks each read a fixed share ---------------------------------------------

from dataclasses import dataclass as _dataclass  # noqa: E402

from rill.datastream.connectors import Source, SourceReader, SourceSplit, SplitEnumerator  # noqa: E402


@_dataclass(frozen=True)
class _StrideSplit(SourceSplit):
    first: int
    stride: int
    end: int

    def split_id(self) -> str:
        return f"stride-{self.first}"


class _StrideReader(SourceReader):
    def read(self, split: _StrideSplit):
        values = list(range(split.first, split.end, split.stride))
        for i in range(0, len(values), 64):
            yield values[i:i + 64]


class _PerSubtaskEnumerator(SplitEnumerator):
    def __init__(self, n: int, parallelism: int):
        self._pending = {i: _StrideSplit(i, parallelism, n) for i in range(parallelism)}

    def handle_split_request(self, subtask_index: int):
        return self._pending.pop(subtask_index, None)


class PerSubtaskSequence(Source):
    """The numbers ``0 .. n-1``; subtask ``i`` of ``p`` reads exactly ``i, i+p, i+2p, ...``
    (unlike ``from_sequence``, whose splits go to whichever subtask asks first)."""

    def __init__(self, n: int):
        self.n = n

    def create_enumerator(self, parallelism: int) -> SplitEnumerator:
        return _PerSubtaskEnumerator(self.n, parallelism)

    def create_reader(self) -> SourceReader:
        return _StrideReader()


import time as _time  # noqa: E402

from rill.datastream.connectors import Boundedness  # noqa: E402


class EndlessReader(SourceReader):
    """0, 1, 2, ... 49_999 fast, then nothing, forever."""

    def read(self, split):
        n = 0
        while True:
            if n < 50_000:
                yield list(range(n, n + 100))
                n += 100
            else:
                _time.sleep(0.001)
                yield []


class EndlessSource(Source):
    """Unbounded: every subtask reads an EndlessReader."""

    def get_boundedness(self) -> Boundedness:
        return Boundedness.CONTINUOUS_UNBOUNDED

    def create_splits(self, parallelism: int) -> List[SourceSplit]:
        return [_StrideSplit(i, parallelism, 0) for i in range(parallelism)]

    def create_reader(self) -> SourceReader:
        return EndlessReader()
