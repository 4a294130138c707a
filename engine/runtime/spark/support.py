"""What ``execution.target: spark`` runs, checked on the JobGraph before Spark starts.

A job runs on Spark only if every operator of every vertex is one whose BATCH behaviour the
Spark runner reproduces with Rill's own operator code (:mod:`rill.runtime.spark.subtask`):
sources that declare ``runs_on_spark`` (collections, sequences, text and Parquet files),
map / flat_map / filter / process, timestamp assignment, key_by with reduce, aggregations,
KeyedProcessFunction and every window kind, connect with co-map / co-flat-map / co-process
(keyed or not), interval joins, broadcast state, and the sinks print, collect and FileSink.
Anything else (async I/O, custom Sink V2 writers, legacy SinkFunctions, sources that read
outside their splits) is refused, naming the operator.
"""

from __future__ import annotations

from typing import Any, Iterable

from rill.common.execution_options import ExecutionOptions, RuntimeExecutionMode
from rill.operators.batch_grouped_reduce import BatchGroupedReduceOperator
from rill.operators.batch_keyed_input import BatchKeyedOneInputOperator, BatchTwoInputOperator
from rill.operators.broadcast import CoBroadcastWithKeyedOperator, CoBroadcastWithNonKeyedOperator
from rill.operators.co_operators import CoProcessOperator, CoStreamFlatMap, CoStreamMap, KeyedCoProcessOperator
from rill.operators.collect_sink import CollectSinkOperator
from rill.operators.file_sink import FileSinkOperator
from rill.operators.interval_join import IntervalJoinOperator
from rill.operators.print_sink import PrintSinkOperator
from rill.operators.process import KeyedProcessOperator, ProcessOperator
from rill.operators.simple import StreamFilter, StreamFlatMap, StreamMap
from rill.operators.source_operator import SourceOperator
from rill.operators.watermark.timestamps_and_watermarks_operator import TimestampsAndWatermarksOperator
from rill.operators.windowing.window_operator import WindowOperator

__all__ = ["UnsupportedOnSparkError", "check_runs_on_spark", "SUPPORTED_OPERATORS"]

#: operator classes (exact, or subclasses) a Spark task runs as the local BATCH task does
SUPPORTED_OPERATORS = (
    SourceOperator, StreamMap, StreamFlatMap, StreamFilter, ProcessOperator, KeyedProcessOperator,
    TimestampsAndWatermarksOperator, BatchGroupedReduceOperator, WindowOperator, CoStreamMap,
    CoStreamFlatMap, CoProcessOperator, KeyedCoProcessOperator, IntervalJoinOperator,
    CoBroadcastWithKeyedOperator, CoBroadcastWithNonKeyedOperator, PrintSinkOperator,
    CollectSinkOperator, FileSinkOperator,
)


class UnsupportedOnSparkError(NotImplementedError):
    """The job holds something the Spark execution target does not run; raised before Spark
    starts. The message names the operator (or source), its class and what is supported."""


def _refuse(operator_name: str, what: str, why: str) -> UnsupportedOnSparkError:
    return UnsupportedOnSparkError(
        f"execution.target 'spark' cannot run operator '{operator_name}' ({what}): {why}. Supported on "
        "Spark: sources over collections, sequences, text and Parquet files; map, flat_map, filter, "
        "process; key_by with reduce, aggregations, KeyedProcessFunction and windows; connect with "
        "co-map/co-flat-map/co-process (keyed or not), interval joins, broadcast state; side outputs; "
        "union; the sinks print, collect (execute_and_collect, CollectSink) and FileSink")


def _check_operator(name: str, operator: Any) -> None:
    inner = operator
    while isinstance(inner, (BatchKeyedOneInputOperator, BatchTwoInputOperator)):
        inner = inner.operator
    if not isinstance(inner, SUPPORTED_OPERATORS):
        raise _refuse(name, type(inner).__name__, "no Spark translation for this operator")
    if isinstance(inner, SourceOperator):
        source = inner.source
        if not getattr(source, "runs_on_spark", False):
            raise _refuse(name, f"source {type(source).__name__}",
                          "the source does not declare runs_on_spark (its readers may read outside their splits)")


def check_runs_on_spark(job_graph: Any) -> None:
    """Refuse a job the Spark target cannot run, before any Spark work.

    :param job_graph: the job's ``JobGraph``; its ``job_type`` must be ``"BATCH"``.
    :raises UnsupportedOnSparkError: for a job not generated in BATCH mode, or the first
        unsupported operator or source (vertices in topological order, head first), naming it.
    """
    if job_graph.job_type != RuntimeExecutionMode.BATCH.name:
        raise UnsupportedOnSparkError(
            f"execution.target 'spark' runs bounded programs in BATCH mode only; job '{job_graph.get_name()}' was "
            f"built in {job_graph.job_type} mode ('{ExecutionOptions.RUNTIME_MODE.key}')")
    for vertex in job_graph.get_vertices_sorted_topologically_from_sources():
        for cfg in _head_first(vertex.stream_configs.values()):
            _check_operator(cfg.operator_name, cfg.operator_factory.operator)


def _head_first(configs: Iterable[Any]):
    return sorted(configs, key=lambda c: c.node_id)
