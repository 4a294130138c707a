"""Flink's REST response bodies, built from :class:`JobSnapshot`\\ s.

Each function names the Flink handler and response class whose JSON it reproduces (field
names as in Flink 1.18's REST documentation). Where Rill adds a field it is marked "Rill".
"""

from __future__ import annotations

import time
from typing import Dict, Iterable, List

from rill.runtime.checkpoint.checkpoint_stats import StatsSummary
from rill.runtime.rest.backpressure import find_root_cause, subtask_level, subtask_ratios, vertex_level
from rill.runtime.rest.snapshot import JobSnapshot, SubtaskSnapshot, VertexSnapshot

__all__ = [
    "RILL_VERSION", "cluster_overview", "dashboard_config", "job_ids_with_status", "multiple_job_details",
    "job_details", "job_plan", "vertex_details", "vertex_backpressure", "vertex_watermarks",
    "job_exceptions", "taskmanagers_info", "savepoint_info", "checkpointing_statistics",
]

RILL_VERSION = "rill-0.1.0"
_EXECUTION_STATES = ("CREATED", "SCHEDULED", "DEPLOYING", "INITIALIZING", "RUNNING", "FINISHED",
                     "CANCELING", "CANCELED", "FAILED", "RECONCILING")


def _status_counts(subtasks: Iterable[SubtaskSnapshot]) -> Dict[str, int]:
    counts = dict.fromkeys(_EXECUTION_STATES, 0)
    for s in subtasks:
        counts[s.status] = counts.get(s.status, 0) + 1
    return counts


def _io_metrics(subtasks: List[SubtaskSnapshot], complete: bool) -> Dict[str, object]:
    """Flink's ``IOMetricsInfo`` over ``subtasks``: records and bytes in/out and the
    accumulated busy / idle / back-pressured times (ms), summed."""
    ms = [s.metrics for s in subtasks]
    return {
        "read-bytes": sum(m.num_bytes_in for m in ms), "read-bytes-complete": complete,
        "write-bytes": sum(m.num_bytes_out for m in ms), "write-bytes-complete": complete,
        "read-records": sum(m.num_records_in for m in ms), "read-records-complete": complete,
        "write-records": sum(m.num_records_out for m in ms), "write-records-complete": complete,
        "accumulated-backpressured-time": int(sum(m.back_pressured_time_ms for m in ms)),
        "accumulated-idle-time": int(sum(m.idle_time_ms for m in ms)),
        "accumulated-busy-time": float(sum(m.busy_time_ms for m in ms)),
    }


def _vertex_status(v: VertexSnapshot) -> str:
    states = {s.status for s in v.subtasks}
    for st in ("FAILED", "CANCELING", "CANCELED", "RUNNING", "INITIALIZING", "DEPLOYING", "SCHEDULED"):
        if st in states:
            return st
    return "FINISHED" if states == {"FINISHED"} else "CREATED"


def cluster_overview(jobs: List[JobSnapshot], taskmanagers: int, slots_total: int, slots_available: int) -> Dict:
    """``GET /overview``: ``ClusterOverviewHandler`` / ``ClusterOverviewWithVersion``."""
    by_state = [j.state for j in jobs]
    return {
        "taskmanagers": taskmanagers, "slots-total": slots_total, "slots-available": slots_available,
        "jobs-running": sum(not j.is_terminal for j in jobs),
        "jobs-finished": by_state.count("FINISHED"), "jobs-cancelled": by_state.count("CANCELED"),
        "jobs-failed": by_state.count("FAILED"), "flink-version": RILL_VERSION, "flink-commit": "",
    }


def dashboard_config(refresh_interval_ms: int) -> Dict:
    """``GET /config``: ``DashboardConfigHandler`` / ``DashboardConfiguration``."""
    offset_ms = -time.timezone * 1000 if not time.daylight else -time.altzone * 1000
    return {
        "refresh-interval": refresh_interval_ms, "timezone-name": time.tzname[0], "timezone-offset": offset_ms,
        "flink-version": RILL_VERSION, "flink-revision": "",
        "features": {"web-submit": False, "web-cancel": True, "web-rescale": False, "web-history": False},
    }


