"""Where the time of one failover goes, read from what the job leaves behind: the task state
changes every task logs in Flink's words (``Map (1/2)#0 (<attempt id>) switched from RUNNING
to CANCELING. [job <id>]``; the cluster's log file, or the ``rill.runtime.taskmanager.task``
logger in the embedded mode) and the sink's part files appearing on disk.

Part of ``bench/recovery.py``; no engine code is changed or mocked to measure.
"""

from __future__ import annotations

import datetime
import logging
import os
import re
import threading
import time
from dataclasses import dataclass
from typing import Dict, List, Optional

__all__ = ["StateChange", "parse_cluster_log", "TaskLogCapture", "DirectoryWatch", "Phases", "phases"]

_CHANGE = re.compile(r"(?P<task>.+)#(?P<attempt>\d+) \((?P<attempt_id>[0-9a-f]+)\) switched from "
                     r"(?P<old>[A-Z]+) to (?P<new>[A-Z]+)\. \[job (?P<job>[0-9a-f]+)\]")
_LOG_LINE = re.compile(r"(?P<date>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(?P<ms>\d{3}) (?P<pid>\d+) \w+ "
                       r"rill\.runtime\.taskmanager\.task (?P<message>.*)")
_TERMINAL = ("FINISHED", "CANCELED", "FAILED")


@dataclass(frozen=True)
class StateChange:
    """One logged task state change. :ivar time_s: wall clock, epoch seconds (ms precision)."""

    time_s: float
    pid: int
    task: str
    attempt: int
    old: str
    new: str
    job_id: str


def _change(time_s: float, pid: int, message: str) -> Optional[StateChange]:
    m = _CHANGE.match(message)
    if m is None:
        return None
    return StateChange(time_s, pid, m["task"], int(m["attempt"]), m["old"], m["new"], m["job"])


def parse_cluster_log(path: str, job_id: str) -> List[StateChange]:
    """The state changes of job ``job_id`` in the cluster log at ``path`` (``asctime`` is the
    local time of the machine, as ``logging`` writes it)."""
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            m = _LOG_LINE.match(line.rstrip("\n"))
            if m is None:
                continue
            local = datetime.datetime.strptime(m["date"], "%Y-%m-%d %H:%M:%S")
            change = _change(time.mktime(local.timetuple()) + int(m["ms"]) / 1000.0, int(m["pid"]), m["message"])
            if change is not None and change.job_id == job_id:
                out.append(change)
    return sorted(out, key=lambda c: c.time_s)


