"""StateAssignmentOperation: a snapshot's keyed state, timers and operator state assigned to
the subtasks of a job at the same or another parallelism, restored through the operator test
harness exactly as a task restores (StreamTaskStateInitializer)."""

from __future__ import annotations

import pickle

import pytest

from rill.common.functions import KeyedProcessFunction
from rill.operators.process import KeyedProcessOperator
from rill.operators.testing import KeyedOneInputStreamOperatorTestHarness
from rill.runtime.checkpoint.job_manager_task_restore import JobManagerTaskRestore
from rill.runtime.checkpoint.state_assignment import (
    ReassignedOperatorSubtaskStateHandle,
    VertexRestoreTarget,
    assign_states,
)
from rill.state import ValueStateDescriptor
from rill.state.checkpoint import OperatorSubtaskState
from rill.state.checkpoint.operator_subtask_state import ChannelStateSnapshot
from rill.state.checkpoint.metadata import CheckpointMetadata, InMemoryOperatorSubtaskStateHandle, OperatorState
from rill.state.key_groups import assign_key_to_parallel_operator

MAX_P = 128
OP = "a" * 32       # generated id of the counting operator
UID_HASH = "b" * 32  # a user-defined id (set_uid_hash)
KEYS = [f"k{i}" for i in range(40)]


class Count(KeyedProcessFunction):
    """Counts records per key; every key's first record sets an event-time timer at 1000 + n,
    where n is the key's number, which emits (key, count)."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        if n == 1:
            ctx.timer_service().register_event_time_timer(1000 + int(value[0][1:]))

    def on_timer(self, timestamp, ctx):
        yield (ctx.get_current_key(), self.count.value())


def harness(parallelism, index):
    return KeyedOneInputStreamOperatorTestHarness(KeyedProcessOperator(Count()), lambda v: v[0],
                                                  max_parallelism=MAX_P, parallelism=parallelism,
                                                  subtask_index=index)


def expected_count(key):
    return int(key[1:]) % 5 + 1


def snapshot_at(parallelism, operator_state=None):
    """Run the counting operator at ``parallelism`` over key ki (i % 5 + 1 records each) and
    take checkpoint 7 of every subtask; ``operator_state(i)`` adds operator state to subtask i."""
    handles = {}
    for i in range(parallelism):
        with harness(parallelism, i) as h:
            for key in KEYS:
                if assign_key_to_parallel_operator(key, MAX_P, parallelism) == i:
                    for _ in range(expected_count(key)):
                        h.process_element((key, 1), 5)
            snap = h.snapshot(checkpoint_id=7)
        if operator_state is not None:
            snap = OperatorSubtaskState(7, operator_state(i), snap.keyed_state, snap.timers)
        handles[i] = InMemoryOperatorSubtaskStateHandle(snap)
    return CheckpointMetadata(7, 1000, {OP: OperatorState(OP, parallelism, MAX_P, handles, uid="counter",
                                                           name="Count")})


def target(parallelism, operator_ids=((OP, None),), max_parallelism=MAX_P):
    return VertexRestoreTarget("v" * 32, "Count", parallelism, max_parallelism, tuple(operator_ids))


def restore_all(assignment, parallelism):
    """Restore every new subtask from its share (pickled, as it travels to a task); fire all
    timers; returns {key: (count, subtask)} from the timers' output."""
    seen = {}
    for i in range(parallelism):
        restore = pickle.loads(pickle.dumps(assignment.get_task_restore("v" * 32, i)))
        h = harness(parallelism, i)
        h.initialize_state(restore.read_operator_state(OP))
        h.open()
        assert h.operator.restored_checkpoint_id == 7
        h.process_watermark(2000)
        for key, count in h.extract_output_values():
            assert key not in seen, f"key {key} restored twice"
            assert assign_key_to_parallel_operator(key, MAX_P, parallelism) == i
            seen[key] = (count, i)
        h.close()
    return seen


