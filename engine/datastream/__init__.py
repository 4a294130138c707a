"""The DataStream API, with PyFlink's names (``pyflink.datastream``).

Names are resolved on first access (PEP 562), so that importing one submodule (say
``rill.datastream.state``) does not pull in the whole API and its graph layer.
"""

from importlib import import_module
from typing import Any

_EXPORTS = {
    "Window": "rill.operators.windowing",
    "TimeWindow": "rill.operators.windowing",
    "CountWindow": "rill.operators.windowing",
    "GlobalWindow": "rill.operators.windowing",
    "WindowAssigner": "rill.operators.windowing",
    "MergingWindowAssigner": "rill.operators.windowing",
    "TriggerResult": "rill.operators.windowing",
    "Trigger": "rill.operators.windowing",
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
    "BroadcastProcessFunction": "rill.common.co_functions",
    "CoFlatMapFunction": "rill.common.co_functions",
    "CoMapFunction": "rill.common.co_functions",
    "CoProcessFunction": "rill.common.co_functions",
    "KeyedBroadcastProcessFunction": "rill.common.co_functions",
    "KeyedCoProcessFunction": "rill.common.co_functions",
    "ProcessJoinFunction": "rill.common.co_functions",
    "AggregateFunction": "rill.common.functions",
    "FilterFunction": "rill.common.functions",
    "FlatMapFunction": "rill.common.functions",
    "Function": "rill.common.functions",
    "KeyedProcessFunction": "rill.common.functions",
    "KeySelector": "rill.common.functions",
    "MapFunction": "rill.common.functions",
    "Partitioner": "rill.common.functions",
    "ProcessFunction": "rill.common.functions",
    "ReduceFunction": "rill.common.functions",
    "RuntimeContext": "rill.common.functions",
    "SinkFunction": "rill.common.functions",
    "SlotSharingGroup": "rill.common.slot_sharing_group",
    "MemorySize": "rill.common.memory_size",
    "SourceFunction": "rill.common.functions",
    "CheckpointListener": "rill.common.functions",
    "TimerService": "rill.common.functions",
    "OutputTag": "rill.datastream.output_tag",
    "WindowedStream": "rill.datastream.windowed_stream",
    "AllWindowedStream": "rill.datastream.windowed_stream",
    "WindowFunction": "rill.datastream.window",
    "ProcessWindowFunction": "rill.datastream.window",
    "AllWindowFunction": "rill.datastream.window",
    "ProcessAllWindowFunction": "rill.datastream.window",
    "CheckpointConfig": "rill.datastream.checkpoint_config",
    "CheckpointStorage": "rill.datastream.checkpoint_storage",
    "CustomCheckpointStorage": "rill.datastream.checkpoint_storage",
    "CustomStateBackend": "rill.datastream.state_backend",
    "FileSystemCheckpointStorage": "rill.datastream.checkpoint_storage",
    "HashMapStateBackend": "rill.datastream.state_backend",
    "EmbeddedRocksDBStateBackend": "rill.datastream.state_backend",
    "PredefinedOptions": "rill.datastream.state_backend",
    "JobManagerCheckpointStorage": "rill.datastream.checkpoint_storage",
    "StateBackend": "rill.datastream.state_backend",
    "CheckpointingMode": "rill.common.checkpointing_options",
    "ExternalizedCheckpointRetention": "rill.common.checkpointing_options",
    "CheckpointedFunction": "rill.operators.checkpointed_function",
    "FunctionInitializationContext": "rill.operators.checkpointed_function",
    "FunctionSnapshotContext": "rill.operators.checkpointed_function",
    "TimeDomain": "rill.operators.timer_service",
    "RuntimeExecutionMode": "rill.common.execution_options",
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
