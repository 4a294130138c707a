"""A JobGraph as Spark RDDs: one stage per vertex, one Spark partition per subtask.

The translation (run on the driver; the JobGraph was generated in BATCH mode):

* a source vertex is ``parallelize(range(p), p)``: partition ``i`` runs source subtask ``i``
  with the splits its enumerator assigned it on the driver
  (:func:`~rill.runtime.spark.subtask.assign_splits`; sequences split by ranges, files by
  file or byte range, a collection is one split of its one subtask, as Flink's);
* every other vertex runs ``mapPartitionsWithIndex`` over its input: partition ``i`` is
  subtask ``i`` fed by :func:`~rill.runtime.spark.subtask.run_subtask`;
* an edge is the producer's items for that edge: its partitioner already chose the consumer
  subtask of every batch in the producer (key group for ``key_by`` -- Rill's
  ``KeyGroupRangeAssignment`` -- round robin for rebalance, every subtask for broadcast);
  a single FORWARD input of equal parallelism stays in its partition (no shuffle); every
  other input is the union of its edges' items, tagged with the consumer's input number
  (1/2 for connect, broadcast side included), ``partitionBy`` the target subtask;
* the consumer groups its keyed input by key with Rill's own sorted BATCH input
  (``KeyGroupedBuffer``: grouped in memory, spilled to local disk by key group beyond
  ``rill.batch.sorted-inputs.max-records``), so memory stays bounded whatever the key skew.

Rill difference from Beam's and the issue's plan: the exchange moves *batches* (up to
``rill.spark.records-per-batch`` records of one edge for one subtask per Spark record)
and the per-key sort happens in the consumer's BATCH input rather than in
``repartitionAndSortWithinPartitions``: Spark would pay its Python per-record cost on every
record, Rill pays it per batch.

A vertex's RDD is persisted when more than one consumer (or the final collect) reads it, so
that no vertex runs twice; one Spark action (``collect`` of the collect sinks' batches)
runs the whole job.
"""

from __future__ import annotations

import pickle
import time
from typing import Any, Dict, List, Optional, Tuple

from rill.common.pickling import dumps
from rill.operators.collect_sink import CollectSinkOperator
from rill.runtime.cluster.shipping import local_modules_by_value
from rill.operators.source_operator import SourceOperator
from rill.runtime.deployment import TaskInformation
from rill.runtime.spark.failures import embed_failure
from rill.runtime.spark.subtask import COLLECT_CHANNEL, SubtaskSettings, assign_splits, run_subtask

__all__ = ["SparkPlan", "pointwise_targets"]

_POINTWISE = ("FORWARD", "RESCALE")