class TaskLogCapture(logging.Handler):
    """Collects the embedded tasks' state changes from the ``rill.runtime.taskmanager.task``
    logger while installed (``with TaskLogCapture() as capture:``)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.changes: List[StateChange] = []
        self._logger = logging.getLogger("rill.runtime.taskmanager.task")
        self._level = self._logger.level

    def emit(self, record: logging.LogRecord) -> None:
        change = _change(record.created, record.process or 0, record.getMessage())
        if change is not None:
            self.changes.append(change)

    def of_job(self, job_id: str) -> List[StateChange]:
        return sorted((c for c in list(self.changes) if c.job_id == job_id), key=lambda c: c.time_s)

    def __enter__(self) -> "TaskLogCapture":
        self._logger.addHandler(self)
        self._logger.setLevel(logging.INFO)
        return self

    def __exit__(self, *exc) -> None:
        self._logger.removeHandler(self)
        self._logger.setLevel(self._level)


class DirectoryWatch:
    """Notes when each file first appears in ``directory`` (polled every ``interval_s`` on a
    thread of its own; the FileSink creates a part's in-progress file when its first batch of
    records arrives)."""

    def __init__(self, directory: str, interval_s: float = 0.002) -> None:
        self.directory = directory
        self.interval_s = interval_s
        self.first_seen: Dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rill-bench-directory-watch", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                names = os.listdir(self.directory)
            except FileNotFoundError:
                names = []
            now = time.time()
            for name in names:
                self.first_seen.setdefault(name, now)
            self._stop.wait(self.interval_s)

    def start(self) -> "DirectoryWatch":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def first_after(self, time_s: float) -> Optional[float]:
        """When the first file that was not there before ``time_s`` appeared, or ``None``."""
        later = [t for t in self.first_seen.values() if t > time_s]
        return min(later) if later else None


@dataclass(frozen=True)
class Phases:
    """One failover, seconds from the failure (``failure_s``, epoch s) on.

    :ivar detected_s: the first task of the failed attempt told to cancel (the JobMaster
        handled the failure and restarts).
    :ivar old_attempt_gone_s: the last task of the failed attempt terminal.
    :ivar redeploying_s: the first task of the new attempt DEPLOYING (after the restart
        strategy's backoff and, on a cluster, new task processes).
    :ivar all_running_s: every task of the new attempt RUNNING.
    :ivar flowing_s: the restarted attempt's watched task has records in (its
        ``numRecordsIn`` above 0, as the job's metrics report it); Rill restores state after
        RUNNING, so restore is in the phase that ends here.
    :ivar first_record_s: the first part file the new attempt's hourly sink created (its first
        records: event-time windows, so this waits for the watermark too).
    """

    failure_s: float
    detected_s: float
    old_attempt_gone_s: float
    redeploying_s: float
    all_running_s: float
    flowing_s: float
    first_record_s: float

    @property
    def total_s(self) -> float:
        """Records flowing again: records in at the restarted task or out at the sink, whichever
        came first (restored windows fire on the first watermark, before any record)."""
        return min(self.flowing_s, self.first_record_s)

    def rows(self) -> List[tuple]:
        """``(phase, seconds)`` per phase, then the totals."""
        marks = [("failure detected (JobMaster cancels the attempt)", self.detected_s),
                 ("old attempt cancelled", self.old_attempt_gone_s),
                 ("restart backoff + new task processes", self.redeploying_s),
                 ("deployment (DEPLOYING -> every task RUNNING)", self.all_running_s),
                 ("restore + first records in at the restarted task", self.flowing_s)]
        out, last = [], 0.0
        for name, at in marks:
            out.append((name, at - last))
            last = at
        out.append(("failure -> first window result at the hourly sink", self.first_record_s))
        out.append(("TOTAL: failure -> records flowing again (first of the two)", self.total_s))
        return out


def phases(changes: List[StateChange], failure_s: float, failed_attempt: int, sink_files: DirectoryWatch,
           flowing_at_s: float) -> Phases:
    """The phases of the failover from attempt ``failed_attempt`` to the next one;
    ``flowing_at_s``: when the new attempt's watched task had records in (epoch s).

    :raises ValueError: if the log or the sink directory lack a phase (the job did not restart).
    """
    old = [c for c in changes if c.attempt == failed_attempt]
    new = [c for c in changes if c.attempt == failed_attempt + 1]
    cancelling = [c.time_s for c in old if c.new == "CANCELING" and c.time_s >= failure_s - 0.001]
    gone = [c.time_s for c in old if c.new in _TERMINAL]
    deploying = [c.time_s for c in new if c.new == "DEPLOYING"]
    running = {c.task: c.time_s for c in new if c.new == "RUNNING"}
    if not (cancelling and gone and deploying and running):
        raise ValueError(f"attempt {failed_attempt} -> {failed_attempt + 1}: missing state changes "
                         f"(cancelling {len(cancelling)}, terminal {len(gone)}, deploying {len(deploying)}, "
                         f"running {len(running)})")
    first_record = sink_files.first_after(min(deploying))
    if first_record is None:
        raise ValueError("the new attempt's sink created no part file")
    return Phases(failure_s, min(cancelling) - failure_s, max(gone) - failure_s, min(deploying) - failure_s,
                  max(running.values()) - failure_s, max(flowing_at_s, max(running.values())) - failure_s,
                  first_record - failure_s)
