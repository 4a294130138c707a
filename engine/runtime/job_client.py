"""``JobClient``: a handle on a submitted job (PyFlink's ``JobClient``)."""

from __future__ import annotations

import concurrent.futures
from typing import Dict, List, Optional, Tuple

from rill.graph.states import ExecutionState, JobStatus
from rill.runtime.checkpoint.checkpoint_stats import CheckpointStatsSnapshot
from rill.runtime.metrics import TaskMetricsSnapshot
from rill.runtime.queryable_state import StateQuery, query_embedded_state
from rill.runtime.rest.backpressure import RootCause, find_root_cause
from rill.runtime.rest.snapshot import snapshot_job_master

__all__ = ["JobClient"]


class JobClient:
    """Status, metrics, cancellation and the result of one job.

    Metrics are readable while the job runs (per task: records/buffers in and out,
    busy/idle/back-pressured time per second, buffer pool usage).
    """

    #: Tasks are threads of this process (read by ``rill run``'s summary and messages).
    tasks_share_a_process = True

    def __init__(self, job_master, on_close=None, web_interface_url: Optional[str] = None):
        self._jm = job_master
        self._on_close = on_close
        self._web_interface_url = web_interface_url

    def get_web_interface_url(self) -> Optional[str]:
        """``http://host:port`` of the REST API and dashboard serving this job (the bound port
        when ``rest.port`` is 0), or None when none was asked for (Flink's
        ``ClusterClient.getWebInterfaceURL``)."""
        return self._web_interface_url

    def get_job_id(self) -> str:
        return self._jm.job_id

    def get_job_name(self) -> str:
        return self._jm.job_name

    def get_job_status(self) -> JobStatus:
        return self._jm.status

    def cancel(self) -> "concurrent.futures.Future[None]":
        """Cancel the job; the returned future completes when the job has stopped."""
        self._jm.cancel()
        done: "concurrent.futures.Future[None]" = concurrent.futures.Future()
        self._jm.result_future.add_done_callback(lambda _f: done.set_result(None))
        return done

    def get_job_execution_result(self) -> "concurrent.futures.Future":
        """A future of the ``JobExecutionResult``; it raises ``JobExecutionException`` when
        the job failed and ``JobCancellationException`` when it was cancelled."""
        return self._jm.result_future

    def wait(self, timeout_s: Optional[float] = None) -> JobStatus:
        """Block until the job has ended (or ``timeout_s`` passed); returns the status."""
        concurrent.futures.wait([self._jm.result_future], timeout=timeout_s)
        return self._jm.status

    def is_done(self) -> bool:
        return self._jm.result_future.done()

    def get_execution_states(self) -> Dict[str, ExecutionState]:
        """State of every task: ``"Name (i/p)"`` → ``ExecutionState``."""
        return {t.task_name_with_subtasks: t.execution_state for t in self._jm.tasks}

    def get_metrics(self) -> List[TaskMetricsSnapshot]:
        """One snapshot per task (subtask), in deployment order."""
        return self._jm.task_metrics()

    def get_vertex_summaries(self):
        return self._jm.vertex_summaries()

    def get_checkpoint_stats(self) -> Optional[CheckpointStatsSnapshot]:
        """The job's checkpoint statistics (Flink's ``CheckpointStatsSnapshot``: counts,
        history newest first with per-subtask figures, latest completed and failed), or
        ``None`` when checkpointing is off."""
        return self._jm.get_checkpoint_stats()

    def trigger_savepoint(self, savepoint_directory: Optional[str] = None) -> "concurrent.futures.Future[str]":
        """Take a savepoint of the running job, which runs on (PyFlink's
        ``JobClient.trigger_savepoint``).

        :param savepoint_directory: path or URL under which the savepoint's directory is
            created; ``None``: ``execution.checkpointing.savepoint-dir``.
        :returns: a future of the savepoint's directory (what ``rill run --from-savepoint``
            takes); it fails with ``ValueError`` without any directory,
            ``NotImplementedError`` when the job has checkpointing off, ``RuntimeError`` when
            it does not run, ``CheckpointException`` when the savepoint is declined, expires or
            a task fails.
        """
        return self._jm.trigger_savepoint(savepoint_directory)

    def stop_with_savepoint(self, advance_to_end_of_event_time: bool = False,
                            savepoint_directory: Optional[str] = None) -> "concurrent.futures.Future[str]":
        """Stop the job with a synchronous savepoint (PyFlink's ``JobClient.stop_with_savepoint``,
        FLIP-34): the sources take the savepoint and stop; with
        ``advance_to_end_of_event_time`` they emit ``MAX_WATERMARK`` first (every event-time
        window and timer fires: ``flink stop --drain``), without it no operator is told its
        input ended, so resuming from the savepoint continues the job exactly. The job ends
        FINISHED.

        :returns: a future of the savepoint's directory, done once the job is FINISHED; it
            fails as :meth:`trigger_savepoint`'s (the job then runs on).
        """
        return self._jm.stop_with_savepoint(savepoint_directory, advance_to_end_of_event_time)

    def get_source_progress(self) -> Tuple[int, Optional[int]]:
        """(units done, total units or None) summed over every source subtask."""
        return self._jm.source_progress()

    def source_units_are_bytes(self) -> bool:
        return self._jm.source_units_are_bytes()

    def get_net_runtime_ms(self) -> Optional[int]:
        return self._jm.get_net_runtime_ms()

    def get_backpressure_root_cause(self) -> Optional[RootCause]:
        """The vertex (and subtask) causing backpressure now, a
        :class:`rill.runtime.rest.backpressure.RootCause`, or None (see that module)."""
        return find_root_cause(snapshot_job_master(self._jm))

    def get_state_future(self, uid: str, state_name: str, key) -> "concurrent.futures.Future":
        """A future of one key's keyed state in the running job (queryable state; see
        :mod:`rill.runtime.queryable_state`): the operator with ``uid``, the subtask owning
        ``key``'s key group, the state named ``state_name``; read on that task's thread.

        :raises UnknownOperatorUidError, NotKeyedOperatorError, JobNotRunningError: at once.
        The future raises ``UnknownStateNameError``, or ``JobNotRunningError`` if the task ended
        first.
        """
        return query_embedded_state(self._jm, StateQuery.of(uid, state_name, key))

    def get_state(self, uid: str, state_name: str, key, timeout_s: Optional[float] = 30.0):
        """The value of ``state_name`` for ``key`` in operator ``uid`` (``None`` if the key has
        none), blocking up to ``timeout_s`` seconds (see :meth:`get_state_future`).

        :raises concurrent.futures.TimeoutError: if the task did not answer in time.
        """
        return self.get_state_future(uid, state_name, key).result(timeout_s)
