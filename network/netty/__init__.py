"""The transport between processes (Flink's ``org.apache.flink.runtime.io.network.netty``),
built on ``selectors`` and non-blocking sockets instead of Netty.

* :mod:`.connection_manager` -- ``NettyConnectionManager``: a process's network thread, server
  and client connections;
* :mod:`.server` / :mod:`.view_reader` -- the producer side: serves subpartitions, one
  credit-based reader per remote channel;
* :mod:`.client` -- the consumer side: one connection per remote process, multiplexing every
  channel that reads from it;
* :mod:`.messages` -- frames and the handshake; :mod:`.connection` -- framing over a socket;
  :mod:`.io_thread` -- the event loop; :mod:`.config`, :mod:`.exceptions`.

The consuming end of a remote exchange is
:class:`~rill.network.partition.consumer.remote_input_channel.RemoteInputChannel`; the credit
accounting is :mod:`rill.network.credit`.

Groundwork for cluster mode: nothing in the runtime creates these yet.
"""

from .config import NettyConfig
from .connection import ConnectionStatistics
from .connection_manager import NettyConnectionManager
from .exceptions import (
    AuthenticationError,
    CorruptFrameError,
    LocalTransportError,
    PartitionRequestTimeoutError,
    RemoteTransportError,
    TransportError,
)
from .view_reader import SubpartitionReaderStatistics

__all__ = [
    "NettyConfig",
    "NettyConnectionManager",
    "ConnectionStatistics",
    "SubpartitionReaderStatistics",
    "TransportError",
    "RemoteTransportError",
    "LocalTransportError",
    "AuthenticationError",
    "CorruptFrameError",
    "PartitionRequestTimeoutError",
]
