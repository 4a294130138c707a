"""Partitioners: how a producer routes records to consumer channels (Flink's
``org.apache.flink.streaming.runtime.partitioner``)."""

from .broadcast_partitioner import BroadcastPartitioner
from .custom_partitioner_wrapper import CustomPartitionerWrapper
from .forward_partitioner import ForwardPartitioner
from .global_partitioner import GlobalPartitioner
from .key_group_stream_partitioner import KeyGroupStreamPartitioner, KeySelectionError
from .keyed_batch import KeyedBatch
from .rebalance_partitioner import RebalancePartitioner
from .rescale_partitioner import RescalePartitioner
from .shuffle_partitioner import ShufflePartitioner
from .stream_partitioner import StreamPartitioner

__all__ = [
    "StreamPartitioner",
    "ForwardPartitioner",
    "RebalancePartitioner",
    "RescalePartitioner",
    "ShufflePartitioner",
    "BroadcastPartitioner",
    "GlobalPartitioner",
    "KeyGroupStreamPartitioner",
    "KeySelectionError",
    "KeyedBatch",
    "CustomPartitionerWrapper",
]
