"""Shared helpers for the network tests: bounded waiting and thread bookkeeping.

No test depends on timing: waits poll a condition with a generous deadline and fail loudly
(never pass) when it expires; every started thread must have ended by the test's teardown.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

import pytest

from rill.network import (
    LocalBufferPool,
    ResultPartition,
    ResultPartitionID,
    ResultPartitionManager,
    ResultPartitionType,
)

DEADLINE_S = 20.0


def _wait_until(predicate: Callable[[], bool], what: str, timeout_s: float = DEADLINE_S) -> None:
    """Poll ``predicate`` until true; fail the test with ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting until {what}")
        time.sleep(0.0005)


class Threads:
    """Starts daemon threads that record their exception; ``join_all`` fails on a hang."""

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []

    def start(self, target: Callable[[], object], name: str) -> threading.Thread:
        def run() -> None:
            try:
                target()
            except BaseException as error:  # noqa: BLE001 - reported by join_all
                self.errors.append(error)

        thread = threading.Thread(target=run, name=name, daemon=True)
        self.threads.append(thread)
        thread.start()
        return thread

    def join_all(self, timeout_s: float = DEADLINE_S) -> None:
        deadline = time.monotonic() + timeout_s
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in self.threads if t.is_alive()]
        assert not alive, f"threads still running after {timeout_s}s: {alive}"
        if self.errors:
            raise self.errors[0]


@pytest.fixture
def wait_until():
    """``wait_until(predicate, what)``: poll until true, fail after a generous deadline."""
    return _wait_until


@pytest.fixture
def threads():
    helper = Threads()
    yield helper
    for thread in helper.threads:
        thread.join(DEADLINE_S)
    assert not [t for t in helper.threads if t.is_alive()], "a test left a thread running"


@pytest.fixture
def manager():
    mgr = ResultPartitionManager()
    yield mgr
    mgr.shutdown()


@pytest.fixture
def make_partition(manager):
    """``make_partition(num_subpartitions, num_buffers=8, name="p")`` -> registered partition."""
    counter = iter(range(10**6))

    def make(num_subpartitions: int, num_buffers: int = 8, name: str = "p") -> ResultPartition:
        pid = ResultPartitionID(f"{name}-{next(counter)}", "attempt-0")
        pool = LocalBufferPool(num_buffers, f"{name} pool")
        partition = ResultPartition(pid, ResultPartitionType.PIPELINED_BOUNDED, num_subpartitions, pool, name)
        manager.register_result_partition(partition)
        return partition

    return make
