"""Watermark alignment (FLIP-182) in running jobs: a source whose event time runs far ahead of
the other source of its group reads only while it is within the drift of the slow one."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from _ds_helpers import collect, run
from rill.common import Duration, WatermarkStrategy
from rill.common.connector.source import Boundedness, Source, SourceReader, SourceSplit
from rill.common.watermark_strategy import WatermarkAlignmentParams
from rill.datastream import StreamExecutionEnvironment
from rill.datastream.functions import CoProcessFunction
from rill.operators.watermark import WatermarkGenerator
from rill.common.streamrecord import Watermark

N = 4000
FAST_STEP_MS = 1000  # the fast source's event time per record (N records: 4,000 s)
SLOW_STEP_MS = 100   # the slow source's (2 N records: 800 s)
SLOW_END_MS = 2 * N * SLOW_STEP_MS
DRIFT_MS = 20_000
BATCH = 5            # records per source batch, and per network buffer


class Lead(CoProcessFunction):
    """For every record of the fast input, how far its event time is ahead of the latest event
    time of the slow input seen so far (ms), until the slow input's end (after it the fast one
    may run freely: an ended source does not hold its group back)."""

    def __init__(self):
        self.slow = None

    def process_element1(self, value, ctx):
        if value <= SLOW_END_MS:
            yield value - (self.slow or 0)

    def process_element2(self, value, ctx):
        self.slow = value if self.slow is None else max(self.slow, value)


class EveryEvent(WatermarkGenerator):
    """A watermark after every record: alignment then sees each source's progress exactly (a
    periodic generator shows it only every auto-watermark interval)."""

    def on_event(self, event, event_timestamp, output):
        output.emit_watermark(Watermark(event_timestamp - 1))

    def on_periodic_emit(self, output):
        pass


def strategy(aligned: bool) -> WatermarkStrategy:
    s = WatermarkStrategy.for_generator(EveryEvent).with_timestamp_assigner(lambda v, _: v)
    if aligned:
        s = s.with_watermark_alignment("inputs", Duration.of_millis(DRIFT_MS), Duration.of_millis(5))
    return s


def leads(env: StreamExecutionEnvironment, aligned: bool):
    env.set_parallelism(1)
    env.get_configuration().set_integer("rill.source.batch-size", BATCH)
    env.get_configuration().set_integer("taskmanager.network.records-per-buffer", BATCH)
    fast = env.from_collection([i * FAST_STEP_MS for i in range(1, N + 1)]).assign_timestamps_and_watermarks(
        strategy(aligned))
    slow = env.from_collection([i * SLOW_STEP_MS for i in range(1, 2 * N + 1)]).assign_timestamps_and_watermarks(
        strategy(aligned))
    return collect(fast.connect(slow).process(Lead()))


def test_an_aligned_source_stays_within_the_drift_of_the_slow_one(env):
    out = leads(env, aligned=True)
    assert out, "the fast input met the slow one"
    # bound: the drift, plus one batch the fast source reads past its ceiling (5 s of its time),
    # plus the slow input's records in flight to the join (a few buffers of 5 records, 0.5 s
    # each) -- far below the ~800 s the fast input runs ahead unaligned
    assert max(out) < DRIFT_MS + 30_000, max(out)


def test_unaligned_the_fast_source_runs_ahead(env):
    # the same job without alignment: proves the test above could fail
    assert max(leads(env, aligned=False)) > 5 * (DRIFT_MS + 30_000)


def test_alignment_needs_a_source():
    env = StreamExecutionEnvironment.get_execution_environment()
    mapped = env.from_collection([1, 2]).map(lambda v: v).name("Double")
    with pytest.raises(ValueError, match="after 'Double': watermark alignment pauses sources"):
        mapped.assign_timestamps_and_watermarks(strategy(aligned=True))


def test_the_strategy_keeps_its_alignment_through_every_copy():
    s = (WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(1))
         .with_watermark_alignment("g", Duration.of_minutes(1))
         .with_timestamp_assigner(lambda v, _: v).with_idleness(Duration.of_seconds(5)))
    assert s.get_alignment_parameters() == WatermarkAlignmentParams("g", 60_000, 1000)
    assert "with_watermark_alignment('g', Duration.of_millis(60000), Duration.of_millis(1000))" in repr(s)
    assert WatermarkStrategy.for_monotonous_timestamps().get_alignment_parameters() is None


@pytest.mark.parametrize("args, error, match", [
    (("", Duration.of_seconds(1)), TypeError, "non-empty str"),
    (("g", 5), TypeError, "expects a Duration"),
    (("g", Duration.of_millis(-1)), ValueError, "must not be negative, got -1 ms"),
    (("g", Duration.of_seconds(1), Duration.of_millis(0)), ValueError, "greater than zero, got 0 ms"),
])
def test_invalid_alignment_settings_are_refused(args, error, match):
    with pytest.raises(error, match=match):
        WatermarkStrategy.for_monotonous_timestamps().with_watermark_alignment(*args)


def test_a_paused_source_is_back_pressured_not_idle(env):
    """The fast source waits for the slow one most of the job: that time is back-pressured
    (Flink shows alignment pauses so), not idle."""
    env.set_parallelism(1)
    env.get_configuration().set_integer("rill.source.batch-size", BATCH)
    env.get_configuration().set_integer("taskmanager.network.records-per-buffer", BATCH)
    fast = env.from_collection([i * FAST_STEP_MS for i in range(1, N + 1)]).name("fast")
    slow = env.from_collection([i * SLOW_STEP_MS for i in range(1, 2 * N + 1)]).name("slow")
    fast.assign_timestamps_and_watermarks(strategy(True)).union(
        slow.assign_timestamps_and_watermarks(strategy(True))).add_sink(lambda v: None)
    vertices = {v.name.split(" -> ")[0]: v for v in run(env).vertices}
    fast_source = vertices["Source: fast"]
    assert fast_source.back_pressured_time_ms > fast_source.duration_ms / 2
    assert fast_source.idle_time_ms < fast_source.duration_ms / 10


@dataclass(frozen=True)
class _Forever(SourceSplit):
    def split_id(self) -> str:
        return "forever"


class _NothingToRead(SourceReader):
    def read(self, split):
        while True:
            yield []  # an unbounded source with nothing to hand over


class Silent(Source):
    """An unbounded source that never produces a record (nor, by itself, a watermark)."""

    non_parallel = True

    def get_boundedness(self):
        return Boundedness.CONTINUOUS_UNBOUNDED

    def create_splits(self, parallelism):
        return [_Forever()]

    def create_reader(self):
        return _NothingToRead()


def test_an_idle_source_does_not_hold_its_group_back(env):
    """A source of the group that has nothing to read goes idle (with_idleness) and reports so:
    the other source of the group reads all its records. Without idleness it would hold the
    group at its start forever (every subtask of a group counts from the start)."""
    env.set_parallelism(1)
    env.get_configuration().set_integer("rill.source.batch-size", BATCH)
    fast = env.from_collection([i * FAST_STEP_MS for i in range(1, 501)]).assign_timestamps_and_watermarks(
        strategy(True))
    silent = env.from_source(Silent(), strategy(True).with_idleness(Duration.of_millis(50)), "silent")
    out = fast.union(silent).execute_and_collect(limit=500)
    assert sorted(out) == [i * FAST_STEP_MS for i in range(1, 501)]
