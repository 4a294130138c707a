"""Windowing (Flink's ``org.apache.flink.streaming.api.windowing`` and
``org.apache.flink.streaming.runtime.operators.windowing``; PyFlink's
``pyflink.datastream.window``).

Modules: :mod:`~rill.operators.windowing.windows` (TimeWindow, CountWindow, GlobalWindow),
:mod:`~rill.operators.windowing.assigners` (tumbling, sliding, session, global assigners),
:mod:`~rill.operators.windowing.triggers` (TriggerResult and the triggers),
:mod:`~rill.operators.windowing.evictors` (count, time, delta evictors),
:mod:`~rill.operators.windowing.window_functions` (WindowFunction, ProcessWindowFunction and
the internal adapters), :mod:`~rill.operators.windowing.merging_window_set`
(MergingWindowSet), :mod:`~rill.operators.windowing.window_operator` (WindowOperator),
:mod:`~rill.operators.windowing.evicting_window_operator` (EvictingWindowOperator) and
:mod:`~rill.operators.windowing.builder` (WindowOperatorBuilder: function -> operator and name).
"""

from rill.operators.windowing.count_assigners import CountSlidingWindowAssigner, CountTumblingWindowAssigner
from rill.operators.windowing.window_serializers import (
    CountWindowSerializer,
    GlobalWindowSerializer,
    TimeWindowSerializer,
)
from rill.operators.windowing.assigners import (
    NO_TIMESTAMP_MESSAGE,
    DynamicEventTimeSessionWindows,
    DynamicProcessingTimeSessionWindows,
    EventTimeSessionWindows,
    GlobalWindows,
    MergingWindowAssigner,
    MissingTimestampError,
    ProcessingTimeSessionWindows,
    SessionWindowTimeGapExtractor,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    WindowAssigner,
)
from rill.operators.windowing.builder import WindowOperatorBuilder
from rill.operators.windowing.evicting_window_operator import EvictingWindowOperator
from rill.operators.windowing.evictors import (
    CountEvictor,
    DeltaEvictor,
    Evictor,
    EvictorContext,
    TimeEvictor,
    TimestampedValue,
)
from rill.operators.windowing.merging_window_set import MergingWindowSet
from rill.operators.windowing.triggers import (
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
    CountTrigger,
    DeltaFunction,
    DeltaTrigger,
    EventTimeTrigger,
    NeverTrigger,
    OnMergeContext,
    ProcessingTimeTrigger,
    PurgingTrigger,
    Trigger,
    TriggerContext,
    TriggerResult,
)
from rill.operators.windowing.window_functions import (
    AggregateApplyProcessWindowFunction,
    AggregateApplyWindowFunction,
    AllWindowFunction,
    AllWindowFunctionAdapter,
    InternalIterableProcessWindowFunction,
    InternalIterableWindowFunction,
    InternalSingleValueProcessWindowFunction,
    InternalSingleValueWindowFunction,
    InternalWindowFunction,
    KeyedStateStore,
    PassThroughAllWindowFunction,
    PassThroughWindowFunction,
    ProcessAllWindowFunction,
    ProcessAllWindowFunctionAdapter,
    ProcessWindowFunction,
    ReduceApplyProcessWindowFunction,
    ReduceApplyWindowFunction,
    WindowFunction,
    function_name,
)
from rill.operators.windowing.window_operator import (
    LATE_ELEMENTS_DROPPED_METRIC_NAME,
    MERGING_WINDOW_SET_STATE_NAME,
    TIMER_SERVICE_NAME,
    WINDOW_STATE_NAME,
    SimpleCounter,
    WindowOperator,
)
from rill.operators.windowing.windows import CountWindow, GlobalWindow, TimeWindow, Window, to_milliseconds

__all__ = [
    "CountTumblingWindowAssigner",
    "CountSlidingWindowAssigner",
    "TimeWindowSerializer",
    "CountWindowSerializer",
    "GlobalWindowSerializer",
    # windows
    "Window",
    "TimeWindow",
    "CountWindow",
    "GlobalWindow",
    "to_milliseconds",
    # assigners
    "NO_TIMESTAMP_MESSAGE",
    "MissingTimestampError",
    "WindowAssigner",
    "MergingWindowAssigner",
    "SessionWindowTimeGapExtractor",
    "TumblingEventTimeWindows",
    "TumblingProcessingTimeWindows",
    "SlidingEventTimeWindows",
    "SlidingProcessingTimeWindows",
    "EventTimeSessionWindows",
    "ProcessingTimeSessionWindows",
    "DynamicEventTimeSessionWindows",
    "DynamicProcessingTimeSessionWindows",
    "GlobalWindows",
    # triggers
    "TriggerResult",
    "Trigger",
    "TriggerContext",
    "OnMergeContext",
    "EventTimeTrigger",
    "ProcessingTimeTrigger",
    "CountTrigger",
    "PurgingTrigger",
    "ContinuousEventTimeTrigger",
    "ContinuousProcessingTimeTrigger",
    "DeltaTrigger",
    "DeltaFunction",
    "NeverTrigger",
    # evictors
    "TimestampedValue",
    "Evictor",
    "EvictorContext",
    "CountEvictor",
    "TimeEvictor",
    "DeltaEvictor",
    # functions
    "KeyedStateStore",
    "WindowFunction",
    "ProcessWindowFunction",
    "AllWindowFunction",
    "ProcessAllWindowFunction",
    "InternalWindowFunction",
    "PassThroughWindowFunction",
    "PassThroughAllWindowFunction",
    "InternalSingleValueWindowFunction",
    "InternalIterableWindowFunction",
    "InternalSingleValueProcessWindowFunction",
    "InternalIterableProcessWindowFunction",
    "ReduceApplyWindowFunction",
    "ReduceApplyProcessWindowFunction",
    "AggregateApplyWindowFunction",
    "AggregateApplyProcessWindowFunction",
    "AllWindowFunctionAdapter",
    "ProcessAllWindowFunctionAdapter",
    "function_name",
    # operators
    "MergingWindowSet",
    "WindowOperator",
    "EvictingWindowOperator",
    "WindowOperatorBuilder",
    "SimpleCounter",
    "LATE_ELEMENTS_DROPPED_METRIC_NAME",
    "WINDOW_STATE_NAME",
    "MERGING_WINDOW_SET_STATE_NAME",
    "TIMER_SERVICE_NAME",
]
