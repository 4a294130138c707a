"""One TCP connection carrying frames, driven by the network thread (the part of Flink's Netty
channel pipeline that frames bytes: ``NettyMessageEncoder`` / ``LengthFieldBasedFrameDecoder``).

:class:`FrameConnection` reads whatever the socket has, cuts it into length-prefixed frames
(:mod:`~rill.network.netty.messages`) and hands each to :meth:`FrameConnection._handle_frame` of
its subclass (client or server); writes are queued as chunks (a frame's header and its payload
are separate chunks: payloads are never copied to be sent) and flushed with one ``sendmsg`` per
batch at the end of the loop iteration. Reads go with ``recv_into`` straight into the
connection's read buffer (no intermediate ``bytes``), which is compacted -- only the bytes of
an incomplete frame move -- or grown when the next read would not fit; frames are handed out
as views into it. Reading can be paused (flow control off: a channel
without a free buffer stops the whole connection) and resumed; frames already read stay queued
in the connection meanwhile.

A frame longer than the maximum frame size, a peer that closes in the middle of a frame, or a
socket error closes the connection, and the subclass fails what depended on it
(:meth:`FrameConnection._on_closed`). All methods run on the network thread unless stated.
"""

from __future__ import annotations

import itertools
import socket
import time
from collections import deque
from dataclasses import dataclass
from typing import Optional

from .config import NettyConfig
from .exceptions import CorruptFrameError
from .io_thread import EVENT_READ, EVENT_WRITE, IOThread
from .messages import LENGTH

__all__ = ["FrameConnection", "ConnectionStatistics"]

#: The largest frame accepted before the peer is authenticated (the handshake's frames).
HANDSHAKE_MAX_FRAME_BYTES = 128
#: A read buffer grown beyond this many receive chunks (for a frame that large) is dropped once
#: it is empty again; the next read allocates the usual two chunks.
_READ_BUFFER_SHRINK_CHUNKS = 16


@dataclass(frozen=True, slots=True)
class ConnectionStatistics:
    """A snapshot of one connection.

    :ivar role: ``"client"`` (consumer side) or ``"server"`` (producer side).
    :ivar local_address: this end's ``(host, port)``, ``None`` before connecting.
    :ivar remote_address: the peer's ``(host, port)``.
    :ivar authenticated: whether the handshake completed.
    :ivar flow_control: credit-based flow control on this connection.
    :ivar channels: client: remote input channels multiplexed on it; server: subpartition
        readers.
    :ivar bytes_sent: bytes written to the socket.
    :ivar bytes_received: bytes read from the socket.
    :ivar frames_sent: frames queued for sending.
    :ivar frames_received: frames processed.
    :ivar buffers_sent: buffers (segments) sent in data frames, one credit each (server side).
    :ivar buffers_received: buffers (segments) received in data frames (client side).
    :ivar credit_announcements: AddCredit messages sent (client side).
    :ivar connect_attempts: connection attempts made (client side; retries included).
    :ivar outbound_bytes_queued: bytes waiting to be written now.
    :ivar read_paused: whether reading is paused now (flow control off, a channel without a
        buffer).
    :ivar read_paused_time_ns: total time reading was paused, including the current pause.
    :ivar closed: whether the connection is closed.
    :ivar error: why it closed, if it failed.
    """

    role: str
    local_address: Optional[tuple]
    remote_address: tuple
    authenticated: bool
    flow_control: bool
    channels: int
    bytes_sent: int
    bytes_received: int
    frames_sent: int
    frames_received: int
    buffers_sent: int
    buffers_received: int
    credit_announcements: int
    connect_attempts: int
    outbound_bytes_queued: int
    read_paused: bool
    read_paused_time_ns: int
    closed: bool
    error: Optional[str]


