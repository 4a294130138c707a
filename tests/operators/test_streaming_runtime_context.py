"""StreamingRuntimeContext: subtask facts, job parameters, keyed state access and its errors."""

import pytest

from rill.datastream.functions import MapFunction, RuntimeContext
from rill.operators.context import StreamOperatorContext
from rill.operators.runtime_context import StreamingRuntimeContext
from rill.operators.simple import StreamMap
from rill.operators.testing import KeyedOneInputStreamOperatorTestHarness, OneInputStreamOperatorTestHarness
from rill.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from rill.datastream.functions import AggregateFunction


def context(**kw):
    base = dict(task_name="Map -> Filter", operator_name="Map", operator_id="0" * 32, subtask_index=1,
                parallelism=4, max_parallelism=256, attempt_number=2, job_parameters={"a": "1"})
    base.update(kw)
    return StreamOperatorContext(**base)


def test_subtask_facts():
    rc = StreamingRuntimeContext(context())
    assert isinstance(rc, RuntimeContext)
    assert rc.get_task_name() == "Map -> Filter"
    assert rc.get_number_of_parallel_subtasks() == 4
    assert rc.get_max_number_of_parallel_subtasks() == 256
    assert rc.get_index_of_this_subtask() == 1
    assert rc.get_attempt_number() == 2
    assert rc.get_task_name_with_subtasks() == "Map -> Filter (2/4)"
    assert rc.get_job_parameter("a") == "1"
    assert rc.get_job_parameter("b") is None
    assert rc.get_job_parameter("b", "d") == "d"
    assert rc.get_job_parameters() == {"a": "1"}
    assert rc.get_metrics_group() is None


@pytest.mark.parametrize("getter, descriptor", [
    ("get_state", ValueStateDescriptor("v")),
    ("get_list_state", ListStateDescriptor("l")),
    ("get_map_state", MapStateDescriptor("m")),
])
def test_keyed_state_on_a_non_keyed_operator_raises_flinks_message(getter, descriptor):
    rc = StreamingRuntimeContext(context())
    with pytest.raises(RuntimeError) as e:
        getattr(rc, getter)(descriptor)
    assert str(e.value) == ("Keyed state can only be used on a 'keyed stream', i.e., after a 'keyBy()' "
                            "operation. (operator 'Map')")


def test_wrong_descriptor_kind_is_a_type_error():
    rc = StreamingRuntimeContext(context())
    with pytest.raises(TypeError, match="get_state expects a ValueStateDescriptor"):
        rc.get_state(ListStateDescriptor("l"))


class Avg(AggregateFunction):
    def create_accumulator(self):
        return [0, 0]

    def add(self, value, acc):
        return [acc[0] + value, acc[1] + 1]

    def get_result(self, acc):
        return acc[0] / acc[1]


def test_all_state_kinds_from_a_rich_map_on_a_keyed_stream():
    """As Flink, the operator sets the record's key before calling a rich function."""
    class UsesState(MapFunction):
        def open(self, rc):
            self.rc = rc
            self.v = rc.get_state(ValueStateDescriptor("v"))
            self.l = rc.get_list_state(ListStateDescriptor("l"))
            self.m = rc.get_map_state(MapStateDescriptor("m"))
            self.r = rc.get_reducing_state(ReducingStateDescriptor("r", lambda a, b: a + b))
            self.a = rc.get_aggregating_state(AggregatingStateDescriptor("a", Avg()))

        def map(self, value):
            key, x = value
            self.v.update(x)
            self.l.add(x)
            self.m.put(x, True)
            self.r.add(x)
            self.a.add(x)
            return key, self.v.value(), list(self.l.get()), sorted(self.m.keys()), self.r.get(), self.a.get()

    with KeyedOneInputStreamOperatorTestHarness(StreamMap(UsesState()), lambda v: v[0]) as h:
        h.process_elements([("a", 1), ("b", 5), ("a", 3)])
    assert h.extract_output_values() == [
        ("a", 1, [1], [1], 1, 1.0),
        ("b", 5, [5], [5], 5, 5.0),
        ("a", 3, [1, 3], [1, 3], 4, 2.0),
    ]


def test_harness_runtime_context_reports_subtask():
    seen = {}

    class Probe(MapFunction):
        def open(self, rc):
            seen.update(name=rc.get_task_name_with_subtasks(), p=rc.get_job_parameter("p"))

        def map(self, v):
            return v

    with OneInputStreamOperatorTestHarness(StreamMap(Probe()), parallelism=3, subtask_index=2,
                                           task_name="T", job_parameters={"p": "x"}):
        pass
    assert seen == {"name": "T (3/3)", "p": "x"}
