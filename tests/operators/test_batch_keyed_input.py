"""BATCH execution operators on the operator harness: a keyed operator sees its input key by key
(each key's records in timestamp order), each key's event-time then processing-time timers fire
right after its records with the watermark back at the start of time for the next key, nothing
(not even a watermark) leaves before the end of input, and ``MAX_WATERMARK`` leaves last;
``BatchGroupedReduceOperator`` emits one final record per key."""

from __future__ import annotations

import pytest

from rill.common.functions import ReduceFunction
from rill.common.streamrecord import MAX_TIMESTAMP, MAX_WATERMARK, MIN_TIMESTAMP, StreamRecord, Watermark
from rill.datastream.functions import KeyedProcessFunction
from rill.operators.batch_grouped_reduce import BatchGroupedReduceOperator
from rill.operators.batch_keyed_input import BatchKeyedOneInputOperator, BatchTwoInputOperator, in_timestamp_order
from rill.operators.process import KeyedProcessOperator
from rill.operators.testing import KeyedOneInputStreamOperatorTestHarness, OneInputStreamOperatorTestHarness
from rill.state import ValueStateDescriptor


class Trace(KeyedProcessFunction):
    """Emits each record with the watermark it sees, registers an event-time timer 1 ms after
    it and a processing-time timer 1 s ahead; each timer emits what fired."""

    def process_element(self, value, ctx):
        ts = ctx.timer_service()
        yield "record", value, ctx.timestamp(), ts.current_watermark()
        ts.register_event_time_timer(ctx.timestamp() + 1)
        ts.register_processing_time_timer(ts.current_processing_time() + 1000)

    def on_timer(self, timestamp, ctx):
        yield "timer", ctx.get_current_key(), timestamp, ctx.time_domain().name


def test_keyed_input_is_processed_key_by_key_with_each_keys_timers_at_its_end():
    harness = KeyedOneInputStreamOperatorTestHarness(
        BatchKeyedOneInputOperator(KeyedProcessOperator(Trace())), lambda v: v[0])
    with harness:
        harness.process_batch([("a", 1), ("b", 1), ("a", 2)], [5, 1, 2])
        harness.process_element(("b", 2), 0)
        harness.process_watermark(MAX_WATERMARK)
        assert harness.get_output() == []  # everything waits for the end of input
        harness.end_input()
    assert harness.get_output() == [
        StreamRecord(("record", ("a", 2), 2, MIN_TIMESTAMP), 2),  # the key's records by timestamp
        StreamRecord(("record", ("a", 1), 5, MIN_TIMESTAMP), 5),
        StreamRecord(("timer", "a", 3, "EVENT_TIME"), 3),
        StreamRecord(("timer", "a", 6, "EVENT_TIME"), 6),
        StreamRecord(("timer", "a", 1000, "PROCESSING_TIME"), None),
        # the next key starts at the start of time again: none of its records is late
        StreamRecord(("record", ("b", 2), 0, MIN_TIMESTAMP), 0),
        StreamRecord(("record", ("b", 1), 1, MIN_TIMESTAMP), 1),
        StreamRecord(("timer", "b", 1, "EVENT_TIME"), 1),
        StreamRecord(("timer", "b", 2, "EVENT_TIME"), 2),
        StreamRecord(("timer", "b", 1000, "PROCESSING_TIME"), None),
        Watermark(MAX_TIMESTAMP),
    ]
    assert harness.num_event_time_timers() == 0 and harness.num_processing_time_timers() == 0


class Echo(KeyedProcessFunction):
    def process_element(self, value, ctx):
        yield value


def test_records_without_timestamps_keep_their_order():
    harness = KeyedOneInputStreamOperatorTestHarness(
        BatchKeyedOneInputOperator(KeyedProcessOperator(Echo())), lambda v: v % 2)
    with harness:
        harness.process_batch([5, 2, 3, 4, 1])
        harness.end_input()
    assert harness.extract_output_values() == [5, 3, 1, 2, 4]


def test_in_timestamp_order_is_stable():
    assert in_timestamp_order(["x", "y", "z"], [3, 1, 3]) == (["y", "x", "z"], [1, 3, 3])
    assert in_timestamp_order(["x", "y"], [None, None]) == (["x", "y"], None)
    # mixed: arrival order, per record
    assert in_timestamp_order(["x", "y"], [4, None]) == (["x", "y"], [4, None])


