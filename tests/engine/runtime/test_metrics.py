"""Task metrics on the real runtime: records in/out counted exactly, and CPU time measured
per task thread (distinct from Flink's busy time, which includes waiting for the GIL)."""

import time

from rill.datastream import StreamExecutionEnvironment
from rill.runtime.metrics import backpressure_level


def _burn(x):
    end = time.thread_time() + 0.0005  # 0.5 ms of this thread's CPU per record
    while time.thread_time() < end:
        pass
    return x


def _nap(x):
    time.sleep(0.0005)  # 0.5 ms of wall time, almost no CPU
    return x


def _run(fn):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_sequence(1, 200).rebalance().map(fn).name("Work").add_sink(lambda v: None)
    result = env.execute("metrics")
    return {v.name: v for v in result.vertices}


def test_records_in_and_out_are_exact():
    vertices = _run(lambda x: x)
    assert vertices["Source: Sequence Source"].records_out == 200
    assert vertices["Work -> Sink: Unnamed"].records_in == 200
    assert vertices["Work -> Sink: Unnamed"].records_out == 0


def test_cpu_time_counts_the_task_threads_own_cpu():
    burning = _run(_burn)["Work -> Sink: Unnamed"]
    assert burning.cpu_time_ms >= 90  # 200 records x 0.5 ms of thread CPU
    assert burning.cpu_time_ms <= burning.duration_ms + 1


def test_sleeping_is_busy_by_flinks_definition_but_uses_no_cpu():
    napping = _run(_nap)["Work -> Sink: Unnamed"]
    assert napping.duration_ms >= 100  # 200 naps of 0.5 ms at least
    assert napping.busy_time_ms >= 0.5 * napping.duration_ms
    assert napping.cpu_time_ms < 0.25 * napping.busy_time_ms


def test_backpressure_levels_use_flinks_thresholds():
    assert [backpressure_level(ms) for ms in (0, 100, 101, 500, 501, 1000)] == [
        "OK", "OK", "LOW", "LOW", "HIGH", "HIGH"]


class _Clock:
    """A monotonic clock the test moves by hand (ns), read by the metrics module."""

    def __init__(self):
        self.ns = 10**12

    def __call__(self):
        return self.ns


def _started_metrics(monkeypatch):
    """``(clock, metrics, idle)``: a started task's metrics on a hand-moved clock, its idle
    time the ns in ``idle[0]``."""
    from rill.runtime import metrics as metrics_module
    from rill.runtime.metrics import TaskIOMetrics

    clock = _Clock()
    monkeypatch.setattr(metrics_module.time, "monotonic_ns", clock)
    m = TaskIOMetrics("Work", 0)
    idle = [0]
    m.idle_ns = lambda: idle[0]
    m.mark_start()
    return clock, m, idle


def test_per_second_values_of_a_running_task_average_over_the_last_second(monkeypatch):
    from rill.runtime.metrics import RATE_WINDOW_S

    clock, m, idle = _started_metrics(monkeypatch)
    # 10 s fully busy, read every 200 ms as the cluster does; then 2 s fully idle
    for _ in range(50):
        clock.ns += 200_000_000
        m.snapshot()
    assert m.snapshot().busy_time_ms_per_second == 1000.0
    for _ in range(10):
        clock.ns += 200_000_000
        idle[0] += 200_000_000
        s = m.snapshot()
    assert RATE_WINDOW_S == 1.0
    assert (s.idle_time_ms_per_second, s.busy_time_ms_per_second) == (1000.0, 0.0)  # the last second
    assert (s.idle_time_ms, s.busy_time_ms) == (2000.0, 10000.0)  # totals: the whole life
    m.mark_end()
    ended = m.snapshot()
    assert round(ended.idle_time_ms_per_second, 6) == round(1000 * 2 / 12, 6)  # an ended task: its life


def test_a_task_younger_than_the_window_averages_over_its_life(monkeypatch):
    clock, m, idle = _started_metrics(monkeypatch)
    clock.ns += 300_000_000
    idle[0] += 300_000_000
    m.snapshot()
    clock.ns += 300_000_000
    s = m.snapshot()
    assert (s.idle_time_ms_per_second, s.busy_time_ms_per_second) == (500.0, 500.0)
