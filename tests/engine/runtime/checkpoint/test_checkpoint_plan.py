"""The pure parts of checkpoints after tasks finish (FLIP-147) and of retention: which tasks a
checkpoint triggers and waits for, fully finished operators in a pending checkpoint's metadata
and in ``_metadata``, their restore (deployed finished), and the retention table."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rill.common.checkpointing_options import ExternalizedCheckpointRetention as R
from rill.graph.states import ExecutionState as S
from rill.graph.states import JobStatus
from rill.network.partition.result_partition_id import ResultPartitionID
from rill.runtime.checkpoint.checkpoint_plan import calculate_checkpoint_plan
from rill.runtime.checkpoint.completed_checkpoint_store import discard_on_shutdown
from rill.runtime.checkpoint.pending_checkpoint import OperatorInfo, PendingCheckpoint
from rill.runtime.checkpoint.state_assignment import VertexRestoreTarget, assign_states
from rill.state.checkpoint.filesystem import FileSystemCheckpointStorage, resolve_checkpoint_pointer
from rill.state.checkpoint.metadata import CheckpointMetadata, OperatorState
from rill.state.checkpoint.storage import MemoryCheckpointStorageLocation


class _Gate(SimpleNamespace):
    pass


def _task(name, attempt, producers=(), vertex="v", index=0):
    gates = [_Gate(channels=[(ResultPartitionID(f"p-{p}", p), 0) for p in producers])] if producers else []
    tdd = SimpleNamespace(attempt_id=attempt, input_gates=gates, vertex=SimpleNamespace(get_id=lambda: vertex),
                          subtask_index=index)
    return SimpleNamespace(task_name_with_subtasks=name, tdd=tdd)


SHORT, LONG = _task("Short", "s"), _task("Long", "l")
UNION = _task("Union", "u", producers=("s", "l"))
SINK = _task("Sink", "k", producers=("u",))


def _names(tasks):
    return [t.task_name_with_subtasks for t in tasks]


def test_while_every_task_runs_the_sources_are_triggered_and_everyone_waited_for():
    plan, why = calculate_checkpoint_plan([(t, S.RUNNING) for t in (SHORT, LONG, UNION, SINK)], True)
    assert why == ""
    assert _names(plan.tasks_to_trigger) == ["Short", "Long"]
    assert _names(plan.tasks_to_wait_for) == ["Short", "Long", "Union", "Sink"]
    assert plan.finished_tasks == []


def test_a_finished_source_is_not_triggered_and_its_consumer_only_once_all_producers_finished():
    plan, _ = calculate_checkpoint_plan([(SHORT, S.FINISHED), (LONG, S.RUNNING), (UNION, S.RUNNING),
                                         (SINK, S.RUNNING)], True)
    assert (_names(plan.tasks_to_trigger), _names(plan.tasks_to_wait_for), _names(plan.finished_tasks)) == (
        ["Long"], ["Long", "Union", "Sink"], ["Short"])
    # both producers finished (one FINISHED, one whose final checkpoint completed): Union is
    # triggered directly
    plan, _ = calculate_checkpoint_plan([(SHORT, S.FINISHED), (LONG, S.RUNNING), (UNION, S.RUNNING),
                                         (SINK, S.RUNNING)], True, finishing_attempts={"l"})
    assert (_names(plan.tasks_to_trigger), _names(plan.tasks_to_wait_for), _names(plan.finished_tasks)) == (
        ["Union"], ["Union", "Sink"], ["Short", "Long"])


@pytest.mark.parametrize("tasks, allow, why", [
    ([], True, "the job has no task"),
    ([(SHORT, S.RUNNING), (UNION, S.DEPLOYING)], True, "Union is DEPLOYING"),
    ([(SHORT, S.FINISHED), (UNION, S.RUNNING)], False,
     "Short finished and execution.checkpointing.checkpoints-after-tasks-finish is off"),
    ([(SHORT, S.FINISHED), (UNION, S.FINISHED)], True, "every task finished"),
])
def test_no_plan_and_why(tasks, allow, why):
    assert calculate_checkpoint_plan(tasks, allow) == (None, why)


def _pending(finished_subtasks=()):
    ops = [OperatorInfo("a" * 32, 2, 128, "Source", "src", "v1"), OperatorInfo("b" * 32, 1, 128, "Sink", None, "v2")]
    return PendingCheckpoint("f" * 32, 4, 1000, {"x": "Source (1/2)", "y": "Sink (1/1)"}, ops,
                             MemoryCheckpointStorageLocation(), finished_subtasks=finished_subtasks)


def test_an_operator_whose_every_subtask_finished_is_fully_finished_without_state():
    pending = _pending(finished_subtasks=[("v1", 1)])
    pending.acknowledge_task("x", 0, {}, finished_vertex="v1")
    pending.acknowledge_task("y", 0, {}, finished_vertex=None)
    assert pending.finished_attempts == {"x"}
    states = pending.metadata().operator_states
    assert (states["a" * 32].fully_finished, states["b" * 32].fully_finished) == (True, False)
    half = _pending()
    half.acknowledge_task("x", 0, {}, finished_vertex="v1")
    assert half.metadata().operator_states["a" * 32].fully_finished is False  # subtask 1 still runs


def test_fully_finished_is_written_to_metadata_and_read_back(tmp_path):
    location = FileSystemCheckpointStorage(str(tmp_path), "f" * 32).initialize_location_for_checkpoint(3)
    metadata = CheckpointMetadata(3, 1, {"a" * 32: OperatorState("a" * 32, 2, 128, {}, "src", "Source",
                                                                 fully_finished=True),
                                         "b" * 32: OperatorState("b" * 32, 1, 128)}, job_id="f" * 32)
    back = resolve_checkpoint_pointer(location.finalize(metadata)).operator_states
    assert (back["a" * 32].fully_finished, back["b" * 32].fully_finished) == (True, False)
    with pytest.raises(ValueError, match="Operator src is fully finished: it has no subtask states"):
        OperatorState("a" * 32, 1, 128, {0: object()}, "src", fully_finished=True)


def test_a_fully_finished_vertex_is_deployed_finished_and_a_mixed_one_refused():
    metadata = CheckpointMetadata(5, 1, {"a" * 32: OperatorState("a" * 32, 2, 128, fully_finished=True),
                                         "b" * 32: OperatorState("b" * 32, 1, 128)})
    source = VertexRestoreTarget("v1", "Source", 3, 128, (("a" * 32, None),))
    sink = VertexRestoreTarget("v2", "Sink", 1, 128, (("b" * 32, None),))
    assignment = assign_states(metadata, [source, sink])
    assert [assignment.get_task_restore("v1", i).finished_on_restore for i in range(3)] == [True] * 3
    assert assignment.get_task_restore("v2", 0) is None  # no state: starts empty
    chained = VertexRestoreTarget("v3", "Source -> Sink", 1, 128, (("a" * 32, None), ("b" * 32, None)))
    with pytest.raises(ValueError, match=r"Can not restore vertex Source -> Sink \(v3\) which contains mixed "
                                         r"operator finished state"):
        assign_states(metadata, [chained])


@pytest.mark.parametrize("retention, finished, canceled, failed", [
    (R.NO_EXTERNALIZED_CHECKPOINTS, True, True, True),
    (R.DELETE_ON_CANCELLATION, True, True, False),
    (R.RETAIN_ON_CANCELLATION, False, False, False),
])
def test_what_a_job_that_ended_discards(retention, finished, canceled, failed):
    assert [discard_on_shutdown(retention, s) for s in (JobStatus.FINISHED, JobStatus.CANCELED, JobStatus.FAILED)] \
        == [finished, canceled, failed]
    with pytest.raises(ValueError, match="not when it is RESTARTING"):
        discard_on_shutdown(retention, JobStatus.RESTARTING)
