"""Buffers of records <-> segments of bytes (Flink's ``SpanningRecordSerializer`` and
``SpillingAdaptiveSpanningRecordDeserializer``, in Rill's batch form).

In-process, a :class:`~rill.network.buffer.buffer.Buffer` holds Python objects. To cross a
process boundary its records (values and optional timestamps) are serialized with **one**
``msgpack.packb`` for the whole buffer (:func:`~rill.network.api.serialization.value_codec.pack_records`),
optionally compressed with lz4 (:mod:`~rill.network.api.serialization.compression`), and the
payload is cut into segments of at most ``segment_size_bytes`` (Flink's 32 KiB network buffer):
each segment travels as one frame and takes one credit. A buffer whose payload is larger than a
segment -- many records, or one record larger than a segment -- spans several segments, and the
receiving channel's deserializer reassembles them before decoding, exactly as Flink's
deserializer reassembles records that span network buffers.

Differences from Flink: Flink serializes record by record into fixed-size memory segments on the
task thread; Rill serializes a whole buffer at once (the per-record cost is msgpack's C loop),
so the spanning unit is the buffer's payload rather than the record. There is no spilling to
disk: a payload larger than ``max_payload_size_bytes`` is refused, on both sides, with
:class:`PayloadTooLargeError`.

Thread-safety: a serializer or deserializer belongs to one channel and is used by one thread at
a time.
"""

from __future__ import annotations

from typing import Any, Optional

from .compression import BufferCompressor, BufferDecompressor
from .event_serializer import EventSerializer
from .value_codec import pack_records, unpack_records

__all__ = [
    "SpanningRecordSerializer",
    "AdaptiveSpanningRecordDeserializer",
    "PayloadTooLargeError",
    "DEFAULT_SEGMENT_SIZE_BYTES",
    "DEFAULT_MAX_PAYLOAD_SIZE_BYTES",
]

#: Flink's default network buffer size (``taskmanager.memory.segment-size``).
DEFAULT_SEGMENT_SIZE_BYTES = 32 * 1024
#: The largest serialized buffer (or event) a channel accepts by default.
DEFAULT_MAX_PAYLOAD_SIZE_BYTES = 64 * 1024 * 1024
#: The largest reassembly buffer a deserializer keeps for the next payload (it keeps one).
SPARE_REASSEMBLY_BUFFER_MAX_BYTES = 4 * 1024 * 1024


class PayloadTooLargeError(ValueError):
    """A serialized buffer or event exceeds the maximum payload size.

    :ivar size_bytes: the payload's size (or, while reassembling, the size reached so far).
    :ivar max_size_bytes: the limit.
    :ivar channel: the channel description given to the (de)serializer.
    """

    def __init__(self, size_bytes: int, max_size_bytes: int, channel: str, what: str) -> None:
        super().__init__(
            f"{what} of {size_bytes} bytes exceeds the maximum payload size of {max_size_bytes} "
            f"bytes on {channel or 'a channel'} (raise max_payload_size_bytes, or emit smaller "
            "records or fewer records per buffer)"
        )
        self.size_bytes = size_bytes
        self.max_size_bytes = max_size_bytes
        self.channel = channel


def _check_sizes(segment_size_bytes: int, max_payload_size_bytes: int) -> None:
    if not isinstance(segment_size_bytes, int) or segment_size_bytes < 64:
        raise ValueError(f"segment_size_bytes must be an int >= 64, got {segment_size_bytes!r}")
    if not isinstance(max_payload_size_bytes, int) or max_payload_size_bytes < 1:
        raise ValueError(f"max_payload_size_bytes must be an int >= 1, got {max_payload_size_bytes!r}")


class SpanningRecordSerializer:
    """The sending side of one channel: buffers and events to payloads and segments.

    :param segment_size_bytes: the largest segment (one frame, one credit); >= 64.
    :param compression: compress each buffer's payload with lz4 when that makes it smaller.
    :param max_payload_size_bytes: refuse larger serialized buffers and events.
    :param channel: a description of the channel, for error messages.
    """

    def __init__(
        self,
        segment_size_bytes: int = DEFAULT_SEGMENT_SIZE_BYTES,
        compression: bool = False,
        max_payload_size_bytes: int = DEFAULT_MAX_PAYLOAD_SIZE_BYTES,
        channel: str = "",
    ) -> None:
        _check_sizes(segment_size_bytes, max_payload_size_bytes)
        self.segment_size_bytes = segment_size_bytes
        self.max_payload_size_bytes = max_payload_size_bytes
        self.channel = channel
        self._compressor = BufferCompressor() if compression else None

    def serialize_buffer(self, values: list, timestamps: Optional[list]) -> tuple[bytes, bool]:
        """Serialize one buffer's records.

        :returns: ``(payload, compressed)``.
        :raises PayloadTooLargeError: if the serialized records exceed the maximum payload size.
        :raises ValueSerializationError: if a record cannot be serialized.
        """
        payload = pack_records(values, timestamps)
        if len(payload) > self.max_payload_size_bytes:
            raise PayloadTooLargeError(
                len(payload), self.max_payload_size_bytes, self.channel,
                f"A serialized buffer of {len(values)} record(s)",
            )
        if self._compressor is not None:
            compressed = self._compressor.compress(payload)
            if compressed is not None:
                return compressed, True
        return payload, False

    def serialize_into(self, buffer) -> None:
        """Serialize a :class:`~rill.network.buffer.buffer.Buffer`'s records into its
        ``serialized`` field: ``(payload, compressed, number_of_records)``, the records then
        dropped (freed on the calling thread); or, if serializing fails, the exception (a
        ``PayloadTooLargeError`` or ``ValueSerializationError``), the records kept, so the
        sender can fail the channel naming them. Never raises for the records' sake."""
        values = buffer.values
        try:
            payload, compressed = self.serialize_buffer(values, buffer.timestamps)
        except Exception as error:  # noqa: BLE001 - reported by the sender, with the channel
            buffer.serialized = error
            return
        buffer.serialized = (payload, compressed, len(values))
        buffer.values = []
        buffer.timestamps = None

    def serialize_event(self, event: Any) -> bytes:
        """Serialize an event (one frame, never compressed, never split).

        :raises PayloadTooLargeError: if it exceeds the maximum payload size.
        """
        payload = EventSerializer.to_bytes(event)
        if len(payload) > self.max_payload_size_bytes:
            raise PayloadTooLargeError(
                len(payload), self.max_payload_size_bytes, self.channel, f"Event {type(event).__name__}"
            )
        return payload

    def split(self, payload: bytes) -> list:
        """The segments of ``payload`` (zero-copy memoryviews), at least one."""
        size = self.segment_size_bytes
        if len(payload) <= size:
            return [payload]
        view = memoryview(payload)
        return [view[start:start + size] for start in range(0, len(payload), size)]