@pytest.mark.parametrize("old_p,new_p", [(4, 1), (1, 3), (3, 2), (2, 2), (2, 5)])
def test_keyed_counts_and_timers_restore_exactly_at_another_parallelism(old_p, new_p):
    assignment = assign_states(snapshot_at(old_p), [target(new_p)])
    assert assignment.checkpoint_id == 7
    assert sorted(k for k, _ in assignment.task_restores) == ["v" * 32] * new_p
    seen = restore_all(assignment, new_p)
    assert {k: c for k, (c, _) in seen.items()} == {k: expected_count(k) for k in KEYS}


def test_each_new_subtask_reads_only_the_old_subtasks_whose_key_groups_intersect_its_own():
    # 3 -> 2 over 128 key groups: old [0,42] [43,85] [86,127]; new [0,63] [64,127]
    assignment = assign_states(snapshot_at(3), [target(2)])
    first = assignment.get_task_restore("v" * 32, 0).task_state_snapshot[OP]
    second = assignment.get_task_restore("v" * 32, 1).task_state_snapshot[OP]
    assert isinstance(first, ReassignedOperatorSubtaskStateHandle)
    assert [(r.start_key_group, r.end_key_group) for _, r in first.keyed_sources] == [(0, 42), (43, 63)]
    assert [(r.start_key_group, r.end_key_group) for _, r in second.keyed_sources] == [(64, 85), (86, 127)]
    state = first.read()
    groups = {kg for snap in state.keyed_state for kg in snap.key_groups}
    assert groups and all(0 <= kg <= 63 for kg in groups)


def test_operator_state_list_round_robin_union_to_all_broadcast_copied():
    def op_state(i):
        return {"list": ("SPLIT_DISTRIBUTE", [f"e{i}{j}" for j in range(i + 1)]),  # 1, 2, 3 elements
                "union": ("UNION", [f"u{i}"]),
                "bc": ("BROADCAST", [("k", "same")])}
    assignment = assign_states(snapshot_at(3, op_state), [target(2)])
    states = [assignment.get_task_restore("v" * 32, i).read_operator_state(OP).operator_state for i in range(2)]
    # six list elements over two subtasks: contiguous chunks of three, in old subtask order
    assert states[0]["list"] == ("SPLIT_DISTRIBUTE", ("e00", "e10", "e11"))
    assert states[1]["list"] == ("SPLIT_DISTRIBUTE", ("e20", "e21", "e22"))
    assert states[0]["union"] == states[1]["union"] == ("UNION", ("u0", "u1", "u2"))
    assert states[0]["bc"] == states[1]["bc"] == ("BROADCAST", (("k", "same"),))


def test_union_state_goes_to_every_subtask_at_the_same_parallelism_too():
    assignment = assign_states(snapshot_at(2, lambda i: {"u": ("UNION", [i])}), [target(2)])
    for i in range(2):
        assert assignment.get_task_restore("v" * 32, i).read_operator_state(OP).operator_state == {
            "u": ("UNION", (0, 1))}


def test_state_is_matched_by_user_defined_id_first_and_filed_under_the_generated_id():
    meta = snapshot_at(2)
    by_uid_hash = CheckpointMetadata(7, 1000, {UID_HASH: OperatorState(
        UID_HASH, 2, MAX_P, meta.operator_states[OP].subtask_states, uid="counter")})
    generated = "c" * 32
    assignment = assign_states(by_uid_hash, [VertexRestoreTarget("v" * 32, "Count", 2, MAX_P,
                                                                 ((generated, UID_HASH),))])
    assert set(assignment.get_task_restore("v" * 32, 0).task_state_snapshot) == {generated}
    # a generated id equal to the state's does not match when a user-defined id is set
    with pytest.raises(ValueError, match="Cannot map checkpoint/savepoint state for operator"):
        assign_states(meta, [VertexRestoreTarget("v" * 32, "Count", 2, MAX_P, ((OP, UID_HASH),))])


