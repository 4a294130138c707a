"""StreamTaskStateInitializer and snapshot_operator_state: an operator's keyed state, timers and
operator state go into one OperatorSubtaskState and come back from it, through the operator
test harnesses (which build their operators' state services with the initializer, as the
task does)."""

from __future__ import annotations

import pytest

from rill.common.functions import KeyedProcessFunction, MapFunction
from rill.datastream.checkpointed_function import CheckpointedFunction
from rill.operators.context import StreamOperatorContext
from rill.operators.process import KeyedProcessOperator
from rill.operators.simple import StreamMap
from rill.operators.state_initializer import StreamTaskStateInitializer, snapshot_operator_state_sync
from rill.operators.testing import KeyedOneInputStreamOperatorTestHarness, OneInputStreamOperatorTestHarness
from rill.state import (
    DefaultOperatorStateBackend,
    HeapKeyedStateBackend,
    KeyGroupRange,
    ListStateDescriptor,
    ValueStateDescriptor,
)
from rill.state.checkpoint import OperatorSubtaskState


class CountAndRemind(KeyedProcessFunction):
    """Counts per key; the first record of a key sets an event-time timer at +10 and a
    processing-time timer at 100 that emit the key's count."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        if n == 1:
            ctx.timer_service().register_event_time_timer(ctx.timestamp() + 10)
            ctx.timer_service().register_processing_time_timer(100)

    def on_timer(self, timestamp, ctx):
        yield ("timer", ctx.get_current_key(), timestamp, self.count.value())


def keyed_harness():
    return KeyedOneInputStreamOperatorTestHarness(KeyedProcessOperator(CountAndRemind()), lambda v: v[0])


def test_keyed_state_and_both_kinds_of_timers_survive_a_snapshot():
    with keyed_harness() as before:
        before.process_element(("a", 1), 1)
        before.process_element(("a", 2), 2)
        before.process_element(("b", 1), 5)
        snapshot = before.snapshot(checkpoint_id=3, timestamp=1_000)
        before.process_element(("a", 3), 6)        # after the snapshot: not in it
    assert isinstance(snapshot, OperatorSubtaskState)
    assert snapshot.checkpoint_id == 3 and snapshot.has_state()
    assert set(snapshot.timers) == {"user-timers"}

    after = keyed_harness()
    after.initialize_state(snapshot)
    after.open()
    assert after.operator.is_restored() and after.operator.restored_checkpoint_id == 3
    assert after.num_event_time_timers() == 2 and after.num_processing_time_timers() == 2
    after.process_watermark(11)
    assert after.extract_output_values() == [("timer", "a", 11, 2)]
    after.set_processing_time(100)
    assert sorted(after.extract_output_values()[1:]) == [("timer", "a", 100, 2), ("timer", "b", 100, 1)]
    after.process_watermark(15)
    assert after.extract_output_values()[-1] == ("timer", "b", 15, 1)
    after.close()


def test_the_sync_part_keeps_timers_and_state_of_its_time_while_timers_fire_and_come():
    with keyed_harness() as h:
        for i, key in enumerate(["a", "b", "c", "a"]):
            h.process_element((key, i), i)
        expected = h.snapshot(checkpoint_id=4)
        futures = snapshot_operator_state_sync(h.operator, 4, 0)
        h.process_element(("d", 1), 7)       # new key, new timers
        h.process_watermark(100)             # every event-time timer fires and goes
        h.set_processing_time(10_000)        # and every processing-time timer
        assert h.num_event_time_timers() == 0 and h.num_processing_time_timers() == 0
        got = futures.finalize()
    assert got.timers == expected.timers and got.timers["user-timers"].key_groups
    assert got.keyed_state == expected.keyed_state


def test_restored_timers_are_registered_when_the_operator_asks_for_its_timer_service():
    # As Flink's InternalTimeServiceManager: a timer can only fire once its triggerable (the
    # operator, from open()) is bound.
    with keyed_harness() as before:
        before.process_element(("a", 1), 1)
        snapshot = before.snapshot()
    after = keyed_harness()
    after.initialize_state(snapshot)
    assert after.num_processing_time_timers() == 0
    assert after.processing_time_service.get_active_timer_timestamps() == []
    after.open()
    assert after.num_processing_time_timers() == 1
    assert after.processing_time_service.get_active_timer_timestamps() == [100]
    after.set_processing_time(500)
    assert after.extract_output_values() == [("timer", "a", 100, 1)]
    after.close()


class Buffering(MapFunction, CheckpointedFunction):
    def initialize_state(self, context):
        self.state = context.get_operator_state_store().get_list_state(ListStateDescriptor("buffer"))
        self.restored = context.is_restored(), context.get_restored_checkpoint_id()
        self.buffer = list(self.state.get())

    def snapshot_state(self, context):
        self.state.update(self.buffer)

    def map(self, value):
        self.buffer.append(value)
        return value


def test_operator_state_of_a_checkpointed_function_survives_a_snapshot():
    with OneInputStreamOperatorTestHarness(StreamMap(Buffering())) as before:
        before.process_elements([1, 2])
        snapshot = before.snapshot(checkpoint_id=9)
    assert snapshot.operator_state == {"buffer": ("SPLIT_DISTRIBUTE", (1, 2))}
    assert snapshot.keyed_state == () and snapshot.timers == {}
    fn = Buffering()
    after = OneInputStreamOperatorTestHarness(StreamMap(fn))
    after.initialize_state(snapshot)
    after.open()
    assert fn.restored == (True, 9) and fn.buffer == [1, 2]
    after.close()


def test_an_operator_not_restored_says_so():
    fn = Buffering()
    with OneInputStreamOperatorTestHarness(StreamMap(fn)) as h:
        assert fn.restored == (False, None)
        assert not h.operator.is_restored()


def test_restoring_after_initialization_is_refused():
    with OneInputStreamOperatorTestHarness(StreamMap(Buffering())) as h:
        with pytest.raises(RuntimeError):
            h.initialize_state(OperatorSubtaskState())


def _context(keyed: bool, **kwargs) -> StreamOperatorContext:
    return StreamOperatorContext("t", "op", "0" * 32, subtask_index=kwargs.pop("subtask_index", 0),
                                 parallelism=kwargs.pop("parallelism", 1), max_parallelism=128,
                                 key_selector=(lambda v: v) if keyed else None, **kwargs)


def test_keyed_operators_get_a_keyed_backend_over_their_key_groups_and_timers():
    ctx = StreamTaskStateInitializer().initialize(_context(True, subtask_index=1, parallelism=2))
    assert isinstance(ctx.keyed_state_backend, HeapKeyedStateBackend)
    assert ctx.keyed_state_backend.get_key_group_range() == KeyGroupRange(64, 127)
    assert ctx.timer_service_manager is not None
    assert isinstance(ctx.operator_state_backend, DefaultOperatorStateBackend)
    assert ctx.runtime_context is not None and not ctx.restored


def test_non_keyed_operators_get_only_operator_state():
    ctx = StreamTaskStateInitializer().initialize(_context(False))
    assert ctx.keyed_state_backend is None and ctx.timer_service_manager is None
    assert ctx.operator_state_backend is not None


def test_keyed_state_for_a_non_keyed_operator_is_an_error_naming_it():
    with keyed_harness() as h:
        h.process_element(("a", 1), 1)
        snapshot = h.snapshot()
    with pytest.raises(ValueError, match="'op' is not keyed"):
        StreamTaskStateInitializer().initialize(_context(False), snapshot)


def test_backends_come_from_the_factories():
    made = []

    def keyed_factory(key_groups, max_parallelism):
        made.append((key_groups, max_parallelism))
        return HeapKeyedStateBackend(key_groups, max_parallelism)

    initializer = StreamTaskStateInitializer(keyed_factory, lambda name: DefaultOperatorStateBackend(name + "!"))
    ctx = initializer.initialize(_context(True))
    assert made == [(KeyGroupRange(0, 127), 128)]
    assert ctx.operator_state_backend.operator_name == "op!"


def test_restored_timers_of_a_service_not_asked_for_are_kept_in_the_next_snapshot():
    with keyed_harness() as before:
        before.process_element(("a", 1), 1)
        snapshot = before.snapshot()
    renamed = OperatorSubtaskState(snapshot.checkpoint_id, snapshot.operator_state, snapshot.keyed_state,
                                   {"other-timers": snapshot.timers["user-timers"]})
    after = keyed_harness()
    after.initialize_state(renamed)
    after.open()
    assert after.num_event_time_timers() == 0
    again = after.snapshot()
    assert again.timers["other-timers"] == snapshot.timers["user-timers"]
    assert again.timers["user-timers"].key_groups == {}
    after.close()
