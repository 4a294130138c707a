"""CheckpointedFunction through the operator test harness: hook order and contexts, operator
state snapshot by the operator, restore into fresh operators at parallelism 1→2 and 2→1 with
the redistributed contents checked exactly, keyed state store on keyed streams."""

from __future__ import annotations

import pytest

from rill.datastream.checkpointed_function import (
    CheckpointedFunction,
    FunctionInitializationContext,
    FunctionSnapshotContext,
)
from rill.datastream.functions import KeyedProcessFunction, MapFunction
from rill.operators.process import KeyedProcessOperator
from rill.operators.simple import StreamMap
from rill.operators.testing import KeyedOneInputStreamOperatorTestHarness, OneInputStreamOperatorTestHarness
from rill.state import (
    DefaultOperatorStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
    redistribute,
)


class BufferingMap(MapFunction, CheckpointedFunction):
    """Passes records through; keeps them in a buffer that survives in split list state, its
    subtask index in union list state and the last record in broadcast state."""

    def __init__(self):
        self.events = []
        self.buffer = []

    def initialize_state(self, context: FunctionInitializationContext) -> None:
        assert isinstance(context, FunctionInitializationContext)
        store = context.get_operator_state_store()
        self.events.append(("initialize_state", context.is_restored(), context.get_restored_checkpoint_id(),
                            context.get_keyed_state_store()))
        self.buffered = store.get_list_state(ListStateDescriptor("buffered"))
        self.subtasks = store.get_union_list_state(ListStateDescriptor("subtasks"))
        self.last = store.get_broadcast_state(MapStateDescriptor("last"))
        self.buffer = self.buffered.get()
        self.restored_subtasks = self.subtasks.get()
        self.restored_last = self.last.items()

    def open(self, runtime_context):
        self.events.append("open")
        self.index = runtime_context.get_index_of_this_subtask()

    def map(self, value):
        self.buffer.append(value)
        self.last.put("last", value)
        return value

    def snapshot_state(self, context: FunctionSnapshotContext) -> None:
        assert isinstance(context, FunctionSnapshotContext)
        self.events.append(("snapshot_state", context.get_checkpoint_id(), context.get_checkpoint_timestamp()))
        self.buffered.update(self.buffer)
        self.subtasks.update([self.index])

    def close(self):
        self.events.append("close")


def harness(fn, parallelism=1, subtask_index=0, restored=None, checkpoint_id=None):
    """A harness around ``StreamMap(fn)``; ``restored``: the subtask's share to restore."""
    h = OneInputStreamOperatorTestHarness(StreamMap(fn), parallelism=parallelism, subtask_index=subtask_index)
    h.setup()
    if restored is not None:
        h.operator.restore_state(restored, checkpoint_id)
    h.open()
    return h


def test_hooks_in_order_with_contexts():
    fn = BufferingMap()
    h = harness(fn)
    h.process_elements([1, 2])
    assert h.operator.snapshot_state(7, 1_000) == {
        "buffered": ("SPLIT_DISTRIBUTE", [1, 2]),
        "subtasks": ("UNION", [0]),
        "last": ("BROADCAST", [("last", 2)]),
    }
    h.close()
    assert fn.events == [("initialize_state", False, None, None), "open", ("snapshot_state", 7, 1_000), "close"]
    assert h.extract_output_values() == [1, 2]


