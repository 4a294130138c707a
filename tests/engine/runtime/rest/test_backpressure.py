"""The root cause on synthetic snapshots: chains, the seed's slow subtask B.4, evenly slow
vertices, no backpressure at all."""

from __future__ import annotations

from rill.runtime.metrics import TaskMetricsSnapshot
from rill.runtime.rest.backpressure import find_root_cause, vertex_level
from rill.runtime.rest.snapshot import JobSnapshot, SubtaskSnapshot, VertexSnapshot


def _sub(i, busy, idle, bp):
    m = TaskMetricsSnapshot("t", i, 0, 0, 0, 0, 0, 0, 1000.0, busy, idle, bp, busy, idle, bp, 0.0, 0.0, 0.0, 0.0, 0)
    return SubtaskSnapshot(i, "RUNNING", m, "tm")


def _vertex(vid, name, inputs, subs):
    return VertexSnapshot(vid * 32, name, len(subs), 128, [i * 32 for i in inputs], subs)


def _job(*vertices):
    return JobSnapshot("j" * 32, "job", "RUNNING", 0, -1, 1000, 128, {}, list(vertices))


def test_chain_names_the_first_busy_vertex_below_the_back_pressured_ones():
    job = _job(_vertex("a", "A", [], [_sub(0, 100, 0, 900)]),
               _vertex("b", "B", ["a"], [_sub(0, 150, 0, 850)]),
               _vertex("c", "C", ["b"], [_sub(0, 950, 50, 0)]),
               _vertex("d", "D", ["c"], [_sub(0, 10, 990, 0)]))
    cause = find_root_cause(job)
    assert (cause.vertex_name, cause.subtask, cause.back_pressured) == ("C", None, ["A", "B"])
    assert cause.describe() == "C is busy 0.95 and back-pressures: A, B"


def test_the_seeds_slow_subtask_b4_is_named():
    a = _vertex("a", "A", [], [_sub(i, 100, 0, 900) for i in range(5)])
    b = _vertex("b", "B", ["a"], [_sub(i, 50, 950, 0) for i in range(4)] + [_sub(4, 990, 10, 0)])
    cause = find_root_cause(_job(a, b))
    assert (cause.vertex_id, cause.subtask, cause.busy_ratio) == ("b" * 32, 4, 0.99)
    assert cause.as_json() == {"vertex-id": "b" * 32, "vertex-name": "B", "subtask": 4, "busyRatio": 0.99,
                               "back-pressured-vertices": ["A"]}
    assert vertex_level(a) == "high" and vertex_level(b) == "ok"


def test_evenly_slow_subtasks_name_the_vertex_only():
    a = _vertex("a", "A", [], [_sub(0, 300, 0, 700)])
    b = _vertex("b", "B", ["a"], [_sub(0, 900, 100, 0), _sub(1, 800, 200, 0)])
    assert find_root_cause(_job(a, b)).subtask is None


def test_no_backpressure_no_cause_and_low_counts_as_pressured():
    a = _vertex("a", "A", [], [_sub(0, 900, 0, 100)])
    b = _vertex("b", "B", ["a"], [_sub(0, 1000, 0, 0)])
    assert find_root_cause(_job(a, b)) is None  # 0.10 is still "ok"
    a_low = _vertex("a", "A", [], [_sub(0, 700, 0, 300)])
    assert vertex_level(a_low) == "low" and find_root_cause(_job(a_low, b)).vertex_name == "B"


def test_idle_consumer_is_not_a_cause():
    a = _vertex("a", "A", [], [_sub(0, 100, 0, 900)])
    b = _vertex("b", "B", ["a"], [_sub(0, 100, 900, 0)])
    assert find_root_cause(_job(a, b)) is None
