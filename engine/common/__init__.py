"""Common API types, with PyFlink's names (``pyflink.common``)."""

from rill.common.configuration import Configuration, ConfigOptions
from rill.common.job_execution_result import JobExecutionResult
from rill.common.row import Row, RowKind
from rill.common.typeinfo import Types, TypeInformation
from rill.graph.states import JobStatus, ExecutionState
from rill.common.serialization import Encoder, SimpleStringSchema
from rill.common.time import Duration, Time
from rill.common.watermark_strategy import TimestampAssigner, WatermarkStrategy

__all__ = [
    "Configuration",
    "ConfigOptions",
    "Duration",
    "Encoder",
    "ExecutionState",
    "JobExecutionResult",
    "JobStatus",
    "Row",
    "RowKind",
    "SimpleStringSchema",
    "Time",
    "TimestampAssigner",
    "Types",
    "TypeInformation",
    "WatermarkStrategy",
]
