"""Channel timelines recorded on demand: one recording per running job, started and stopped
for all its tasks at once (the REST API's ``POST`` / ``DELETE /jobs/:jobid/channel-timelines``;
Rill, no Flink counterpart).

Each task writes the same Parquet file as with ``rill.network.timeline.interval``
(:mod:`rill.runtime.taskmanager.channel_timeline`). While a recording runs, tasks deployed by a
restart record from their start; the tasks of the failed attempt wrote their files when they
ended. Tasks are embedded ``Task``\\ s (stopping returns the file's path) or the cluster's
``RemoteTask`` handles (stopping returns a future of it).
"""

from __future__ import annotations

import concurrent.futures
import threading
from typing import List, Optional

from rill.graph.states import JobStatus
from rill.runtime.taskmanager.channel_timeline import (
    ChannelTimelineOptions,
    ChannelTimelineSettings,
    ChannelTimelineStateError,
)

__all__ = ["start_channel_timelines", "stop_channel_timelines"]


def start_channel_timelines(job_master, settings: ChannelTimelineSettings) -> None:
    """Start recording every task of ``job_master``'s job with ``settings``.

    :raises ChannelTimelineStateError: when the job is not RUNNING, a recording runs already,
        or ``rill.network.timeline.interval`` makes every task record from its start.
    """
    with job_master._lock:
        what = f"job '{job_master.job_name}' ({job_master.job_id})"
        if job_master.status is not JobStatus.RUNNING:
            raise ChannelTimelineStateError(f"Cannot record channel timelines of {what}: it is "
                                            f"{job_master.status.name}, not RUNNING")
        if ChannelTimelineSettings.from_configuration(job_master.config) is not None:
            raise ChannelTimelineStateError(
                f"Channel timelines of {what} are recorded already: {ChannelTimelineOptions.INTERVAL.key} is set")
        current = job_master.channel_timeline
        if current is not None:
            raise ChannelTimelineStateError(
                f"Channel timelines of {what} are recorded already (every {current.interval_ms} ms into "
                f"{current.directory}): stop that recording first")
        job_master.channel_timeline = settings
        tasks = list(job_master.tasks)
    for task in tasks:
        task.start_channel_timeline(settings)


def stop_channel_timelines(job_master) -> "concurrent.futures.Future[List[str]]":
    """Stop the job's recording; a future of the files written (sorted paths), done once every
    task wrote its file (tasks that recorded nothing, e.g. finished before, have none).

    :raises ChannelTimelineStateError: when no recording was started.
    """
    with job_master._lock:
        if job_master.channel_timeline is None:
            raise ChannelTimelineStateError(f"No channel timeline of job '{job_master.job_name}' "
                                            f"({job_master.job_id}) is being recorded")
        job_master.channel_timeline = None
        tasks = list(job_master.tasks)
    result: "concurrent.futures.Future[List[str]]" = concurrent.futures.Future()
    parts = []
    for task in tasks:
        try:
            part = task.stop_channel_timeline()
        except OSError as e:
            part = concurrent.futures.Future()
            part.set_exception(e)
        parts.append(part if isinstance(part, concurrent.futures.Future) else _done(part))
    _gather(parts, result)
    return result


def _done(value: Optional[str]) -> "concurrent.futures.Future[Optional[str]]":
    f: "concurrent.futures.Future[Optional[str]]" = concurrent.futures.Future()
    f.set_result(value)
    return f


def _gather(parts: List[concurrent.futures.Future], result: concurrent.futures.Future) -> None:
    """Complete ``result`` with the sorted non-None results of ``parts`` once all are done,
    or with the first failure (callbacks: a cluster's futures complete on the actor's thread)."""
    remaining = [len(parts)]
    lock = threading.Lock()

    def on_done(_f) -> None:
        with lock:
            remaining[0] -= 1
            if remaining[0]:
                return
        errors = [f.exception() for f in parts if f.exception() is not None]
        if errors:
            result.set_exception(errors[0])
        else:
            result.set_result(sorted(p.result() for p in parts if p.result() is not None))

    if not parts:
        result.set_result([])
    for part in parts:
        part.add_done_callback(on_done)
