"""The two-input harnesses themselves: inputs reach the right methods, watermark combination
and idleness, end_input per input, life cycle, refusals of the one-input methods."""

import pytest

from rill.operators.base import AbstractTwoInputStreamOperator
from rill.operators.co_operators import CoStreamMap
from rill.operators.simple import StreamMap
from rill.operators.testing_two_input import (
    KeyedTwoInputStreamOperatorTestHarness,
    TwoInputStreamOperatorTestHarness,
)
from rill.datastream.co_functions import CoMapFunction
from rill.datastream.functions import MapFunction
from rill.common.streamrecord import StreamRecord, Watermark, WatermarkStatus


class Recorder(AbstractTwoInputStreamOperator):
    def __init__(self):
        self.calls = []

    def open(self):
        self.calls.append("open")

    def process_element1(self, value, timestamp=None):
        self.calls.append(("1", value, timestamp))

    def process_element2(self, value, timestamp=None):
        self.calls.append(("2", value, timestamp))

    def end_input(self, input_id=1):
        self.calls.append(("end", input_id))

    def finish(self):
        self.calls.append("finish")

    def close(self):
        self.calls.append("close")


class Id(CoMapFunction):
    def map1(self, value):
        return value

    def map2(self, value):
        return value


def test_inputs_reach_their_methods_and_the_life_cycle_runs():
    op = Recorder()
    with TwoInputStreamOperatorTestHarness(op) as h:
        h.process_element1("a", 1)
        h.process_element2(StreamRecord("b", 2))
        h.process_batch1(["c", "d"], [3, 4])
        h.process_batch2(["e"])
        h.end_input(2)
        h.end_input(1)
    assert op.calls == ["open", ("1", "a", 1), ("2", "b", 2), ("1", "c", 3), ("1", "d", 4), ("2", "e", None),
                        ("end", 2), ("end", 1), "finish", "close"]


def test_idle_input_is_left_out_of_the_combined_watermark():
    with TwoInputStreamOperatorTestHarness(CoStreamMap(Id())) as h:
        h.process_watermark1(10)
        h.process_watermark_status2(WatermarkStatus.IDLE)
        h.process_watermark1(20)
        h.process_watermark_status2(WatermarkStatus.ACTIVE)
        h.process_watermark2(15)
        h.process_both_watermarks(30)
    assert h.get_output() == [WatermarkStatus.ACTIVE, Watermark(10), Watermark(20), WatermarkStatus.ACTIVE,
                              Watermark(30)]


def test_one_input_methods_are_refused():
    with TwoInputStreamOperatorTestHarness(CoStreamMap(Id())) as h:
        for call in (lambda: h.process_element(1), lambda: h.process_batch([1]), lambda: h.process_watermark(1),
                     lambda: h.process_elements([1])):
            with pytest.raises(TypeError, match="two-input operator takes"):
                call()
        with pytest.raises(ValueError, match="input_id 1 or 2"):
            h.end_input(3)
        with pytest.raises(ValueError, match="2 values but 1 timestamps"):
            h.process_batch1([1, 2], [1])
        with pytest.raises(ValueError, match="not both"):
            h.process_element2(StreamRecord(1, 1), 1)


def test_harness_checks_its_arguments():
    with pytest.raises(TypeError, match="drives TwoInputStreamOperators, got StreamMap"):
        TwoInputStreamOperatorTestHarness(StreamMap(_Double()))
    with pytest.raises(TypeError, match="key_selector2 must be a KeySelector or a callable"):
        KeyedTwoInputStreamOperatorTestHarness(CoStreamMap(Id()), lambda v: v, 42)


def test_keyed_harness_gives_both_selectors_and_a_backend():
    h = KeyedTwoInputStreamOperatorTestHarness(CoStreamMap(Id()), lambda v: v[0], lambda v: v[1],
                                               max_parallelism=8, parallelism=2, subtask_index=1)
    with h:
        assert h.context.key_selector(("a", "b")) == "a"
        assert h.context.key_selector2(("a", "b")) == "b"
        assert h.keyed_state_backend.key_group_range.start_key_group == 4
        from rill.state.key_groups import assign_to_key_group  # noqa: PLC0415
        owned = next(k for k in "abcdefghijklmnop" if assign_to_key_group(k, 8) >= 4)
        h.set_current_key(owned)
        assert h.get_current_key() == owned


class _Double(MapFunction):
    def map(self, value):
        return 2 * value
