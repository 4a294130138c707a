"""TimestampsAndWatermarksOperator through the operator test harness: exact records (with
their new timestamps), watermarks and watermark statuses, in emission order, with the test
clock driving periodic emission."""

from __future__ import annotations

import datetime
import enum

import pytest

from rill.common import Duration, WatermarkStrategy
from rill.common.watermark_strategy import TimestampAssigner
from rill.operators.testing import OneInputStreamOperatorTestHarness
from rill.operators.watermark import TimestampsAndWatermarksOperator, WatermarkGenerator
from rill.common.streamrecord import MAX_TIMESTAMP, MAX_WATERMARK, MIN_TIMESTAMP, StreamRecord, Watermark, WatermarkStatus

IDLE, ACTIVE = WatermarkStatus.IDLE, WatermarkStatus.ACTIVE
R = StreamRecord
W = Watermark


def by_second_field(value, record_timestamp):
    return value[1]


def harness(strategy, interval_ms=100):
    h = OneInputStreamOperatorTestHarness(TimestampsAndWatermarksOperator(strategy))
    h.context.auto_watermark_interval_ms = interval_ms
    return h


def bounded(ms):
    return WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(ms)).with_timestamp_assigner(by_second_field)


# -- assignment and periodic emission ------------------------------------------------------

def test_bounded_out_of_orderness_exact_output():
    with harness(bounded(5)) as h:
        h.process_batch([("a", 10), ("b", 30), ("c", 20)])
        h.set_processing_time(100)
        h.process_element(("d", 25), 7)           # out of order: max stays 30
        h.set_processing_time(200)                # same watermark: not emitted again
        h.process_batch([("e", 50)], [1])
        h.set_processing_time(300)
        assert h.get_output() == [
            R(("a", 10), 10), R(("b", 30), 30), R(("c", 20), 20),
            W(24),
            R(("d", 25), 25),
            R(("e", 50), 50),
            W(44),
        ]


def test_monotonous_timestamps_watermark_is_max_minus_one():
    s = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(by_second_field)
    with harness(s) as h:
        h.process_batch([("a", 1), ("b", 2)])
        h.set_processing_time(100)
        h.process_batch([("c", 3)])
        h.set_processing_time(200)
        assert h.get_output() == [R(("a", 1), 1), R(("b", 2), 2), W(1), R(("c", 3), 3), W(2)]


def test_first_periodic_emit_before_any_record_emits_nothing():
    # max starts at MIN + ooo + 1, so the first watermark is MIN_TIMESTAMP: not an increase
    with harness(bounded(1000)) as h:
        h.set_processing_time(100)
        h.set_processing_time(200)
        assert h.get_output() == []


def test_periodic_emission_every_interval_of_processing_time():
    with harness(bounded(0), interval_ms=50) as h:
        h.process_element(("a", 100))
        h.set_processing_time(49)
        assert h.get_output() == [R(("a", 100), 100)]
        h.set_processing_time(50)
        assert h.get_output()[-1] == W(99)
        h.process_element(("b", 200))
        h.set_processing_time(99)
        assert h.get_output()[-1] == R(("b", 200), 200)
        h.set_processing_time(100)
        assert h.get_output()[-1] == W(199)
        assert h.processing_time_service.get_number_of_registered_timers() == 1


def test_auto_watermark_interval_0_disables_periodic_emission():
    with harness(bounded(0), interval_ms=0) as h:
        h.process_batch([("a", 100)])
        h.set_processing_time(10_000)
        assert h.processing_time_service.get_number_of_registered_timers() == 0
        h.process_watermark(MAX_WATERMARK)
        assert h.get_output() == [R(("a", 100), 100), MAX_WATERMARK]


def test_default_interval_is_200_ms():
    h = OneInputStreamOperatorTestHarness(TimestampsAndWatermarksOperator(bounded(0)))
    with h:
        h.process_element(("a", 100))
        h.set_processing_time(199)
        assert W(99) not in h.get_output()
        h.set_processing_time(200)
        assert h.get_output()[-1] == W(99)