def pointwise_targets(producer_parallelism: int, consumer_parallelism: int) -> List[List[int]]:
    """Per producer subtask, the consumer subtasks a POINTWISE edge connects it to (Flink's
    ``EdgeManagerBuildUtil.connectPointwise``: equal parallelism one to one; more producers
    share a consumer; fewer producers each feed a contiguous range)."""
    up, down = producer_parallelism, consumer_parallelism
    if up >= down:
        return [[i * down // up] for i in range(up)]
    return [list(range(i * down // up, (i + 1) * down // up)) for i in range(up)]


def _ship(info: TaskInformation, pointwise, consumers, settings, splits) -> bytes:
    """What the tasks of one vertex need, pickled once on the driver, with the program's own
    modules (the ``__main__`` file, test modules) by value: a Spark executor cannot import them
    (as a cluster task process cannot, see ``rill.runtime.cluster.shipping``)."""
    with local_modules_by_value():
        return dumps((info, pointwise, consumers, settings, splits))


def _run(payload: bytes, counters):
    """The partition function of one vertex (pickled by Spark with cloudpickle)."""
    def run(index: int, records):
        started = time.monotonic()
        info, pointwise, consumers, settings, splits = pickle.loads(payload)
        counts = [0, 0]

        def inputs():
            for record in records:
                batch = record[1]
                counts[0] += len(batch[1])
                yield batch

        task = f"{info.get_name()} ({index + 1}/{info.get_parallelism()})"
        try:
            for item in run_subtask(info, index, [p if p is None else p[index] for p in pointwise], consumers,
                                    settings, inputs(), None if splits is None else splits[index]):
                if item[0] != COLLECT_CHANNEL:
                    counts[1] += len(item[1][1])
                yield item
        except Exception as e:
            raise embed_failure(e, task) from None
        counters.add({str(info.get_id()): (counts[0], counts[1], (time.monotonic() - started) * 1000.0)})

    return run


class SparkPlan:
    """The RDDs of one job (built on the driver, nothing runs until :meth:`run`).

    :param spark_context: the ``SparkContext``.
    :param job_graph: a JobGraph generated in BATCH mode, checked by ``check_runs_on_spark``.
    :param settings: the subtasks' shared settings.
    :param counters: a Spark accumulator of ``{vertex id: (records in, records out, ms)}``.
    """

    def __init__(self, spark_context: Any, job_graph: Any, settings: SubtaskSettings, counters: Any):
        self.sc = spark_context
        self.vertices = job_graph.get_vertices_sorted_topologically_from_sources()
        self._settings = settings
        self._counters = counters
        self._rdds: Dict[Any, Any] = {}
        self._persisted: List[Any] = []
        # readers of each vertex's output, counted before any RDD exists: PySpark pipelines an
        # uncached parent's function into each child, so persisting after the children were
        # built would still run the vertex once per reader
        self._uses: Dict[Any, int] = {v.get_id(): 0 for v in self.vertices}
        for v in self.vertices:
            for job_edge in v.inputs:
                self._uses[job_edge.source.producer.get_id()] += 1
            if not v.transitive_out_edges or _has_collect_sink(v):
                self._uses[v.get_id()] += 1
        self.finals: List[Any] = []
        for v in self.vertices:
            rdd = self._vertex_rdd(v)
            if self._uses[v.get_id()] > 1:
                rdd = rdd.persist()
                self._persisted.append(rdd)
            self._rdds[v.get_id()] = rdd
            if not v.transitive_out_edges or _has_collect_sink(v):
                self.finals.append(rdd)

    def _edges_out(self, v) -> Tuple[List[Optional[List[List[int]]]], List[int]]:
        pointwise, consumers = [], []
        for edge in v.transitive_out_edges:
            consumer = _consumer_of(v, edge)
            consumers.append(consumer.get_parallelism())
            pointwise.append(pointwise_targets(v.get_parallelism(), consumer.get_parallelism())
                             if str(edge.partitioner) in _POINTWISE else None)
        return pointwise, consumers

    def _vertex_rdd(self, v) -> Any:
        info = TaskInformation.from_job_vertex(v)
        p = v.get_parallelism()
        pointwise, consumers = self._edges_out(v)
        head = v.stream_configs[v.head_node_id].operator_factory.operator
        if isinstance(head, SourceOperator):
            splits = assign_splits(head.source, p)
            fn = _run(_ship(info, pointwise, consumers, self._settings, splits), self._counters)
            return self.sc.parallelize(range(p), p).mapPartitionsWithIndex(fn, preservesPartitioning=False)
        fn = _run(_ship(info, pointwise, consumers, self._settings, None), self._counters)
        inputs = []
        for stream_edge, job_edge in zip(v.in_edges, v.inputs):
            producer = job_edge.source.producer
            index = _index_of(producer.transitive_out_edges, stream_edge)
            inputs.append((producer, index, stream_edge))
        if len(inputs) == 1:
            producer, index, stream_edge = inputs[0]
            if str(stream_edge.partitioner) == "FORWARD" and producer.get_parallelism() == p:
                # stays in its partition: subtask i of the consumer reads subtask i's output
                return (self._rdds[producer.get_id()].filter(_for_edge(index))
                        .map(_tag(stream_edge.type_number), preservesPartitioning=True).mapPartitionsWithIndex(fn))
        tagged = [self._rdds[producer.get_id()].filter(_for_edge(index)).map(_tag(stream_edge.type_number))
                  for producer, index, stream_edge in inputs]
        merged = tagged[0] if len(tagged) == 1 else self.sc.union(tagged)
        return merged.partitionBy(p, _identity).mapPartitionsWithIndex(fn)

    def run(self) -> List[Tuple[str, list]]:
        """Run the job (one Spark action); the collect sinks' ``(channel id, values)`` batches.

        :raises Exception: Spark's error when a task failed (see ``rill.runtime.spark.failures``).
        """
        try:
            final = self.finals[0] if len(self.finals) == 1 else self.sc.union(self.finals)
            return final.filter(_is_collect).map(_payload).collect()
        finally:
            for rdd in self._persisted:
                rdd.unpersist()


def _identity(channel: int) -> int:
    return channel


def _is_collect(item) -> bool:
    return item[0] == COLLECT_CHANNEL


def _payload(item):
    return item[1]


def _for_edge(index: int):
    def keep(item) -> bool:
        return item[0] != COLLECT_CHANNEL and item[1][0] == index
    return keep


def _tag(type_number: int):
    def tag(item):
        _edge, values, timestamps = item[1]
        return item[0], (type_number, values, timestamps)
    return tag


def _index_of(edges: List[Any], edge: Any) -> int:
    for i, e in enumerate(edges):
        if e is edge:
            return i
    raise ValueError(f"edge {edge} is not among the out edges of its producer")


def _consumer_of(v, edge) -> Any:
    for ds in v.produced_data_sets:
        for job_edge in ds.get_consumers():
            target = job_edge.target
            if any(e is edge for e in target.in_edges):
                return target
    raise ValueError(f"edge {edge} of vertex '{v.get_name()}' has no consuming vertex")


def _has_collect_sink(v) -> bool:
    return any(isinstance(cfg.operator_factory.operator, CollectSinkOperator) for cfg in v.stream_configs.values())
