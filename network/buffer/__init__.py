"""Buffers and buffer pools (Flink's ``org.apache.flink.runtime.io.network.buffer``)."""

from .buffer import Buffer, BufferRecycler
from .buffer_pool import BufferPoolDestroyedError, BufferPoolStatistics, LocalBufferPool
from .network_buffer_pool import (
    InsufficientNetworkBuffersError,
    NetworkBufferPool,
    NetworkBufferPoolStatistics,
    SegmentLease,
)

__all__ = [
    "Buffer",
    "BufferRecycler",
    "LocalBufferPool",
    "BufferPoolStatistics",
    "BufferPoolDestroyedError",
    "NetworkBufferPool",
    "NetworkBufferPoolStatistics",
    "SegmentLease",
    "InsufficientNetworkBuffersError",
]