def job_ids_with_status(jobs: List[JobSnapshot]) -> Dict:
    """``GET /jobs``: ``JobIdsHandler`` / ``JobIdsWithStatusOverview``."""
    return {"jobs": [{"id": j.job_id, "status": j.state} for j in jobs]}


def _job_overview(j: JobSnapshot) -> Dict:
    subtasks = [s for v in j.vertices for s in v.subtasks]
    tasks = {k.lower(): n for k, n in _status_counts(subtasks).items()}
    tasks["total"] = len(subtasks)
    return {"jid": j.job_id, "name": j.name, "state": j.state, "start-time": j.start_time_ms,
            "end-time": j.end_time_ms, "duration": j.duration_ms, "last-modification": j.now_ms, "tasks": tasks}


def multiple_job_details(jobs: List[JobSnapshot]) -> Dict:
    """``GET /jobs/overview``: ``JobsOverviewHandler`` / ``MultipleJobsDetails``."""
    return {"jobs": [_job_overview(j) for j in jobs]}


def job_details(j: JobSnapshot) -> Dict:
    """``GET /jobs/:jobid``: ``JobDetailsHandler`` / ``JobDetailsInfo``.

    Rill adds ``"backpressure-root-cause"``: :meth:`RootCause.as_json` or null.
    """
    vertices = []
    for v in j.vertices:
        starts = [s.metrics.duration_ms for s in v.subtasks]
        vertices.append({
            "id": v.id, "name": v.name, "maxParallelism": v.max_parallelism, "parallelism": v.parallelism,
            "status": _vertex_status(v), "start-time": j.start_time_ms,
            "end-time": j.end_time_ms if j.is_terminal else -1,
            "duration": int(max(starts, default=0)), "tasks": _status_counts(v.subtasks),
            "metrics": _io_metrics(v.subtasks, j.is_terminal),
        })
    cause = find_root_cause(j)
    return {
        "jid": j.job_id, "name": j.name, "isStoppable": False, "state": j.state, "job-type": "STREAMING",
        "start-time": j.start_time_ms, "end-time": j.end_time_ms, "duration": j.duration_ms,
        "maxParallelism": j.max_parallelism, "now": j.now_ms, "timestamps": dict(j.timestamps),
        "vertices": vertices, "status-counts": _status_counts(s for v in j.vertices for s in v.subtasks),
        "plan": j.plan, "backpressure-root-cause": cause.as_json() if cause else None,
    }


def job_plan(j: JobSnapshot) -> Dict:
    """``GET /jobs/:jobid/plan``: ``JobPlanHandler`` / ``JobPlanInfo``."""
    return {"plan": j.plan}


def vertex_details(j: JobSnapshot, v: VertexSnapshot) -> Dict:
    """``GET /jobs/:jobid/vertices/:vertexid``: ``JobVertexDetailsHandler`` /
    ``JobVertexDetailsInfo`` with one ``SubtaskExecutionAttemptDetailsInfo`` per subtask."""
    subtasks = []
    for s in v.subtasks:
        done = s.status in ("FINISHED", "CANCELED", "FAILED")
        subtasks.append({
            "subtask": s.subtask, "status": s.status, "attempt": 0, "endpoint": s.host,
            "start-time": j.start_time_ms, "end-time": j.end_time_ms if done else -1,
            "duration": int(s.metrics.duration_ms), "metrics": _io_metrics([s], done),
            "taskmanager-id": s.taskmanager_id, "status-duration": {},
        })
    return {"id": v.id, "name": v.name, "parallelism": v.parallelism, "maxParallelism": v.max_parallelism,
            "now": j.now_ms, "subtasks": subtasks}


def vertex_backpressure(j: JobSnapshot, v: VertexSnapshot) -> Dict:
    """``GET /jobs/:jobid/vertices/:vertexid/backpressure``: ``JobVertexBackPressureHandler`` /
    ``JobVertexBackPressureInfo`` (Flink >= 1.13's metric-based shape: ``status`` is ``"ok"``
    once metrics exist)."""
    subtasks = [{"subtask": s.subtask, "attempt-number": 0, "backpressure-level": subtask_level(s),
                 **subtask_ratios(s)} for s in v.subtasks]
    return {"status": "ok", "backpressure-level": vertex_level(v), "end-timestamp": j.now_ms, "subtasks": subtasks}


