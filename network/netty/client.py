"""The consumer side of the transport (Flink's ``NettyPartitionRequestClient``,
``PartitionRequestClientFactory`` and ``CreditBasedPartitionRequestClientHandler``).

One :class:`PartitionRequestClient` per remote process: every
:class:`~rill.network.partition.consumer.remote_input_channel.RemoteInputChannel` of this process
that reads from that process shares it, identified in each frame by its receiver id.

Life of a connection: non-blocking connect, retried with exponential back-off until
``connect_timeout_s`` (then every waiting channel fails, naming the address) -> Hello ->
the server's Challenge is verified (a server that cannot prove the secret is dropped before
anything it sends is deserialized) -> Auth, immediately followed by the queued
PartitionRequests -> BufferResponses are dispatched to their channels; AddCredit messages go out
as channels free buffers -> closed when its last channel is released (CloseRequest), on
shutdown, or on failure, in which case every channel still reading fails with an error that
names it and the cause; connections to other processes are unaffected.

All methods run on the network thread except :meth:`PartitionRequestClient.notify_credit_available`.
"""

from __future__ import annotations

import errno
import os
import socket
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Optional

from . import messages
from .config import NettyConfig
from .connection import FrameConnection, _fmt
from .exceptions import AuthenticationError, CorruptFrameError
from .io_thread import EVENT_WRITE, IOThread, Timer
from .messages import LENGTH

if TYPE_CHECKING:
    from ..partition.consumer.remote_input_channel import RemoteInputChannel
    from .connection_manager import NettyConnectionManager

__all__ = ["PartitionRequestClient"]

_CONNECTING = "connecting"
_HANDSHAKE = "handshake"
_READY = "ready"
_CONNECT_IN_PROGRESS = {0, errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY}
_BUFFER_RESPONSE = messages.BUFFER_RESPONSE
_BUFFER_RESPONSE_HEADER = messages.BUFFER_RESPONSE_HEADER
_BUFFER_RESPONSE_HEADER_SIZE = messages.BUFFER_RESPONSE_HEADER.size
_BUFFER_RESPONSE_FIXED = messages.BUFFER_RESPONSE_PAYLOAD_OFFSET
_FLAG_EVENT = messages.FLAG_EVENT


