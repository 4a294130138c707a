"""Buffers and events -> segments -> reassembled and decoded, as a remote channel sees them."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rill.network import (
    END_OF_PARTITION_EVENT,
    CheckpointBarrier,
    EndOfDataEvent,
    StopMode,
)
from rill.network.api.serialization import (
    AdaptiveSpanningRecordDeserializer,
    BufferCompressor,
    BufferDecompressor,
    CompressionError,
    EventSerializer,
    PayloadTooLargeError,
    SpanningRecordSerializer,
    ValueSerializationError,
)
from rill.common.streamrecord import MAX_WATERMARK, Watermark, WatermarkStatus


def transmit(serializer: SpanningRecordSerializer, deserializer: AdaptiveSpanningRecordDeserializer, entries):
    """What a reader and a channel do: each buffer -> payload -> segments (frames) ->
    reassembly -> decode; each event -> one frame. Returns the decoded entries and the
    number of frames."""
    out, frames = [], 0
    for entry in entries:
        if entry[0] == "event":
            payload = serializer.serialize_event(entry[1])
            frames += 1
            out.append(("event", deserializer.decode_event(payload)))
            continue
        _, values, timestamps = entry
        payload, compressed = serializer.serialize_buffer(values, timestamps)
        segments = serializer.split(payload)
        assert all(len(s) <= serializer.segment_size_bytes for s in segments)
        assert sum(map(len, segments)) == len(payload)
        complete = None
        for index, segment in enumerate(segments):
            assert complete is None
            complete = deserializer.add_segment(segment, index == len(segments) - 1)
            frames += 1
        assert complete == bytes(payload) and not deserializer.has_partial_payload()
        out.append(("buffer",) + deserializer.decode_buffer(complete, compressed))
    return out, frames


records = st.one_of(
    st.integers(), st.text(max_size=50), st.tuples(st.text(max_size=10), st.integers()),
    st.builds(lambda n, b: bytes([b]) * n, st.integers(33_000, 70_000), st.integers(0, 255)),  # > a segment
    st.text(max_size=5).map(lambda t: t * 10_000),
    st.lists(st.floats(allow_nan=False), max_size=10),
)
events = st.sampled_from([
    END_OF_PARTITION_EVENT, EndOfDataEvent(), EndOfDataEvent(StopMode.NO_DRAIN), CheckpointBarrier(7, 123),
    CheckpointBarrier(8, 124, {"type": "SAVEPOINT", "path": "/tmp/x"}), Watermark(-5), MAX_WATERMARK,
    WatermarkStatus.IDLE, WatermarkStatus.ACTIVE,  # type: ignore[attr-defined]
])


@st.composite
def streams(draw):
    entries = []
    for _ in range(draw(st.integers(0, 12))):
        if draw(st.booleans()):
            values = draw(st.lists(records, min_size=1, max_size=6))
            timestamps = draw(st.none() | st.lists(st.integers(0, 2**62), min_size=len(values), max_size=len(values)))
            entries.append(("buffer", values, timestamps))
        else:
            entries.append(("event", draw(events)))
    return entries


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(streams(), st.sampled_from([512, 4096, 32 * 1024]), st.booleans())
def test_any_interleaving_of_buffers_and_events_survives_segmentation(entries, segment_size, compression):
    serializer = SpanningRecordSerializer(segment_size, compression, channel="test channel")
    deserializer = AdaptiveSpanningRecordDeserializer(channel="test channel")
    decoded, frames = transmit(serializer, deserializer, entries)
    assert decoded == entries
    assert frames >= len(entries)


def test_a_record_larger_than_a_segment_spans_several():
    serializer = SpanningRecordSerializer()
    payload, compressed = serializer.serialize_buffer([b"\x01" * 100_000], None)
    assert not compressed and len(serializer.split(payload)) == 4  # 100 KB in 32 KiB segments
    decoded, frames = transmit(serializer, AdaptiveSpanningRecordDeserializer(),
                               [("buffer", [b"\x01" * 100_000], [1])])
    assert frames == 4 and decoded == [("buffer", [b"\x01" * 100_000], [1])]


def test_compression_applies_only_when_it_pays():
    serializer = SpanningRecordSerializer(compression=True)
    _, compressed = serializer.serialize_buffer(["abc" * 10_000], None)
    assert compressed
    _, compressed = serializer.serialize_buffer([bytes(range(256))[:7]], None)
    assert not compressed


def test_the_maximum_payload_size_is_enforced_on_both_sides_naming_the_channel():
    serializer = SpanningRecordSerializer(max_payload_size_bytes=1000, channel="subpartition 3 of p@a")
    with pytest.raises(PayloadTooLargeError, match=r"serialized buffer of 2 record\(s\) of \d+ bytes exceeds the "
                                                   r"maximum payload size of 1000 bytes on subpartition 3 of p@a"):
        serializer.serialize_buffer(["x" * 600, "y" * 600], None)
    with pytest.raises(PayloadTooLargeError, match="Event CheckpointBarrier"):
        serializer.serialize_event(CheckpointBarrier(1, 2, "z" * 2000))
    deserializer = AdaptiveSpanningRecordDeserializer(1000, channel="remote input channel 0")
    assert deserializer.add_segment(b"a" * 600, last=False) is None
    with pytest.raises(PayloadTooLargeError, match="received payload of 1200 bytes .* on remote input channel 0"):
        deserializer.add_segment(b"b" * 600, last=False)
    assert not deserializer.has_partial_payload()  # dropped, ready for the next payload


def test_a_decompression_bomb_or_corrupt_block_is_refused():
    compressed = BufferCompressor().compress(b"a" * 100_000)
    assert BufferDecompressor(100_000).decompress(compressed) == b"a" * 100_000
    with pytest.raises(CompressionError, match="announces 100000 bytes, more than the maximum payload size of 99999"):
        BufferDecompressor(99_999).decompress(compressed)
    with pytest.raises(CompressionError, match="Corrupt compressed payload"):
        BufferDecompressor(10**6).decompress(compressed[:4] + b"\xff" * 20)
    with pytest.raises(CompressionError, match="truncated"):
        BufferDecompressor(10).decompress(b"\x01")


def test_events_decode_to_equal_values_and_shared_instances():
    for event in [END_OF_PARTITION_EVENT, WatermarkStatus.IDLE, WatermarkStatus.ACTIVE]:  # type: ignore[attr-defined]
        assert EventSerializer.from_bytes(EventSerializer.to_bytes(event)) is event
    custom = ("user event", 1)
    assert EventSerializer.from_bytes(EventSerializer.to_bytes(custom)) == custom
    for corrupt in (b"", b"\x07", b"\x02\x02\xc1"):
        with pytest.raises(ValueSerializationError, match="Corrupt"):
            EventSerializer.from_bytes(corrupt)


def test_sizes_are_validated():
    with pytest.raises(ValueError, match="segment_size_bytes must be an int >= 64"):
        SpanningRecordSerializer(segment_size_bytes=10)
    with pytest.raises(ValueError, match="max_payload_size_bytes must be an int >= 1"):
        AdaptiveSpanningRecordDeserializer(0)
