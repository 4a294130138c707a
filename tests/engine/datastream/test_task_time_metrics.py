"""The busy / idle / back-pressured times a running job reports (README: "every task reports
busy, idle and back-pressured time the way Flink does"), in both execution modes: a fast
source feeding a sink that takes 2 ms per record is back-pressured most of each second while
the sink is busy; once the source pauses and the sink has drained, the sink is idle.

Regression: the idle time counted a wait for input only once it ended, so a sink that had
drained and waited for seconds reported itself busy (1000 ms/s) the whole time, in both modes.

Rates are measured between two readings of the job's metrics (the snapshot's ``*_per_second``
fields average over the last second only), and each reading is taken when a condition on the
metrics holds, never after a sleep.
"""

from __future__ import annotations

import os
import time
from typing import List

from _ds_helpers import wait_until
from rill.datastream.connectors import Boundedness, Source, SourceReader, SourceSplit

N_RECORDS = 1500
SINK_MS_PER_RECORD = 2
WAIT_S = 60.0


class _Split(SourceSplit):
    def split_id(self) -> str:
        return "paced"


class _ThenPauseReader(SourceReader):
    def __init__(self, n: int, gate_path: str):
        self.n, self.gate_path = n, gate_path

    def read(self, split):
        for start in range(0, self.n, 50):
            yield list(range(start, min(start + 50, self.n)))
        deadline = time.monotonic() + WAIT_S
        while not os.path.exists(self.gate_path) and time.monotonic() < deadline:
            time.sleep(0.002)
            yield []


class ThenPauseSource(Source):
    """Emits ``0 .. n-1`` as fast as it may, then pauses until ``gate_path`` exists."""

    def __init__(self, n: int, gate_path: str):
        self.n, self.gate_path = n, gate_path

    def get_boundedness(self) -> Boundedness:
        return Boundedness.BOUNDED

    def create_splits(self, parallelism: int) -> List[SourceSplit]:
        return [_Split()]

    def create_reader(self) -> SourceReader:
        return _ThenPauseReader(self.n, self.gate_path)


def _slow_sink(value) -> None:
    time.sleep(SINK_MS_PER_RECORD / 1000)


def _reading(client, task_prefix: str):
    for m in client.get_metrics():
        if m.task_name.startswith(task_prefix):
            return m
    return None


def _rates(before, after) -> dict:
    """ms per second of busy, idle and back-pressured time between two readings."""
    span = after.duration_ms - before.duration_ms
    assert span > 0, (before, after)
    return {name: 1000 * (getattr(after, f"{name}_time_ms") - getattr(before, f"{name}_time_ms")) / span
            for name in ("busy", "idle", "back_pressured")}


def test_slow_sink_back_pressures_the_source_then_idles_when_it_pauses(env, tmp_path):
    gate = str(tmp_path / "resume")
    env.disable_operator_chaining()
    # small buffers: a few dozen records in flight fill the source's buffers (backpressure)
    env.get_configuration().set_integer("taskmanager.network.records-per-buffer", 4)
    env.from_source(ThenPauseSource(N_RECORDS, gate), source_name="Paced").add_sink(_slow_sink)
    client = env.execute_async("slow sink")
    try:
        def sink_in(at_least):
            def ok():
                m = _reading(client, "Sink")
                return m is not None and m.num_records_in >= at_least
            return ok

        assert wait_until(sink_in(200), WAIT_S)
        source_1, sink_1 = _reading(client, "Source"), _reading(client, "Sink")
        assert wait_until(lambda: (s := _reading(client, "Sink")).duration_ms >= sink_1.duration_ms + 1000
                          and s.num_records_in < N_RECORDS - 100, WAIT_S), "the sink drained too fast"
        source_2, sink_2 = _reading(client, "Source"), _reading(client, "Sink")
        pressured, busy = _rates(source_1, source_2), _rates(sink_1, sink_2)
        assert pressured["back_pressured"] > 500, pressured  # most of each second
        assert busy["busy"] > 700, busy

        assert wait_until(sink_in(N_RECORDS), WAIT_S)  # drained: the source is paused
        sink_3 = _reading(client, "Sink")
        assert wait_until(lambda: _reading(client, "Sink").duration_ms >= sink_3.duration_ms + 1000, WAIT_S)
        idle = _rates(sink_3, _reading(client, "Sink"))
        assert idle["idle"] > 700, idle
        assert idle["busy"] < 300, idle
    finally:
        open(gate, "w").close()
    client.get_job_execution_result().result(timeout=WAIT_S)
