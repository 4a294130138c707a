"""The producer side of the transport (Flink's ``NettyServer``, ``PartitionRequestServerHandler``
and ``PartitionRequestQueue``).

:class:`NettyServer` listens (on ``127.0.0.1`` unless configured otherwise) and accepts
connections; each :class:`ServerConnection` first runs the handshake -- until the client proved
the shared secret only the fixed-size handshake frames are parsed, and a wrong proof closes the
connection -- then serves PartitionRequests from the process's
:class:`~rill.network.partition.result_partition_manager.ResultPartitionManager`: one
:class:`~rill.network.netty.view_reader.CreditBasedViewReader` per requested subpartition, all
multiplexed on the connection.

Writing (the ``PartitionRequestQueue``): readers with something to send sit in a FIFO ready
queue; the pump takes one frame from the first reader, re-queues it at the back if it has more
and credit, and stops while more than ``send_high_water_mark_bytes`` wait to be written, so
the readers of a connection share it round robin and a socket the peer does not read pushes
back on the subpartitions (and so on the producers) instead of filling memory.

A connection that closes releases every reader's view: the partition sees its consumer gone.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections import deque
from typing import Optional

from ..api.serialization.record_serializer import SpanningRecordSerializer
from ..partition.exceptions import PartitionNotFoundError, PartitionReleasedError
from ..partition.result_partition_id import ResultPartitionID
from ..partition.result_partition_manager import ResultPartitionManager
from . import messages
from .config import NettyConfig
from .connection import FrameConnection, _fmt
from .exceptions import AuthenticationError, CorruptFrameError
from .io_thread import EVENT_READ, IOThread
from .view_reader import CreditBasedViewReader, SubpartitionReaderStatistics

__all__ = ["NettyServer", "ServerConnection"]

_AWAIT_HELLO = "await-hello"
_AWAIT_AUTH = "await-auth"
_READY = "ready"
#: Pump rounds per flush before yielding to other connections.
_PUMP_ROUNDS = 32


class ServerConnection(FrameConnection):
    """One accepted connection: handshake, then partition requests and credit in, buffers out."""

    role = "server"

    def __init__(self, io: IOThread, config: NettyConfig, sock: socket.socket, remote_address: tuple,
                 server: "NettyServer") -> None:
        self._server = server
        self._state = _AWAIT_HELLO
        self._server_nonce = messages.new_nonce()
        self._client_nonce = b""
        self._readers: dict[bytes, CreditBasedViewReader] = {}
        self._ready: deque = deque()
        self._ready_lock = threading.Lock()
        self._pump_scheduled = False
        super().__init__(io, config, remote_address, sock)
        self._start_handshake_timer()

    # ------------------------------------------------------------------ frames in

    def _handle_frame(self, frame: memoryview) -> bool:
        kind = frame[0]
        state = self._state
        if state is _READY:
            if kind == messages.ADD_CREDIT:
                receiver_id, credit = messages.decode_add_credit(frame)
                reader = self._readers.get(receiver_id)
                if reader is not None:
                    reader.add_credit(credit)
                    if reader.is_available():
                        self._enqueue(reader)
                return True
            if kind == messages.PARTITION_REQUEST:
                self._on_partition_request(frame)
                return True
            if kind == messages.CANCEL_PARTITION_REQUEST:
                reader = self._readers.pop(messages.decode_receiver(frame), None)
                if reader is not None:
                    reader.release()
                return True
            if kind == messages.CLOSE_REQUEST:
                self.close(None)
                return False
            raise CorruptFrameError(f"unexpected message type {kind:#04x} from client {_fmt(self.remote_address)}")
        if state is _AWAIT_HELLO:
            if kind != messages.HELLO:
                raise CorruptFrameError(f"expected Hello from {_fmt(self.remote_address)}, got type {kind:#04x}")
            self._client_nonce, self.flow_control = messages.decode_hello(frame)
            self.write(messages.encode_challenge(self._config.secret, self._client_nonce, self._server_nonce))
            self._state = _AWAIT_AUTH
            return True
        if not messages.check_auth(frame, self._config.secret, self._server_nonce, self._client_nonce):
            self.write(messages.encode_empty(messages.AUTH_FAILED))
            self._flush_socket()
            self.close(AuthenticationError(
                f"client {_fmt(self.remote_address)} failed to prove the shared secret; connection closed"
            ))
            return False
        self._state = _READY
        self._authenticated()
        return True

    def _on_partition_request(self, frame: memoryview) -> None:
        receiver_id, partition, producer, subpartition, credit = messages.decode_partition_request(frame)
        partition_id = ResultPartitionID(partition, producer)
        if receiver_id in self._readers:
            self.write(messages.encode_error_response(
                receiver_id, messages.ERROR_PROTOCOL,
                f"duplicate partition request for receiver {receiver_id.hex()}"))
            return
        config = self._config
        serializer = SpanningRecordSerializer(
            config.segment_size_bytes, config.compression, config.max_payload_size_bytes,
            channel=f"subpartition {subpartition} of partition {partition_id} served to "
                    f"{_fmt(self.remote_address)}",
        )
        reader = CreditBasedViewReader(self, receiver_id, partition_id, subpartition, credit,
                                       self.flow_control, serializer, self._config.max_buffers_per_frame)
        try:
            reader.request_subpartition_view(self._server.partition_manager)
        except PartitionNotFoundError as error:
            self.write(messages.encode_error_response(receiver_id, messages.ERROR_PARTITION_NOT_FOUND, str(error)))
            return
        except PartitionReleasedError as error:
            self.write(messages.encode_error_response(receiver_id, messages.ERROR_PARTITION_RELEASED, str(error)))
            return
        except Exception as error:  # noqa: BLE001 - bad index, already consumed: the request fails
            self.write(messages.encode_error_response(
                receiver_id, messages.ERROR_PROTOCOL, f"{type(error).__name__}: {error}"))
            return
        self._readers[receiver_id] = reader
        self._enqueue(reader)

    # ------------------------------------------------------------------ frames out

    def notify_reader_non_empty(self, reader: CreditBasedViewReader) -> None:
        """Queue ``reader`` for the pump (any thread; the producer's notification path)."""
        with self._ready_lock:
            if reader.queued or reader.released or self._closed:
                return
            reader.queued = True
            self._ready.append(reader)
            if self._pump_scheduled:
                return
            self._pump_scheduled = True
        if self._io.in_loop_thread():
            self._io.mark_dirty(self)
        else:
            self._io.call_soon(self._io.mark_dirty, self)

    def _enqueue(self, reader: CreditBasedViewReader) -> None:
        with self._ready_lock:
            if reader.queued or reader.released:
                return
            reader.queued = True
            self._ready.append(reader)
        self._io.mark_dirty(self)

    def _pump(self) -> None:
        # One pass of Flink's PartitionRequestQueue: round robin over the ready readers, one
        # frame per turn, until the readers have nothing to send or the socket's backlog
        # reaches the high-water mark. The ready queue's lock is taken twice per pass (to take
        # the readers queued so far, and to queue again those that still have data and credit),
        # not twice per frame. A reader's ``queued`` flag is cleared when the pass takes it, as
        # when one was popped before: a notification during the pass queues it again (it may
        # then get a second turn in this pass; never a lost wake-up).
        high_water = self._config.send_high_water_mark_bytes
        lock = self._ready_lock
        with lock:
            self._pump_scheduled = False
            turn = self._ready
            if not turn:
                return
            self._ready = deque()
            for reader in turn:
                reader.queued = False
        out = self._out
        try:
            while turn and self._out_bytes < high_water and not self._closed:
                reader = turn.popleft()
                frame = reader.next_frame()
                if frame is not None:
                    for chunk in frame:
                        out.append(chunk)
                        self._out_bytes += len(chunk)
                    self.frames_sent += 1
                if reader.released:
                    if self._readers.get(reader.receiver_id) is reader:
                        del self._readers[reader.receiver_id]
                    continue
                if frame is not None and reader.is_available():
                    turn.append(reader)
        finally:
            if turn:  # not served to the end (high-water mark): first in the next pass
                with lock:
                    ready = deque()
                    for reader in turn:
                        if not reader.queued and not reader.released and not self._closed:
                            reader.queued = True
                            ready.append(reader)
                    ready.extend(self._ready)
                    self._ready = ready

    def flush(self) -> None:
        """Pump frames from ready readers and write them, until the socket or the readers
        have no more room or data (bounded rounds; the rest continues next iteration)."""
        for _ in range(_PUMP_ROUNDS):
            if self._state is _READY:
                self._pump()
            self._flush_socket()
            if self._closed or self._out or not self._ready:
                return
        self._io.mark_dirty(self)

    # ------------------------------------------------------------------ closing, statistics

    def _on_closed(self, cause: Optional[BaseException]) -> None:
        if isinstance(cause, (AuthenticationError, CorruptFrameError, TimeoutError)) and not self.authenticated:
            # a peer that never proved the secret: nothing it sent was deserialized; say who it was
            # (logger looked up now: in a cluster task process Thespian replaced the logging tree)
            logging.getLogger("rill.network.netty").warning(
                "refused data connection from %s to %s before authentication: %s",
                _fmt(self.remote_address), _fmt(self.local_address), cause)
        with self._ready_lock:
            self._ready.clear()
        readers = list(self._readers.values())
        self._readers.clear()
        for reader in readers:
            reader.release()
        self._server._forget(self)

    def _channel_count(self) -> int:
        return len(self._readers)

    def reader_statistics(self) -> tuple[SubpartitionReaderStatistics, ...]:
        """Statistics of the readers still serving (any thread)."""
        return tuple(reader.statistics() for reader in list(self._readers.values()))


class NettyServer:
    """Accepts connections and serves subpartitions of ``partition_manager``.

    :param io: the network thread.
    :param config: the transport settings (host, port, secret, ...).
    :param partition_manager: where requested partitions are looked up.
    """

    def __init__(self, io: IOThread, config: NettyConfig, partition_manager: ResultPartitionManager) -> None:
        self._io = io
        self._config = config
        self.partition_manager = partition_manager
        self._sock: Optional[socket.socket] = None
        self._connections: dict[ServerConnection, None] = {}
        self.address: Optional[tuple] = None
        self.connections_accepted = 0
        self._closed = False

    def bind(self) -> tuple:
        """Bind and listen (call before the network thread starts); returns ``(host, port)``.

        :raises OSError: if the address cannot be bound.
        """
        family = socket.AF_INET6 if ":" in self._config.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self._config.host, self._config.port))
            sock.listen(128)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self._sock = sock
        self.address = sock.getsockname()[:2]
        self._io.attach(self)
        self._io.register(sock, EVENT_READ, self)
        return self.address

    def handle_read(self) -> None:
        """Accept every pending connection."""
        while not self._closed:
            try:
                sock, address = self._sock.accept()  # type: ignore[union-attr]
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # e.g. ECONNABORTED: the client gave up already
            self.connections_accepted += 1
            connection = ServerConnection(self._io, self._config, sock, address[:2], self)
            self._connections[connection] = None

    def handle_write(self) -> None:
        """Never registered for writing."""

    def flush(self) -> None:
        """Nothing to flush."""

    def handle_error(self, error: BaseException) -> None:
        """An accept failed unexpectedly: keep listening (the error is recorded)."""
        self._io.errors.append(error)

    def _forget(self, connection: ServerConnection) -> None:
        self._connections.pop(connection, None)

    def connections(self) -> list[ServerConnection]:
        """The open connections (any thread)."""
        return list(self._connections)

    def close(self, cause: Optional[BaseException] = None) -> None:
        """Stop listening and close every connection. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._sock is not None:
            self._io.unregister(self._sock)
            self._sock.close()
        self._io.detach(self)
        for connection in list(self._connections):
            connection.close(cause)
