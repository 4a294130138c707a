"""Consuming side of the network stack (Flink's
``org.apache.flink.runtime.io.network.partition.consumer``)."""

from .buffer_manager import BufferManager, BufferManagerStatistics, FloatingBufferPool, FloatingBufferPoolStatistics
from .buffer_or_event import BufferOrEvent
from .input_channel import BufferAndAvailability, InputChannel
from .input_gate import InputGate
from .local_input_channel import LocalInputChannel
from .remote_input_channel import RemoteInputChannel, RemoteInputChannelStatistics, RemoteProducerError
from .single_input_gate import InputGateStatistics, SingleInputGate

__all__ = [
    "BufferOrEvent",
    "InputChannel",
    "BufferAndAvailability",
    "LocalInputChannel",
    "InputGate",
    "SingleInputGate",
    "InputGateStatistics",
    "RemoteInputChannel",
    "RemoteInputChannelStatistics",
    "RemoteProducerError",
    "BufferManager",
    "BufferManagerStatistics",
    "FloatingBufferPool",
    "FloatingBufferPoolStatistics",
]
