"""The DataStream API, with PyFlink's names (``pyflink.datastream``)."""

from rill.datastream.data_stream import CloseableIterator, DataStream, DataStreamSink, KeyedStream
from rill.datastream.functions import (
    AggregateFunction,
    FilterFunction,
    FlatMapFunction,
    Function,
    KeyedProcessFunction,
    KeySelector,
    MapFunction,
    Partitioner,
    ProcessFunction,
    ReduceFunction,
    RuntimeContext,
    SinkFunction,
    TimerService,
)
from rill.datastream.output_tag import OutputTag
from rill.datastream.stream_execution_environment import RuntimeExecutionMode, StreamExecutionEnvironment

__all__ = [
    "AggregateFunction",
    "CloseableIterator",
    "DataStream",
    "DataStreamSink",
    "FilterFunction",
    "FlatMapFunction",
    "Function",
    "KeyedProcessFunction",
    "KeyedStream",
    "KeySelector",
    "MapFunction",
    "OutputTag",
    "Partitioner",
    "ProcessFunction",
    "ReduceFunction",
    "RuntimeContext",
    "RuntimeExecutionMode",
    "SinkFunction",
    "StreamExecutionEnvironment",
    "TimerService",
]
