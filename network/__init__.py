"""Rill's network stack: the data plane between tasks (Flink's
``org.apache.flink.runtime.io.network``).

Layout, as Flink's packages:

* :mod:`rill.network.buffer` -- ``Buffer`` (a batch of records), ``LocalBufferPool``
  (bounds buffers in flight; where backpressure blocks and is measured), ``NetworkBufferPool``
  (the process's budget of segments every pool and gate takes its buffers from);
* :mod:`rill.network.events` -- in-band events (EndOfPartition, EndOfData, CheckpointBarrier;
  watermarks travel the same way);
* :mod:`rill.network.partition` -- producing side: ``ResultPartition``, its
  ``PipelinedSubpartition`` queues and their views, the process's ``ResultPartitionManager``;
* :mod:`rill.network.partition.consumer` -- consuming side: ``InputChannel``
  (``LocalInputChannel``; the credit-based ``RemoteInputChannel`` with its ``BufferManager``
  and the gate's ``FloatingBufferPool``), ``SingleInputGate``;
* :mod:`rill.network.api.serialization` -- records and events to bytes for remote channels
  (msgpack, one ``packb`` per buffer; lz4; segments);
* :mod:`rill.network.credit` -- credit-based flow control's accounting (``CreditLedger``);
* :mod:`rill.network.netty` -- the transport between processes (``NettyConnectionManager``);
  groundwork for cluster mode, not used by the in-process runtime;
* :mod:`rill.network.api.writer` -- ``RecordWriter``: batches records per channel into buffers;
* :mod:`rill.network.partitioner` -- ``StreamPartitioner`` and Flink's partitionings.

The flow of one buffer: writer thread -> ``RecordWriter`` -> ``ResultPartition.emit_buffer`` ->
subpartition deque -> view notifies its channel -> the gate queues the channel and, if it had
nothing to read, calls its availability listener (which wakes the consuming task's mailbox) ->
the task's ``SingleInputGate.poll_next`` returns the buffer -> the task recycles it, freeing a
slot of the producer's pool. Locks are taken per buffer, never per record.

Public names are re-exported here; ``tests/network`` checks this surface.
"""

from .api.writer.record_writer import DEFAULT_RECORDS_PER_BUFFER, RecordWriter
from .api.serialization import (
    AdaptiveSpanningRecordDeserializer,
    EventSerializer,
    PayloadTooLargeError,
    SpanningRecordSerializer,
    ValueSerializationError,
)
from .buffer import (
    Buffer,
    BufferPoolDestroyedError,
    BufferPoolStatistics,
    BufferRecycler,
    InsufficientNetworkBuffersError,
    LocalBufferPool,
    NetworkBufferPool,
    NetworkBufferPoolStatistics,
    SegmentLease,
)
from .credit import BufferKind, CreditInvariantError, CreditLedger, SenderCredit
from .events import (
    END_OF_PARTITION_EVENT,
    CancelCheckpointMarker,
    CheckpointBarrier,
    EndOfDataEvent,
    EndOfPartitionEvent,
    RuntimeEvent,
    StopMode,
)
from .partition import (
    BufferAndBacklog,
    PartitionError,
    PartitionNotFoundError,
    PartitionReleasedError,
    PipelinedSubpartition,
    PipelinedSubpartitionView,
    ResultPartition,
    ResultPartitionID,
    ResultPartitionManager,
    ResultPartitionStatistics,
    ResultPartitionType,
    ResultSubpartition,
    ResultSubpartitionView,
)
from .partition.consumer import (
    BufferAndAvailability,
    BufferOrEvent,
    InputChannel,
    InputGate,
    FloatingBufferPool,
    FloatingBufferPoolStatistics,
    InputGateStatistics,
    LocalInputChannel,
    RemoteInputChannel,
    RemoteInputChannelStatistics,
    SingleInputGate,
)
from .netty import (
    ConnectionStatistics,
    LocalTransportError,
    NettyConfig,
    NettyConnectionManager,
    PartitionRequestTimeoutError,
    RemoteTransportError,
    SubpartitionReaderStatistics,
)
from .partitioner import (
    BroadcastPartitioner,
    CustomPartitionerWrapper,
    ForwardPartitioner,
    GlobalPartitioner,
    KeyGroupStreamPartitioner,
    KeySelectionError,
    RebalancePartitioner,
    RescalePartitioner,
    ShufflePartitioner,
    StreamPartitioner,
)

__all__ = [
    # buffer
    "Buffer",
    "BufferRecycler",
    "LocalBufferPool",
    "BufferPoolStatistics",
    "BufferPoolDestroyedError",
    "NetworkBufferPool",
    "NetworkBufferPoolStatistics",
    "SegmentLease",
    "InsufficientNetworkBuffersError",
    # events
    "RuntimeEvent",
    "EndOfPartitionEvent",
    "END_OF_PARTITION_EVENT",
    "EndOfDataEvent",
    "StopMode",
    "CancelCheckpointMarker",
    "CheckpointBarrier",
    # partition
    "ResultPartitionType",
    "ResultPartitionID",
    "ResultSubpartition",
    "ResultSubpartitionView",
    "BufferAndBacklog",
    "PipelinedSubpartition",
    "PipelinedSubpartitionView",
    "ResultPartition",
    "ResultPartitionStatistics",
    "ResultPartitionManager",
    "PartitionError",
    "PartitionNotFoundError",
    "PartitionReleasedError",
    # consumer
    "InputChannel",
    "BufferAndAvailability",
    "LocalInputChannel",
    "InputGate",
    "SingleInputGate",
    "InputGateStatistics",
    "BufferOrEvent",
    "RemoteInputChannel",
    "RemoteInputChannelStatistics",
    "FloatingBufferPool",
    "FloatingBufferPoolStatistics",
    # serialization
    "SpanningRecordSerializer",
    "AdaptiveSpanningRecordDeserializer",
    "EventSerializer",
    "PayloadTooLargeError",
    "ValueSerializationError",
    # credit-based flow control
    "CreditLedger",
    "SenderCredit",
    "BufferKind",
    "CreditInvariantError",
    # transport (groundwork for cluster mode)
    "NettyConfig",
    "NettyConnectionManager",
    "ConnectionStatistics",
    "SubpartitionReaderStatistics",
    "RemoteTransportError",
    "LocalTransportError",
    "PartitionRequestTimeoutError",
    # writer
    "RecordWriter",
    "DEFAULT_RECORDS_PER_BUFFER",
    # partitioners
    "StreamPartitioner",
    "ForwardPartitioner",
    "RebalancePartitioner",
    "RescalePartitioner",
    "ShufflePartitioner",
    "BroadcastPartitioner",
    "GlobalPartitioner",
    "KeyGroupStreamPartitioner",
    "KeySelectionError",
    "CustomPartitionerWrapper",
]