def test_per_element_and_batch_paths_give_identical_output():
    chunks = [[("a", 5), ("b", 3)], [("c", 9), ("d", 1), ("e", 12)], [("f", 11)]]

    def drive(per_element):
        with harness(bounded(2)) as h:
            for chunk in chunks:
                if per_element:
                    for v in chunk:
                        h.process_element(v)
                else:
                    h.process_batch(chunk)
                h.set_processing_time(h.get_processing_time() + 100)
            return list(h.get_output())

    expected = [R(("a", 5), 5), R(("b", 3), 3), W(2), R(("c", 9), 9), R(("d", 1), 1), R(("e", 12), 12), W(9),
                R(("f", 11), 11)]
    assert drive(True) == drive(False) == expected


def test_record_timestamp_is_the_previous_timestamp_or_none():
    seen = []

    def assigner(value, record_timestamp):
        seen.append((value, record_timestamp))
        return value * 10

    s = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(assigner)
    with harness(s) as h:
        h.process_batch([1, 2], [100, 200])
        h.process_batch([3])
        h.process_element(4, 400)
        assert seen == [(1, 100), (2, 200), (3, None), (4, 400)]
        assert h.extract_output_stream_records() == [R(1, 10), R(2, 20), R(3, 30), R(4, 40)]


def test_timestamp_assigner_object():
    class Assigner(TimestampAssigner):
        def extract_timestamp(self, value, record_timestamp):
            return value["ts"]

    s = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Assigner())
    with harness(s) as h:
        h.process_element({"ts": 7})
        h.set_processing_time(100)
        assert h.get_output() == [R({"ts": 7}, 7), W(6)]


def test_without_assigner_records_keep_their_timestamps():
    with harness(WatermarkStrategy.for_monotonous_timestamps()) as h:
        h.process_batch(["a", "b"], [5, 8])
        h.set_processing_time(100)
        assert h.get_output() == [R("a", 5), R("b", 8), W(7)]


def test_without_assigner_a_record_without_timestamp_fails_naming_the_operator():
    with harness(WatermarkStrategy.for_monotonous_timestamps()) as h:
        with pytest.raises(ValueError) as e:
            h.process_element("a")
        assert str(e.value) == (
            "Operator 'Timestamps/Watermarks' got record 'a' without a timestamp and its WatermarkStrategy "
            "has no timestamp assigner; add one with WatermarkStrategy.with_timestamp_assigner()")


def test_no_watermarks_passes_records_through_and_registers_no_timer():
    with harness(WatermarkStrategy.no_watermarks()) as h:
        h.process_batch(["a", "b"])
        h.process_batch(["c"], [3])
        h.set_processing_time(1000)
        assert h.processing_time_service.get_number_of_registered_timers() == 0
        h.process_watermark(MAX_WATERMARK)
        assert h.get_output() == [R("a"), R("b"), R("c", 3), MAX_WATERMARK]


def test_no_watermarks_with_assigner_assigns_timestamps_only():
    s = WatermarkStrategy.no_watermarks().with_timestamp_assigner(by_second_field)
    with harness(s) as h:
        h.process_batch([("a", 4)])
        h.set_processing_time(1000)
        assert h.get_output() == [R(("a", 4), 4)]


# -- watermarks and statuses from upstream --------------------------------------------------

def test_upstream_watermarks_are_swallowed_except_max_watermark():
    with harness(bounded(0)) as h:
        h.process_watermark(50)
        h.process_element(("a", 10))
        h.process_watermark(1_000_000)
        h.set_processing_time(100)
        h.process_watermark(MAX_WATERMARK)
        h.set_processing_time(200)       # nothing after the end of event time
        assert h.get_output() == [R(("a", 10), 10), W(9), MAX_WATERMARK]


def test_upstream_watermark_status_is_ignored():
    with harness(bounded(0)) as h:
        h.operator.process_watermark_status(IDLE)
        h.process_element(("a", 10))
        h.operator.process_watermark_status(ACTIVE)
        assert h.get_output() == [R(("a", 10), 10)]


def test_finish_emits_periodically_once_more():
    h = harness(bounded(0))
    h.open()
    h.process_element(("a", 10))
    h.close()
    assert h.get_output() == [R(("a", 10), 10), W(9)]


