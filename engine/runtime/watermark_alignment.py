"""Watermark alignment of sources (FLIP-182, FLIP-217): sources of one *watermark group* stop
reading while their watermark is more than the group's *max allowed drift* ahead of the slowest
source of the group, and resume when it catches up.

Two halves, as in Flink:

- :class:`WatermarkAlignmentGroups` is the JobMaster's side (Flink keeps a
  ``WatermarkAggregator`` per group in each ``SourceCoordinator`` and shares groups across
  coordinators through the ``CoordinatorStore``). Every source subtask of a group reports its
  current watermark; the answer is the group's minimum over every subtask that has reported.
  A subtask that is idle or has finished reports :data:`MAX_TIMESTAMP`, so it never holds the
  group back (Flink: ``Long.MAX_VALUE`` for idle splits); one without a watermark yet does not
  report.
- :class:`SourceWatermarkAlignment` is the source task's side (Flink's ``SourceOperator``
  with its ``ReportedWatermarkEvent`` and ``WatermarkAlignmentEvent``): every
  ``update_interval_ms`` a processing-time timer mail reports the subtask's current watermark
  and stores the answer as the largest watermark it may have, ``group minimum + drift``. While
  its watermark is above that, :meth:`SourceWatermarkAlignment.should_pause` is true and the
  task suspends its default action (no spinning, no reading); the next answer that allows it
  resumes the action. Timers and other mails keep running while it is paused, so the reports
  go on. The paused time counts as back-pressured time in the task's metrics, as Flink shows
  it.

Rill difference: the JobMaster registers every subtask of the group's sources from the
JobGraph before deployment, at :data:`MIN_TIMESTAMP` until its first report, and a subtask
starts with the ceiling ``MIN_TIMESTAMP + drift``. In Flink a subtask counts only from its
first report, so a source that starts early (or a small one) can read far ahead before the
others exist; here no source of the group runs more than the drift ahead of a subtask that has
not reported yet. The price: an unbounded source subtask that never produces a watermark
(nothing to read) holds its group until it goes idle, so give such sources ``with_idleness``.
Alignment acts on watermarks, so its grain is the generator's: a periodic generator lets a
source read for up to ``pipeline.auto-watermark-interval`` past its ceiling before its
watermark shows it.

Embedded mode answers a report at once, on the reporting task's thread; in cluster mode the
report is a ``ReportedWatermarkEvent`` message to the JobMaster's process and the answer comes
back as a mail. Rill difference: one watermark per source subtask (its generator covers all
its splits, as ``SourceOperator``'s docstring says), not one per split.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Dict, Hashable, Iterable, Optional

from rill.common.watermark_strategy import WatermarkAlignmentParams
from rill.common.streamrecord import MAX_TIMESTAMP, MIN_TIMESTAMP

__all__ = ["WatermarkAlignmentGroups", "SourceWatermarkAlignment"]


class WatermarkAlignmentGroups:
    """The watermark of every reporting source subtask, per group (one per job, in the
    JobMaster). Thread-safe: embedded source tasks call from their task threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watermarks: Dict[str, Dict[Hashable, int]] = {}

    def expect(self, group: str, participants: Iterable[Hashable]) -> None:
        """Register the subtasks that will report in ``group`` (the JobMaster, before
        deployment), each at :data:`MIN_TIMESTAMP` until its first report, so that no source
        of the group runs ahead while another has not started or has no watermark yet."""
        with self._lock:
            members = self._watermarks.setdefault(group, {})
            for p in participants:
                members.setdefault(p, MIN_TIMESTAMP)

    def report(self, group: str, participant: Hashable, watermark_ms: int) -> int:
        """Record ``participant``'s current watermark (ms; :data:`MAX_TIMESTAMP` when idle or
        finished) in ``group`` and return the group's minimum over every participant that has
        reported so far (this one included)."""
        with self._lock:
            members = self._watermarks.setdefault(group, {})
            members[participant] = watermark_ms
            return min(members.values())

    def group_minimum(self, group: str) -> Optional[int]:
        """The group's current minimum, or ``None`` before any report (for tests and metrics)."""
        with self._lock:
            members = self._watermarks.get(group)
            return min(members.values()) if members else None


