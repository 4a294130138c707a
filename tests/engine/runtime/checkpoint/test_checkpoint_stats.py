"""The checkpoint statistics records: counts, history and summaries as the coordinator reports
them (the coordinator's own reports are checked end to end in test_checkpointing.py)."""

from __future__ import annotations

from rill.runtime.checkpoint.checkpoint_options import CheckpointMetrics
from rill.runtime.checkpoint.checkpoint_stats import (
    CheckpointStatsCounts,
    CheckpointStatsStatus,
    CheckpointStatsTracker,
    StatsSummary,
)


def test_summary_quantiles_are_nearest_rank():
    s = StatsSummary.of([float(v) for v in range(100, 0, -1)])
    assert (s.count, s.minimum, s.maximum, s.average) == (100, 1.0, 100.0, 50.5)
    assert [s.get_quantile(q) for q in (0.5, 0.9, 0.95, 0.99, 0.999)] == [50.0, 90.0, 95.0, 99.0, 100.0]
    assert StatsSummary.of([7.0]).get_quantile(0.5) == 7.0
    assert StatsSummary.of([]) == StatsSummary() and StatsSummary().get_quantile(0.99) == 0.0


def test_tracker_counts_history_and_summaries():
    t = CheckpointStatsTracker(history_size=2)
    for cid in (1, 2, 3):
        t.report_pending_checkpoint(cid, 1000 * cid, 2)
    t.report_subtask_stats(1, "Map", 0, 1010, CheckpointMetrics(1.0, 2.0, 3.0, 0.5, 100))
    t.report_subtask_stats(1, "Map", 1, 1020, CheckpointMetrics(4.0, 5.0, 6.0, 0.5, 50))
    t.report_completed_checkpoint(1, 1025, "/c/chk-1")
    t.report_failed_checkpoint(3, 3050, "Checkpoint expired before completing.")
    t.report_subtask_stats(3, "Map", 0, 3060, CheckpointMetrics())  # after its end: dropped
    snap = t.create_snapshot()
    assert snap.counts == CheckpointStatsCounts(0, 3, 1, 1, 1)
    assert [(c.checkpoint_id, c.status) for c in snap.history] == [
        (3, CheckpointStatsStatus.FAILED), (2, CheckpointStatsStatus.IN_PROGRESS)]
    done = snap.latest_completed
    assert (done.checkpoint_id, done.number_of_acknowledged_subtasks, done.state_size_bytes,
            done.end_to_end_duration_ms, done.external_path) == (1, 2, 150, 25, "/c/chk-1")
    assert (done.sync_checkpoint_duration_ms, done.async_checkpoint_duration_ms, done.alignment_duration_ms) == (
        4.0, 5.0, 6.0)
    assert [s.end_to_end_duration_ms for s in done.subtask_stats] == [10, 20]
    assert snap.latest_failed.failure_message == "Checkpoint expired before completing."
    assert snap.latest_failed.end_to_end_duration_ms == 50
    summary = snap.summary
    assert summary.end_to_end_duration_ms == StatsSummary.of([25])
    assert summary.state_size_bytes == StatsSummary.of([150])
    assert summary.sync_checkpoint_duration_ms == StatsSummary.of([1.0, 4.0])
    assert summary.alignment_duration_ms.maximum == 6.0


def test_persisted_in_flight_data_and_the_unaligned_flag_per_checkpoint():
    t = CheckpointStatsTracker()
    for cid in (1, 2):
        t.report_pending_checkpoint(cid, 1000 * cid, 2)
    t.report_subtask_stats(1, "Map", 0, 1010, CheckpointMetrics(1.0, 2.0, 3.0, 0.5, 100, 700, True))
    t.report_subtask_stats(1, "Map", 1, 1020, CheckpointMetrics(1.0, 2.0, 3.0, 0.5, 100, 0, False))
    t.report_completed_checkpoint(1, 1025, None)
    t.report_subtask_stats(2, "Map", 0, 2010, CheckpointMetrics(1.0, 2.0, 3.0, 0.5, 100))
    t.report_subtask_stats(2, "Map", 1, 2020, CheckpointMetrics(1.0, 2.0, 3.0, 0.5, 100))
    t.report_completed_checkpoint(2, 2025, None)
    snap = t.create_snapshot()
    assert [(c.checkpoint_id, c.persisted_data_bytes, c.unaligned_checkpoint) for c in snap.history] == [
        (2, 0, False), (1, 700, True)]
    assert [(s.persisted_data_bytes, s.unaligned_checkpoint) for s in snap.history[1].subtask_stats] == [
        (700, True), (0, False)]
    assert snap.summary.persisted_data_bytes == StatsSummary.of([700, 0])
