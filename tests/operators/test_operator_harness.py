"""The harnesses themselves: life cycle, inputs, output checks, keyed services."""

import pytest

from rill.datastream.functions import MapFunction, wrap
from rill.operators.base import AbstractStreamOperator, AbstractUdfStreamOperator
from rill.operators.output_tag import OutputTag
from rill.operators.simple import StreamMap
from rill.operators.testing import KeyedOneInputStreamOperatorTestHarness, OneInputStreamOperatorTestHarness
from rill.common.streamrecord import StreamRecord, Watermark
from rill.state import HeapKeyedStateBackend, KeyGroupRange, assign_to_key_group


class LifeCycle(AbstractUdfStreamOperator):
    def __init__(self):
        super().__init__(None)
        self.events = []

    def setup(self, context, output):
        super().setup(context, output)
        self.events.append("setup")

    def initialize_state(self):
        self.events.append("initialize_state")

    def open(self):
        self.events.append("open")

    def process_element(self, value, timestamp=None):
        self.output.collect(value, timestamp)

    def end_input(self):
        self.events.append("end_input")

    def finish(self):
        self.events.append("finish")

    def close(self):
        self.events.append("close")


def test_life_cycle_order_and_close_once():
    op = LifeCycle()
    h = OneInputStreamOperatorTestHarness(op)
    h.open()
    h.open()
    h.end_input()
    h.close()
    h.close()
    assert op.events == ["setup", "initialize_state", "open", "end_input", "finish", "close"]


def test_context_manager_skips_finish_when_the_block_fails():
    op = LifeCycle()
    with pytest.raises(KeyError):
        with OneInputStreamOperatorTestHarness(op):
            raise KeyError("x")
    assert op.events == ["setup", "initialize_state", "open", "close"]


def test_inputs_stream_records_watermarks_and_live_output():
    with OneInputStreamOperatorTestHarness(LifeCycle()) as h:
        h.process_element(StreamRecord("a", 5))
        h.process_elements(["b", StreamRecord("c", 6)])
        h.process_watermark(7)
        h.process_watermark(Watermark(8))
        with pytest.raises(ValueError):
            h.process_element(StreamRecord("d", 1), 2)
        assert h.get_output() == [StreamRecord("a", 5), StreamRecord("b"), StreamRecord("c", 6),
                                  Watermark(7), Watermark(8)]
        assert h.extract_output_values() == ["a", "b", "c"]
        assert h.extract_output_stream_records() == [StreamRecord("a", 5), StreamRecord("b"), StreamRecord("c", 6)]
        h.get_output().clear()
        h.process_element("e")
        assert h.get_output() == [StreamRecord("e")]


def test_process_batch_checks_lengths():
    with OneInputStreamOperatorTestHarness(StreamMap(wrap(str, MapFunction, "map"))) as h:
        with pytest.raises(ValueError, match="2 values but 1 timestamps"):
            h.process_batch([1, 2], [1])
        h.process_batch((1, 2), (3, 4))  # any sequences
    assert h.get_output() == [StreamRecord("1", 3), StreamRecord("2", 4)]


class BrokenBatches(AbstractStreamOperator):
    def __init__(self, mode):
        self.mode = mode

    def process_batch(self, values, timestamps=None):
        if self.mode == "tuple":
            self.output.collect_batch(tuple(values), timestamps)
        elif self.mode == "short":
            self.output.collect_batch(values, timestamps[:-1])
        elif self.mode == "float":
            self.output.collect_batch(values, [float(t) for t in timestamps])
        elif self.mode == "side":
            self.output.collect_side("not-a-tag", values[0])


@pytest.mark.parametrize("mode", ["tuple", "short", "float", "side"])
def test_collecting_output_checks_the_batch_convention(mode):
    with pytest.raises(AssertionError):
        with OneInputStreamOperatorTestHarness(BrokenBatches(mode)) as h:
            h.process_batch([1, 2], [1, 2])


def test_side_outputs_are_kept_per_tag():
    class Side(AbstractStreamOperator):
        def process_element(self, value, timestamp=None):
            self.output.collect_side(OutputTag(value[0]), value[1], timestamp)

    with OneInputStreamOperatorTestHarness(Side()) as h:
        h.process_elements([StreamRecord(("x", 1), 1), ("y", 2), ("x", 3)])
    assert h.get_side_output(OutputTag("x")) == [StreamRecord(1, 1), StreamRecord(3)]
    assert h.get_side_output(OutputTag("y")) == [StreamRecord(2)]
    assert h.get_output() == []


def test_processing_time_and_timer_counts_on_a_non_keyed_harness():
    with OneInputStreamOperatorTestHarness(LifeCycle(), initial_processing_time_ms=10) as h:
        assert h.get_processing_time() == 10
        h.set_processing_time(25)
        assert h.get_processing_time() == 25
        assert h.num_event_time_timers() == h.num_processing_time_timers() == 0
        assert h.keyed_state_backend is None
        assert h.context.runtime_context is not None


def test_keyed_harness_services_cover_the_subtasks_key_groups():
    h = KeyedOneInputStreamOperatorTestHarness(LifeCycle(), lambda v: v, max_parallelism=16, parallelism=4,
                                               subtask_index=2)
    backend = h.keyed_state_backend
    assert isinstance(backend, HeapKeyedStateBackend)
    assert backend.key_group_range == KeyGroupRange(8, 11)
    assert h.context.timer_service_manager is not None
    assert h.context.key_selector("k") == "k"
    mine = next(k for k in map(str, range(100)) if 8 <= assign_to_key_group(k, 16) <= 11)
    h.set_current_key(mine)
    assert h.get_current_key() == mine
    with pytest.raises(TypeError):
        KeyedOneInputStreamOperatorTestHarness(LifeCycle(), key_selector=42)
    with pytest.raises(ValueError):
        OneInputStreamOperatorTestHarness(LifeCycle(), parallelism=2, subtask_index=2)
