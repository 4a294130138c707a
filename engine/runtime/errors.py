"""Errors of job execution (Flink's ``JobExecutionException`` and friends)."""

from __future__ import annotations

__all__ = ["JobExecutionException", "JobCancellationException", "NoResourceAvailableException",
           "RemoteTaskException", "JobSubmissionException"]


class JobExecutionException(Exception):
    """A job failed. The message names the failing operator and subtask; ``__cause__`` is the
    original exception with its traceback.

    :param job_id: 32 hex characters.
    """

    def __init__(self, job_id: str, message: str):
        super().__init__(message)
        self.job_id = job_id

    def __reduce__(self):
        # travels from the cluster to the client: rebuild with both arguments, keep notes
        return type(self), (self.job_id, self.args[0]), self.__dict__


class JobCancellationException(JobExecutionException):
    """The job was cancelled before it finished."""


class NoResourceAvailableException(Exception):
    """The slots available cannot host the job (Flink's ``NoResourceAvailableException``)."""


class RemoteTaskException(Exception):
    """A task in another process raised an exception that could not be pickled; this carries
    its type name and message (the remote traceback is attached as a note)."""


class JobSubmissionException(JobExecutionException):
    """The cluster refused a job (Flink's ``JobSubmissionException``)."""
