"""Life-cycle states of executions and jobs.

Follows Flink's ``org.apache.flink.runtime.execution.ExecutionState`` and
``org.apache.flink.api.common.JobStatus``. Flink's ``RECONCILING`` and ``SUSPENDED`` states
(job-manager fail-over) are left out: Rill has no job-manager high availability.
"""

from __future__ import annotations

import enum

__all__ = ["ExecutionState", "JobStatus"]


class ExecutionState(enum.Enum):
    """State of one execution attempt of a subtask (Flink's ``ExecutionState``).

    Normal path: ``CREATED → SCHEDULED → DEPLOYING → INITIALIZING → RUNNING → FINISHED``;
    cancellation goes through ``CANCELING`` to ``CANCELED``; any state may end in ``FAILED``.
    """

    CREATED = "CREATED"
    SCHEDULED = "SCHEDULED"
    DEPLOYING = "DEPLOYING"
    INITIALIZING = "INITIALIZING"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    CANCELING = "CANCELING"
    CANCELED = "CANCELED"
    FAILED = "FAILED"

    def is_terminal(self) -> bool:
        """``FINISHED``, ``CANCELED`` and ``FAILED`` are final (Flink's ``isTerminal``)."""
        return self in (ExecutionState.FINISHED, ExecutionState.CANCELED, ExecutionState.FAILED)


class JobStatus(enum.Enum):
    """State of a whole job (Flink's ``JobStatus``)."""

    CREATED = "CREATED"
    RUNNING = "RUNNING"
    FAILING = "FAILING"
    FAILED = "FAILED"
    CANCELLING = "CANCELLING"
    CANCELED = "CANCELED"
    FINISHED = "FINISHED"
    #: a task failed and the restart strategy allows a restart: every task is cancelled, then
    #: (after the backoff) redeployed from the latest completed checkpoint; back to RUNNING
    RESTARTING = "RESTARTING"

    def is_globally_terminal_state(self) -> bool:
        """``FINISHED``, ``CANCELED`` and ``FAILED`` end the job for good."""
        return self in (JobStatus.FINISHED, JobStatus.CANCELED, JobStatus.FAILED)
