"""``AsyncDataStream.add_batch_sink``: an ``async def invoke_batch(values)`` per batch of at most
``batch_size`` records, at most ``capacity`` batches in flight, every record in exactly one
batch, the job ending after every call."""

from __future__ import annotations

import asyncio
import json

import pytest

from rill.datastream import AsyncDataStream
from rill.runtime.errors import JobExecutionException

class BatchRecorder:
    """Awaits 5 ms per batch and appends the batch and the calls in flight at its start to
    ``path`` (a file, so the test reads them in the cluster mode too, where the sink runs in a
    task process)."""

    def __init__(self, path):
        self.path = str(path)
        self.in_flight = 0

    async def invoke_batch(self, values):
        self.in_flight += 1
        peak = self.in_flight
        await asyncio.sleep(0.005)
        self.in_flight -= 1
        with open(self.path, "a") as f:
            f.write(json.dumps([peak, list(values)]) + "\n")


class FailsOnSeven:
    async def invoke_batch(self, values):
        if 7 in values:
            raise ValueError("the bulk insert refused 7")


def test_batches_cover_every_record_once_in_bounded_batches_and_bounded_concurrency(env, tmp_path):
    AsyncDataStream.add_batch_sink(env.from_collection(list(range(1000))), BatchRecorder(tmp_path / "batches"),
                                   batch_size=64, capacity=4)
    env.execute("batch sink")  # returns once every call has finished
    rows = [json.loads(line) for line in (tmp_path / "batches").read_text().splitlines()]
    batches = [b for _, b in rows]
    assert sorted(v for b in batches for v in b) == list(range(1000))
    assert all(1 <= len(b) <= 64 and b == sorted(b) for b in batches)
    assert len(batches) >= 1000 // 64
    assert max(peak for peak, _ in rows) == 4


def test_a_failing_batch_fails_the_job_with_the_cause(env):
    AsyncDataStream.add_batch_sink(env.from_collection(list(range(20))), FailsOnSeven(), batch_size=5)
    with pytest.raises(JobExecutionException) as info:
        env.execute("failing batch sink")
    causes = []
    e = info.value
    while e is not None:
        causes.append(str(e))
        e = e.__cause__
    assert any("the bulk insert refused 7" in c for c in causes), causes


def test_invoke_batch_must_be_async_and_sizes_positive(env):
    class Sync:
        def invoke_batch(self, values):
            pass

    with pytest.raises(TypeError, match=r"method 'invoke_batch' of Sync must be declared 'async def'"):
        AsyncDataStream.add_batch_sink(env.from_collection([1]), Sync())
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        AsyncDataStream.add_batch_sink(env.from_collection([1]), BatchRecorder("x"), batch_size=0)
    with pytest.raises(ValueError, match="capacity must be a positive int"):
        AsyncDataStream.add_batch_sink(env.from_collection([1]), BatchRecorder("x"), capacity=0)