class Concat(ReduceFunction):
    def reduce(self, value1, value2):
        if value2[1] == "reset":
            return None
        return value1[0], value1[1] + value2[1]


def test_batch_grouped_reduce_emits_one_final_record_per_key():
    harness = KeyedOneInputStreamOperatorTestHarness(BatchGroupedReduceOperator(Concat()), lambda v: v[0])
    with harness:
        harness.process_batch([("a", "1"), ("b", "1"), ("a", "2")], [1, 2, 3])
        harness.process_watermark(MAX_WATERMARK)
        harness.process_elements([StreamRecord(("c", "1")), StreamRecord(("c", "reset")), StreamRecord(("b", "2"))])
        assert harness.get_output() == []
        harness.end_input()
    # a reduce result of None clears the key (Flink: ValueState.update(null)); results carry
    # the end of time as timestamp, and the final watermark follows them
    assert harness.get_output() == [StreamRecord(("a", "12"), MAX_TIMESTAMP), StreamRecord(("b", "12"), MAX_TIMESTAMP),
                                    Watermark(MAX_TIMESTAMP)]


def test_batch_grouped_reduce_needs_a_keyed_stream():
    harness = OneInputStreamOperatorTestHarness(BatchGroupedReduceOperator(Concat()), task_name="Reduce")
    with pytest.raises(RuntimeError, match=r"^Operator 'Reduce' \(BatchGroupedReduceOperator\) needs a keyed stream: "
                                           r"key_by\(\) must come before reduce\(\)$"):
        harness.open()


def test_a_keyed_second_input_needs_a_keyed_first():
    with pytest.raises(ValueError, match=r"input 2 keyed needs input 1 keyed, got keyed_inputs=\(False, True\)"):
        BatchTwoInputOperator(KeyedProcessOperator(Trace()), (False, True))


def trace_with_bound(max_buffered_records):
    harness = KeyedOneInputStreamOperatorTestHarness(
        BatchKeyedOneInputOperator(KeyedProcessOperator(Trace()), max_buffered_records), lambda v: v[0],
        max_parallelism=4)
    with harness:
        for i in range(40):
            harness.process_element((f"k{i % 7}", i), (i * 13) % 17)
        buffer = harness.operator._buffer
        harness.end_input()
    return harness.get_output(), buffer


def test_a_spilled_input_gives_each_key_all_its_records_once():
    in_memory, unspilled = trace_with_bound(1000)
    spilled, buffer = trace_with_bound(3)
    assert unspilled.spills == 0 and buffer.spills == 10  # one per 4 records held
    assert buffer._spill_dir is None  # the spill files are gone with the operator

    def per_key(output):
        keys = {}
        for element in output[:-1]:
            kind, what = element.value[0], element.value[1]
            keys.setdefault(what[0] if kind == "record" else what, []).append(element)
        return keys

    # the same records and timers per key, in the same order; keys key group by key group
    assert per_key(spilled) == per_key(in_memory)
    assert spilled[-1] == in_memory[-1] == Watermark(MAX_TIMESTAMP)
    assert sorted(map(repr, spilled)) == sorted(map(repr, in_memory))


def test_the_sort_buffer_needs_room_for_a_record():
    harness = KeyedOneInputStreamOperatorTestHarness(
        BatchKeyedOneInputOperator(KeyedProcessOperator(Trace()), 0), lambda v: v[0], task_name="P")
    with pytest.raises(ValueError, match=r"^Operator 'P': the BATCH sort buffer must hold at least 1 record, "
                                         r"got max_records_in_memory=0$"):
        harness.open()


class CountAtEnd(KeyedProcessFunction):
    def open(self, ctx):
        self.count = ctx.get_state(ValueStateDescriptor("count"))

    def process_element(self, value, ctx):
        self.count.update((self.count.value() or 0) + 1)
        ctx.timer_service().register_event_time_timer(100)

    def on_timer(self, timestamp, ctx):
        yield ctx.get_current_key(), self.count.value()


def test_a_finished_keys_state_is_dropped():
    harness = KeyedOneInputStreamOperatorTestHarness(
        BatchKeyedOneInputOperator(KeyedProcessOperator(CountAtEnd())), lambda v: v % 3)
    with harness:
        harness.process_batch(list(range(10)))
        harness.end_input()
        # as Flink's BATCH state backend, which holds the current key only
        assert harness.num_keyed_state_entries() == 0
    assert harness.extract_output_values() == [(0, 4), (1, 3), (2, 3)]
