"""Windows and window assigners: TimeWindow arithmetic, Flink's window-start formula (offsets,
negative timestamps), what each assigner assigns, and every parameter error."""

import datetime
import pickle

import pytest

from rill.common.time import Duration, Time
from rill.operators.windowing import (
    NO_TIMESTAMP_MESSAGE,
    ContinuousEventTimeTrigger,
    CountWindow,
    DynamicEventTimeSessionWindows,
    DynamicProcessingTimeSessionWindows,
    EventTimeSessionWindows,
    EventTimeTrigger,
    GlobalWindow,
    GlobalWindows,
    MissingTimestampError,
    NeverTrigger,
    ProcessingTimeSessionWindows,
    ProcessingTimeTrigger,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TimeWindow,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)


class _Ctx:
    operator_name = "Window(test)"

    def __init__(self, now=0):
        self.now = now

    def get_current_processing_time(self):
        return self.now

    def get_runtime_context(self):
        return None


# -- windows --------------------------------------------------------------------------------------

def test_time_window_bounds_and_max_timestamp():
    w = TimeWindow(0, 10)
    assert (w.start, w.end, w.get_start(), w.get_end(), w.max_timestamp()) == (0, 10, 0, 10, 9)
    assert repr(w) == "TimeWindow{start=0, end=10}"
    assert w == TimeWindow(0, 10) and hash(w) == hash(TimeWindow(0, 10))
    assert TimeWindow(0, 10) < TimeWindow(0, 11) < TimeWindow(1, 2)
    assert pickle.loads(pickle.dumps(w)) == w and type(pickle.loads(pickle.dumps(w))) is TimeWindow


def test_time_window_rejects_non_int_bounds():
    with pytest.raises(TypeError, match="int ms"):
        TimeWindow(0.5, 10)


def test_time_window_intersects_counts_touching_windows_and_cover():
    assert TimeWindow(0, 10).intersects(TimeWindow(10, 20))  # touching: merge (as Flink)
    assert TimeWindow(0, 10).intersects(TimeWindow(5, 7))
    assert not TimeWindow(0, 10).intersects(TimeWindow(11, 20))
    assert TimeWindow(0, 10).cover(TimeWindow(5, 30)) == TimeWindow(0, 30)


def test_merge_windows_calls_back_once_per_group_of_two_or_more():
    calls = []
    TimeWindow.merge_windows(
        [TimeWindow(20, 25), TimeWindow(0, 5), TimeWindow(4, 8), TimeWindow(8, 9), TimeWindow(30, 31)],
        lambda merged, result: calls.append((sorted(merged), result)),
    )
    assert calls == [([TimeWindow(0, 5), TimeWindow(4, 8), TimeWindow(8, 9)], TimeWindow(0, 9))]


def test_window_start_with_offset_follows_flink_for_negative_timestamps():
    start = TimeWindow.get_window_start_with_offset
    assert start(7, 0, 5) == 5
    assert start(-1, 0, 5) == -5
    assert start(-5, 0, 5) == -5
    assert start(-6, 0, 5) == -10
    assert start(7, 2, 5) == 7
    assert start(6, 2, 5) == 2
    assert start(1, -2, 5) == -2
    assert start(3, -2, 5) == 3


def test_count_and_global_windows():
    assert CountWindow(3) == CountWindow(3) != CountWindow(4)
    assert CountWindow(3).max_timestamp() == (1 << 63) - 1
    assert GlobalWindow.get() is GlobalWindow() is pickle.loads(pickle.dumps(GlobalWindow.get()))
    assert GlobalWindow.get().max_timestamp() == (1 << 63) - 1


# -- assigners ------------------------------------------------------------------------------------

