"""Runs a JobGraph on Spark and hands back a JobClient (``execution.target: spark``).

pyspark is optional (the ``spark`` extra): this is the only module that imports it, and
without it :func:`submit_to_spark` raises an ``ImportError`` naming the extra.

The session: the active ``SparkSession`` of the submitting thread, else the process's default
one, else one started with ``SparkSession.builder.master(rill.spark.master)`` (``local[N]``,
N the CPU count, when unset) and left running for later jobs (as ``getOrCreate`` does).
"""

from __future__ import annotations

import concurrent.futures
import os
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from rill.common.configuration import ConfigOptions, Configuration
from rill.common.job_execution_result import JobExecutionResult, VertexSummary
from rill.graph.states import JobStatus
from rill.operators.collect_sink import get_channel
from rill.runtime.errors import JobCancellationException, JobExecutionException
from rill.runtime.spark.failures import recover_failure
from rill.common.execution_options import SparkOptions
from rill.runtime.spark.subtask import SubtaskSettings
from rill.runtime.spark.support import check_runs_on_spark
from rill.runtime.spark.translation import SparkPlan

try:
    from pyspark import AccumulatorParam
    from pyspark.sql import SparkSession
except ImportError as _missing:  # pragma: no cover - the test extra has pyspark
    AccumulatorParam = object  # type: ignore[assignment,misc]
    SparkSession = None  # type: ignore[assignment]
    _PYSPARK_MISSING: Optional[ImportError] = _missing
else:
    _PYSPARK_MISSING = None

__all__ = ["submit_to_spark", "SparkJobClient", "spark_session"]


class _CountersParam(AccumulatorParam):
    """Merges ``{vertex id: (records in, records out, longest subtask ms)}``."""

    def zero(self, value):
        return {}

    def addInPlace(self, value1, value2):
        for k, (i, o, ms) in value2.items():
            a, b, c = value1.get(k, (0, 0, 0.0))
            value1[k] = (a + i, b + o, max(c, ms))
        return value1


def spark_session(configuration: Configuration) -> Any:
    """The SparkSession a Spark job runs on (see the module docstring).

    :raises ImportError: when pyspark is not installed, naming the extra.
    """
    if _PYSPARK_MISSING is not None:
        raise ImportError("execution.target 'spark' needs pyspark: install Rill with the 'spark' extra "
                          "(pip install 'rill[spark]')") from _PYSPARK_MISSING
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    master = str(configuration.get(SparkOptions.MASTER) or "").strip() or f"local[{os.cpu_count() or 1}]"
    builder = SparkSession.builder.master(master).appName("rill")
    if not os.environ.get("PYSPARK_PYTHON"):
        # the workers run this interpreter, which has Rill (PySpark reads the variable when the
        # SparkContext starts; its default is ``python3`` on the PATH)
        os.environ["PYSPARK_PYTHON"] = sys.executable
    return builder.getOrCreate()


def _worker_hint(error: BaseException, sc: Any) -> str:
    """Why a task could not even start: Spark's Python workers run another interpreter than the
    driver (``PYSPARK_PYTHON``, default ``python3`` on the PATH) that cannot import Rill."""
    if "No module named 'rill'" not in str(error):
        return ""
    return (f" (Spark's Python workers run {getattr(sc, 'pythonExec', 'python3')!r}, which cannot import rill: "
            f"set PYSPARK_PYTHON={sys.executable} before the SparkSession starts, or install Rill there)")


class SparkJobClient:
    """The JobClient of a job running on Spark (status, cancellation, result; PyFlink's
    ``JobClient`` names). Metrics per task, checkpoints, savepoints and queryable state do not
    exist on this target: those methods raise ``NotImplementedError`` naming it.

    :ivar spark_master: the master URL of the session the job runs on.
    """

    tasks_share_a_process = True  # for `rill run`: no cluster address, no .out files to point to

    def __init__(self, job_id: str, job_name: str, spark_master: str):
        self._job_id = job_id
        self._job_name = job_name
        self.spark_master = spark_master
        self._status = JobStatus.RUNNING
        self._future: "concurrent.futures.Future[JobExecutionResult]" = concurrent.futures.Future()
        self._summaries: List[VertexSummary] = []
        self._net_runtime_ms: Optional[int] = None
        self._cancel = None

    def get_job_id(self) -> str:
        return self._job_id

    def get_job_name(self) -> str:
        return self._job_name

    def get_job_status(self) -> JobStatus:
        return self._status

    def get_job_execution_result(self) -> "concurrent.futures.Future[JobExecutionResult]":
        """A future of the ``JobExecutionResult``; it raises ``JobExecutionException`` (whose
        ``__cause__`` is the operator's own exception) when the job failed."""
        return self._future

    def cancel(self) -> "concurrent.futures.Future[None]":
        """Cancel the job's Spark job group; the future completes when the job has stopped."""
        if self._cancel is not None and not self._future.done():
            self._cancel()
        done: "concurrent.futures.Future[None]" = concurrent.futures.Future()
        self._future.add_done_callback(lambda _f: done.set_result(None))
        return done

    def wait(self, timeout_s: Optional[float] = None) -> JobStatus:
        concurrent.futures.wait([self._future], timeout=timeout_s)
        return self._status

    def is_done(self) -> bool:
        return self._future.done()

    def get_vertex_summaries(self) -> List[VertexSummary]:
        """Per vertex: records in and out, the longest subtask's duration (ms); busy, idle and
        back-pressured times are 0 (Spark tasks have no mailbox)."""
        return list(self._summaries)

    def get_net_runtime_ms(self) -> Optional[int]:
        return self._net_runtime_ms

    def get_source_progress(self) -> Tuple[int, Optional[int]]:
        """``(0, None)``: Spark tasks report no progress while they run."""
        return 0, None

    def source_units_are_bytes(self) -> bool:
        return False

    def get_checkpoint_stats(self) -> None:
        """``None``: BATCH jobs take no checkpoints."""
        return None

    def get_backpressure_root_cause(self) -> None:
        """``None``: Spark's exchanges are blocking, nothing is back-pressured."""
        return None

    def _not_on_spark(self, what: str):
        raise NotImplementedError(f"JobClient.{what} is not available for jobs on execution.target 'spark'")

    def get_metrics(self):
        self._not_on_spark("get_metrics")

    def get_execution_states(self):
        self._not_on_spark("get_execution_states")

    def trigger_savepoint(self, savepoint_directory=None):
        self._not_on_spark("trigger_savepoint (BATCH jobs take no checkpoints)")

    def stop_with_savepoint(self, advance_to_end_of_event_time=False, savepoint_directory=None):
        self._not_on_spark("stop_with_savepoint (BATCH jobs take no checkpoints)")

    def get_state(self, uid, state_name, key, timeout_s=30.0):
        self._not_on_spark("get_state (queryable state)")

    def get_web_interface_url(self) -> Optional[str]:
        return None

    def get_cluster_address(self) -> str:
        """Where the job runs, for messages: ``"Spark (master local[2])"``."""
        return f"Spark (master {self.spark_master})"


