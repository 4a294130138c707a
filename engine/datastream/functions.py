"""User function interfaces, with PyFlink's names (``pyflink.datastream.functions``).

The one-input interfaces are defined in :mod:`rill.common.functions`, the two-input ones in
:mod:`rill.common.co_functions`, the window ones in :mod:`rill.operators.windowing`; PyFlink
keeps them all in this one module, so it re-exports them. They sit below the DataStream API
because the operators that call them are a lower layer (see ``tests/test_layering.py``).
"""

from rill.common.co_functions import (
    BaseBroadcastProcessFunction,
    BroadcastProcessFunction,
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
    ProcessJoinFunction,
)
from rill.common.functions import (
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
    SourceFunction,
    TimerService,
    is_rich,
    wrap,
)
from rill.datastream.async_function_descriptor import AsyncFunctionDescriptor
from rill.datastream.async_functions import AsyncFunction, AsyncRetryPredicate, AsyncRetryStrategy
from rill.operators.windowing.window_functions import (
    AllWindowFunction,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    WindowFunction,
)

__all__ = [
    "BaseBroadcastProcessFunction",
    "Function",
    "MapFunction",
    "FlatMapFunction",
    "FilterFunction",
    "ReduceFunction",
    "AggregateFunction",
    "KeySelector",
    "Partitioner",
    "ProcessFunction",
    "KeyedProcessFunction",
    "SinkFunction",
    "SourceFunction",
    "RuntimeContext",
    "TimerService",
    "wrap",
    "is_rich",
    "CoMapFunction",
    "CoFlatMapFunction",
    "CoProcessFunction",
    "KeyedCoProcessFunction",
    "BroadcastProcessFunction",
    "KeyedBroadcastProcessFunction",
    "ProcessJoinFunction",
    "WindowFunction",
    "ProcessWindowFunction",
    "AllWindowFunction",
    "ProcessAllWindowFunction",
    "AsyncFunction",
    "AsyncRetryStrategy",
    "AsyncRetryPredicate",
    "AsyncFunctionDescriptor",
]
