"""Results of ``execute_and_collect`` streamed from sink subtasks in task processes to the client
(Flink's ``CollectSinkFunction`` / ``CollectSinkOperatorCoordinator`` / ``CollectResultFetcher``).

In cluster mode the sink subtasks run in task processes, so they cannot put batches into the
client's :class:`~rill.operators.collect_sink.CollectChannel` directly. The client starts a
:class:`CollectServer`, attaches the channel with the number of sink subtasks that will write
to it, and tells the task processes the server's address and a shared secret
(:func:`rill.operators.collect_sink.register_remote_endpoint`). Each sink subtask then writes
through a :class:`RemoteCollectChannel`: one TCP connection per (channel, subtask), batches in
order, an explicit end frame when the sink closes.

Rill difference: in Flink each sink subtask opens a server socket, the JobMaster's
``CollectSinkOperatorCoordinator`` connects to it and the client's ``CollectResultFetcher``
polls the coordinator (pull, with versions and offsets for exactly-once after failover). Rill
has no failover (a failed job fails), so the sinks push to a server in the client instead; TCP
carries the backpressure: when the channel is full the server's connection thread blocks, its
socket buffers fill and the sink's ``put_batch`` blocks.

Wire format (the frame layout and handshake of :mod:`rill.network.netty.messages`; every frame
is ``length (uint32, big endian) | type (uint8) | body``)::

    client                                   server
    Hello(client_nonce)            ->
                                   <-        Challenge(server_nonce, proof of the secret)
    Auth(proof of the secret)      ->
                                   <-        AuthFailed (then close), if the proof is wrong
    Open(subtask u32, channel id)  ->
                                   <-        Accepted(max frame bytes u32) | Error(text)
    Batch(value_codec payload)     ->        ... any number, in order
    End                            ->
                                   <-        EndAck | Error(text)

The handshake is mutual HMAC-SHA256 (each side proves the secret on the other's nonce): the
server parses nothing but fixed-size handshake frames of at most 128 bytes until the client
proved the secret, so an unauthenticated peer can never make it decode (unpickle) a payload.
Batches are encoded with :func:`rill.network.api.serialization.value_codec.pack_records`
(exact round trip of tuples, ``Row``, datetimes, ``Decimal``, big ints; anything else is
pickled -- acceptable only because the peer is authenticated).

Thread-safety: :class:`CollectServer` methods may be called from any thread; a
:class:`RemoteCollectChannel` is used by one task thread (its methods take a lock anyway).
"""

from __future__ import annotations

import logging
import queue
import select
import selectors
import socket
import struct
import threading
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from rill.network.api.serialization.value_codec import pack_records, unpack_records
from rill.network.netty.exceptions import AuthenticationError, CorruptFrameError
from rill.network.netty.messages import (
    AUTH_FAILED,
    CHALLENGE,
    HELLO,
    LENGTH,
    check_auth,
    decode_challenge,
    decode_hello,
    encode_auth,
    encode_challenge,
    encode_empty,
    encode_hello,
    new_nonce,
)

__all__ = [
    "CollectServer",
    "RemoteCollectChannel",
    "CollectConnectionError",
    "CollectAuthenticationError",
    "DEFAULT_MAX_FRAME_BYTES",
]

# Frame types of the collect protocol (after the shared handshake's 0x01-0x04).
OPEN = 0x40
ACCEPTED = 0x41
BATCH = 0x42
END = 0x43
END_ACK = 0x44
ERROR = 0x45

#: The largest frame the server accepts after authentication (a batch's payload + 1).
DEFAULT_MAX_FRAME_BYTES = 256 * 1024 * 1024
#: The largest frame read before the peer is authenticated (the handshake's frames).
_HANDSHAKE_MAX_FRAME_BYTES = 128
#: The largest control frame (Open, Accepted, Error).
_CONTROL_MAX_FRAME_BYTES = 64 * 1024
_MAX_CHANNEL_ID_BYTES = 1024

