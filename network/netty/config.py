"""Configuration of the network transport (Flink's ``NettyConfig`` and the
``taskmanager.network.*`` options that concern remote channels)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..api.serialization.record_serializer import DEFAULT_MAX_PAYLOAD_SIZE_BYTES, DEFAULT_SEGMENT_SIZE_BYTES
from .messages import MAX_BUFFERS_PER_FRAME

__all__ = ["NettyConfig"]


@dataclass(frozen=True)
class NettyConfig:
    """Settings of one process's transport; both ends of a connection should agree on
    ``secret``. Flow control is the *receiver's* choice: a server follows what each client
    asked for in its handshake.

    :ivar secret: the shared secret both ends prove they know before anything they send is
        deserialized (>= 16 bytes; never printed).
    :ivar host: the address the server binds to (``127.0.0.1`` by default: nothing is exposed
        beyond the machine unless asked for).
    :ivar port: the server's port; 0 picks a free one.
    :ivar segment_size_bytes: the largest data frame payload, one credit (Flink's 32 KiB).
    :ivar compression: lz4-compress each buffer's payload on the sending side (Flink's
        ``taskmanager.network.compression.enabled``).
    :ivar max_payload_size_bytes: the largest serialized buffer or event, checked on both
        sides; also bounds every frame's length.
    :ivar flow_control: credit-based flow control (``True``, Flink >= 1.5) or none (``False``:
        senders send without credit and a receiver without a free buffer stops reading the whole
        connection) -- for backpressure experiments.
    :ivar exclusive_buffers_per_channel: Flink's ``buffers-per-channel`` (default 2).
    :ivar floating_buffers_per_gate: Flink's ``floating-buffers-per-gate`` (default 8), the
        size :meth:`~rill.network.netty.connection_manager.NettyConnectionManager.create_floating_buffer_pool`
        uses.
    :ivar credit_announce_batch: announce credit once this many buffers are free, or as soon as
        the sender has none left (1: announce whenever the network thread gets to it).
    :ivar connect_timeout_s: how long to keep retrying a refused or failing connection.
    :ivar handshake_timeout_s: a peer that has not completed the handshake this long after the
        TCP connection was established is disconnected (both sides).
    :ivar partition_request_timeout_s: how long to keep retrying a partition request the
        server does not know (yet).
    :ivar retry_initial_backoff_s: first retry delay; doubled per retry up to
        ``retry_max_backoff_s`` (Flink's ``request-backoff.initial``/``max``).
    :ivar retry_max_backoff_s: the largest retry delay.
    :ivar send_high_water_mark_bytes: a server stops taking buffers from subpartitions while
        this many bytes wait to be written to a connection (Netty's channel writability).
    :ivar receive_chunk_bytes: bytes read from a socket per ``recv``.
    :ivar max_buffers_per_frame: with flow control, the most segments of one payload a sender
        puts in one BufferResponse when its credit allows (each still takes one credit; Flink's
        ``numOfPartialBuffers``, see :mod:`rill.network.netty.messages`); 1 sends one segment
        per frame. Per frame, not per segment, is where the Python cost of the transport is.
    """

    secret: bytes = field(repr=False)
    host: str = "127.0.0.1"
    port: int = 0
    segment_size_bytes: int = DEFAULT_SEGMENT_SIZE_BYTES
    compression: bool = False
    max_payload_size_bytes: int = DEFAULT_MAX_PAYLOAD_SIZE_BYTES
    flow_control: bool = True
    exclusive_buffers_per_channel: int = 2
    floating_buffers_per_gate: int = 8
    credit_announce_batch: int = 1
    connect_timeout_s: float = 10.0
    handshake_timeout_s: float = 10.0
    partition_request_timeout_s: float = 10.0
    retry_initial_backoff_s: float = 0.01
    retry_max_backoff_s: float = 1.0
    send_high_water_mark_bytes: int = 256 * 1024
    receive_chunk_bytes: int = 256 * 1024
    max_buffers_per_frame: int = 4

    def __post_init__(self) -> None:
        if not isinstance(self.secret, (bytes, bytearray)) or len(self.secret) < 16:
            raise ValueError("NettyConfig.secret must be bytes of length >= 16 (e.g. os.urandom(32))")
        positive_ints = {
            "segment_size_bytes": 64,
            "max_payload_size_bytes": 1,
            "credit_announce_batch": 1,
            "send_high_water_mark_bytes": 1,
            "receive_chunk_bytes": 1024,
        }
        for name, minimum in positive_ints.items():
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                raise ValueError(f"NettyConfig.{name} must be an int >= {minimum}, got {value!r}")
        for name in ("exclusive_buffers_per_channel", "floating_buffers_per_gate"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"NettyConfig.{name} must be an int >= 0, got {value!r}")
        if self.flow_control and self.exclusive_buffers_per_channel < 1:
            raise ValueError(
                "NettyConfig.exclusive_buffers_per_channel must be >= 1 with flow control: the "
                "initial credit is the exclusive buffers, and without it nothing is ever sent"
            )
        if (not isinstance(self.max_buffers_per_frame, int) or isinstance(self.max_buffers_per_frame, bool)
                or not 1 <= self.max_buffers_per_frame <= MAX_BUFFERS_PER_FRAME):
            raise ValueError(f"NettyConfig.max_buffers_per_frame must be an int in [1, {MAX_BUFFERS_PER_FRAME}], "
                             f"got {self.max_buffers_per_frame!r}")
        if not isinstance(self.port, int) or not 0 <= self.port <= 65535:
            raise ValueError(f"NettyConfig.port must be in [0, 65535], got {self.port!r}")
        for name in ("connect_timeout_s", "handshake_timeout_s", "partition_request_timeout_s", "retry_initial_backoff_s",
                     "retry_max_backoff_s"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"NettyConfig.{name} must be > 0, got {value!r}")
        if self.retry_max_backoff_s < self.retry_initial_backoff_s:
            raise ValueError("NettyConfig.retry_max_backoff_s must be >= retry_initial_backoff_s")

    @property
    def max_frame_size_bytes(self) -> int:
        """The largest frame accepted: a payload of the maximum size plus headers."""
        return max(self.max_payload_size_bytes, self.segment_size_bytes) + 64
