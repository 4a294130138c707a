"""Which tasks a checkpoint triggers and waits for (Flink's ``CheckpointPlan`` and
``DefaultCheckpointPlanCalculator``), with checkpoints after tasks finish (FLIP-147).

While every task runs, a checkpoint triggers the source tasks (no network inputs) and waits for
every task. Once some tasks finished (``execution.checkpointing.checkpoints-after-tasks-finish``,
on by default), the running tasks whose every input channel's producer has finished take the
sources' place: the coordinator triggers them directly (a finished source is no longer
triggered; its consumers are) and the checkpoint waits for the running tasks only. The finished
tasks are recorded as such (their vertex's operators are *fully finished* in the metadata once
every subtask finished).

A task counts as finished when the JobMaster recorded it FINISHED, or when it acknowledged a
checkpoint that completed with its operators finished (its final checkpoint): it exits on that
notification and must not be waited for by the next checkpoint (Flink waits for it and then
declines the checkpoint when the task is gone).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, AbstractSet, List, Optional, Sequence, Tuple

from rill.graph.states import ExecutionState

__all__ = ["CheckpointPlan", "calculate_checkpoint_plan"]


@dataclass(frozen=True)
class CheckpointPlan:
    """
    :param tasks_to_trigger: the running tasks whose inputs' producers all finished (the
        sources while nothing finished): each gets ``trigger_checkpoint``.
    :param tasks_to_wait_for: every running task: the checkpoint completes when each one
        acknowledged.
    :param finished_tasks: the tasks that finished (recorded as finished in the checkpoint).
    """

    tasks_to_trigger: List[Any]
    tasks_to_wait_for: List[Any]
    finished_tasks: List[Any]


def _producers(task) -> List[str]:
    """The attempt ids of the producers of every input channel of ``task``."""
    return [partition_id.producer_id for gate in task.tdd.input_gates for partition_id, _ in gate.channels]


def calculate_checkpoint_plan(tasks: Sequence[Tuple[Any, ExecutionState]], allow_finished_tasks: bool,
                              finishing_attempts: AbstractSet[str] = frozenset()) -> Tuple[Optional[CheckpointPlan], str]:
    """The plan of a checkpoint over ``tasks`` (each with its state as the JobMaster recorded it).

    :param allow_finished_tasks: ``checkpoints_after_tasks_finish``: without it a finished task
        makes the checkpoint impossible, as before FLIP-147.
    :param finishing_attempts: attempt ids whose final checkpoint completed (they exit now and
        count as finished).
    :returns: ``(plan, "")``, or ``(None, why)`` when no checkpoint can be taken now: a task is
        neither running nor finished (deploying, cancelling, failed...), a task finished and
        finished tasks are not allowed, or every task finished.
    """
    if not tasks:
        return None, "the job has no task"
    running, finished = [], []
    for task, state in tasks:
        if state is ExecutionState.FINISHED or (state is ExecutionState.RUNNING
                                                and task.tdd.attempt_id in finishing_attempts):
            finished.append(task)
        elif state is ExecutionState.RUNNING:
            running.append(task)
        else:
            return None, f"{task.task_name_with_subtasks} is {state.name}"
    if finished and not allow_finished_tasks:
        return None, (f"{finished[0].task_name_with_subtasks} finished and "
                      "execution.checkpointing.checkpoints-after-tasks-finish is off")
    if not running:
        return None, "every task finished"
    finished_ids = {t.tdd.attempt_id for t in finished}
    trigger = [t for t in running if all(p in finished_ids for p in _producers(t))]
    return CheckpointPlan(trigger, running, finished), ""
