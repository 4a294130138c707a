"""The two halves of watermark alignment without a job: the JobMaster's groups (minimum over the
registered and reporting subtasks) and a source subtask's ceiling, pause and resume."""

from __future__ import annotations

from rill.common.watermark_strategy import WatermarkAlignmentParams
from rill.common.streamrecord import MAX_TIMESTAMP, MIN_TIMESTAMP
from rill.runtime.watermark_alignment import SourceWatermarkAlignment, WatermarkAlignmentGroups


def test_the_group_minimum_covers_every_registered_subtask():
    groups = WatermarkAlignmentGroups()
    assert groups.group_minimum("g") is None
    groups.expect("g", [(1, 0), (1, 1), (2, 0)])
    assert groups.report("g", (1, 0), 5_000) == MIN_TIMESTAMP  # the others have not reported
    assert groups.report("g", (1, 1), 7_000) == MIN_TIMESTAMP
    assert groups.report("g", (2, 0), 6_000) == 5_000
    assert groups.report("g", (1, 0), MAX_TIMESTAMP) == 6_000  # finished: no longer holds it back
    assert groups.report("other", (3, 0), 1) == 1              # groups are independent
    assert groups.group_minimum("g") == 6_000


class _Subtask:
    """A source subtask's watermark and the group's answers, driven by hand."""

    def __init__(self, groups, participant, params):
        self.watermark = MIN_TIMESTAMP
        self.resumed = 0
        self.alignment = SourceWatermarkAlignment(
            params, lambda: self.watermark,
            lambda group, wm, on_minimum: on_minimum(groups.report(group, participant, wm)),
            self._resume)

    def _resume(self):
        self.resumed += 1


def test_a_subtask_pauses_above_minimum_plus_drift_and_resumes_when_the_group_catches_up():
    groups = WatermarkAlignmentGroups()
    groups.expect("g", [("fast", 0), ("slow", 0)])
    params = WatermarkAlignmentParams("g", 1_000, 10)
    fast, slow = _Subtask(groups, ("fast", 0), params), _Subtask(groups, ("slow", 0), params)
    # before any answer the ceiling is MIN + drift: nothing with a watermark reads ahead
    assert not fast.alignment.should_pause()
    fast.watermark = 0
    assert fast.alignment.should_pause()
    fast.alignment.report_watermark()
    assert fast.alignment.max_allowed_watermark == MIN_TIMESTAMP + 1_000  # slow has not reported
    slow.alignment.report_watermark()  # no watermark yet: reports nothing
    assert groups.group_minimum("g") == MIN_TIMESTAMP
    slow.watermark = 500
    slow.alignment.report_watermark()
    assert slow.alignment.max_allowed_watermark == 1_000 and not slow.alignment.should_pause()
    fast.watermark = 2_000
    fast.alignment.report_watermark()
    assert fast.alignment.max_allowed_watermark == 1_500 and fast.alignment.should_pause()
    fast.alignment.mark_paused()
    assert fast.resumed == 0 and fast.alignment.drift_ms() == 1_500  # 2000 - 500
    slow.watermark = 999
    slow.alignment.report_watermark()
    fast.alignment.report_watermark()  # 999 + 1000 < 2000: still paused
    assert fast.resumed == 0 and fast.alignment.paused_ns() > 0
    slow.watermark = 1_000
    slow.alignment.report_watermark()
    fast.alignment.report_watermark()
    assert fast.resumed == 1 and not fast.alignment.should_pause()
    paused = fast.alignment.paused_ns()
    assert fast.alignment.paused_ns() == paused  # the pause ended: the clock stopped


def test_the_ceiling_saturates_when_the_group_has_ended():
    groups = WatermarkAlignmentGroups()
    a = _Subtask(groups, ("a", 0), WatermarkAlignmentParams("g", 60_000, 10))
    a.watermark = MAX_TIMESTAMP  # ended (or idle)
    a.alignment.report_watermark()
    assert a.alignment.max_allowed_watermark == MAX_TIMESTAMP
    assert not a.alignment.should_pause()
    assert a.alignment.drift_ms() is None


def test_one_report_is_in_flight_and_the_latest_watermark_follows_its_answer():
    """Cluster mode: the answer comes back later as a mail. Reports asked for meanwhile are not
    queued one per interval; one follows the answer, with the watermark of that moment."""
    groups = WatermarkAlignmentGroups()
    groups.expect("g", [("a", 0), ("b", 0)])
    sent = []  # (watermark, on_minimum) of every report sent, unanswered until the test answers
    watermark = [1_000]
    alignment = SourceWatermarkAlignment(WatermarkAlignmentParams("g", 500, 5), lambda: watermark[0],
                                         lambda group, wm, on_minimum: sent.append((wm, on_minimum)),
                                         lambda: None)
    alignment.report_watermark()
    watermark[0] = 2_000
    alignment.report_watermark()
    watermark[0] = 3_000
    alignment.report_watermark()
    assert [wm for wm, _ in sent] == [1_000]
    sent[0][1](groups.report("g", ("a", 0), 1_000))  # the first answer: the latest watermark goes out
    assert [wm for wm, _ in sent] == [1_000, 3_000]
    assert alignment.max_allowed_watermark == MIN_TIMESTAMP + 500  # b has not reported
    sent[1][1](groups.report("g", ("b", 0), 2_500))
    assert len(sent) == 2 and alignment.max_allowed_watermark == 1_000 + 500  # a at 1,000, b at 2,500
    alignment.report_watermark()  # nothing in flight: sent at once
    assert [wm for wm, _ in sent] == [1_000, 3_000, 3_000]
    watermark[0] = MAX_TIMESTAMP  # end of input: sent at once, even with a report in flight
    alignment.report_watermark(final=True)
    assert [wm for wm, _ in sent] == [1_000, 3_000, 3_000, MAX_TIMESTAMP]