def test_restore_1_to_2_and_back_2_to_1():
    fn = BufferingMap()
    h = harness(fn)
    h.process_elements([1, 2, 3, 4, 5])
    old = [h.operator.snapshot_state(1, 100)]
    h.close()

    shares = redistribute(old, 2)
    restored = [BufferingMap(), BufferingMap()]
    harnesses = [harness(f, 2, i, shares[i], checkpoint_id=1) for i, f in enumerate(restored)]
    assert [f.events[0][:3] for f in restored] == [("initialize_state", True, 1)] * 2
    assert [f.buffer for f in restored] == [[1, 2, 3], [4, 5]]
    assert [f.restored_subtasks for f in restored] == [[0], [0]]
    assert [f.restored_last for f in restored] == [[("last", 5)], [("last", 5)]]

    harnesses[0].process_element(6)
    harnesses[1].process_element(7)
    old = [h2.operator.snapshot_state(2, 200) for h2 in harnesses]
    assert [f.events[-1] for f in restored] == [("snapshot_state", 2, 200)] * 2
    for h2 in harnesses:
        h2.close()
    assert old == [
        {"buffered": ("SPLIT_DISTRIBUTE", [1, 2, 3, 6]), "subtasks": ("UNION", [0]), "last": ("BROADCAST", [("last", 6)])},
        {"buffered": ("SPLIT_DISTRIBUTE", [4, 5, 7]), "subtasks": ("UNION", [1]), "last": ("BROADCAST", [("last", 7)])},
    ]

    merged = BufferingMap()
    h1 = harness(merged, 1, 0, redistribute(old, 1)[0], checkpoint_id=2)
    assert merged.buffer == [1, 2, 3, 6, 4, 5, 7]
    assert merged.restored_subtasks == [0, 1]
    assert merged.restored_last == [("last", 6)]  # old subtask 0's copy
    h1.close()


def test_restored_without_a_share_is_still_restored():
    fn = BufferingMap()
    h = harness(fn, 2, 1, restored={}, checkpoint_id=3)
    assert fn.events[0][:3] == ("initialize_state", True, 3)
    assert fn.buffer == [] and fn.restored_subtasks == []
    h.close()


def test_restored_state_not_accessed_is_snapshot_again():
    class Plain(MapFunction):
        def map(self, value):
            return value

    h = OneInputStreamOperatorTestHarness(StreamMap(Plain()))
    h.setup()
    h.operator.restore_state({"kept": ("UNION", ["x"])}, 1)
    h.open()
    assert h.operator.snapshot_state(2, 0) == {"kept": ("UNION", ["x"])}
    h.close()


def test_operator_without_checkpointed_function_has_no_operator_state():
    class Plain(MapFunction):
        def map(self, value):
            return value

    with OneInputStreamOperatorTestHarness(StreamMap(Plain())) as h:
        h.process_element(1)
        assert h.operator.snapshot_state(1, 0) == {}
        assert h.operator._operator_state_backend is None
        assert not h.operator.is_restored()


def test_restore_after_initialization_is_refused():
    h = harness(BufferingMap())
    with pytest.raises(RuntimeError, match=r"restore_state\(\) after the operator state was initialized"):
        h.operator.restore_state({}, 1)
    h.close()


def test_backend_from_the_context_is_used():
    backend = DefaultOperatorStateBackend("from-task")
    h = OneInputStreamOperatorTestHarness(StreamMap(BufferingMap()))
    h.context.operator_state_backend = backend  # what the task will provide
    h.open()
    h.process_element(1)
    h.operator.snapshot_state(1, 0)
    assert h.operator.operator_state_backend is backend
    assert backend.get_list_state(ListStateDescriptor("buffered")).get() == [1]
    h.close()


class CountPerKey(KeyedProcessFunction, CheckpointedFunction):
    """Registers keyed state in initialize_state and counts records per key."""

    def initialize_state(self, context):
        self.keyed_store = context.get_keyed_state_store()
        self.count = self.keyed_store.get_state(ValueStateDescriptor("count"))
        self.total = context.get_operator_state_store().get_list_state(ListStateDescriptor("total"))
        self.seen = sum(self.total.get())

    def process_element(self, value, ctx):
        self.count.update((self.count.value() or 0) + 1)
        self.seen += 1
        yield ctx.get_current_key(), self.count.value()

    def snapshot_state(self, context):
        self.total.update([self.seen])


def test_keyed_state_store_on_a_keyed_stream():
    fn = CountPerKey()
    with KeyedOneInputStreamOperatorTestHarness(KeyedProcessOperator(fn), lambda v: v) as h:
        h.process_elements(["a", "b", "a"])
        assert h.extract_output_values() == [("a", 1), ("b", 1), ("a", 2)]
        assert h.operator.snapshot_state(1, 0) == {"total": ("SPLIT_DISTRIBUTE", [3])}
    with pytest.raises(TypeError, match="^get_state expects a ValueStateDescriptor"):
        fn.keyed_store.get_state(ListStateDescriptor("x"))