class PartitionRequestClient(FrameConnection):
    """The connection from this process to one remote server, shared by its channels.

    :param io: the network thread.
    :param config: the transport settings.
    :param address: the server's ``(host, port)``.
    :param manager: the owning connection manager (told when the connection closes).
    """

    role = "client"

    def __init__(self, io: IOThread, config: NettyConfig, address: tuple,
                 manager: "NettyConnectionManager") -> None:
        super().__init__(io, config, address, None)
        self._manager = manager
        self._state = _CONNECTING
        self._channels: dict[bytes, "RemoteInputChannel"] = {}
        self._pending: list["RemoteInputChannel"] = []
        self._client_nonce = messages.new_nonce()
        self._connect_started = time.monotonic()
        self._backoff_s = config.retry_initial_backoff_s
        self._retry_timer: Optional[Timer] = None
        self._credit_lock = threading.Lock()
        self._credit_queue: deque = deque()
        self._credit_scheduled = False
        self._deferred_credit: list = []
        self._blocked_by: Optional["RemoteInputChannel"] = None

    # ------------------------------------------------------------------ connecting

    def connect(self) -> None:
        """Start (or retry) connecting without blocking."""
        self._retry_timer = None
        if self._closed:
            return
        self.connect_attempts += 1
        host, port = self.remote_address[:2]
        try:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
        except OSError as error:
            self._connect_failed(error)
            return
        sock.setblocking(False)
        code = sock.connect_ex((host, port))
        if code not in _CONNECT_IN_PROGRESS:
            sock.close()
            self._connect_failed(OSError(code, os.strerror(code)))
            return
        self._sock = sock
        self._io.register(sock, EVENT_WRITE, self)

    def _connect_failed(self, error: BaseException) -> None:
        sock = self._sock
        if sock is not None:
            self._io.unregister(sock)
            sock.close()
            self._sock = None
        elapsed = time.monotonic() - self._connect_started
        if elapsed + self._backoff_s > self._config.connect_timeout_s:
            self.close(ConnectionRefusedError(
                f"connecting to {_fmt(self.remote_address)} failed after {self.connect_attempts} "
                f"attempts in {elapsed:.2f}s (connect timeout {self._config.connect_timeout_s}s): "
                f"{error}; is the producer's process alive and is this the right address?"
            ))
            return
        self._retry_timer = self._io.call_later(self._backoff_s, self.connect)
        self._backoff_s = min(self._backoff_s * 2, self._config.retry_max_backoff_s)

    def handle_write(self) -> None:
        """Connected (or failed to), or the socket is writable again."""
        if self._state is _CONNECTING:
            code = self._sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)  # type: ignore[union-attr]
            if code:
                self._connect_failed(OSError(code, os.strerror(code)))
                return
            self._state = _HANDSHAKE
            self._start_io(self._sock)  # type: ignore[arg-type]
            self._start_handshake_timer()
            self.write(messages.encode_hello(self._client_nonce, self.flow_control))
            return
        super().handle_write()

    def flush(self) -> None:
        """Write queued frames once connected."""
        if self._state is not _CONNECTING:
            self._flush_socket()

    # ------------------------------------------------------------------ channels

    def add_channel(self, channel: "RemoteInputChannel") -> None:
        """Multiplex ``channel`` on this connection and request its subpartition (now, or
        once the handshake is done)."""
        self._channels[channel.receiver_id] = channel
        channel._attach_client(self)
        if self._state is _READY:
            self.send_partition_request(channel)
        else:
            self._pending.append(channel)

    def send_partition_request(self, channel: "RemoteInputChannel") -> None:
        """(Re)send ``channel``'s PartitionRequest with its current initial credit."""
        if self._closed or self._channels.get(channel.receiver_id) is not channel:
            return
        partition_id = channel.partition_id
        self.write(messages.encode_partition_request(
            channel.receiver_id, partition_id.partition_id, partition_id.producer_id,
            channel.subpartition_index, channel._initial_credit(),
        ))

    def remove_channel(self, channel: "RemoteInputChannel", cancel: bool) -> None:
        """Stop multiplexing ``channel`` (released); cancel its request at the server if it
        did not finish. Closes the connection when no channel is left."""
        if self._channels.get(channel.receiver_id) is channel:
            del self._channels[channel.receiver_id]
            if cancel and self._state is _READY:
                self.write(messages.encode_cancel(channel.receiver_id))
        if channel in self._pending:
            self._pending.remove(channel)
        if self._blocked_by is channel:
            self._resume_after_block()
        if not self._channels and not self._closed:
            if self._state is _READY:
                self.write(messages.encode_empty(messages.CLOSE_REQUEST))
                self._flush_socket()
            self.close(None)

    def channels(self) -> list:
        """The channels multiplexed now."""
        return list(self._channels.values())

    # ------------------------------------------------------------------ frames in

    def _handle_frame(self, frame: memoryview) -> bool:
        kind = frame[0]
        if self._state is _READY:
            if kind == messages.BUFFER_RESPONSE:
                receiver_id, sequence, backlog, flags, buffers = messages.decode_buffer_response_header(frame)
                channel = self._channels.get(receiver_id)
                if channel is None:
                    return True  # released meanwhile: drop (its credit died with it)
                if not flags & messages.FLAG_EVENT:
                    self.buffers_received += buffers
                # a view into the read buffer, valid during the call only: the channel copies it
                with frame[messages.BUFFER_RESPONSE_PAYLOAD_OFFSET:] as payload:
                    taken = channel._on_buffer_response(sequence, backlog, flags, payload, buffers)
                if taken:
                    return True
                self.buffers_received -= buffers  # not taken yet: counted again when re-dispatched
                self._blocked_by = channel
                self.pause_reading()
                return False
            if kind == messages.ERROR_RESPONSE:
                receiver_id, code, message = messages.decode_error_response(frame)
                if receiver_id == messages.NO_RECEIVER:
                    raise ConnectionError(f"the server at {_fmt(self.remote_address)} reported: {message}")
                channel = self._channels.get(receiver_id)
                if channel is not None:
                    channel._on_error_response(code, message)
                return True
            if kind == messages.AUTH_FAILED:
                raise AuthenticationError(
                    f"the server at {_fmt(self.remote_address)} refused our proof of the shared "
                    "secret (the two processes use different secrets)"
                )
            raise CorruptFrameError(
                f"unexpected message type {kind:#04x} from server {_fmt(self.remote_address)}"
            )
        if self._state is _HANDSHAKE:
            if kind == messages.AUTH_FAILED:
                raise AuthenticationError(
                    f"the server at {_fmt(self.remote_address)} refused the handshake"
                )
            if kind != messages.CHALLENGE:
                raise CorruptFrameError(
                    f"expected a Challenge from {_fmt(self.remote_address)}, got type {kind:#04x}"
                )
            server_nonce = messages.decode_challenge(frame, self._config.secret, self._client_nonce)
            self.write(messages.encode_auth(self._config.secret, server_nonce, self._client_nonce))
            self._state = _READY
            self._authenticated()
            pending, self._pending = self._pending, []
            for channel in pending:
                self.send_partition_request(channel)
            deferred, self._deferred_credit = self._deferred_credit, []
            for channel in deferred:
                self.notify_credit_available(channel)
            return True
        raise CorruptFrameError(f"data from {_fmt(self.remote_address)} before the connection was set up")

    def _process_frames(self) -> None:
        # The data path, in two passes over the frames of one read. First the credit side of
        # every data frame (sequence check, receiving buffer; a segment before the last gives
        # its buffer back at once), then the AddCredit for what that freed is written and
        # flushed, and only then are the payloads copied into the channels' reassembly
        # buffers: the sender gets its credit a read's worth of copies earlier (with 10
        # credits in flight it otherwise waits for them). The payloads stay valid until the
        # next recv, which comes after both passes. A BufferResponse is parsed in place (no
        # frame view, no _handle_frame call); events, other frames, flow control off and
        # everything before the handshake completed take the per-frame path, after the
        # deferred payloads before them.
        if self._state is not _READY:
            super()._process_frames()
            return
        buf = self._rbuf
        view = self._rview
        pos = self._rstart
        total = self._rend
        max_frame = self._max_frame
        channels = self._channels
        unpack_length = LENGTH.unpack_from
        unpack_header = _BUFFER_RESPONSE_HEADER.unpack_from
        defer = self.flow_control
        deferred: list = []
        frames = data = 0
        try:
            while total - pos >= 4 and not self._closed and not self._read_paused:
                (length,) = unpack_length(buf, pos)
                if length == 0 or length > max_frame:
                    raise self._bad_length(length)
                end = pos + 4 + length
                if end > total:
                    break
                if buf[pos + 4] == _BUFFER_RESPONSE and length >= _BUFFER_RESPONSE_FIXED:
                    _, _, receiver_id, sequence, backlog, flags, buffers = unpack_header(buf, pos)
                    channel = channels.get(receiver_id)
                    if channel is None:
                        pass  # released meanwhile: drop (its credit died with it)
                    elif defer and not flags & _FLAG_EVENT:
                        kind = channel._on_data_segment(sequence, backlog, flags,
                                                        end - pos - _BUFFER_RESPONSE_HEADER_SIZE, buffers)
                        if kind is not False:
                            deferred.append((channel, pos + _BUFFER_RESPONSE_HEADER_SIZE, end, flags, kind))
                        data += buffers
                    else:
                        if deferred:
                            self._deliver_deferred(deferred, view)
                        # valid during the call only: the channel copies it
                        payload = view[pos + _BUFFER_RESPONSE_HEADER_SIZE:end]
                        taken = channel._on_buffer_response(sequence, backlog, flags, payload, buffers)
                        payload.release()
                        if not taken:  # flow control off, no buffer: re-dispatched on resume
                            self._blocked_by = channel
                            self.pause_reading()
                            break
                        if not flags & _FLAG_EVENT:
                            data += buffers
                else:
                    if deferred:
                        self._deliver_deferred(deferred, view)
                    frame = view[pos + 4:end]
                    try:
                        consumed = self._handle_frame(frame)
                    finally:
                        frame.release()
                    if not consumed:
                        break
                pos = end
                frames += 1
        finally:
            self.frames_received += frames
            self.buffers_received += data
            try:
                if deferred:
                    self._deliver_deferred(deferred, view)
            finally:
                self._consumed_up_to(buf, pos)

    def _deliver_deferred(self, deferred: list, view: memoryview) -> None:
        """Announce the credit the deferred data frames freed, then hand their payloads (in
        ``view``, the read buffer they were read into) over."""
        if self._credit_queue and not self._closed:
            self._announce_credit()
            self._flush_socket()
        try:
            for channel, start, end, flags, kind in deferred:
                payload = view[start:end]
                channel._on_data_segment_payload(payload, flags, kind)
                payload.release()
        finally:
            deferred.clear()

    def resume_reading(self) -> None:
        """A channel that blocked the connection (flow control off) has a buffer again."""
        self._blocked_by = None
        super().resume_reading()

    def _resume_after_block(self) -> None:
        self.resume_reading()

    # ------------------------------------------------------------------ credit

    def notify_credit_available(self, channel: "RemoteInputChannel") -> None:
        """``channel`` has unannounced credit: send an AddCredit soon. Any thread; requests
        made before the network thread runs are merged into one message per channel."""
        with self._credit_lock:
            self._credit_queue.append(channel)
            if self._credit_scheduled:
                return
            self._credit_scheduled = True
        self._io.call_soon(self._announce_credit)

    def _announce_credit(self) -> None:
        with self._credit_lock:
            queue = self._credit_queue
            self._credit_queue = deque()
            self._credit_scheduled = False
        for channel in queue:
            if self._closed or self._channels.get(channel.receiver_id) is not channel:
                continue
            if self._state is not _READY:
                self._deferred_credit.append(channel)
                continue
            credit = channel._take_unannounced_credit()
            if credit:
                self.write(messages.encode_add_credit(channel.receiver_id, credit))
                self.credit_announcements += 1

    # ------------------------------------------------------------------ closing

    def _on_closed(self, cause: Optional[BaseException]) -> None:
        if self._retry_timer is not None:
            self._retry_timer.cancel()
        channels = list(self._channels.values()) + [c for c in self._pending if c.receiver_id not in self._channels]
        self._channels.clear()
        self._pending.clear()
        self._manager._forget_client(self)
        if cause is not None:
            for channel in channels:
                channel._on_connection_failed(self.remote_address, cause)

    def _channel_count(self) -> int:
        return len(self._channels)
