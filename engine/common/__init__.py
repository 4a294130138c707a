"""Common API types, with PyFlink's names (``pyflink.common``).

Names are resolved on first access (PEP 562), so that low-level modules (state, operators)
can import a leaf such as ``rill.common.time`` without pulling in the graph layer.
"""

from importlib import import_module
from typing import Any

_EXPORTS = {
    "AssignerWithPeriodicWatermarksWrapper": "rill.common.watermark_strategy",
    "CompletableFuture": "rill.common.completable_future",
    "ConfigOption": "rill.common.configuration",
    "InputDependencyConstraint": "rill.common.input_dependency_constraint",
    "Instant": "rill.common.time",
    "JobClient": "rill.runtime.job_client",
    "JobID": "rill.graph.job_graph",
    "TypeSerializer": "rill.common.serializer",
    "Configuration": "rill.common.configuration",
    "ConfigOptions": "rill.common.configuration",
    "ByteArraySchema": "rill.common.serialization",
    "DeserializationSchema": "rill.common.serialization",
    "Duration": "rill.common.time",
    "Encoder": "rill.common.serialization",
    "ExecutionConfig": "rill.common.execution_config",
    "ExecutionState": "rill.graph.states",
    "JobExecutionResult": "rill.common.job_execution_result",
    "JobStatus": "rill.graph.states",
    "RestartStrategies": "rill.common.restart_strategy",
    "RestartStrategyConfiguration": "rill.common.restart_strategy",
    "Row": "rill.common.row",
    "SerializationSchema": "rill.common.serialization",
    "RowKind": "rill.common.row",
    "SimpleStringSchema": "rill.common.serialization",
    "Time": "rill.common.time",
    "TimestampAssigner": "rill.common.watermark_strategy",
    "Types": "rill.common.typeinfo",
    "TypeInformation": "rill.common.typeinfo",
    "WatermarkStrategy": "rill.common.watermark_strategy",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rill.common' has no attribute '{name}'")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
