"""Producing side of the network stack (Flink's ``org.apache.flink.runtime.io.network.partition``).

The consuming side lives in :mod:`rill.network.partition.consumer`.
"""

from .exceptions import PartitionError, PartitionNotFoundError, PartitionReleasedError
from .pipelined_subpartition import PipelinedSubpartition, PipelinedSubpartitionView
from .result_partition import ResultPartition, ResultPartitionStatistics
from .result_partition_id import ResultPartitionID
from .result_partition_manager import ResultPartitionManager
from .result_partition_type import ResultPartitionType
from .result_subpartition import BufferAndBacklog, BufferAvailabilityListener, ResultSubpartition
from .result_subpartition_view import ResultSubpartitionView

__all__ = [
    "ResultPartitionType",
    "ResultPartitionID",
    "ResultSubpartition",
    "BufferAndBacklog",
    "BufferAvailabilityListener",
    "ResultSubpartitionView",
    "PipelinedSubpartition",
    "PipelinedSubpartitionView",
    "ResultPartition",
    "ResultPartitionStatistics",
    "ResultPartitionManager",
    "PartitionError",
    "PartitionNotFoundError",
    "PartitionReleasedError",
]