def test_unmatched_state_fails_naming_the_operator_unless_allowed():
    meta = snapshot_at(2)
    other = target(2, operator_ids=(("d" * 32, None),))
    with pytest.raises(ValueError) as e:
        assign_states(meta, [other])
    assert str(e.value) == (
        f"Failed to rollback to checkpoint/savepoint checkpoint 7. Cannot map checkpoint/savepoint state for "
        f"operator {OP}, uid 'counter', name 'Count' to the new program, because the operator is not available "
        "in the new program. If you want to allow to skip this, you can set the --allow-non-restored-state "
        "option on the CLI (execution.state-recovery.ignore-unclaimed-state: true).")
    assignment = assign_states(meta, [other], allow_non_restored_state=True)
    assert assignment.task_restores == {} and assignment.skipped_operators == (OP,)


def test_an_operator_state_without_subtask_states_needs_no_operator():
    meta = CheckpointMetadata(3, 0, {OP: OperatorState(OP, 2, MAX_P, {})})
    assert assign_states(meta, [target(2, operator_ids=(("d" * 32, None),))]).task_restores == {}


def test_a_max_parallelism_change_is_refused_with_flinks_message():
    with pytest.raises(ValueError) as e:
        assign_states(snapshot_at(2), [target(2, max_parallelism=256)])
    assert str(e.value) == (
        f"The maximum parallelism (128) with which the latest checkpoint of the execution job vertex Count "
        f"({'v' * 32}) has been taken and the current maximum parallelism (256) changed. This is currently "
        "not supported.")


def test_a_parallelism_above_the_states_max_parallelism_is_refused():
    meta = CheckpointMetadata(3, 0, {OP: OperatorState(OP, 2, 4, {0: InMemoryOperatorSubtaskStateHandle(
        OperatorSubtaskState(3))})})
    with pytest.raises(ValueError, match=r"The maximum parallelism \(4\) of the restored state is lower than "
                                         r"the configured parallelism \(5\)"):
        assign_states(meta, [target(5, max_parallelism=4)])


def test_a_task_restore_holding_a_record_gives_it_back_and_absent_operators_none():
    record = OperatorSubtaskState(4, {"x": ("UNION", [1])})
    restore = JobManagerTaskRestore(4, {OP: record})
    assert restore.read_operator_state(OP) is record
    assert restore.read_operator_state("e" * 32) is None


def _unaligned_snapshot(parallelism):
    """Operator state with in-flight data (an unaligned checkpoint) in every subtask."""
    from_subtask = {i: ChannelStateSnapshot([(0, 0, f"in-{i}".encode())], [(0, 1, f"out-{i}".encode())])
                    for i in range(parallelism)}
    handles = {i: InMemoryOperatorSubtaskStateHandle(OperatorSubtaskState(5, channel_state=c))
               for i, c in from_subtask.items()}
    return CheckpointMetadata(5, 0, {OP: OperatorState(OP, parallelism, MAX_P, handles)}), from_subtask


def test_in_flight_data_goes_to_the_subtask_of_the_same_index():
    meta, from_subtask = _unaligned_snapshot(2)
    assignment = assign_states(meta, [target(2)])
    for i in range(2):
        restore = pickle.loads(pickle.dumps(assignment.get_task_restore("v" * 32, i)))
        assert restore.read_channel_state(OP) == from_subtask[i]


def test_in_flight_data_refuses_another_parallelism():
    meta, _ = _unaligned_snapshot(2)
    with pytest.raises(ValueError, match=r"Operator a{32} \(Count\): the snapshot is an unaligned checkpoint with "
                                         r"in-flight data \(subtasks \[0, 1\]\), which Rill restores only at the same "
                                         r"parallelism \(2\), not at 3"):
        assign_states(meta, [target(3)])
