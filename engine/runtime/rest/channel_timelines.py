"""The channel timeline action's bodies (Rill; Flink has no such action):
``POST /jobs/:jobid/channel-timelines`` starts recording every task's per-channel credit,
backlog and buffer-pool timeline, ``DELETE /jobs/:jobid/channel-timelines`` stops it.

Request of the start (JSON object)::

    {"interval": 10, "target-directory": "/abs/dir", "duration": 5000}

- ``interval``: ms between two samples, an integer >= 1 (required);
- ``target-directory``: an absolute path (required: the tasks' processes and the REST
  endpoint's have different working directories); each task attempt writes
  ``<target-directory>/<job id>/<task>-attempt<n>.parquet``, the same file as the
  ``rill.network.timeline.*`` settings (:mod:`rill.runtime.taskmanager.channel_timeline`);
- ``duration``: ms after which each task ends its recording by itself (optional; without it
  the recording runs until stopped or until the task ends).

Answer of the start: 202 ``{"interval", "target-directory", "duration", "location"}`` with
``location`` the job's directory of files. Answer of the stop: 200 ``{"files": [...]}``, the
paths written (sorted), once every task wrote its file.
"""

from __future__ import annotations

import os
from typing import Dict, List

from rill.runtime.taskmanager.channel_timeline import ChannelTimelineSettings

__all__ = ["parse_start_request", "start_response", "stop_response"]


def _positive_ms(request: Dict, key: str) -> int:
    value = request.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{key} must be a whole number of ms >= 1, got {value!r}")
    return value


def parse_start_request(request: Dict) -> ChannelTimelineSettings:
    """The recording a start request asks for.

    :raises ValueError: naming the field and the rule broken: ``interval`` or ``duration`` not
        an integer >= 1, ``target-directory`` missing, not a string or not absolute, or an
        unknown field.
    """
    unknown = sorted(set(request) - {"interval", "target-directory", "duration"})
    if unknown:
        raise ValueError(f"Unknown field(s) {', '.join(unknown)}: a channel timeline request takes "
                         "interval, target-directory and duration")
    interval = _positive_ms(request, "interval")
    directory = request.get("target-directory")
    if not isinstance(directory, str) or not os.path.isabs(directory):
        raise ValueError(f"target-directory must be an absolute path, got {directory!r}")
    duration = None if request.get("duration") is None else _positive_ms(request, "duration")
    return ChannelTimelineSettings(interval, os.path.normpath(directory), duration)


def start_response(job_id: str, settings: ChannelTimelineSettings) -> Dict:
    """The start's 202 body."""
    return {"interval": settings.interval_ms, "target-directory": settings.directory,
            "duration": settings.duration_ms, "location": os.path.join(settings.directory, job_id)}


def stop_response(files: List[str]) -> Dict:
    """The stop's 200 body."""
    return {"files": sorted(files)}
