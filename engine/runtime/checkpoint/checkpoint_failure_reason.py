"""Why a checkpoint failed, and which failures count against the tolerable number (Flink's
``CheckpointFailureReason``, ``CheckpointException`` and the counting rule of
``CheckpointFailureManager``)."""

from __future__ import annotations

import enum

__all__ = ["CheckpointFailureReason", "CheckpointException"]


class CheckpointFailureReason(enum.Enum):
    """Flink's ``CheckpointFailureReason`` (the reasons Rill produces), each with its message
    and whether it counts towards ``execution.checkpointing.tolerable-failed-checkpoints``
    (Flink counts only I/O, asynchronous-phase, declined, expired and finalization failures;
    the others say "not now" rather than "checkpointing is broken")."""

    PERIODIC_SCHEDULER_SHUTDOWN = ("Periodic checkpoint scheduler is shut down.", False)
    TOO_MANY_CHECKPOINT_REQUESTS = ("The maximum number of queued checkpoint requests exceeded", False)
    NOT_ALL_REQUIRED_TASKS_RUNNING = ("Not all required tasks are currently running.", False)
    CHECKPOINT_EXPIRED = ("Checkpoint expired before completing.", True)
    CHECKPOINT_SUBSUMED = ("Checkpoint has been subsumed.", False)
    CHECKPOINT_DECLINED = ("Checkpoint was declined.", True)
    CHECKPOINT_DECLINED_TASK_NOT_READY = ("Checkpoint was declined (tasks not ready)", False)
    CHECKPOINT_DECLINED_TASK_CLOSING = ("Checkpoint was declined (task is closing)", False)
    CHECKPOINT_DECLINED_SUBSUMED = ("Checkpoint was canceled because a barrier from newer checkpoint was "
                                    "received.", False)
    CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER = ("Task received cancellation from one of its inputs", False)
    CHECKPOINT_ASYNC_EXCEPTION = ("Asynchronous task checkpoint failed.", True)
    CHECKPOINT_COORDINATOR_SHUTDOWN = ("CheckpointCoordinator shutdown.", False)
    FINALIZE_CHECKPOINT_FAILURE = ("Failure to finalize checkpoint.", True)
    TASK_FAILURE = ("Task has failed.", False)
    TASK_CHECKPOINT_FAILURE = ("Task local checkpoint failure.", False)
    IO_EXCEPTION = ("An Exception occurred while triggering the checkpoint.", True)

    def __init__(self, message: str, counted: bool) -> None:
        self.message = message
        #: whether it counts towards the tolerable failed checkpoints
        self.counted = counted


class CheckpointException(Exception):
    """A checkpoint failed for ``reason`` (Flink's ``CheckpointException``).

    :param reason: a :class:`CheckpointFailureReason`.
    :param detail: what happened, e.g. the task's exception as text.
    """

    def __init__(self, reason: CheckpointFailureReason, detail: str = "") -> None:
        super().__init__(reason.message + (f" {detail}" if detail else ""))
        self.reason = reason
        self.detail = detail

    def __reduce__(self):
        return (CheckpointException, (self.reason, self.detail))