def test_tumbling_event_time_windows_with_offset_and_negative_timestamps():
    a = TumblingEventTimeWindows.of(10)
    assert a.assign_windows("x", 0, _Ctx()) == [TimeWindow(0, 10)]
    assert a.assign_windows("x", 9, _Ctx()) == [TimeWindow(0, 10)]
    assert a.assign_windows("x", -1, _Ctx()) == [TimeWindow(-10, 0)]
    assert a.assign_windows("x", -10, _Ctx()) == [TimeWindow(-10, 0)]
    shifted = TumblingEventTimeWindows.of(10, 3)
    assert shifted.assign_windows("x", 2, _Ctx()) == [TimeWindow(-7, 3)]
    assert shifted.assign_windows("x", 3, _Ctx()) == [TimeWindow(3, 13)]
    back = TumblingEventTimeWindows.of(10, -3)
    assert back.assign_windows("x", 7, _Ctx()) == [TimeWindow(7, 17)]
    assert back.assign_windows("x", 6, _Ctx()) == [TimeWindow(-3, 7)]
    assert repr(a) == "TumblingEventTimeWindows(10)"
    assert a.is_event_time() and isinstance(a.get_default_trigger(), EventTimeTrigger)


def test_sizes_accept_time_duration_and_timedelta():
    assert TumblingEventTimeWindows.of(Time.seconds(5)).size == 5000
    assert TumblingEventTimeWindows.of(Duration.of_millis(250)).size == 250
    assert SlidingEventTimeWindows.of(datetime.timedelta(minutes=1), datetime.timedelta(seconds=30)).slide == 30_000
    assert EventTimeSessionWindows.with_gap(Time.milliseconds(7)).session_gap == 7


def test_sliding_event_time_windows_latest_first_with_offset():
    a = SlidingEventTimeWindows.of(10, 5)
    assert a.assign_windows("x", 7, _Ctx()) == [TimeWindow(5, 15), TimeWindow(0, 10)]
    assert a.assign_windows("x", -3, _Ctx()) == [TimeWindow(-5, 5), TimeWindow(-10, 0)]
    assert SlidingEventTimeWindows.of(10, 3).assign_windows("x", 0, _Ctx()) == [
        TimeWindow(0, 10), TimeWindow(-3, 7), TimeWindow(-6, 4), TimeWindow(-9, 1)]
    assert SlidingEventTimeWindows.of(10, 5, 2).assign_windows("x", 7, _Ctx()) == [
        TimeWindow(7, 17), TimeWindow(2, 12)]
    assert repr(a) == "SlidingEventTimeWindows(10, 5)"


def test_processing_time_assigners_use_the_current_processing_time():
    ctx = _Ctx(now=23)
    assert TumblingProcessingTimeWindows.of(10).assign_windows("x", None, ctx) == [TimeWindow(20, 30)]
    assert SlidingProcessingTimeWindows.of(10, 5).assign_windows("x", 1, ctx) == [TimeWindow(20, 30), TimeWindow(15, 25)]
    assert ProcessingTimeSessionWindows.with_gap(4).assign_windows("x", 1, ctx) == [TimeWindow(23, 27)]
    assert isinstance(TumblingProcessingTimeWindows.of(10).get_default_trigger(), ProcessingTimeTrigger)
    assert not ProcessingTimeSessionWindows.with_gap(4).is_event_time()


def test_session_assigners():
    a = EventTimeSessionWindows.with_gap(10)
    assert a.assign_windows("x", 5, _Ctx()) == [TimeWindow(5, 15)]
    assert a.is_merging() and repr(a) == "EventTimeSessionWindows(10)"
    dyn = EventTimeSessionWindows.with_dynamic_gap(lambda v: v[1])
    assert isinstance(dyn, DynamicEventTimeSessionWindows)
    assert dyn.assign_windows(("a", 3), 5, _Ctx()) == [TimeWindow(5, 8)]
    pdyn = ProcessingTimeSessionWindows.with_dynamic_gap(lambda v: 2)
    assert isinstance(pdyn, DynamicProcessingTimeSessionWindows)
    assert pdyn.assign_windows("x", None, _Ctx(now=4)) == [TimeWindow(4, 6)]


def test_global_windows():
    a = GlobalWindows.create()
    assert a.assign_windows("x", None, _Ctx()) == [GlobalWindow.get()]
    assert isinstance(a.get_default_trigger(), NeverTrigger) and not a.is_event_time()