class AdaptiveSpanningRecordDeserializer:
    """The receiving side of one channel: reassembles segments, decodes payloads.

    :param max_payload_size_bytes: refuse a payload that grows beyond this while reassembling
        (or decompresses beyond it).
    :param channel: a description of the channel, for error messages.
    """

    def __init__(self, max_payload_size_bytes: int = DEFAULT_MAX_PAYLOAD_SIZE_BYTES, channel: str = "") -> None:
        _check_sizes(64, max_payload_size_bytes)
        self.max_payload_size_bytes = max_payload_size_bytes
        self.channel = channel
        self._partial: Optional[bytearray] = None
        self._partial_view: Optional[memoryview] = None
        self._partial_size = 0
        self._size_hint = 0
        self._spare: Optional[bytearray] = None
        self._decompressor = BufferDecompressor(max_payload_size_bytes)

    def add_segment(self, segment, last: bool) -> Optional[bytes]:
        """Add the next segment of the current payload (copied: ``segment`` may be a view into
        a reused buffer).

        Each byte is copied once: a single-segment payload into its own ``bytes``; the segments
        of a spanning payload into one ``bytearray``, allocated at the size of the previous
        spanning payload (a channel's buffers are usually alike) and grown in place if this
        one is larger -- never collected and joined, never grown segment by segment (each
        reallocation of a large ``bytearray`` may copy it all).

        :returns: the complete payload (``bytes``, or a ``bytearray`` when it spanned
            segments) when ``last`` is true, else ``None``.
        :raises PayloadTooLargeError: if the payload exceeds the maximum size.
        """
        fill = self._partial_size
        size = fill + len(segment)
        if size > self.max_payload_size_bytes:
            self.clear()
            raise PayloadTooLargeError(size, self.max_payload_size_bytes, self.channel, "A received payload")
        partial = self._partial
        if partial is None:
            if last:
                return bytes(segment)
            wanted = max(self._size_hint, size)
            spare = self._spare
            self._spare = None
            if spare is None:
                partial = bytearray(wanted)
            else:
                partial = spare
                if len(partial) < wanted:
                    partial += bytes(wanted - len(partial))
            self._partial = partial
            self._partial_view = memoryview(partial)
        view = self._partial_view
        if view is not None and size <= len(partial):
            view[fill:size] = segment  # into the preallocated bytes
        else:
            if view is not None:
                view.release()
                self._partial_view = None
                del partial[fill:]
            partial += segment
        if last:
            if self._partial_view is not None:
                self._partial_view.release()
                if size < len(partial):
                    del partial[size:]
            self._size_hint = size
            self._partial = self._partial_view = None
            self._partial_size = 0
            return partial  # type: ignore[return-value]
        self._partial_size = size
        return None

    def give_back(self, payload) -> None:
        """``payload``, a complete payload :meth:`add_segment` returned, is decoded and not
        referenced any more: its memory may take the next spanning payload. Reusing it spares
        the allocator a fresh block of the payload's size per buffer, whose pages the kernel
        must fault in (≈100 µs per MiB, more than copying the bytes). One buffer of at most
        :data:`SPARE_REASSEMBLY_BUFFER_MAX_BYTES` is kept. Any thread; ``bytes`` payloads
        (single segments) are ignored."""
        if type(payload) is bytearray and len(payload) <= SPARE_REASSEMBLY_BUFFER_MAX_BYTES:
            self._spare = payload

    def has_partial_payload(self) -> bool:
        """Whether segments of an incomplete payload are held."""
        return self._partial is not None

    def clear(self) -> None:
        """Drop a partially reassembled payload (on release or failure)."""
        if self._partial_view is not None:
            self._partial_view.release()
        self._partial = self._partial_view = self._spare = None
        self._partial_size = 0

    def decode_buffer(self, payload, compressed: bool) -> tuple[list, Optional[list]]:
        """The ``(values, timestamps)`` of a reassembled buffer payload.

        :raises ValueSerializationError, CompressionError: if the payload is corrupt.
        """
        if compressed:
            payload = self._decompressor.decompress(payload)
        return unpack_records(payload)

    def decode_event(self, payload) -> Any:
        """The event in an event payload.

        :raises ValueSerializationError: if the payload is corrupt.
        """
        return EventSerializer.from_bytes(payload)