def _summaries(job_graph, counters: Dict[str, Tuple[int, int, float]]) -> List[VertexSummary]:
    out = []
    for v in job_graph.get_vertices_sorted_topologically_from_sources():
        records_in, records_out, ms = counters.get(str(v.get_id()), (0, 0, 0.0))
        out.append(VertexSummary(str(v.get_id()), v.get_name(), v.get_parallelism(), records_in, records_out,
                                 ms, 0.0, 0.0, 0.0))
    return out


def submit_to_spark(job_graph, configuration: Configuration, job_parameters=None,
                    collect_channel=None) -> SparkJobClient:
    """Check ``job_graph`` and run it on Spark in a background thread; returns its client.

    :param collect_channel: the ``execute_and_collect`` channel, ended when the job ends.
    :raises UnsupportedOnSparkError: at once, for a job the target cannot run (naming the
        operator), before any Spark work.
    :raises ImportError: when pyspark is missing (naming the extra).
    """
    check_runs_on_spark(job_graph)
    session = spark_session(configuration)
    sc = session.sparkContext
    job_id = str(job_graph.get_job_id())
    client = SparkJobClient(job_id, job_graph.get_name(), sc.master)
    settings = SubtaskSettings(configuration.get(ConfigOptions.SOURCE_BATCH_SIZE),
                               configuration.get(SparkOptions.RECORDS_PER_SHUFFLE_BATCH), job_parameters)
    counters = sc.accumulator({}, _CountersParam())
    plan = SparkPlan(sc, job_graph, settings, counters)
    cancelled = threading.Event()

    def cancel() -> None:
        cancelled.set()
        sc.cancelJobGroup(job_id)

    client._cancel = cancel

    def run() -> None:
        started = time.monotonic()
        error: Optional[BaseException] = None
        try:
            sc.setJobGroup(job_id, f"rill job '{job_graph.get_name()}'", interruptOnCancel=True)
            for channel_id, values in plan.run():
                get_channel(channel_id).put_batch(values)
        except BaseException as e:  # noqa: BLE001 - the job's failure goes to its future
            error = e
        client._net_runtime_ms = int((time.monotonic() - started) * 1000)
        client._summaries = _summaries(job_graph, counters.value)
        if error is None:
            client._status = JobStatus.FINISHED
            result = JobExecutionResult(job_id, job_graph.get_name(), client._net_runtime_ms,
                                        vertices=client.get_vertex_summaries())
            if collect_channel is not None:
                collect_channel.end()
            client._future.set_result(result)
            return
        if cancelled.is_set():
            client._status = JobStatus.CANCELED
            failure: JobExecutionException = JobCancellationException(job_id, f"Job '{job_graph.get_name()}' "
                                                                              f"({job_id}) was cancelled.")
        else:
            client._status = JobStatus.FAILED
            cause = recover_failure(error) or error
            operator = getattr(cause, "_rill_operator", None)
            where = f" in operator '{operator}'" if operator else ""
            failure = JobExecutionException(job_id, f"Job '{job_graph.get_name()}' ({job_id}) failed on Spark{where}: "
                                                    f"{type(cause).__name__}: {cause}{_worker_hint(cause, sc)}")
            failure.__cause__ = cause
        if collect_channel is not None:
            collect_channel.end(None if cancelled.is_set() else failure)
        client._future.set_exception(failure)

    threading.Thread(target=run, name=f"rill-spark-{job_id[:8]}", daemon=True).start()
    return client
