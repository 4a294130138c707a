"""Legacy sources: ``env.add_source(SourceFunction)`` runs ``run(ctx)`` in its own thread
(Flink's LegacySourceFunctionThread), in both modes."""

from __future__ import annotations

import pytest

from _ds_helpers import collect, run
from rill.datastream import SourceFunction
from rill.runtime.errors import JobExecutionException


class Count(SourceFunction):
    def __init__(self, n):
        self.n = n
        self.running = True

    def run(self, ctx):
        i = 0
        while self.running and i < self.n:
            ctx.collect(i)
            i += 1

    def cancel(self):
        self.running = False


class Forever(SourceFunction):
    def __init__(self):
        self.running = True

    def run(self, ctx):
        i = 0
        while self.running:
            ctx.collect(i)
            i += 1

    def cancel(self):
        self.running = False


class Failing(SourceFunction):
    def run(self, ctx):
        ctx.collect(1)
        raise RuntimeError("sensor unplugged")

    def cancel(self):
        pass


class WithTimestamp(SourceFunction):
    def run(self, ctx):
        ctx.collect_with_timestamp(1, 1000)

    def cancel(self):
        pass


def test_add_source_runs_a_source_function_to_its_end(env):
    # more records than the buffer holds: collect blocks and resumes (backpressure)
    ds = env.add_source(Count(10_000), "counter")
    assert collect(ds.map(lambda v: v * 2)) == [2 * i for i in range(10_000)]


def test_a_cancelled_job_cancels_an_endless_source_function(env):
    ds = env.add_source(Forever())
    assert ds.execute_and_collect(limit=5) == [0, 1, 2, 3, 4]


def test_a_source_function_failure_fails_the_job(env):
    env.add_source(Failing()).print()
    with pytest.raises(JobExecutionException, match="sensor unplugged"):
        run(env)


def test_timestamps_from_a_source_function_are_not_built(env):
    env.add_source(WithTimestamp()).print()
    with pytest.raises(JobExecutionException, match="collect_with_timestamp is not implemented"):
        run(env)


def test_add_source_is_non_parallel_and_rejects_other_objects(env):
    ds = env.add_source(Count(1))
    with pytest.raises(ValueError, match="must be 1, got 2"):
        ds.set_parallelism(2)
    with pytest.raises(TypeError, match="expects a Source, got list"):
        env.add_source([1, 2])