_TYPE_ONLY = struct.Struct(">IB")
_OPEN = struct.Struct(">IBI")  # length, type, subtask index; then the channel id (utf-8)
_ACCEPTED = struct.Struct(">IBI")  # length, type, max frame bytes
_U32 = struct.Struct(">I")
#: How often a connection thread blocked on a full channel checks whether the server closes.
_PUT_POLL_S = 0.1


def _fmt(address: Tuple[str, int]) -> str:
    return f"{address[0]}:{address[1]}"


class CollectConnectionError(ConnectionError):
    """A collect connection failed: connecting was refused (after retries), the peer closed the
    connection or sent an error, or a frame was corrupt.

    :ivar channel_id: the collect channel's id.
    :ivar subtask_index: the writing sink subtask (``None`` if not known yet).
    :ivar address: server side: the writer's ``(host, port)``; task side: the server's.
    """

    def __init__(self, message: str, channel_id: Optional[str] = None,
                 subtask_index: Optional[int] = None, address: Optional[Tuple[str, int]] = None) -> None:
        super().__init__(message)
        self.channel_id = channel_id
        self.subtask_index = subtask_index
        self.address = address


class CollectAuthenticationError(CollectConnectionError, AuthenticationError):
    """The peer did not prove knowledge of the shared secret (or refused ours)."""


# ---------------------------------------------------------------------- framing

def _recv_exact(sock: socket.socket, size: int, frame_start: bool) -> Optional[bytearray]:
    """``size`` bytes; ``None`` if the peer closed before the first byte and ``frame_start``.

    :raises CorruptFrameError: if the peer closed in the middle.
    """
    buffer = bytearray(size)
    view = memoryview(buffer)
    got = 0
    while got < size:
        n = sock.recv_into(view[got:], size - got)
        if n == 0:
            if got == 0 and frame_start:
                return None
            raise CorruptFrameError(f"the peer closed the connection in the middle of a frame "
                                    f"({got} of {size} bytes received)")
        got += n
    return buffer


def _read_frame(sock: socket.socket, max_bytes: int) -> Optional[bytearray]:
    """The next frame from its type byte on, or ``None`` at a clean end of stream (between
    frames). The length is checked against ``max_bytes`` before the body is read.

    :raises CorruptFrameError: a zero or too large length, or the peer closed mid-frame.
    """
    head = _recv_exact(sock, LENGTH.size, True)
    if head is None:
        return None
    (length,) = LENGTH.unpack(head)
    if length == 0 or length > max_bytes:
        raise CorruptFrameError(f"frame of {length} bytes refused (1..{max_bytes} allowed)")
    frame = _recv_exact(sock, length, False)
    assert frame is not None
    return frame


def _frame(message_type: int, body: bytes = b"") -> bytes:
    return _TYPE_ONLY.pack(len(body) + 1, message_type) + body


# ---------------------------------------------------------------------- server (client side)

@dataclass
class _Writer:
    """One sink subtask's connection state."""

    connected: bool = False
    ended: bool = False  # sent its end frame
    error: Optional[BaseException] = None
    batches: int = 0
    records: int = 0


class _Attached:
    """A channel and its expected writers."""

    def __init__(self, channel: Any, expected_writers: int) -> None:
        self.channel = channel
        self.expected_writers = expected_writers
        self.writers: Dict[int, _Writer] = {}

    def pending(self) -> List[int]:
        return [i for i in range(self.expected_writers)
                if i not in self.writers or self.writers[i].connected]


class _ServerClosed(Exception):
    pass


