"""Ends an ``execute_and_collect`` channel when its job ends, passing on the job's failure."""

from __future__ import annotations

from rill.runtime.errors import JobCancellationException

__all__ = ["attach_collect_channel"]


def attach_collect_channel(job_master, channel) -> None:
    """End ``channel`` when the job ends: with the job's error if it failed, normally if it
    finished or was cancelled (a reader that stops early cancels the job)."""
    def done(future) -> None:
        error = future.exception()
        if isinstance(error, JobCancellationException):
            error = None  # the reader cancelled it (close/limit): a normal end for the iterator
        channel.end(error)

    job_master.result_future.add_done_callback(done)