# -- idleness -------------------------------------------------------------------------------

def test_idleness_marks_idle_then_active_on_next_record():
    s = bounded(0).with_idleness(Duration.of_millis(300))
    with harness(s, interval_ms=100) as h:
        h.process_element(("a", 1000))
        for t in range(100, 800, 100):
            h.set_processing_time(t)
        # 100: activity seen -> W(999); 200: inactivity starts; 300..500: 100..300 ms, not > 300;
        # 600: 400 ms > 300 -> IDLE; 700: still idle, nothing new
        assert h.get_output() == [R(("a", 1000), 1000), W(999), IDLE]
        h.process_element(("b", 2000))
        h.set_processing_time(800)
        assert h.get_output() == [R(("a", 1000), 1000), W(999), IDLE, ACTIVE, R(("b", 2000), 2000), W(1999)]


def test_idleness_exact_time_of_marking_idle():
    s = bounded(0).with_idleness(Duration.of_millis(250))
    with harness(s, interval_ms=100) as h:
        h.process_element(("a", 1000))
        outputs = {}
        for t in range(100, 600, 100):
            h.set_processing_time(t)
            outputs[t] = IDLE in h.get_output()
        # inactivity noticed at 200; idle when more than 250 ms later: at 500
        assert outputs == {100: False, 200: False, 300: False, 400: False, 500: True}


def test_idle_stream_emits_active_before_max_watermark_and_nothing_after():
    s = bounded(0).with_idleness(Duration.of_millis(10))
    with harness(s, interval_ms=100) as h:
        for t in (100, 200, 300):
            h.set_processing_time(t)
        h.process_watermark(MAX_WATERMARK)
        h.set_processing_time(400)
        h.set_processing_time(500)
    assert h.get_output() == [IDLE, ACTIVE, MAX_WATERMARK]


def test_idle_stream_watermark_from_upstream_max_only():
    s = bounded(0).with_idleness(Duration.of_millis(10))
    with harness(s, interval_ms=100) as h:
        for t in (100, 200, 300):
            h.set_processing_time(t)
        h.process_watermark(500)          # swallowed: stays idle
        assert h.get_output() == [IDLE]


# -- custom generators ----------------------------------------------------------------------

class Punctuated(WatermarkGenerator):
    """Emits a watermark at every record whose value ends with '!'."""

    def on_event(self, event, event_timestamp, output):
        if event[0].endswith("!"):
            output.emit_watermark(Watermark(event_timestamp))


def test_punctuated_generator_interleaves_records_and_watermarks_exactly():
    s = WatermarkStrategy.for_generator(Punctuated).with_timestamp_assigner(by_second_field)
    with harness(s) as h:
        h.process_batch([("a", 1), ("b!", 5), ("c", 3), ("d!", 9), ("e", 10)])
        h.process_batch([("f!", 4), ("g!", 11)])        # 4 is no increase: swallowed
        h.set_processing_time(100)
        assert h.get_output() == [R(("a", 1), 1), R(("b!", 5), 5), W(5), R(("c", 3), 3), R(("d!", 9), 9), W(9),
                                  R(("e", 10), 10), R(("f!", 4), 4), R(("g!", 11), 11), W(11)]


def test_generator_marking_idle_and_active_itself():
    class Toggling(WatermarkGenerator):
        def on_event(self, event, event_timestamp, output):
            if event == "idle":
                output.mark_idle()
            elif event == "active":
                output.mark_active()

    s = WatermarkStrategy.for_generator(Toggling).with_timestamp_assigner(lambda v, t: 1)
    with harness(s) as h:
        h.process_batch(["x", "idle", "idle", "y"])
        # the next batch first makes the output active again (before its records)
        h.process_batch(["z"])
        assert h.get_output() == [R("x", 1), R("idle", 1), IDLE, R("idle", 1), R("y", 1), ACTIVE, R("z", 1)]