class FrameConnection:
    """A framed, non-blocking TCP connection owned by an :class:`IOThread`.

    :param io: the network thread.
    :param config: the transport settings.
    :param remote_address: the peer's ``(host, port)``.
    :param sock: a connected socket, or ``None`` (a client connects later and calls
        :meth:`_start_io`).
    """

    role = "connection"

    def __init__(self, io: IOThread, config: NettyConfig, remote_address: tuple,
                 sock: Optional[socket.socket] = None) -> None:
        self._io = io
        self._config = config
        self.remote_address = tuple(remote_address)
        self.local_address: Optional[tuple] = None
        self._sock: Optional[socket.socket] = None
        # The read buffer: unconsumed bytes are _rbuf[_rstart:_rend] (allocated at first read).
        self._rbuf = bytearray()
        self._rview = memoryview(self._rbuf)
        self._rstart = 0
        self._rend = 0
        #: The events the socket is registered for, as last told to the selector (-1: unknown).
        self._events = -1
        self._out: deque = deque()
        self._out_bytes = 0
        self._read_paused = False
        self._paused_since = 0
        self._paused_ns = 0
        self._closed = False
        self._error: Optional[BaseException] = None
        self._max_frame = HANDSHAKE_MAX_FRAME_BYTES
        self.authenticated = False
        self.flow_control = config.flow_control
        self.bytes_sent = 0
        self.bytes_received = 0
        self.frames_sent = 0
        self.frames_received = 0
        self.buffers_sent = 0
        self.buffers_received = 0
        self.credit_announcements = 0
        self.connect_attempts = 0
        self._handshake_timer = None
        io.attach(self)
        if sock is not None:
            self._start_io(sock)

    # ------------------------------------------------------------------ set-up

    def _start_io(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:  # pragma: no cover - not TCP (tests may use other sockets)
            pass
        self._sock = sock
        try:
            self.local_address = sock.getsockname()
        except OSError:  # pragma: no cover
            self.local_address = None
        self._events = -1  # registered by someone else (a client's connect) or not at all
        self._update_interest()

    def _start_handshake_timer(self) -> None:
        timeout = self._config.handshake_timeout_s
        self._handshake_timer = self._io.call_later(timeout, self._handshake_timed_out)

    def _handshake_timed_out(self) -> None:
        if not self.authenticated and not self._closed:
            self.close(TimeoutError(
                f"the handshake with {_fmt(self.remote_address)} did not complete within "
                f"{self._config.handshake_timeout_s}s (not a Rill peer, or it hangs)"
            ))

    def _authenticated(self) -> None:
        self.authenticated = True
        self._max_frame = self._config.max_frame_size_bytes
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
            self._handshake_timer = None

    def _update_interest(self) -> None:
        sock = self._sock
        if self._closed or sock is None:
            return
        events = 0 if self._read_paused else EVENT_READ
        if self._out:
            events |= EVENT_WRITE
        if events != self._events:
            # a selector lookup per flush otherwise (get_map, fileno, key): ~3% of a network thread
            self._io.register(sock, events, self)
            self._events = events

    # ------------------------------------------------------------------ reading

    def handle_read(self) -> None:
        """The socket is readable: read a chunk and process the complete frames in it."""
        if self._read_paused or self._closed:
            return
        chunk = self._config.receive_chunk_bytes
        end = self._rend
        if len(self._rbuf) - end < chunk:
            self._make_room(chunk)
            end = self._rend
        try:
            received = self._sock.recv_into(self._rview[end:end + chunk])  # type: ignore[union-attr]
        except (BlockingIOError, InterruptedError):
            return
        except OSError as error:
            self.close(ConnectionResetError(f"reading from {_fmt(self.remote_address)} failed: {error}"))
            return
        if not received:
            self._on_eof()
            return
        self.bytes_received += received
        self._rend = end + received
        self._process_frames()

    def _make_room(self, chunk: int) -> None:
        """Make ``chunk`` bytes of room after the unconsumed bytes: move them to the front if
        that suffices (they are at most an incomplete frame and the frames behind it), else
        move them into a larger buffer."""
        start, end = self._rstart, self._rend
        pending = end - start
        if pending + chunk <= len(self._rbuf):
            if start:
                self._rview[:pending] = self._rview[start:end]  # memmove; no resize, no temporary
        else:
            grown = bytearray(max(2 * len(self._rbuf), pending + chunk, 2 * chunk))
            view = memoryview(grown)
            view[:pending] = self._rview[start:end]
            self._rview.release()
            self._rbuf = grown
            self._rview = view
        self._rstart = 0
        self._rend = pending

    def _pending_bytes(self) -> int:
        return self._rend - self._rstart

    def _process_frames(self) -> None:
        buf = self._rbuf
        view = self._rview
        pos = self._rstart
        total = self._rend
        unpack = LENGTH.unpack_from
        try:
            while total - pos >= 4 and not self._closed and not self._read_paused:
                (length,) = unpack(buf, pos)
                if length == 0 or length > self._max_frame:
                    raise self._bad_length(length)
                end = pos + 4 + length
                if end > total:
                    break
                frame = view[pos + 4:end]
                try:
                    consumed = self._handle_frame(frame)
                finally:
                    frame.release()
                if not consumed:
                    break
                pos = end
                self.frames_received += 1
        finally:
            self._consumed_up_to(buf, pos)

    def _consumed_up_to(self, buf: bytearray, pos: int) -> None:
        """The frames of ``buf`` before ``pos`` are processed (end of a frame loop)."""
        if not self._closed and buf is self._rbuf:
            if pos == self._rend:
                self._rstart = self._rend = 0  # all consumed: the next read starts at 0
                if len(buf) > _READ_BUFFER_SHRINK_CHUNKS * self._config.receive_chunk_bytes:
                    self._rview.release()  # a huge frame passed: do not keep its memory
                    self._rbuf = bytearray()
                    self._rview = memoryview(self._rbuf)
            else:
                self._rstart = pos

    def _bad_length(self, length: int) -> CorruptFrameError:
        return CorruptFrameError(
            f"frame length {length} from {_fmt(self.remote_address)} is outside "
            f"[1, {self._max_frame}] (corrupt stream, or not a Rill peer)"
        )

    def _handle_frame(self, frame: memoryview) -> bool:
        """Process one frame (``frame`` starts at the type byte and is only valid during the
        call). :returns: ``False`` to leave it unconsumed and stop processing (reading paused,
        or the connection closed)."""
        raise NotImplementedError

    def _on_eof(self) -> None:
        pending = self._pending_bytes()
        if pending:
            expected = LENGTH.unpack_from(self._rbuf, self._rstart)[0] + 4 if pending >= 4 else 4
            self.close(ConnectionResetError(
                f"connection closed by {_fmt(self.remote_address)} in the middle of a frame "
                f"(truncated frame: {pending} of {expected} bytes received)"
            ))
        else:
            self.close(ConnectionResetError(f"connection closed by {_fmt(self.remote_address)}"))

    def pause_reading(self) -> None:
        """Stop reading the socket (and processing queued frames) until :meth:`resume_reading`."""
        if not self._read_paused:
            self._read_paused = True
            self._paused_since = time.perf_counter_ns()
            self._update_interest()

    def resume_reading(self) -> None:
        """Process the frames read meanwhile, then read the socket again."""
        if not self._read_paused or self._closed:
            return
        self._read_paused = False
        self._paused_ns += time.perf_counter_ns() - self._paused_since
        try:
            self._process_frames()
        except Exception as error:  # noqa: BLE001 - as if raised from handle_read
            self.handle_error(error)
            return
        self._update_interest()

    # ------------------------------------------------------------------ writing

    def write(self, *chunks) -> None:
        """Queue one frame (as one or more chunks) to be sent at the end of this iteration."""
        if self._closed:
            return
        out = self._out
        for chunk in chunks:
            out.append(chunk)
            self._out_bytes += len(chunk)
        self.frames_sent += 1
        self._io.mark_dirty(self)

    def flush(self) -> None:
        """Write what is queued (called by the network thread at the end of an iteration)."""
        self._flush_socket()

    def _flush_socket(self) -> None:
        sock = self._sock
        if self._closed or sock is None:
            return
        out = self._out
        while out:
            try:
                sent = sock.sendmsg(list(itertools.islice(out, 0, 64)))
            except (BlockingIOError, InterruptedError):
                break
            except OSError as error:
                self.close(ConnectionResetError(f"writing to {_fmt(self.remote_address)} failed: {error}"))
                return
            self.bytes_sent += sent
            self._out_bytes -= sent
            while sent:
                head = out[0]
                size = len(head)
                if sent >= size:
                    out.popleft()
                    sent -= size
                else:
                    out[0] = memoryview(head)[sent:]
                    sent = 0
        self._update_interest()

    def handle_write(self) -> None:
        """The socket is writable again."""
        self.flush()

    # ------------------------------------------------------------------ closing

    def handle_error(self, error: BaseException) -> None:
        """A handler raised: the connection fails with ``error``."""
        self.close(error)

    def close(self, cause: Optional[BaseException] = None) -> None:
        """Close the socket; ``cause`` ``None`` means an orderly close. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._error = cause
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
            self._handshake_timer = None
        if self._read_paused:
            self._paused_ns += time.perf_counter_ns() - self._paused_since
            self._read_paused = False
        sock = self._sock
        if sock is not None:
            self._io.unregister(sock)
            try:
                sock.close()
            except OSError:  # pragma: no cover
                pass
        self._io.detach(self)
        self._out.clear()
        self._out_bytes = 0
        self._rstart = self._rend = 0
        self._rbuf = bytearray()  # the old buffer goes once the views of it are gone
        self._rview = memoryview(self._rbuf)
        self._on_closed(cause)

    def _on_closed(self, cause: Optional[BaseException]) -> None:
        """Subclass hook: fail or release what used the connection."""

    def is_closed(self) -> bool:
        """Whether the connection is closed."""
        return self._closed

    # ------------------------------------------------------------------ statistics

    def _channel_count(self) -> int:
        return 0

    def statistics(self) -> ConnectionStatistics:
        """A snapshot (any thread; counters are read without stopping the network thread)."""
        paused = self._read_paused
        paused_ns = self._paused_ns + (time.perf_counter_ns() - self._paused_since if paused else 0)
        return ConnectionStatistics(
            role=self.role,
            local_address=self.local_address,
            remote_address=self.remote_address,
            authenticated=self.authenticated,
            flow_control=self.flow_control,
            channels=self._channel_count(),
            bytes_sent=self.bytes_sent,
            bytes_received=self.bytes_received,
            frames_sent=self.frames_sent,
            frames_received=self.frames_received,
            buffers_sent=self.buffers_sent,
            buffers_received=self.buffers_received,
            credit_announcements=self.credit_announcements,
            connect_attempts=self.connect_attempts,
            outbound_bytes_queued=self._out_bytes,
            read_paused=paused,
            read_paused_time_ns=paused_ns,
            closed=self._closed,
            error=None if self._error is None else f"{type(self._error).__name__}: {self._error}",
        )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({_fmt(self.local_address)} -> {_fmt(self.remote_address)}"
            f"{', closed' if self._closed else ''})"
        )


def _fmt(address: Optional[tuple]) -> str:
    if not address:
        return "?"
    return f"{address[0]}:{address[1]}"