# -- errors ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("make, message", [
    (lambda: TumblingEventTimeWindows.of(0), "TumblingEventTimeWindows parameters must satisfy 0 < size, got size = 0 ms"),
    (lambda: TumblingEventTimeWindows.of(-5), "TumblingEventTimeWindows parameters must satisfy 0 < size, got size = -5 ms"),
    (lambda: TumblingEventTimeWindows.of(10, 10),
     r"TumblingEventTimeWindows parameters must satisfy abs\(offset\) < size, got offset = 10 ms and size = 10 ms"),
    (lambda: TumblingProcessingTimeWindows.of(10, -11),
     r"TumblingProcessingTimeWindows parameters must satisfy abs\(offset\) < size, got offset = -11 ms"),
    (lambda: SlidingEventTimeWindows.of(10, 0), "SlidingEventTimeWindows parameters must satisfy 0 < slide, got slide = 0 ms"),
    (lambda: SlidingEventTimeWindows.of(-1, 5), "SlidingEventTimeWindows parameters must satisfy 0 < size, got size = -1 ms"),
    (lambda: SlidingProcessingTimeWindows.of(10, 5, 5),
     r"SlidingProcessingTimeWindows parameters must satisfy abs\(offset\) < slide, got offset = 5 ms and slide = 5 ms"),
    (lambda: EventTimeSessionWindows.with_gap(0), "EventTimeSessionWindows parameters must satisfy 0 < gap, got gap = 0 ms"),
    (lambda: ProcessingTimeSessionWindows.with_gap(Time.seconds(-1)),
     "ProcessingTimeSessionWindows parameters must satisfy 0 < gap, got gap = -1000 ms"),
])
def test_bad_static_parameters_name_the_assigner_and_the_value(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("bad", [1.5, "10", None, True])
def test_sizes_must_be_milliseconds(bad):
    with pytest.raises(TypeError, match="TumblingEventTimeWindows size must be an int number of milliseconds"):
        TumblingEventTimeWindows.of(bad)


def test_dynamic_gap_must_be_positive_per_record():
    a = EventTimeSessionWindows.with_dynamic_gap(lambda v: v[1])
    with pytest.raises(ValueError, match=r"Dynamic session time gap must satisfy 0 < gap: "
                                         r"DynamicEventTimeSessionWindows's extractor returned 0 ms for element \('a', 0\)"):
        a.assign_windows(("a", 0), 5, _Ctx())
    with pytest.raises(ValueError, match="returned -3 ms"):
        ProcessingTimeSessionWindows.with_dynamic_gap(lambda v: -3).assign_windows("x", None, _Ctx())
    with pytest.raises(TypeError, match="SessionWindowTimeGapExtractor or a callable"):
        EventTimeSessionWindows.with_dynamic_gap(42)


@pytest.mark.parametrize("assigner", [
    TumblingEventTimeWindows.of(10), SlidingEventTimeWindows.of(10, 5), EventTimeSessionWindows.with_gap(3),
    EventTimeSessionWindows.with_dynamic_gap(lambda v: 1),
])
def test_event_time_assigners_refuse_records_without_timestamp(assigner):
    with pytest.raises(MissingTimestampError) as info:
        assigner.assign_windows("x", None, _Ctx())
    assert str(info.value).startswith(NO_TIMESTAMP_MESSAGE)
    assert "operator 'Window(test)'" in str(info.value)
    assert NO_TIMESTAMP_MESSAGE == (
        "Record has Long.MIN_VALUE timestamp (= no timestamp marker). Is the time characteristic set to "
        "'ProcessingTime', or did you forget to call 'DataStream.assignTimestampsAndWatermarks(...)'?")


def test_triggers_reject_bad_intervals():
    with pytest.raises(ValueError, match="ContinuousEventTimeTrigger interval must be > 0 ms, got 0"):
        ContinuousEventTimeTrigger.of(0)