def test_generator_supplier_gets_the_context_with_the_processing_time_clock():
    clocks = []

    class Gen(WatermarkGenerator):
        def on_periodic_emit(self, output):
            output.emit_watermark(Watermark(clocks[0]()))

    def supplier(context):
        clocks.append(context.get_input_activity_clock())
        return Gen()

    s = WatermarkStrategy.for_generator(supplier).with_timestamp_assigner(by_second_field)
    with harness(s, interval_ms=100) as h:
        h.set_processing_time(100)
        h.set_processing_time(200)
        assert h.get_output() == [W(100), W(200)]


def test_error_in_periodic_emit_is_attributed_to_the_operator():
    class Failing(WatermarkGenerator):
        def on_periodic_emit(self, output):
            raise RuntimeError("boom")

    s = WatermarkStrategy.for_generator(Failing).with_timestamp_assigner(by_second_field)
    h = harness(s)
    h.open()
    with pytest.raises(RuntimeError, match="boom") as e:
        h.set_processing_time(100)
    assert e.value._rill_operator == "Timestamps/Watermarks"
    h._close_without_finish()


def test_generator_without_on_event_is_refused_at_open():
    s = WatermarkStrategy.for_generator(lambda: object()).with_timestamp_assigner(by_second_field)
    h = harness(s)
    with pytest.raises(TypeError, match=r"generator of operator 'Timestamps/Watermarks' \(object\) has no on_event\(\)"):
        h.open()
    h._close_without_finish()


# -- bad input --------------------------------------------------------------------------------

@pytest.mark.parametrize("bad,shown", [
    (1.5, "1.5 (float)"),
    ("17", "'17' (str)"),
    (None, "None (NoneType)"),
    (True, "True (bool)"),
    (datetime.datetime(2024, 1, 1), "datetime.datetime(2024, 1, 1, 0, 0) (datetime)"),
])
def test_assigner_returning_a_non_int_fails_naming_operator_record_and_value(bad, shown):
    s = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
        lambda v, t: bad if v == "bad" else 5)
    with harness(s) as h:
        with pytest.raises(TypeError) as e:
            h.process_batch(["ok1", "ok2", "bad", "never"])
        assert str(e.value) == (
            f"Timestamp assigner of operator 'Timestamps/Watermarks' returned {shown} for record 'bad'; "
            f"it must return an int of epoch milliseconds")
        # nothing already accepted is lost: the records before the bad one were emitted
        assert h.get_output() == [R("ok1", 5), R("ok2", 5)]
        h.set_processing_time(100)
        assert h.get_output()[-1] == W(4)


def test_assigner_returning_an_int_outside_the_long_range():
    s = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v, t: v)
    with harness(s) as h:
        with pytest.raises(ValueError) as e:
            h.process_element(MAX_TIMESTAMP + 1)
        assert str(e.value) == (
            f"Timestamp assigner of operator 'Timestamps/Watermarks' returned {MAX_TIMESTAMP + 1} (int) for "
            f"record {MAX_TIMESTAMP + 1}; it must return an int of epoch milliseconds between "
            f"{MIN_TIMESTAMP} and {MAX_TIMESTAMP}")


def test_bad_timestamp_message_truncates_long_records():
    s = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v, t: 0.5)
    with harness(s) as h:
        with pytest.raises(TypeError) as e:
            h.process_element("x" * 1000)
        assert "for record 'xxxx" in str(e.value) and "...; it must return" in str(e.value)
        assert len(str(e.value)) < 400


def test_int_subclasses_are_accepted_as_plain_ints():
    class Ts(enum.IntEnum):
        T = 42

    s = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v, t: Ts.T)
    with harness(s) as h:
        h.process_element("a")
        rec = h.get_output()[0]
        assert rec == R("a", 42) and type(rec.timestamp) is int


def test_bad_timestamp_on_the_punctuated_path_keeps_order():
    s = WatermarkStrategy.for_generator(Punctuated).with_timestamp_assigner(
        lambda v, t: "x" if v[0] == "bad" else v[1])
    with harness(s) as h:
        with pytest.raises(TypeError, match=r"returned 'x' \(str\) for record \('bad', 0\)"):
            h.process_batch([("a!", 3), ("b", 4), ("bad", 0)])
        assert h.get_output() == [R(("a!", 3), 3), W(3), R(("b", 4), 4)]