class CollectServer:
    """The client's end of collecting sinks in cluster mode: accepts authenticated
    connections from sink subtasks and puts their batches into attached
    :class:`~rill.operators.collect_sink.CollectChannel`\\ s (the receiving half of Flink's
    ``CollectSinkOperatorCoordinator`` + ``CollectResultFetcher``).

    One daemon thread accepts connections; each connection gets a daemon thread that performs
    the handshake, then reads frames and calls ``channel.put_batch`` in arrival order (per
    writer, the order the sink sent them; across writers, arbitrary). A full bounded channel
    blocks the connection's thread, which back-pressures the sink through TCP.

    Usage::

        server = CollectServer(secret)
        host, port = server.start()
        server.attach(channel, expected_writers=sink_parallelism)
        ... # task processes: register_remote_endpoint(channel_id, (host, port), secret)
        errors = server.wait_writers_done(channel.channel_id, timeout_s=60.0)
        channel.end(errors[0] if errors else None)
        server.close()

    :param secret: the shared secret (non-empty ``bytes``) sinks must prove.
    :param host: the interface to listen on (default loopback).
    :param port: the port (0: any free port).
    :param max_frame_bytes: the largest batch frame accepted after authentication; announced to
        writers, which split larger batches.
    :param handshake_timeout_s: seconds a connection may take to authenticate and open.
    :param max_connections: connections served at once; more are closed immediately.
    :raises ValueError: an empty or non-bytes secret.
    """

    def __init__(self, secret: bytes, host: str = "127.0.0.1", port: int = 0, *,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, handshake_timeout_s: float = 10.0,
                 max_connections: int = 256) -> None:
        if not isinstance(secret, (bytes, bytearray)) or not secret:
            raise ValueError("CollectServer needs a non-empty bytes secret")
        self._secret = bytes(secret)
        self._host = host
        self._port = port
        self._max_frame_bytes = max_frame_bytes
        self._handshake_timeout_s = handshake_timeout_s
        self._max_connections = max_connections
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._channels: Dict[str, _Attached] = {}
        self._handshake_errors: List[BaseException] = []
        self._listen: Optional[socket.socket] = None
        self._wake_r: Optional[socket.socket] = None
        self._wake_w: Optional[socket.socket] = None
        self._accept_thread: Optional[threading.Thread] = None
        self._conn_threads: List[threading.Thread] = []
        self._conns: Dict[int, socket.socket] = {}
        self._next_conn = 0
        self._address: Optional[Tuple[str, int]] = None
        self._closed = False

    # -- life cycle --------------------------------------------------------------------
    def start(self) -> Tuple[str, int]:
        """Listen and start the accept thread; returns the ``(host, port)`` writers connect to.

        :raises RuntimeError: if already started or closed.
        :raises OSError: if the address cannot be bound.
        """
        with self._lock:
            if self._closed or self._listen is not None:
                raise RuntimeError("CollectServer.start() called twice or after close()")
            listen = socket.create_server((self._host, self._port), backlog=128)
            try:
                listen.setblocking(False)
                self._wake_r, self._wake_w = socket.socketpair()
            except BaseException:
                listen.close()
                raise
            self._listen = listen
            self._address = listen.getsockname()[:2]
            self._accept_thread = threading.Thread(
                target=self._accept_loop, name=f"rill-collect-server-{self._address[1]}", daemon=True)
            self._accept_thread.start()
            return self._address

    @property
    def address(self) -> Optional[Tuple[str, int]]:
        """``(host, port)`` once started, else ``None``."""
        return self._address

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop accepting, close every connection and join every thread (idempotent).

        Writers still connected are counted as done with a :class:`CollectConnectionError`;
        batches already in the channels stay there (ending a channel is the caller's job).

        :param timeout_s: how long to wait for the threads (each is woken, so they end quickly).
        """
        with self._cond:
            if self._closed:
                return
            self._closed = True
            conns = list(self._conns.values())
            self._cond.notify_all()
        if self._wake_w is not None:
            try:
                self._wake_w.send(b"x")
            except OSError:
                pass
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)  # wakes the connection thread's recv
            except OSError:
                pass
        deadline = time.monotonic() + timeout_s
        current = threading.current_thread()
        if self._accept_thread is not None and self._accept_thread is not current:
            self._accept_thread.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            threads = list(self._conn_threads)
        for thread in threads:
            if thread is not current:
                thread.join(max(0.0, deadline - time.monotonic()))
        for sock in (self._listen, self._wake_r, self._wake_w):
            if sock is not None:
                sock.close()
        with self._cond:
            self._cond.notify_all()

    def is_running(self) -> bool:
        """Whether any of the server's threads is still alive."""
        with self._lock:
            threads = [self._accept_thread, *self._conn_threads]
        return any(t is not None and t.is_alive() for t in threads)

    def __enter__(self) -> "CollectServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- channels ----------------------------------------------------------------------
    def attach(self, channel: Any, expected_writers: int) -> None:
        """Accept writers for ``channel`` (a ``CollectChannel``; its ``put_batch`` must take
        ``timeout_s``): subtasks ``0 .. expected_writers - 1`` of the collecting sink. Attach
        before the job is submitted: a writer for an unknown channel is refused.

        :raises ValueError: ``expected_writers`` < 1, or the channel id is attached already.
        :raises RuntimeError: if the server is closed.
        """
        if not isinstance(expected_writers, int) or expected_writers < 1:
            raise ValueError(f"expected_writers must be a positive int, got {expected_writers!r}")
        with self._lock:
            if self._closed:
                raise RuntimeError("CollectServer is closed")
            if channel.channel_id in self._channels:
                raise ValueError(f"collect channel {channel.channel_id} is attached already")
            self._channels[channel.channel_id] = _Attached(channel, expected_writers)

    def detach(self, channel_id: str) -> None:
        """Forget ``channel_id`` (idempotent); new writers for it are refused. Connections of
        it still open keep delivering to the channel until they end."""
        with self._lock:
            self._channels.pop(channel_id, None)

    def wait_writers_done(self, channel_id: str, timeout_s: Optional[float] = None) -> List[BaseException]:
        """Block until every expected writer of ``channel_id`` sent its end frame or
        disconnected; then every batch it sent before is in the channel.

        :param timeout_s: seconds to wait at most (``None``: no limit).
        :returns: the errors of writers that did not end cleanly (disconnected without an end
            frame, corrupt frame, undecodable batch: :class:`CollectConnectionError` naming the
            channel, subtask and peer address), by subtask index; empty if all ended cleanly.
            A non-empty result means results are missing: the job must fail.
        :raises KeyError: if ``channel_id`` is not attached.
        :raises TimeoutError: if writers are still pending after ``timeout_s`` (names them).
        :raises RuntimeError: if the server closed while writers were pending (never connected).
        """
        with self._cond:
            attached = self._channels.get(channel_id)
            if attached is None:
                raise KeyError(f"collect channel {channel_id} is not attached to this CollectServer")
            done = self._cond.wait_for(lambda: not attached.pending() or self._closed, timeout_s)
            pending = attached.pending()
            if pending:
                what = (f"collect channel {channel_id}: sink subtasks {pending} of "
                        f"{attached.expected_writers} have not ended")
                if not done:
                    raise TimeoutError(f"{what} after {timeout_s} s")
                raise RuntimeError(f"{what} and the CollectServer at {_fmt(self._address or ('?', 0))} is closed")
            return [w.error for _, w in sorted(attached.writers.items()) if w.error is not None]

    def writer_statistics(self, channel_id: str) -> Dict[int, Dict[str, Any]]:
        """Per subtask index that connected: ``{"connected", "ended", "batches", "records",
        "error"}`` (a snapshot).

        :raises KeyError: if ``channel_id`` is not attached.
        """
        with self._lock:
            attached = self._channels[channel_id]
            return {i: dict(connected=w.connected, ended=w.ended, batches=w.batches,
                            records=w.records, error=w.error)
                    for i, w in attached.writers.items()}

    def handshake_errors(self) -> List[BaseException]:
        """Errors of connections refused before they were bound to a writer (failed
        authentication, unknown channel, bad subtask index, protocol errors), oldest first."""
        with self._lock:
            return list(self._handshake_errors)

    # -- threads -----------------------------------------------------------------------
    def _accept_loop(self) -> None:
        assert self._listen is not None and self._wake_r is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self._listen, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            while True:
                for key, _ in selector.select():
                    if key.fileobj is self._wake_r:
                        return
                    try:
                        conn, peer = self._listen.accept()
                    except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                        continue
                    except OSError:
                        if self._closed:
                            return
                        raise
                    self._spawn(conn, peer[:2])

    def _spawn(self, conn: socket.socket, peer: Tuple[str, int]) -> None:
        conn.setblocking(True)
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        with self._lock:
            self._conn_threads = [t for t in self._conn_threads if t.is_alive()]
            if self._closed or len(self._conns) >= self._max_connections:
                conn.close()
                return
            conn_id = self._next_conn
            self._next_conn += 1
            self._conns[conn_id] = conn
            thread = threading.Thread(target=self._serve, args=(conn_id, conn, peer),
                                      name=f"rill-collect-conn-{_fmt(peer)}", daemon=True)
            self._conn_threads.append(thread)
        thread.start()

    def _serve(self, conn_id: int, conn: socket.socket, peer: Tuple[str, int]) -> None:
        writer: Optional[_Writer] = None
        attached: Optional[_Attached] = None
        channel_id: Optional[str] = None
        subtask: Optional[int] = None
        authenticated = False
        try:
            conn.settimeout(self._handshake_timeout_s)
            # 1. mutual authentication: only fixed-size frames are parsed
            frame = _read_frame(conn, _HANDSHAKE_MAX_FRAME_BYTES)
            if frame is None or frame[0] != HELLO:
                raise CorruptFrameError("expected a Hello frame")
            client_nonce, _ = decode_hello(frame)
            server_nonce = new_nonce()
            conn.sendall(encode_challenge(self._secret, client_nonce, server_nonce))
            frame = _read_frame(conn, _HANDSHAKE_MAX_FRAME_BYTES)
            if frame is None or not check_auth(frame, self._secret, server_nonce, client_nonce):
                try:
                    conn.sendall(encode_empty(AUTH_FAILED))
                except OSError:
                    pass
                raise CollectAuthenticationError(
                    f"collect connection from {_fmt(peer)} refused: it did not prove the shared secret",
                    address=peer)
            authenticated = True
            # 2. bind the connection to (channel, subtask)
            frame = _read_frame(conn, _CONTROL_MAX_FRAME_BYTES)
            if frame is None or frame[0] != OPEN or len(frame) < _OPEN.size - 4:
                raise CorruptFrameError("expected an Open frame")
            (subtask,) = _U32.unpack_from(frame, 1)
            channel_id = bytes(frame[_OPEN.size - 4:]).decode("utf-8")
            with self._lock:
                if self._closed:
                    raise _ServerClosed()
                attached = self._channels.get(channel_id)
                if attached is None:
                    raise CollectConnectionError(
                        f"collect channel {channel_id} is not attached to the CollectServer "
                        f"at {_fmt(self._address)}", channel_id, subtask, peer)
                if subtask >= attached.expected_writers:
                    raise CollectConnectionError(
                        f"collect channel {channel_id} expects sink subtasks 0..{attached.expected_writers - 1}, "
                        f"got subtask {subtask}", channel_id, subtask, peer)
                previous = attached.writers.get(subtask)
                if previous is not None and previous.connected:
                    raise CollectConnectionError(
                        f"collect channel {channel_id}: sink subtask {subtask} is connected already",
                        channel_id, subtask, peer)
                writer = attached.writers[subtask] = _Writer(connected=True)
            conn.sendall(_ACCEPTED.pack(_ACCEPTED.size - 4, ACCEPTED, self._max_frame_bytes))
            conn.settimeout(None)  # a writer may pause for as long as its job does
            # 3. batches, then the end frame
            while True:
                frame = _read_frame(conn, self._max_frame_bytes)
                if frame is None:
                    raise CollectConnectionError(
                        f"collect channel {channel_id}: sink subtask {subtask} at {_fmt(peer)} "
                        "disconnected without an end frame", channel_id, subtask, peer)
                kind = frame[0]
                if kind == BATCH:
                    values, _ = unpack_records(memoryview(frame)[1:])
                    self._put(attached.channel, values)
                    writer.batches += 1
                    writer.records += len(values)
                elif kind == END:
                    with self._cond:
                        writer.ended = True
                        writer.connected = False
                        self._cond.notify_all()
                    conn.sendall(_frame(END_ACK))
                    return
                else:
                    raise CorruptFrameError(f"unexpected frame type {kind:#04x}")
        except BaseException as error:  # noqa: BLE001 - recorded; the thread must not die noisily
            self._on_error(error, conn, peer, writer, channel_id, subtask, authenticated)
        finally:
            with self._cond:
                self._conns.pop(conn_id, None)
                if writer is not None and writer.connected:  # ended without being recorded
                    writer.connected = False
                    if writer.error is None and not writer.ended:
                        writer.error = CollectConnectionError(
                            f"collect channel {channel_id}: sink subtask {subtask} connection ended",
                            channel_id, subtask, peer)
                self._cond.notify_all()
            conn.close()

    def _on_error(self, error: BaseException, conn: socket.socket, peer: Tuple[str, int],
                  writer: Optional[_Writer], channel_id: Optional[str], subtask: Optional[int],
                  authenticated: bool) -> None:
        if not authenticated and not self._closed:
            logging.getLogger("rill.cluster.collect").warning(
                "refused collect connection from %s to %s before authentication: %s: %s",
                _fmt(peer), _fmt(self._address), type(error).__name__, error)
        if isinstance(error, _ServerClosed) or (self._closed and not isinstance(error, CollectAuthenticationError)):
            error = CollectConnectionError(
                f"collect channel {channel_id}: the CollectServer closed before sink subtask "
                f"{subtask} at {_fmt(peer)} ended", channel_id, subtask, peer)
        elif not isinstance(error, CollectConnectionError):
            wrapped = CollectConnectionError(
                f"collect channel {channel_id}: connection of sink subtask {subtask} from "
                f"{_fmt(peer)} failed: {type(error).__name__}: {error}", channel_id, subtask, peer)
            wrapped.__cause__ = error
            error = wrapped
        if authenticated and not self._closed:
            try:  # tell the writer why (best effort)
                conn.sendall(_frame(ERROR, str(error).encode("utf-8", "replace")[:_CONTROL_MAX_FRAME_BYTES - 1]))
            except OSError:
                pass
        with self._cond:
            if writer is not None:
                if not writer.ended:
                    writer.error = error
                writer.connected = False
            else:
                self._handshake_errors.append(error)
            self._cond.notify_all()

    def _put(self, channel: Any, values: List[Any]) -> None:
        """``channel.put_batch`` that blocks while the channel is full, but not past close()."""
        while True:
            if self._closed:
                raise _ServerClosed()
            try:
                channel.put_batch(values, timeout_s=_PUT_POLL_S)
                return
            except queue.Full:
                continue


# ---------------------------------------------------------------------- writer (task side)

class RemoteCollectChannel:
    """A sink subtask's end of a collect channel in another process (the sending half of
    Flink's ``CollectSinkFunction``): same ``put_batch(values)`` as
    :class:`~rill.operators.collect_sink.CollectChannel`.

    The constructor connects (retrying refused connections until ``connect_timeout_s``),
    authenticates (mutual HMAC-SHA256 with ``secret``) and binds the connection to
    ``(channel_id, subtask_index)``. :meth:`put_batch` sends one frame per batch (splitting
    batches larger than the server's maximum frame) and blocks while the server's channel is
    full. :meth:`close` sends the end frame and waits for the server to acknowledge it, so when
    it returns every batch is in the client's channel.

    :param channel_id: the client's channel id.
    :param subtask_index: this sink subtask's 0-based index.
    :param address: the :class:`CollectServer`'s ``(host, port)``.
    :param secret: the shared secret (``bytes``).
    :param connect_timeout_s: seconds to keep retrying a refused or failed TCP connect.
    :param handshake_timeout_s: seconds to wait for each handshake answer.
    :raises CollectAuthenticationError: the server does not know the secret or refused ours.
    :raises CollectConnectionError: connecting failed after retries, or the server refused the
        channel (unknown channel id, subtask out of range or connected already); the message
        names the channel, subtask and address.
    """

    def __init__(self, channel_id: str, subtask_index: int, address: Tuple[str, int], secret: bytes, *,
                 connect_timeout_s: float = 30.0, handshake_timeout_s: float = 30.0) -> None:
        self.channel_id = channel_id
        self.subtask_index = subtask_index
        self.address = (address[0], int(address[1]))
        self._secret = bytes(secret)
        self._lock = threading.Lock()
        self._closed = False
        self._failed = False  # an error was raised: close() only releases the socket
        self._sock: Optional[socket.socket] = None
        self._max_frame_bytes = DEFAULT_MAX_FRAME_BYTES
        encoded_id = channel_id.encode("utf-8")
        if not 0 < len(encoded_id) <= _MAX_CHANNEL_ID_BYTES:
            raise ValueError(f"collect channel id must be 1..{_MAX_CHANNEL_ID_BYTES} utf-8 bytes")
        sock = self._connect(connect_timeout_s)
        try:
            self._handshake(sock, encoded_id, handshake_timeout_s)
        except BaseException:
            sock.close()
            raise
        self._sock = sock

    def _where(self) -> str:
        return (f"collect channel {self.channel_id} (sink subtask {self.subtask_index}) at "
                f"collect server {_fmt(self.address)}")

    def _error(self, message: str, cls=None, cause: Optional[BaseException] = None) -> CollectConnectionError:
        self._failed = True
        error = (cls or CollectConnectionError)(f"{self._where()}: {message}", self.channel_id,
                                                self.subtask_index, self.address)
        if cause is not None:
            error.__cause__ = cause
        return error

    def _connect(self, timeout_s: float) -> socket.socket:
        deadline = time.monotonic() + timeout_s
        delay = 0.02
        attempts = 0
        while True:
            attempts += 1
            remaining = deadline - time.monotonic()
            try:
                sock = socket.create_connection(self.address, timeout=max(0.05, min(remaining, 10.0)))
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return sock
            except OSError as error:
                if time.monotonic() + delay > deadline:
                    raise self._error(f"cannot connect after {attempts} attempts in {timeout_s} s "
                                      f"({type(error).__name__}: {error})", cause=error) from error
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def _handshake(self, sock: socket.socket, encoded_id: bytes, timeout_s: float) -> None:
        sock.settimeout(timeout_s)
        try:
            client_nonce = new_nonce()
            sock.sendall(encode_hello(client_nonce, False))
            frame = _read_frame(sock, _HANDSHAKE_MAX_FRAME_BYTES)
            if frame is None or frame[0] != CHALLENGE:
                raise self._error("not a collect server (no challenge received)")
            try:
                server_nonce = decode_challenge(frame, self._secret, client_nonce)
            except AuthenticationError as error:
                raise self._error("the server failed to prove the shared secret (wrong secret?)",
                                  CollectAuthenticationError, error) from error
            open_frame = _OPEN.pack(_OPEN.size - 4 + len(encoded_id), OPEN, self.subtask_index) + encoded_id
            sock.sendall(encode_auth(self._secret, server_nonce, client_nonce) + open_frame)
            frame = _read_frame(sock, _CONTROL_MAX_FRAME_BYTES)
        except CollectConnectionError:
            raise
        except (OSError, CorruptFrameError) as error:
            raise self._error(f"handshake failed ({type(error).__name__}: {error})", cause=error) from error
        if frame is None:
            raise self._error("the server closed the connection during the handshake")
        if frame[0] == AUTH_FAILED:
            raise self._error("the server refused our proof of the shared secret (wrong secret?)",
                              CollectAuthenticationError)
        if frame[0] == ERROR:
            raise self._error("refused: " + bytes(frame[1:]).decode("utf-8", "replace"))
        if frame[0] != ACCEPTED or len(frame) != _ACCEPTED.size - 4:
            raise self._error(f"unexpected answer to Open (frame type {frame[0]:#04x})")
        (self._max_frame_bytes,) = _U32.unpack_from(frame, 1)
        sock.settimeout(None)  # sends block while the client's channel is full

    # -- writing -----------------------------------------------------------------------
    def put_batch(self, values: List[Any]) -> None:
        """Send one batch (a ``list`` of records; an empty one is skipped). Blocks while the
        client's channel is full (TCP backpressure).

        :raises CollectConnectionError: the connection failed or the server reported an error
            (its text is in the message), or after :meth:`close`.
        :raises ValueSerializationError: if a record cannot be serialized.
        """
        if not values:
            return
        with self._lock:
            if self._closed:
                raise self._error("put_batch() after close()")
            if self._failed:
                raise self._error("the connection failed earlier")
            self._check_server()
            self._send_batch(list(values))

    def _send_batch(self, values: List[Any]) -> None:
        payload = pack_records(values, None)
        if len(payload) + 1 > self._max_frame_bytes:
            if len(values) == 1:
                raise self._error(f"a record of {len(payload)} serialized bytes exceeds the server's "
                                  f"maximum frame of {self._max_frame_bytes} bytes")
            half = len(values) // 2
            self._send_batch(values[:half])
            self._send_batch(values[half:])
            return
        self._send(_TYPE_ONLY.pack(len(payload) + 1, BATCH) + payload)

    def _send(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except OSError as error:
            text = self._server_error_text()
            raise self._error(f"connection lost ({text or f'{type(error).__name__}: {error}'})",
                              cause=error) from error

    def _check_server(self) -> None:
        """The server writes nothing while batches flow; anything readable is an error frame
        or the end of the connection: fail now instead of sending into the void."""
        sock = self._sock
        if hasattr(select, "poll"):  # no FD_SETSIZE limit
            poller = select.poll()
            poller.register(sock, select.POLLIN)
            readable = bool(poller.poll(0))
        else:  # pragma: no cover - platforms without poll
            readable = bool(select.select([sock], [], [], 0)[0])
        if readable:
            text = self._server_error_text()
            raise self._error(f"the server ended the connection ({text or 'no reason given'})")

    def _server_error_text(self) -> Optional[str]:
        """The text of an Error frame the server sent, if one can be read now."""
        try:
            self._sock.settimeout(1.0)
            frame = _read_frame(self._sock, _CONTROL_MAX_FRAME_BYTES)
        except (OSError, CorruptFrameError):
            return None
        if frame is not None and frame[0] == ERROR:
            return bytes(frame[1:]).decode("utf-8", "replace")
        return None

    def close(self) -> None:
        """Send the end frame, wait for the server's acknowledgement (every batch is then in
        the client's channel) and close the socket. Idempotent. After a failure already raised
        by :meth:`put_batch`, only closes the socket (the server counts the writer as failed).

        :raises CollectConnectionError: if the end could not be delivered or acknowledged (the
            socket is closed anyway).
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            sock = self._sock
            if self._failed:
                sock.close()
                return
            try:
                self._send(_frame(END))
                try:
                    frame = _read_frame(sock, _CONTROL_MAX_FRAME_BYTES)
                except (OSError, CorruptFrameError) as error:
                    raise self._error(f"the end was not acknowledged ({type(error).__name__}: {error})",
                                      cause=error) from error
                if frame is None:
                    raise self._error("the server closed the connection before acknowledging the end")
                if frame[0] == ERROR:
                    raise self._error("the server failed: " + bytes(frame[1:]).decode("utf-8", "replace"))
                if frame[0] != END_ACK:
                    raise self._error(f"unexpected answer to End (frame type {frame[0]:#04x})")
            finally:
                sock.close()

    def abort(self) -> None:
        """Close the socket without an end frame (idempotent): the server records this writer
        as failed."""
        with self._lock:
            self._closed = True
            if self._sock is not None:
                self._sock.close()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` or :meth:`abort` was called."""
        return self._closed
