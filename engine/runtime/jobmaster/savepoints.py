"""A job's savepoint operations (Flink's ``SchedulerBase.triggerSavepoint`` /
``stopWithSavepoint`` and the Dispatcher's asynchronous operation cache of the REST API's
``/jobs/:jobid/savepoints``), the same in embedded and cluster mode.

:func:`trigger_savepoint` and :func:`stop_with_savepoint` return futures of the savepoint's
directory; :class:`SavepointOperations` keeps them by trigger id, so that a client that cannot
hold a future (a cluster client, the REST API) asks for the status by id.
"""

from __future__ import annotations

import concurrent.futures
import threading
import uuid
from dataclasses import dataclass
from typing import Dict, Optional

from rill.graph.states import JobStatus

__all__ = ["trigger_savepoint", "stop_with_savepoint", "cancel_with_savepoint", "SavepointOperations", "SavepointStatus",
           "CHECKPOINTING_DISABLED_MESSAGE"]

#: why a job without checkpointing takes no savepoint (Rill builds its coordinator only then)
CHECKPOINTING_DISABLED_MESSAGE = (
    "Savepoints of a job without checkpointing are not built yet: the job's checkpoint coordinator "
    "exists only with checkpointing enabled (env.enable_checkpointing(interval_ms) or "
    "execution.checkpointing.interval)")


def _coordinator_or_error(job_master, future: concurrent.futures.Future):
    coordinator = job_master.checkpoint_coordinator
    if coordinator is None:
        future.set_exception(NotImplementedError(f"Job {job_master.job_id}: {CHECKPOINTING_DISABLED_MESSAGE}"))
        return None
    if job_master.status is not JobStatus.RUNNING:
        future.set_exception(RuntimeError(
            f"Job {job_master.job_id} is {job_master.status.name}, not RUNNING: no savepoint can be taken"))
        return None
    return coordinator


def trigger_savepoint(job_master, target_directory: Optional[str]) -> "concurrent.futures.Future[str]":
    """A savepoint of the running job (it runs on).

    :param target_directory: where the savepoint's directory is created; ``None``: the
        configured ``execution.checkpointing.savepoint-dir``.
    :returns: a future of the savepoint's directory; it fails with ``NotImplementedError``
        without checkpointing, ``RuntimeError`` when the job does not run, and as
        ``CheckpointCoordinator.trigger_savepoint`` says.
    """
    future: "concurrent.futures.Future[str]" = concurrent.futures.Future()
    coordinator = _coordinator_or_error(job_master, future)
    return future if coordinator is None else coordinator.trigger_savepoint(target_directory)


def stop_with_savepoint(job_master, target_directory: Optional[str], drain: bool) -> "concurrent.futures.Future[str]":
    """Stop the job with a synchronous savepoint (FLIP-34; see
    ``CheckpointCoordinator.stop_with_savepoint``).

    :returns: a future of the savepoint's directory that completes once the job is FINISHED
        (as Flink's); it fails as :func:`trigger_savepoint`'s, or with ``RuntimeError`` when the
        job ended otherwise after the savepoint (a task failed while finishing).
    """
    done: "concurrent.futures.Future[str]" = concurrent.futures.Future()
    coordinator = _coordinator_or_error(job_master, done)
    if coordinator is None:
        return done
    savepoint = coordinator.stop_with_savepoint(target_directory, drain)

    def on_savepoint(f: concurrent.futures.Future) -> None:
        error = f.exception()
        if error is not None:
            done.set_exception(error)
            return
        job_master.result_future.add_done_callback(lambda _r: on_job_end(f.result()))

    def on_job_end(path: str) -> None:
        if job_master.status is JobStatus.FINISHED:
            done.set_result(path)
        else:
            done.set_exception(RuntimeError(
                f"Job {job_master.job_id} ended {job_master.status.name} after its savepoint {path} completed"))

    savepoint.add_done_callback(on_savepoint)
    return done


def cancel_with_savepoint(job_master, target_directory: Optional[str]) -> "concurrent.futures.Future[str]":
    """A savepoint, then cancel the job (Flink's deprecated cancel-with-savepoint,
    ``SchedulerBase.triggerSavepoint`` with ``cancelJob``; the REST API's ``"cancel-job": true``).
    Periodic checkpoints are stopped first, so none follows the savepoint; they resume if the
    savepoint fails, and the job runs on then.

    :returns: a future of the savepoint's directory, completed once the job was asked to
        cancel; it fails as :func:`trigger_savepoint`'s.
    """
    done: "concurrent.futures.Future[str]" = concurrent.futures.Future()
    coordinator = _coordinator_or_error(job_master, done)
    if coordinator is None:
        return done
    coordinator.stop_checkpoint_scheduler()
    savepoint = coordinator.trigger_savepoint(target_directory)

    def on_savepoint(f: concurrent.futures.Future) -> None:
        error = f.exception()
        if error is not None:
            coordinator.start_checkpoint_scheduler()
            done.set_exception(error)
            return
        job_master.cancel()
        done.set_result(f.result())

    savepoint.add_done_callback(on_savepoint)
    return done


@dataclass(frozen=True)
class SavepointStatus:
    """One savepoint operation as the REST API shows it (Flink's ``AsynchronousOperationInfo``).

    :param status: ``"IN_PROGRESS"`` or ``"COMPLETED"``.
    :param location: the savepoint's directory when it completed successfully.
    :param failure_cause: why it failed (``"<ExceptionType>: <message>"``), when it did.
    """

    status: str
    location: Optional[str] = None
    failure_cause: Optional[str] = None


class SavepointOperations:
    """Savepoint futures by trigger id (32 hex digits); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._futures: Dict[str, concurrent.futures.Future] = {}

    def register(self, future: concurrent.futures.Future) -> str:
        """Keep ``future``; returns its new trigger id."""
        trigger_id = uuid.uuid4().hex
        with self._lock:
            self._futures[trigger_id] = future
        return trigger_id

    def status(self, trigger_id: str) -> Optional[SavepointStatus]:
        """The operation's status, ``None`` for an unknown trigger id."""
        with self._lock:
            future = self._futures.get(trigger_id)
        if future is None:
            return None
        if not future.done():
            return SavepointStatus("IN_PROGRESS")
        error = future.exception()
        if error is not None:
            return SavepointStatus("COMPLETED", failure_cause=f"{type(error).__name__}: {error}")
        return SavepointStatus("COMPLETED", location=future.result())
