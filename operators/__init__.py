"""Stream operators (Flink's ``org.apache.flink.streaming.api.operators``)."""

from rill.operators.aggregations import (
    MaxAggregator,
    MaxByAggregator,
    MinAggregator,
    MinByAggregator,
    SumAggregator,
)
from rill.operators.base import (
    AbstractStreamOperator,
    AbstractUdfStreamOperator,
    ChainingStrategy,
    OneInputStreamOperator,
    Output,
    StreamOperator,
)
from rill.operators.factory import SimpleOperatorFactory
from rill.operators.keyed_reduce import StreamGroupedReduce
from rill.operators.output_tag import OutputTag
from rill.operators.process import KeyedProcessOperator, ProcessOperator
from rill.operators.simple import StreamFilter, StreamFlatMap, StreamMap
from rill.operators.sink import StreamSink
from rill.operators.source_operator import SourceOperator

__all__ = [
    "AbstractStreamOperator",
    "AbstractUdfStreamOperator",
    "ChainingStrategy",
    "KeyedProcessOperator",
    "MaxAggregator",
    "MaxByAggregator",
    "MinAggregator",
    "MinByAggregator",
    "OneInputStreamOperator",
    "Output",
    "OutputTag",
    "ProcessOperator",
    "SimpleOperatorFactory",
    "SourceOperator",
    "StreamFilter",
    "StreamFlatMap",
    "StreamGroupedReduce",
    "StreamMap",
    "StreamOperator",
    "StreamSink",
    "SumAggregator",
]