class SourceWatermarkAlignment:
    """One source subtask's part in its watermark group (lives on the task thread).

    :param params: the strategy's ``WatermarkAlignmentParams``.
    :param current_watermark: ``() -> int``, the subtask's current watermark in ms
        (:data:`MAX_TIMESTAMP` when idle or finished).
    :param report: ``(group, watermark_ms, on_minimum) -> None``: sends the report; calls (or
        has the task thread call) ``on_minimum(group_minimum_ms)`` with the answer.
    :param resume: called on the task thread when a paused subtask may read again.
    """

    def __init__(self, params: WatermarkAlignmentParams, current_watermark: Callable[[], int],
                 report: Callable[[str, int, Callable[[int], None]], None], resume: Callable[[], None]):
        self.params = params
        self._current_watermark = current_watermark
        self._report = report
        self._resume = resume
        #: the largest watermark this subtask may have before it pauses (ms): until the first
        #: answer the group's minimum is taken as unknown (MIN_TIMESTAMP), as the JobMaster
        #: registered every subtask of the group at MIN_TIMESTAMP
        self.max_allowed_watermark = MIN_TIMESTAMP + params.max_allowed_watermark_drift_ms
        self.group_minimum: Optional[int] = None
        self._paused_since_ns: Optional[int] = None
        self._paused_ns = 0
        #: a report awaits its answer (cluster mode), and another was asked for meanwhile
        self._in_flight = False
        self._report_again = False

    def report_watermark(self, final: bool = False) -> None:
        """Report the current watermark (the timer's action; also at the end of input, with
        ``final``: sent at once whatever is in flight, since the task may end before an answer
        comes and must not hold its group back). A
        subtask without a watermark yet reports nothing, as Flink's ``SourceOperator`` skips
        ``Watermark.UNINITIALIZED``: it does not hold the group back before its first one.

        At most one report is in flight: one asked for before the previous answer came is sent
        when it comes, with the watermark of that moment. Rill difference: Flink sends one
        every interval; here the JobMaster is a process reached through actor messages, and
        when a round trip takes longer than the interval (5 ms in the tests, a loaded machine)
        unanswered reports would queue faster than either side handles them."""
        if self._in_flight and not final:
            self._report_again = True
            return
        watermark = self._current_watermark()
        if watermark != MIN_TIMESTAMP:
            self._in_flight = True
            self._report(self.params.watermark_group, watermark, self.on_group_minimum)

    def on_group_minimum(self, group_minimum_ms: int) -> None:
        """The group's answer: the new ceiling is ``minimum + drift`` (saturating); resumes a
        paused subtask that may read again; sends a report asked for while this one was in
        flight."""
        self._in_flight = False
        self._apply_group_minimum(group_minimum_ms)
        if self._report_again:
            self._report_again = False
            self.report_watermark()

    def _apply_group_minimum(self, group_minimum_ms: int) -> None:
        self.group_minimum = group_minimum_ms
        if group_minimum_ms >= MAX_TIMESTAMP - self.params.max_allowed_watermark_drift_ms:
            self.max_allowed_watermark = MAX_TIMESTAMP
        else:
            self.max_allowed_watermark = group_minimum_ms + self.params.max_allowed_watermark_drift_ms
        if self._paused_since_ns is not None and not self.should_pause():
            self._paused_ns += time.monotonic_ns() - self._paused_since_ns
            self._paused_since_ns = None
            self._resume()

    def should_pause(self) -> bool:
        """Whether the subtask's watermark is above its ceiling (it must not read)."""
        return self._current_watermark() > self.max_allowed_watermark

    def mark_paused(self) -> None:
        """The task suspended its default action because :meth:`should_pause` was true."""
        if self._paused_since_ns is None:
            self._paused_since_ns = time.monotonic_ns()

    def paused_ns(self) -> int:
        """Total time (ns) spent paused by alignment so far, the current pause included."""
        since = self._paused_since_ns
        return self._paused_ns + (0 if since is None else time.monotonic_ns() - since)

    def drift_ms(self) -> Optional[int]:
        """Current watermark minus the group's minimum (ms), or ``None`` before the first
        answer or while either is at an end of time (Flink's ``watermarkAlignmentDrift``)."""
        minimum, current = self.group_minimum, self._current_watermark()
        if minimum is None or minimum in (MIN_TIMESTAMP, MAX_TIMESTAMP) or current in (MIN_TIMESTAMP, MAX_TIMESTAMP):
            return None
        return current - minimum

