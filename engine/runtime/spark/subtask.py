"""One subtask of a JobVertex inside a Spark task: the vertex's operator chain, built and run by
Rill's own code in BATCH semantics, fed the records of the task's partition.

This is what the mailbox of a local BATCH task does, without mailbox and network: the
:class:`~rill.runtime.tasks.operator_chain.OperatorChain` is built from the vertex's
StreamConfigs (the BATCH operator factories the StreamGraph chose: sorted keyed inputs,
final-only reduce, timers at the end of each key), every operator gets its state services from
the task's :class:`~rill.operators.state_initializer.StreamTaskStateInitializer`, and

* a source head reads the splits the driver assigned to this subtask (the enumerator ran on the
  driver, :func:`assign_splits`);
* a one-input head gets every input batch through ``process_batch``, a two-input head through
  ``process_batch1``/``process_batch2`` by the input number of the edge the batch came by;
* at the end each input gets ``MAX_WATERMARK`` and ``end_input`` (two-input heads input 1
  first), then the chain finishes and closes, as ``StreamTask.invoke`` ends a task.

Records leave through one :class:`SparkOutputWriter` per non-chained out edge: the edge's own
partitioner routes each batch (key groups for ``key_by``, round robin, broadcast...), so a key
reaches the same consumer subtask as on Rill's network. Collect sinks write to a channel
registered in this process under the driver's channel id; its batches leave the task with the
edges' batches and the driver hands them to the real channel.

Processing time: a :class:`~rill.operators.processing_time_service.TestProcessingTimeService`
set to the wall clock before the chain opens and after every input batch, so due timers fire
between batches on the task's thread, as mails would (keyed operators' processing-time timers
fire at the end of their key, as in local BATCH mode).

Rill difference: what one call into the chain emits (a batch's results, or a keyed operator's
final results at ``end_input``) is buffered until the call returns before it is handed to
Spark.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Deque, Dict, Iterable, Iterator, List, Optional, Tuple

from rill.common.streamrecord import MAX_WATERMARK
from rill.operators.base import TwoInputStreamOperator
from rill.operators.collect_sink import CollectSinkOperator, register_channel_as, release_channel
from rill.operators.context import StreamOperatorContext
from rill.operators.processing_time_service import TestProcessingTimeService
from rill.operators.source_operator import InputStatus, SourceOperator
from rill.operators.state_initializer import StreamTaskStateInitializer
from rill.runtime.tasks.operator_chain import OperatorChain

__all__ = ["SparkOutputWriter", "AssignedSplits", "assign_splits", "run_subtask", "COLLECT_CHANNEL",
           "SubtaskSettings"]

#: the channel of an output item carrying a collect sink's batch: ``(COLLECT_CHANNEL, (channel id,
#: values))``; every other item is ``(target subtask, (out edge index, values, timestamps))``
COLLECT_CHANNEL = -1


class SubtaskSettings:
    """What every subtask of a Spark job shares (plain data, pickled with the task).

    :param records_per_batch: records a source emits per batch (``rill.source.batch-size``).
    :param records_per_output_batch: records an output edge gathers per channel before it
        hands them to Spark as one item (fewer, larger shuffle records).
    :param job_parameters: the job's global parameters (str -> str).
    """

    def __init__(self, records_per_batch: int = 1024, records_per_output_batch: int = 1024,
                 job_parameters: Optional[Dict[str, str]] = None):
        self.records_per_batch = records_per_batch
        self.records_per_output_batch = records_per_output_batch
        self.job_parameters = dict(job_parameters or {})


class SparkOutputWriter:
    """Stands in for the ``RecordWriter`` of one non-chained out edge: routes batches with the
    edge's partitioner and gathers them per target subtask into ``sink`` items
    ``(target subtask, (edge index, values, timestamps or None))``.

    :param edge_index: the edge's index among the vertex's ``transitive_out_edges``.
    :param partitioner: a copy of the edge's ``StreamPartitioner`` (set up here).
    :param channels: the consumer's parallelism.
    :param pointwise: ``None`` for an all-to-all edge; for FORWARD/RESCALE the consumer subtasks
        this producer subtask feeds (Flink's POINTWISE pattern), round robin over them.
    :param sink: the list the items are appended to (drained by the subtask runner).
    """

    def __init__(self, edge_index: int, partitioner: Any, channels: int, pointwise: Optional[List[int]],
                 sink: List[Any], records_per_batch: int):
        self.edge_index = edge_index
        self.partitioner = partitioner
        self._pointwise = pointwise
        self._next = 0
        if pointwise is None:
            partitioner.setup(channels)
        self._sink = sink
        self._limit = records_per_batch
        self._pending: Dict[int, Tuple[list, Optional[list]]] = {}

    def emit_batch(self, values: list, timestamps: Optional[list] = None) -> None:
        if not values:
            return
        if self._pointwise is not None:
            targets = self._pointwise
            channel = targets[self._next % len(targets)]
            self._next += 1
            parts = [(channel, values, timestamps)]
        else:
            parts = self.partitioner.split(values, timestamps)
        for part in parts:
            self._add(part[0], part[1], part[2])

    def _add(self, channel: int, values: list, timestamps: Optional[list]) -> None:
        pending = self._pending.get(channel)
        if pending is not None and (pending[1] is None) != (timestamps is None):
            self._send(channel)
            pending = None
        if pending is None:
            # copies: the caller may reuse its lists, and a broadcast shares one list
            self._pending[channel] = pending = (list(values), None if timestamps is None else list(timestamps))
        else:
            pending[0].extend(values)
            if timestamps is not None:
                pending[1].extend(timestamps)
        if len(pending[0]) >= self._limit:
            self._send(channel)

    def _send(self, channel: int) -> None:
        values, timestamps = self._pending.pop(channel)
        self._sink.append((channel, (self.edge_index, values, timestamps)))

    def flush_all(self) -> None:
        for channel in list(self._pending):
            self._send(channel)

    def emit_watermark(self, watermark: Any) -> None:
        """Dropped: a consumer's only watermark is the ``MAX_WATERMARK`` its runner gives it at
        the end of its input (BATCH)."""

    def broadcast_event(self, event: Any) -> None:
        """Dropped (watermark statuses; BATCH has none that matter)."""

    def close(self) -> None:
        self._pending.clear()


class AssignedSplits:
    """The source coordinator of one source subtask in a Spark task: hands out the splits the
    driver's enumerator assigned to this subtask, then ``None`` (synchronous, as the embedded
    ``SourceCoordinator``)."""

    asynchronous = False

    def __init__(self, splits: Iterable[Any]):
        self._splits: Deque[Any] = deque(splits)

    def assign_split(self, subtask_index: int) -> Tuple[Optional[Any], int]:
        return (self._splits.popleft() if self._splits else None), 0


def assign_splits(source: Any, parallelism: int) -> List[List[Any]]:
    """The splits of ``source`` per subtask, as its enumerator assigns them to ``parallelism``
    subtasks asking in turn (run on the driver; Flink's ``SplitEnumerator`` runs in the
    JobManager). A subtask whose request gets ``None`` asks no more."""
    enumerator = source.create_enumerator(parallelism)
    assigned: List[List[Any]] = [[] for _ in range(parallelism)]
    asking = list(range(parallelism))
    while asking:
        still = []
        for i in asking:
            split = enumerator.handle_split_request(i)
            if split is not None:
                assigned[i].append(split)
                still.append(i)
        asking = still
    return assigned


class _DirectExecutor:
    """A mailbox executor without a mailbox: the action runs at once on the caller's thread
    (the Spark task has one thread, and nothing else submits)."""

    def execute(self, action, description: str = "") -> None:
        action()


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def run_subtask(vertex: Any, subtask_index: int, pointwise: List[Optional[List[int]]],
                consumer_parallelism: List[int], settings: SubtaskSettings,
                inputs: Iterable[Tuple[int, list, Optional[list]]] = (),
                splits: Optional[List[Any]] = None) -> Iterator[Any]:
    """Run subtask ``subtask_index`` of ``vertex`` to its end; yields its output items (see
    :data:`COLLECT_CHANNEL`) as they are produced.

    :param vertex: a :class:`~rill.runtime.deployment.TaskInformation` (or JobVertex).
    :param pointwise: per out edge, ``None`` or the consumer subtasks this subtask feeds.
    :param consumer_parallelism: per out edge, the consumer's parallelism.
    :param inputs: ``(input number 1 or 2 (0: one-input), values, timestamps)`` batches.
    :param splits: for a source vertex, the splits of this subtask.
    :raises BaseException: whatever an operator raised, tagged with the operator's name.
    """
    items: List[Any] = []
    writers = [SparkOutputWriter(i, edge.partitioner.copy(), consumer_parallelism[i], pointwise[i], items,
                                 settings.records_per_output_batch)
               for i, edge in enumerate(vertex.transitive_out_edges)]
    clock = TestProcessingTimeService(_now_ms())
    initializer = StreamTaskStateInitializer()
    executor = _DirectExecutor()
    coordinator = AssignedSplits(splits or ())

    def context(cfg) -> StreamOperatorContext:
        ctx = StreamOperatorContext(
            task_name=vertex.get_name(), operator_name=cfg.operator_name, operator_id=str(cfg.operator_id),
            subtask_index=subtask_index, parallelism=vertex.get_parallelism(),
            max_parallelism=cfg.max_parallelism, processing_time_service=clock,
            key_selector=cfg.state_key_selector, key_selector2=getattr(cfg, "state_key_selector2", None),
            mailbox_executor=executor, job_parameters=dict(settings.job_parameters),
            operator_coordinator=coordinator if cfg.node_id == vertex.head_node_id else None,
            records_per_batch=settings.records_per_batch, auto_watermark_interval_ms=0,
            checkpointing_enabled=False, coordinator_event_executor=executor)
        return initializer.initialize(ctx, None)

    chain = OperatorChain(vertex, writers, context)
    channels = [op.channel_id for _, op in chain.all_operators if isinstance(op, CollectSinkOperator)]
    collected = {cid: register_channel_as(cid) for cid in channels}

    def drain() -> List[Any]:
        for cid, channel in collected.items():
            values = channel.drain()
            if values:
                items.append((COLLECT_CHANNEL, (cid, values)))
        out = list(items)
        items.clear()
        return out

    try:
        chain.initialize_state_and_open()
        head = chain.head_operator
        if isinstance(head, SourceOperator):
            while head.emit_next() is not InputStatus.END_OF_INPUT:
                clock.set_current_time(max(_now_ms(), clock.get_current_processing_time()))
                yield from drain()
        elif isinstance(head, TwoInputStreamOperator):
            feeds = {1: head.process_batch1, 2: head.process_batch2}
            for number, values, timestamps in inputs:
                feeds[max(1, number)](values, timestamps)
                clock.set_current_time(max(_now_ms(), clock.get_current_processing_time()))
                yield from drain()
            for number, watermark in ((1, head.process_watermark1), (2, head.process_watermark2)):
                watermark(MAX_WATERMARK)
                head.end_input(number)
                yield from drain()
        else:
            for _number, values, timestamps in inputs:
                head.process_batch(values, timestamps)
                clock.set_current_time(max(_now_ms(), clock.get_current_processing_time()))
                yield from drain()
            head.process_watermark(MAX_WATERMARK)
        chain.end_input_and_finish()
        for w in writers:
            w.flush_all()
        yield from drain()
    finally:
        clock.shutdown()
        errors = chain.close()
        for _, op in chain.all_operators:
            timers = getattr(getattr(op, "context", None), "timer_service_manager", None)
            if timers is not None:
                timers.close()
        for cid in channels:
            release_channel(cid)
    if errors:
        raise errors[0]
    yield from drain()
