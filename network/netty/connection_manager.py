"""The transport of one process (Flink's ``NettyConnectionManager``).

A :class:`NettyConnectionManager` owns the process's network thread, the server that serves
its partitions (if it produces any) and one client connection per remote process its channels
read from. Remote input channels talk to it; nothing else needs to.

Groundwork: the in-process runtime does not use it yet (every exchange is local); cluster mode
will create one per TaskExecutor process.

Usage::

    manager = NettyConnectionManager(NettyConfig(secret=shared_secret), partition_manager)
    address = manager.start()                    # ("127.0.0.1", port) if it serves partitions
    pool = manager.create_floating_buffer_pool("Sink (1/2) gate 0")
    channels = [RemoteInputChannel(manager, producer_address, partition_id, index, pool)]
    gate = SingleInputGate(0, channels, "Sink (1/2)")
    ...
    manager.shutdown()                            # joins the network thread, closes sockets
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Optional

from ..partition.consumer.buffer_manager import FloatingBufferPool
from ..partition.result_partition_manager import ResultPartitionManager
from .client import PartitionRequestClient
from .config import NettyConfig
from .connection import ConnectionStatistics
from .io_thread import IOThread
from .server import NettyServer
from .view_reader import SubpartitionReaderStatistics

if TYPE_CHECKING:
    from ..partition.consumer.remote_input_channel import RemoteInputChannel

__all__ = ["NettyConnectionManager"]


class NettyConnectionManager:
    """The network thread, server and client connections of one process.

    :param config: the transport settings (the shared secret, bind address, flow control, ...).
    :param partition_manager: the process's partitions, served to remote consumers; ``None``
        for a process that only consumes.
    :param name: names the network thread (``{name}-io``).

    Thread-safety: every public method may be called from any thread.
    """

    def __init__(self, config: NettyConfig, partition_manager: Optional[ResultPartitionManager] = None,
                 name: str = "rill-network") -> None:
        if not isinstance(config, NettyConfig):
            raise TypeError(f"config must be a NettyConfig, got {config!r}")
        self.config = config
        self.name = name
        self._io = IOThread(f"{name}-io")
        self._server = NettyServer(self._io, config, partition_manager) if partition_manager is not None else None
        self._clients: dict[tuple, PartitionRequestClient] = {}
        self._lock = threading.Lock()
        self._started = False
        self._shut_down = False

    # ------------------------------------------------------------------ life cycle

    def start(self) -> Optional[tuple]:
        """Bind the server (if any) and start the network thread.

        :returns: the server's ``(host, port)``, or ``None`` without a partition manager.
        :raises OSError: if the address cannot be bound. :raises RuntimeError: if started twice
            or after shutdown.
        """
        with self._lock:
            if self._started or self._shut_down:
                raise RuntimeError(f"{self!r} was already started or shut down")
            self._started = True
        address = self._server.bind() if self._server is not None else None
        self._io.start()
        return address

    @property
    def server_address(self) -> Optional[tuple]:
        """The bound ``(host, port)`` of the server, ``None`` if there is none (yet)."""
        return None if self._server is None else self._server.address

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Close every connection (channels still reading fail with an error saying so;
        served partitions see their consumers gone), stop and join the network thread.
        Idempotent.

        :raises RuntimeError: if the network thread does not stop within ``timeout_s``.
        """
        with self._lock:
            if self._shut_down:
                return
            self._shut_down = True
        self._io.shutdown(ConnectionAbortedError(f"the network stack {self.name!r} of this process shut down"),
                          timeout_s)

    def is_running(self) -> bool:
        """Whether the network thread runs."""
        return self._io.is_alive()

    # ------------------------------------------------------------------ for gates and channels

    def create_floating_buffer_pool(self, name: str = "floating buffers") -> FloatingBufferPool:
        """A gate's floating buffer pool of ``config.floating_buffers_per_gate`` buffers."""
        return FloatingBufferPool(self.config.floating_buffers_per_gate, name)

    def _request_subpartition(self, channel: "RemoteInputChannel") -> None:
        if not self._started or not self._io.call_soon(self._do_request, channel):
            channel._on_connection_failed(channel.producer_address, ConnectionAbortedError(
                f"the network stack {self.name!r} is not running"
                + (" (shut down)" if self._shut_down else " (start() was not called)")))

    def _do_request(self, channel: "RemoteInputChannel") -> None:
        if channel.is_released():
            return
        address = channel.producer_address
        client = self._clients.get(address)
        if client is None or client.is_closed():
            client = PartitionRequestClient(self._io, self.config, address, self)
            self._clients[address] = client
            client.connect()
            if client.is_closed():  # failed at once (and gave up)
                channel._on_connection_failed(address, client._error or ConnectionError("connect failed"))
                return
        client.add_channel(channel)

    def _release_channel(self, channel: "RemoteInputChannel", cancel: bool) -> None:
        self._io.call_soon(self._do_release, channel, cancel)

    def _do_release(self, channel: "RemoteInputChannel", cancel: bool) -> None:
        channel._on_released_in_network_thread()
        client = channel._client
        if client is not None:
            client.remove_channel(channel, cancel)

    def _call_soon(self, callback, *args) -> bool:
        return self._io.call_soon(callback, *args)

    def _forget_client(self, client: PartitionRequestClient) -> None:
        if self._clients.get(client.remote_address) is client:
            del self._clients[client.remote_address]

    # ------------------------------------------------------------------ statistics

    def connection_statistics(self) -> tuple[ConnectionStatistics, ...]:
        """One snapshot per open connection, server side first."""
        server = [] if self._server is None else self._server.connections()
        return tuple(c.statistics() for c in server + list(self._clients.values()))

    def reader_statistics(self) -> tuple[SubpartitionReaderStatistics, ...]:
        """The subpartition readers serving remote channels now (server side)."""
        if self._server is None:
            return ()
        return tuple(s for c in self._server.connections() for s in c.reader_statistics())

    def network_thread_errors(self) -> list[BaseException]:
        """Errors raised by callbacks on the network thread (should stay empty)."""
        return list(self._io.errors)

    def __repr__(self) -> str:
        return f"NettyConnectionManager({self.name!r}, server={self.server_address})"