def vertex_watermarks(v: VertexSnapshot) -> List[Dict]:
    """``GET /jobs/:jobid/vertices/:vertexid/watermarks``: ``JobVertexWatermarksHandler``, a
    metric collection ``[{"id": "<subtask>.currentInputWatermark", "value": "<epoch ms>"}]``;
    source subtasks (no input) are left out."""
    return [{"id": f"{s.subtask}.currentInputWatermark", "value": str(s.metrics.current_input_watermark)}
            for s in v.subtasks if s.metrics.current_input_watermark is not None]


def job_exceptions(j: JobSnapshot) -> Dict:
    """``GET /jobs/:jobid/exceptions``: ``JobExceptionsHandler`` / ``JobExceptionsInfoWithHistory``
    (one history entry per failure the job restarted after or failed with, newest first; the
    newest is the root exception)."""
    entries = [{"exceptionName": e.exception_name, "stacktrace": e.stacktrace, "timestamp": e.timestamp_ms,
                "taskName": e.task_name, "endpoint": "127.0.0.1", "taskManagerId": e.taskmanager_id,
                "failureLabels": {}, "concurrentExceptions": []} for e in j.exceptions]
    first = j.exceptions[0] if j.exceptions else None
    return {
        "root-exception": first.stacktrace if first else None,
        "timestamp": first.timestamp_ms if first else None,
        "all-exceptions": [{"exception": e.stacktrace, "task": e.task_name, "location": "127.0.0.1",
                            "timestamp": e.timestamp_ms, "taskManagerId": e.taskmanager_id} for e in j.exceptions],
        "truncated": False,
        "exceptionHistory": {"entries": entries, "truncated": False},
    }


def taskmanagers_info(taskmanagers: List[Dict]) -> Dict:
    """``GET /taskmanagers``: ``TaskManagersHandler`` / ``TaskManagersInfo``. Each entry is
    given as ``{"id", "slotsNumber", "freeSlots", "host"}``; the rest of Flink's fields are
    filled in (resources and hardware as zeros: Rill does not measure them)."""
    zero = {"cpuCores": 0.0, "taskHeapMemory": 0, "taskOffHeapMemory": 0, "managedMemory": 0, "networkMemory": 0}
    out = []
    for tm in taskmanagers:
        out.append({
            "id": tm["id"], "path": f"rill://{tm.get('host', '127.0.0.1')}/{tm['id']}", "dataPort": tm.get("dataPort", -1),
            "jmxPort": -1, "timeSinceLastHeartbeat": tm.get("timeSinceLastHeartbeat", 0),
            "slotsNumber": tm["slotsNumber"], "freeSlots": tm["freeSlots"],
            "totalResource": dict(zero), "freeResource": dict(zero),
            "hardware": {"cpuCores": tm.get("cpuCores", 0), "physicalMemory": 0, "freeMemory": 0, "managedMemory": 0},
        })
    return {"taskmanagers": out}


def savepoint_info(status) -> Dict:
    """``GET /jobs/:jobid/savepoints/:triggerid`` (Flink's ``SavepointStatusHandler``,
    ``AsynchronousOperationResult<SavepointInfo>``): ``{"status": {"id": "IN_PROGRESS" |
    "COMPLETED"}, "operation": {"location": ...} | {"failure-cause": {"class", "stack-trace"}}}``;
    no ``operation`` while in progress.

    :param status: a :class:`~rill.runtime.jobmaster.savepoints.SavepointStatus`.
    """
    body: Dict = {"status": {"id": status.status}}
    if status.status == "COMPLETED":
        if status.failure_cause is not None:
            cls, _, message = status.failure_cause.partition(": ")
            body["operation"] = {"failure-cause": {"class": cls, "stack-trace": status.failure_cause,
                                                   "serialized-throwable": None}}
        else:
            body["operation"] = {"location": status.location}
    return body


def _summary(stats) -> Dict:
    """Flink's ``StatsSummaryDto``: ``min``, ``max``, ``avg`` and the quantiles (ints, as Flink's)."""
    q = dict(stats.quantiles)
    return {"min": int(stats.minimum), "max": int(stats.maximum), "avg": int(stats.average),
            "p50": q[0.5], "p90": q[0.9], "p95": q[0.95], "p99": q[0.99], "p999": q[0.999]}


