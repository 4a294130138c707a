"""The DataStream API, with PyFlink's names (``pyflink.datastream``).

Names are resolved on first access (PEP 562), so that low-level modules can import
``rill.datastream.functions`` without pulling in the whole API (and its graph layer).
"""

from importlib import import_module
from typing import Any

_EXPORTS = {
    "AsyncDataStream": "rill.datastream.async_data_stream",
    "AsyncJobClient": "rill.datastream.async_client",
    "AsyncFunction": "rill.datastream.async_functions",
    "AsyncRetryPredicate": "rill.datastream.async_functions",
    "AsyncRetryStrategy": "rill.datastream.async_functions",
    "CloseableIterator": "rill.datastream.data_stream",
    "DataStream": "rill.datastream.data_stream",
    "DataStreamSink": "rill.datastream.data_stream",
    "KeyedStream": "rill.datastream.data_stream",
    "BroadcastConnectedStream": "rill.datastream.connected_streams",
    "BroadcastStream": "rill.datastream.connected_streams",
    "ConnectedStreams": "rill.datastream.connected_streams",
    "IntervalJoin": "rill.datastream.join",
    "IntervalJoined": "rill.datastream.join",
    "BroadcastProcessFunction": "rill.datastream.co_functions",
    "CoFlatMapFunction": "rill.datastream.co_functions",
    "CoMapFunction": "rill.datastream.co_functions",
    "CoProcessFunction": "rill.datastream.co_functions",
    "KeyedBroadcastProcessFunction": "rill.datastream.co_functions",
    "KeyedCoProcessFunction": "rill.datastream.co_functions",
    "ProcessJoinFunction": "rill.datastream.co_functions",
    "AggregateFunction": "rill.datastream.functions",
    "FilterFunction": "rill.datastream.functions",
    "FlatMapFunction": "rill.datastream.functions",
    "Function": "rill.datastream.functions",
    "KeyedProcessFunction": "rill.datastream.functions",
    "KeySelector": "rill.datastream.functions",
    "MapFunction": "rill.datastream.functions",
    "Partitioner": "rill.datastream.functions",
    "ProcessFunction": "rill.datastream.functions",
    "ReduceFunction": "rill.datastream.functions",
    "RuntimeContext": "rill.datastream.functions",
    "SinkFunction": "rill.datastream.functions",
    "TimerService": "rill.datastream.functions",
    "OutputTag": "rill.datastream.output_tag",
    "WindowedStream": "rill.datastream.windowed_stream",
    "AllWindowedStream": "rill.datastream.windowed_stream",
    "WindowFunction": "rill.datastream.window",
    "ProcessWindowFunction": "rill.datastream.window",
    "AllWindowFunction": "rill.datastream.window",
    "ProcessAllWindowFunction": "rill.datastream.window",
    "CheckpointedFunction": "rill.datastream.checkpointed_function",
    "FunctionInitializationContext": "rill.datastream.checkpointed_function",
    "FunctionSnapshotContext": "rill.datastream.checkpointed_function",
    "TimeDomain": "rill.operators.timer_service",
    "RuntimeExecutionMode": "rill.datastream.stream_execution_environment",
    "StreamExecutionEnvironment": "rill.datastream.stream_execution_environment",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rill.datastream' has no attribute '{name}'")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
