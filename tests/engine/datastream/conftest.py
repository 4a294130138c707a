"""Helpers for the end-to-end tests of the DataStream API in embedded mode.

Every job runs on the real runtime (MiniCluster, tasks on threads, local network stack).
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

JOB_TIMEOUT_S = 30.0
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


def task_names(env_or_client) -> List[str]:
    """The task (JobVertex) names of a submitted job, from its JobClient."""
    jm = env_or_client._jm
    return [v.get_name() for v in jm.job_graph.get_vertices()]


@pytest.fixture
def env() -> StreamExecutionEnvironment:
    """A fresh environment with parallelism 1."""
    e = StreamExecutionEnvironment.get_execution_environment()
    e.set_parallelism(1)
    return e


@pytest.fixture(autouse=True)
def no_leaked_threads():
    """Every thread a test started must be gone within ``THREAD_GRACE_S`` after it."""
    before = set(threading.enumerate())
    yield
    def leaked():
        return [t for t in threading.enumerate() if t not in before and t.is_alive()]
    if not wait_until(lambda: not leaked()):
        pytest.fail(f"threads leaked by the test: {[t.name for t in leaked()]}")