def _checkpoint_statistics(c) -> Dict:
    """One entry of ``history`` / ``latest`` (Flink's ``CheckpointStatistics`` and its subclasses:
    ``CompletedCheckpointStatistics`` adds ``external_path`` and ``discarded``,
    ``FailedCheckpointStatistics`` adds ``failure_timestamp`` (epoch ms) and ``failure_message``,
    ``PendingCheckpointStatistics`` nothing). A savepoint has ``is_savepoint`` true, Flink's
    ``savepointFormat`` ``"CANONICAL"`` (Rill writes one format, its Parquet layout, for both) and
    ``checkpoint_type`` ``SAVEPOINT`` (``SYNC_SAVEPOINT`` for stop-with-savepoint's); ``tasks``
    is empty (no per-vertex details endpoint yet)."""
    status = c.status.name
    if c.is_savepoint:  # Flink's CheckpointStatistics.RestAPICheckpointType
        checkpoint_type = "SYNC_SAVEPOINT" if c.is_synchronous else "SAVEPOINT"
    else:
        checkpoint_type = "UNALIGNED_CHECKPOINT" if c.unaligned_checkpoint else "CHECKPOINT"
    body = {"className": {"COMPLETED": ".CompletedCheckpointStatistics", "FAILED": ".FailedCheckpointStatistics"}
            .get(status, ".PendingCheckpointStatistics"),
            "id": c.checkpoint_id, "status": status, "is_savepoint": c.is_savepoint,
            "savepointFormat": "CANONICAL" if c.is_savepoint else None,
            "trigger_timestamp": c.trigger_timestamp, "latest_ack_timestamp": c.latest_ack_timestamp,
            "checkpointed_size": c.state_size_bytes, "state_size": c.state_size_bytes,
            "end_to_end_duration": c.end_to_end_duration_ms, "alignment_buffered": 0, "processed_data": 0,
            "persisted_data": c.persisted_data_bytes, "num_subtasks": c.number_of_subtasks,
            "num_acknowledged_subtasks": c.number_of_acknowledged_subtasks,
            "checkpoint_type": checkpoint_type,
            "tasks": {}}
    if status == "COMPLETED":
        body.update({"external_path": c.external_path, "discarded": False})
    elif status == "FAILED":
        # the tracker ends a failed checkpoint's end-to-end duration at its failure
        body.update({"failure_timestamp": c.trigger_timestamp + c.end_to_end_duration_ms,
                     "failure_message": c.failure_message})
    return body


def checkpointing_statistics(snapshot) -> Dict:
    """``GET /jobs/:jobid/checkpoints`` (Flink's ``CheckpointingStatisticsHandler``,
    ``CheckpointingStatistics``): ``counts``, ``summary`` over completed checkpoints, ``latest``
    and ``history`` (newest first), from a ``CheckpointStatsSnapshot``."""
    counts = snapshot.counts
    summary = snapshot.summary
    return {
        "counts": {"restored": counts.number_of_restored_checkpoints, "total": counts.number_of_total_checkpoints,
                   "in_progress": counts.number_of_in_progress_checkpoints,
                   "completed": counts.number_of_completed_checkpoints, "failed": counts.number_of_failed_checkpoints},
        "summary": {"checkpointed_size": _summary(summary.state_size_bytes),
                    "state_size": _summary(summary.state_size_bytes),
                    "end_to_end_duration": _summary(summary.end_to_end_duration_ms),
                    # bytes Rill does not measure: all zero
                    "alignment_buffered": _summary(StatsSummary()),
                    "processed_data": _summary(StatsSummary()),
                    "persisted_data": _summary(summary.persisted_data_bytes)},
        "latest": {"completed": (None if snapshot.latest_completed is None
                                 else _checkpoint_statistics(snapshot.latest_completed)),
                   "savepoint": (None if snapshot.latest_savepoint is None
                                 else _checkpoint_statistics(snapshot.latest_savepoint)),
                   "failed": None if snapshot.latest_failed is None else _checkpoint_statistics(snapshot.latest_failed),
                   "restored": None},
        "history": [_checkpoint_statistics(c) for c in snapshot.history],
    }
