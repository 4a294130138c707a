"""Small helpers that build Transformations directly (no DataStream API), as Flink's
``StreamGraphGenerator`` tests do. Ids come from a per-builder counter in creation order,
exactly like a fresh environment's (and a fresh JVM's, in the golden data)."""

from __future__ import annotations

from typing import List, Optional

from rill.graph.stream_graph_generator import StreamGraphGenerator
from rill.graph.transformations import (
    OneInputTransformation,
    PartitionTransformation,
    SideOutputTransformation,
    SinkTransformation,
    SourceTransformation,
    Transformation,
    TwoInputTransformation,
    UnionTransformation,
)
from rill.network.partitioner import (
    BroadcastPartitioner,
    ForwardPartitioner,
    GlobalPartitioner,
    KeyGroupStreamPartitioner,
    RebalancePartitioner,
    RescalePartitioner,
    ShufflePartitioner,
)
from rill.operators.base import AbstractStreamOperator, ChainingStrategy
from rill.operators.factory import SimpleOperatorFactory


class _Op(AbstractStreamOperator):
    """A stand-in operator: only its chaining strategy matters to the graph layers."""

    def __init__(self, label: str = "op"):
        self.label = label

    def process_element(self, value, timestamp=None):  # pragma: no cover - never run here
        self.output.collect(value, timestamp)


class _SourceOp(_Op):
    chaining_strategy = ChainingStrategy.HEAD


class FakeSource:
    """A Source object placeholder (the graph only carries it)."""

    def __init__(self, name="src"):
        self.name = name


class Builder:
    """Creates transformations with increasing ids and collects the ones an environment would
    record (everything but sources and logical transformations, as Flink's ``addOperator``)."""

    def __init__(self):
        self._next = 0
        self.transformations: List[Transformation] = []

    def _id(self, explicit: Optional[int] = None) -> int:
        if explicit is not None:
            return explicit
        self._next += 1
        return self._next

    def skip_id(self, n: int = 1) -> None:
        """Consume ids (e.g. for transformations PyFlink creates and later replaces)."""
        self._next += n

    def source(self, name="Collection Source", parallelism=-1, chaining=None, source=None, id=None):
        op = _SourceOp(name)
        t = SourceTransformation(self._id(id), name, SimpleOperatorFactory(op, chaining), source or FakeSource(name),
                                 parallelism)
        return t

    def one(self, name, input, parallelism=-1, chaining=None, keyed_by=None, register=True, id=None):
        t = OneInputTransformation(self._id(id), name, SimpleOperatorFactory(_Op(name), chaining), input, parallelism)
        if keyed_by is not None:
            t.state_key_selector = keyed_by
        if register:
            self.transformations.append(t)
        return t

    def two(self, name, input1, input2, parallelism=-1):
        t = TwoInputTransformation(self._id(), name, SimpleOperatorFactory(_Op(name)), input1, input2, parallelism)
        self.transformations.append(t)
        return t

    def sink(self, input, name="Print to Std. Out", parallelism=-1, chaining=None, id=None):
        t = SinkTransformation(self._id(id), name, SimpleOperatorFactory(_Op(name), chaining), input, parallelism)
        self.transformations.append(t)
        return t

    def partition(self, input, partitioner, exchange_mode=None):
        if exchange_mode is None:
            return PartitionTransformation(self._id(), input, partitioner)
        return PartitionTransformation(self._id(), input, partitioner, exchange_mode)

    def shuffle(self, input):
        return self.partition(input, ShufflePartitioner())

    def rebalance(self, input):
        return self.partition(input, RebalancePartitioner())

    def rescale(self, input):
        return self.partition(input, RescalePartitioner())

    def broadcast(self, input):
        return self.partition(input, BroadcastPartitioner())

    def forward(self, input):
        return self.partition(input, ForwardPartitioner())

    def global_(self, input):
        return self.partition(input, GlobalPartitioner())

    def key_by(self, input, key_selector, max_parallelism=128):
        return self.partition(input, KeyGroupStreamPartitioner(key_selector, max_parallelism))

    def union(self, *inputs):
        return UnionTransformation(self._id(), list(inputs))

    def side_output(self, input, tag):
        return SideOutputTransformation(self._id(), input, tag)

    def stream_graph(self, job_name="job", chaining=True, parallelism=1, max_parallelism=-1,
                     transformations: Optional[list] = None):
        return StreamGraphGenerator(
            self.transformations if transformations is None else transformations,
            job_name=job_name,
            chaining_enabled=chaining,
            default_parallelism=parallelism,
            default_max_parallelism=max_parallelism,
        ).generate()


def acceptance(chaining=True):
    """source(p=1) → flat_map(p=4) → shuffle → filter(p=4) → print(p=4)  (Flink golden T1)."""
    b = Builder()
    src = b.source(parallelism=1)
    fm = b.one("FlatMap", src, parallelism=4)
    flt = b.one("Filter", b.shuffle(fm), parallelism=4)
    b.sink(flt, parallelism=4)
    return b, b.stream_graph(chaining=chaining, parallelism=1)
