"""Errors of job execution (Flink's ``JobExecutionException`` and friends)."""

from __future__ import annotations

__all__ = ["JobExecutionException", "JobCancellationException", "NoResourceAvailableException"]


class JobExecutionException(Exception):
    """A job failed. The message names the failing operator and subtask; ``__cause__`` is the
    original exception with its traceback.

    :param job_id: 32 hex characters.
    """

    def __init__(self, job_id: str, message: str):
        super().__init__(message)
        self.job_id = job_id


class JobCancellationException(JobExecutionException):
    """The job was cancelled before it finished."""


class NoResourceAvailableException(Exception):
    """The slots available cannot host the job (Flink's ``NoResourceAvailableException``)."""
