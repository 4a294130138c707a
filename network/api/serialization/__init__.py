"""Record and event serialization for remote channels (Flink's
``org.apache.flink.runtime.io.network.api.serialization`` plus ``buffer.BufferCompressor``).

* :mod:`.value_codec` -- Python values <-> msgpack, one ``packb`` per buffer, exact round trips;
* :mod:`.record_serializer` -- buffers <-> payloads <-> segments (spanning, reassembly, limits);
* :mod:`.event_serializer` -- in-band events <-> bytes;
* :mod:`.compression` -- lz4 block compression per buffer.
"""

from .compression import BufferCompressor, BufferDecompressor, CompressionError
from .event_serializer import EventSerializer
from .record_serializer import (
    DEFAULT_MAX_PAYLOAD_SIZE_BYTES,
    DEFAULT_SEGMENT_SIZE_BYTES,
    AdaptiveSpanningRecordDeserializer,
    PayloadTooLargeError,
    SpanningRecordSerializer,
)
from .value_codec import ValueSerializationError, pack_records, pack_value, unpack_records, unpack_value

__all__ = [
    "SpanningRecordSerializer",
    "AdaptiveSpanningRecordDeserializer",
    "EventSerializer",
    "BufferCompressor",
    "BufferDecompressor",
    "CompressionError",
    "PayloadTooLargeError",
    "ValueSerializationError",
    "pack_records",
    "unpack_records",
    "pack_value",
    "unpack_value",
    "DEFAULT_SEGMENT_SIZE_BYTES",
    "DEFAULT_MAX_PAYLOAD_SIZE_BYTES",
]
