"""In-band events <-> bytes (Flink's ``EventSerializer``).

Events travel in the same ordered stream as buffers, one frame each, and never need credit (as
in Flink, where they are copied into unpooled buffers on the receiving side). The encoding is a
tag byte followed by the event's fields packed with :mod:`~rill.network.api.serialization.value_codec`:

==== =========================================================================
tag  event
==== =========================================================================
0    :class:`~rill.network.events.EndOfPartitionEvent` (no body)
1    :class:`~rill.network.events.EndOfDataEvent` (stop mode)
2    :class:`~rill.network.events.CheckpointBarrier` (id, timestamp, options)
3    :class:`~rill.common.streamrecord.Watermark` (timestamp)
4    :class:`~rill.common.streamrecord.WatermarkStatus` (status)
5    :class:`~rill.network.events.CancelCheckpointMarker` (id)
255  any other event object, through the value codec (pickled if needed)
==== =========================================================================

Thread-safety: stateless; any thread.
"""

from __future__ import annotations

from typing import Any

from rill.common.streamrecord import Watermark, WatermarkStatus

from ...events import (
    END_OF_PARTITION_EVENT,
    CancelCheckpointMarker,
    CheckpointBarrier,
    EndOfDataEvent,
    EndOfPartitionEvent,
    StopMode,
)
from .value_codec import ValueSerializationError, pack_value, unpack_value

__all__ = ["EventSerializer"]

_TAG_END_OF_PARTITION = 0
_TAG_END_OF_DATA = 1
_TAG_BARRIER = 2
_TAG_WATERMARK = 3
_TAG_WATERMARK_STATUS = 4
_TAG_CANCEL_CHECKPOINT = 5
_TAG_OTHER = 255

_EOP_BYTES = bytes((_TAG_END_OF_PARTITION,))


class EventSerializer:
    """Serializes and deserializes in-band events (static methods, as Flink's)."""

    @staticmethod
    def to_bytes(event: Any) -> bytes:
        """The bytes of ``event``.

        :raises ValueSerializationError: if the event (or a field) cannot be serialized.
        """
        kind = type(event)
        if kind is EndOfPartitionEvent:
            return _EOP_BYTES
        if kind is Watermark:
            return bytes((_TAG_WATERMARK,)) + pack_value(event.timestamp)
        if kind is CheckpointBarrier:
            body = pack_value((event.checkpoint_id, event.timestamp, event.options))
            return bytes((_TAG_BARRIER,)) + body
        if kind is EndOfDataEvent:
            return bytes((_TAG_END_OF_DATA,)) + pack_value(event.stop_mode.value)
        if kind is WatermarkStatus:
            return bytes((_TAG_WATERMARK_STATUS,)) + pack_value(event.status)
        if kind is CancelCheckpointMarker:
            return bytes((_TAG_CANCEL_CHECKPOINT,)) + pack_value(event.checkpoint_id)
        return bytes((_TAG_OTHER,)) + pack_value(event)

    @staticmethod
    def from_bytes(data) -> Any:
        """The event encoded in ``data`` (shared instances for EndOfPartition and the two
        watermark statuses).

        :raises ValueSerializationError: if ``data`` is corrupt.
        """
        if not data:
            raise ValueSerializationError("Corrupt event: empty payload")
        tag = data[0]
        if tag == _TAG_END_OF_PARTITION:
            return END_OF_PARTITION_EVENT
        body = memoryview(data)[1:]
        try:
            if tag == _TAG_WATERMARK:
                return Watermark(unpack_value(body))
            if tag == _TAG_BARRIER:
                checkpoint_id, timestamp, options = unpack_value(body)
                return CheckpointBarrier(checkpoint_id, timestamp, options)
            if tag == _TAG_END_OF_DATA:
                return EndOfDataEvent(StopMode(unpack_value(body)))
            if tag == _TAG_WATERMARK_STATUS:
                status = unpack_value(body)
                for shared in (WatermarkStatus.IDLE, WatermarkStatus.ACTIVE):  # type: ignore[attr-defined]
                    if shared.status == status:
                        return shared
                return WatermarkStatus(status)
            if tag == _TAG_CANCEL_CHECKPOINT:
                return CancelCheckpointMarker(unpack_value(body))
            if tag == _TAG_OTHER:
                return unpack_value(body)
        except ValueSerializationError:
            raise
        except Exception as error:  # noqa: BLE001 - malformed fields
            raise ValueSerializationError(f"Corrupt event with tag {tag}: {error}") from error
        raise ValueSerializationError(f"Corrupt event: unknown tag {tag}")
