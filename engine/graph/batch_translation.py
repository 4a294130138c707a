"""BATCH runtime mode in the StreamGraph: which mode a program runs in, and the operators a
BATCH program runs instead of its STREAMING ones.

Follows Flink's ``StreamGraphGenerator`` (``shouldExecuteInBatchMode``,
``configureStreamGraphBatch``) and its BATCH translators (FLIP-134, FLIP-140):

* ``BATCH`` refuses a program with an unbounded source, naming the source; ``AUTOMATIC`` is
  ``BATCH`` when every source is bounded;
* watermark strategies are ignored: sources and ``assign_timestamps_and_watermarks`` still
  assign timestamps but generate no watermarks (Flink's ``emitProgressiveWatermarks=false``);
  the only watermark is ``MAX_WATERMARK`` at the end of input;
* ``reduce`` and the aggregations run as :class:`BatchGroupedReduceOperator` (final results
  only);
* every other keyed operator (process functions, windows, keyed ``connect``, interval join,
  keyed broadcast) gets its input grouped by key and processed key by key, timers firing at
  the end of each key (:mod:`rill.operators.batch_keyed_input`); a non-keyed broadcast
  operator reads its broadcast input first;
* checkpointing is disabled (see ``StreamExecutionEnvironment``).

Exchanges stay pipelined (Flink makes every BATCH edge a BLOCKING result partition, so a stage
finishes before the next starts): a keyed operator in BATCH mode consumes its whole input
before it emits anything, so downstream of every keyed exchange the stages are sequential as
in Flink; only the non-keyed operators before it overlap with their producers, which changes
no result. Failover stays the STREAMING one (restart of the whole job).
"""

from __future__ import annotations

from typing import Any, Iterable, List, Optional

from rill.common.connector.source import Boundedness
from rill.common.execution_options import ExecutionOptions, RuntimeExecutionMode
from rill.common.watermark_strategy import WatermarkStrategy
from rill.graph.transformations import (
    OneInputTransformation,
    SourceTransformation,
    Transformation,
    TwoInputTransformation,
)
from rill.operators.batch_grouped_reduce import BatchGroupedReduceOperator
from rill.operators.batch_keyed_input import BatchKeyedOneInputOperator, BatchTwoInputOperator
from rill.operators.broadcast import CoBroadcastWithKeyedOperator, CoBroadcastWithNonKeyedOperator
from rill.operators.factory import SimpleOperatorFactory
from rill.operators.keyed_reduce import StreamGroupedReduce
from rill.operators.source_operator import SourceOperator
from rill.operators.watermark.timestamps_and_watermarks_operator import TimestampsAndWatermarksOperator

__all__ = ["executes_in_batch_mode", "batch_operator_factory", "batch_watermark_strategy"]


def _sources(transformations: Iterable[Transformation]) -> List[SourceTransformation]:
    seen, found, stack = set(), [], list(transformations)
    while stack:
        t = stack.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        if isinstance(t, SourceTransformation):
            found.append(t)
        stack.extend(t.get_inputs())
    return sorted(found, key=lambda s: s.id)


def _is_unbounded(t: SourceTransformation) -> bool:
    return t.source.get_boundedness() is not Boundedness.BOUNDED


def executes_in_batch_mode(mode: RuntimeExecutionMode, transformations: Iterable[Transformation]) -> bool:
    """Whether the program runs in BATCH mode (Flink's ``shouldExecuteInBatchMode``).

    :param mode: the configured runtime mode.
    :param transformations: the program's transformations (sources are found through inputs).
    :raises ValueError: for ``BATCH`` with an unbounded source, naming it.
    """
    if mode is RuntimeExecutionMode.STREAMING:
        return False
    sources = _sources(transformations)
    unbounded = [t for t in sources if _is_unbounded(t)]
    if mode is RuntimeExecutionMode.AUTOMATIC:
        return not unbounded
    if unbounded:
        t = unbounded[0]
        raise ValueError(
            f"Detected an UNBOUNDED source with the '{ExecutionOptions.RUNTIME_MODE.key}' set to 'BATCH'. "
            f"This combination is not allowed, please set the '{ExecutionOptions.RUNTIME_MODE.key}' to "
            f"STREAMING or AUTOMATIC: source '{t.name}' ({type(t.source).__name__}) is "
            f"{t.source.get_boundedness().value}"
        )
    return True


def batch_watermark_strategy(strategy: Optional[WatermarkStrategy]) -> Optional[WatermarkStrategy]:
    """``strategy`` without its watermarks: the same timestamp assigner (if any), no generator,
    no idleness, no alignment; ``None`` stays ``None``."""
    if strategy is None:
        return None
    batch = WatermarkStrategy.no_watermarks()
    assigner = strategy.get_timestamp_assigner()
    return batch if assigner is None else batch.with_timestamp_assigner(assigner)


def batch_operator_factory(t: Transformation, max_buffered_records: int) -> Any:
    """The operator factory the physical transformation ``t`` runs with in BATCH mode (its own
    when BATCH changes nothing for it). Never modifies ``t``.

    :param max_buffered_records: records a keyed input holds in memory before it spills
        (``rill.batch.sorted-inputs.max-records``).
    """
    factory = t.operator_factory
    op = factory.operator
    replacement = None
    if isinstance(t, SourceTransformation):
        if isinstance(op, SourceOperator) and op.watermark_strategy is not None:
            replacement = SourceOperator(op.source, batch_watermark_strategy(op.watermark_strategy))
    elif isinstance(op, TimestampsAndWatermarksOperator):
        replacement = TimestampsAndWatermarksOperator(batch_watermark_strategy(op.watermark_strategy))
    elif isinstance(t, OneInputTransformation) and t.state_key_selector is not None:
        if type(op) is StreamGroupedReduce:
            replacement = BatchGroupedReduceOperator(op.user_function, op.type_info)
        else:
            replacement = BatchKeyedOneInputOperator(op, max_buffered_records)
    elif isinstance(t, TwoInputTransformation):
        if t.state_key_selector1 is not None and t.state_key_selector2 is not None:
            replacement = BatchTwoInputOperator(op, (True, True), max_buffered_records)
        elif isinstance(op, CoBroadcastWithKeyedOperator):
            replacement = BatchTwoInputOperator(op, (True, False), max_buffered_records)
        elif isinstance(op, CoBroadcastWithNonKeyedOperator):
            replacement = BatchTwoInputOperator(op, (False, False), max_buffered_records)
    if replacement is None:
        return factory
    return SimpleOperatorFactory(replacement, factory.chaining_strategy)
