"""What one Spark task of a savepoint write does, run directly (no Spark): the subtask's files
through the checkpoint writer, read back through the checkpoint's own handle; processing-time
timers kept but never fired; an empty subtask; keyed state refused outside a keyed bootstrap."""

import pytest

from rill.common.typeinfo import Types
from rill.state import ListStateDescriptor, ValueStateDescriptor
from rill.state.checkpoint.filesystem import FileOperatorSubtaskStateHandle
from rill.state.key_groups import KeyGroupRange, assign_to_key_group
from rill.state_processor import KeyedStateBootstrapFunction, StateBootstrapFunction
from rill.state_processor.bootstrap_tasks import (
    BootstrapError,
    BootstrapTask,
    write_keyed_subtask,
    write_operator_state_subtask,
)

OPERATOR_ID = "ab" * 16


class Remember(KeyedStateBootstrapFunction):
    def open(self, runtime_context):
        self.last = runtime_context.get_state(ValueStateDescriptor("last", Types.STRING()))

    def process_element(self, value, ctx):
        self.last.update(value)
        now = ctx.timer_service().current_processing_time()
        # due already: a firing timer would leave the queue, a bootstrap's is kept to be written
        ctx.timer_service().register_processing_time_timer(now - 1)
        ctx.timer_service().register_event_time_timer(100)


class KeyedInOperatorState(StateBootstrapFunction):
    def initialize_state(self, context):
        pass

    def open(self, runtime_context):
        runtime_context.get_state(ValueStateDescriptor("x", Types.LONG()))

    def process_element(self, value, ctx):
        pass

    def snapshot_state(self, context):
        pass


def _task(tmp_path, function, parallelism=2):
    return BootstrapTask(str(tmp_path), OPERATOR_ID, "remember", parallelism, 128, function, 0, 1_000)


def test_a_keyed_subtask_writes_state_and_timers_that_read_back_as_a_checkpoints(tmp_path):
    keys = [k for k in ("a", "b", "c", "d", "e", "f") if assign_to_key_group(k, 128) < 64]  # subtask 0's
    index, description = write_keyed_subtask(_task(tmp_path, Remember()), 0, [(k, f"{k}!") for k in keys])
    assert index == 0
    state = FileOperatorSubtaskStateHandle(str(tmp_path), description).read()
    (keyed,) = state.keyed_state
    assert keyed.key_group_range == KeyGroupRange(0, 63)
    assert sorted((k, v) for kg in keyed.key_groups for k, _, v in keyed.entries("last", kg)) == sorted(
        (k, f"{k}!") for k in keys)
    timers = state.timers["user-timers"].key_groups
    assert sorted(k for t in timers.values() for _, k, _ in t.event_time) == sorted(keys)
    assert sorted(k for t in timers.values() for _, k, _ in t.processing_time) == sorted(keys)
    assert {ts for t in timers.values() for ts, _, _ in t.event_time} == {100}


def test_an_empty_subtask_writes_no_file_and_reads_back_empty(tmp_path):
    index, description = write_keyed_subtask(_task(tmp_path, Remember()), 1, [])
    handle = FileOperatorSubtaskStateHandle(str(tmp_path), description)
    assert (index, handle.files()) == (1, [])
    assert not handle.read().has_state()


def test_keyed_state_outside_a_keyed_bootstrap_is_refused_naming_the_operator(tmp_path):
    with pytest.raises(RuntimeError, match=r"get_state: keyed state needs a keyed bootstrap \(bootstrap_with\(df\)"
                                           r"\.key_by\(\.\.\.\)\) \(Bootstrap\(uid 'remember'\)\)"):
        write_operator_state_subtask(_task(tmp_path, KeyedInOperatorState()), 0, [])


def test_a_failing_function_names_the_operator_and_the_row(tmp_path):
    class Failing(Remember):
        def process_element(self, value, ctx):
            raise KeyError(value)

    with pytest.raises(BootstrapError, match=r"with_operator\(uid 'remember'\): Failing.process_element failed on "
                                             r"the row 'x!' \(key 'x'\): KeyError: 'x!'"):
        write_keyed_subtask(_task(tmp_path, Failing(), parallelism=1), 0, [("x", "x!")])


def test_operator_list_state_is_snapshotted_after_the_rows(tmp_path):
    class Collect(StateBootstrapFunction):
        def initialize_state(self, context):
            self.state = context.get_operator_state_store().get_list_state(ListStateDescriptor("rows", Types.LONG()))
            self.rows = []

        def process_element(self, value, ctx):
            assert ctx.current_processing_time() > 0
            self.rows.append(value)

        def snapshot_state(self, context):
            assert (context.get_checkpoint_id(), context.get_checkpoint_timestamp()) == (0, 1_000)
            self.state.update(self.rows)

    _, description = write_operator_state_subtask(_task(tmp_path, Collect()), 1, iter([3, 1, 2]))
    state = FileOperatorSubtaskStateHandle(str(tmp_path), description).read()
    assert state.operator_state == {"rows": ("SPLIT_DISTRIBUTE", (3, 1, 2))}
