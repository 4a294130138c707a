"""The queues of the async wait operator: what is in flight and what may be emitted when
(Flink's ``StreamElementQueue``, ``OrderedStreamElementQueue``,
``UnorderedStreamElementQueue``).

A queue holds one :class:`RecordEntry` per input record whose call has not been emitted yet
and one :class:`WatermarkEntry` per watermark not yet emitted; ``size`` counts both, as Flink's
queues do, and the operator bounds it by its capacity.

* :class:`OrderedQueue` emits in input order: the head, while it is complete.
* :class:`UnorderedQueue` emits records as they complete, but never across a watermark:
  records and watermarks form *segments* (the records between two watermarks, then the
  watermark that closes them). Only the first segment emits: its completed records at once,
  and its watermark once all of its records are out. So no record overtakes a watermark in
  either direction (Flink's watermark-separated segments).

:meth:`values` lists what is in a queue, in input order, for a checkpoint (Flink's
``StreamElementQueue.values``): the operator stores it and replays it on restore.

Threading: task thread only (the operator's mails and input processing).
"""

from __future__ import annotations

from collections import deque
from typing import Any, Deque, Dict, List, Optional

__all__ = ["RecordEntry", "WatermarkEntry", "OrderedQueue", "UnorderedQueue", "QueueElement"]

#: An element of a queue as a checkpoint stores it: ``("record", value, timestamp or None)`` or
#: ``("watermark", timestamp ms)``.
QueueElement = tuple


def _element(entry: Any) -> QueueElement:
    if type(entry) is WatermarkEntry:
        return ("watermark", entry.watermark.timestamp)
    return ("record", entry.value, entry.timestamp)


class RecordEntry:
    """One input record in flight: its value and timestamp, then its output records."""

    __slots__ = ("value", "timestamp", "done", "outputs", "segment")

    def __init__(self, value: Any, timestamp: Optional[int]):
        self.value = value
        self.timestamp = timestamp
        self.done = False
        self.outputs: List[Any] = []
        self.segment: Optional["_Segment"] = None


class WatermarkEntry:
    """A watermark waiting for the records ahead of it."""

    __slots__ = ("watermark",)
    done = True

    def __init__(self, watermark: Any):
        self.watermark = watermark


class _Emitter:
    """Gathers consecutive output records into batches (one ``collect_batch`` per run of
    records that all have, or all lack, timestamps)."""

    __slots__ = ("output", "values", "timestamps", "timed")

    def __init__(self, output: Any):
        self.output = output
        self.values: List[Any] = []
        self.timestamps: List[int] = []
        self.timed: Optional[bool] = None

    def record(self, entry: RecordEntry) -> None:
        if not entry.outputs:
            return
        timed = entry.timestamp is not None
        if timed is not self.timed and self.values:
            self.flush()
        self.timed = timed
        self.values.extend(entry.outputs)
        if timed:
            self.timestamps.extend([entry.timestamp] * len(entry.outputs))

    def watermark(self, entry: WatermarkEntry) -> None:
        self.flush()
        self.output.emit_watermark(entry.watermark)

    def flush(self) -> None:
        if self.values:
            values, self.values = self.values, []
            timestamps, self.timestamps = (self.timestamps if self.timed else None), []
            self.output.collect_batch(values, timestamps)


class OrderedQueue:
    """Emits results in the order of the input (Flink's ``OrderedStreamElementQueue``)."""

    def __init__(self) -> None:
        self._entries: Deque[Any] = deque()

    def size(self) -> int:
        """Entries (records and watermarks) not emitted yet."""
        return len(self._entries)

    def is_empty(self) -> bool:
        return not self._entries

    def add_record(self, value: Any, timestamp: Optional[int]) -> RecordEntry:
        entry = RecordEntry(value, timestamp)
        self._entries.append(entry)
        return entry

    def add_watermark(self, watermark: Any) -> None:
        self._entries.append(WatermarkEntry(watermark))

    def complete(self, entry: RecordEntry, outputs: List[Any]) -> None:
        """Mark ``entry`` done with its output records."""
        entry.outputs = outputs
        entry.done = True

    def values(self) -> List[QueueElement]:
        """The input records and watermarks not emitted yet, in input order (done or not)."""
        return [_element(e) for e in self._entries]

    def emit(self, output: Any) -> int:
        """Emit the complete head entries to ``output``; returns how many entries left."""
        entries = self._entries
        emitter = _Emitter(output)
        n = 0
        while entries and entries[0].done:
            entry = entries.popleft()
            n += 1
            if type(entry) is WatermarkEntry:
                emitter.watermark(entry)
            else:
                emitter.record(entry)
        emitter.flush()
        return n


class _Segment:
    """Records between two watermarks, and the watermark that closes them (if it came)."""

    __slots__ = ("in_flight", "ready", "watermark")

    def __init__(self) -> None:
        # insertion-ordered set of the entries not complete (a dict: O(1) removal)
        self.in_flight: Dict[RecordEntry, None] = {}
        self.ready: List[RecordEntry] = []
        self.watermark: Optional[WatermarkEntry] = None


class UnorderedQueue:
    """Emits results as they complete, within watermark-separated segments (Flink's
    ``UnorderedStreamElementQueue``)."""

    def __init__(self) -> None:
        self._segments: Deque[_Segment] = deque()
        self._size = 0

    def size(self) -> int:
        """Entries (records and watermarks) not emitted yet."""
        return self._size

    def is_empty(self) -> bool:
        return self._size == 0

    def _open_segment(self) -> _Segment:
        segments = self._segments
        if not segments or segments[-1].watermark is not None:
            segments.append(_Segment())
        return segments[-1]

    def add_record(self, value: Any, timestamp: Optional[int]) -> RecordEntry:
        entry = RecordEntry(value, timestamp)
        segment = self._open_segment()
        segment.in_flight[entry] = None
        entry.segment = segment
        self._size += 1
        return entry

    def add_watermark(self, watermark: Any) -> None:
        self._open_segment().watermark = WatermarkEntry(watermark)
        self._size += 1

    def complete(self, entry: RecordEntry, outputs: List[Any]) -> None:
        """Mark ``entry`` done with its output records; it may be emitted at the next
        :meth:`emit` if its segment is the first."""
        entry.outputs = outputs
        entry.done = True
        segment = entry.segment
        del segment.in_flight[entry]
        segment.ready.append(entry)

    def emit(self, output: Any) -> int:
        """Emit what the first segments allow; returns how many entries left."""
        segments = self._segments
        emitter = _Emitter(output)
        n = 0
        while segments:
            segment = segments[0]
            if segment.ready:
                ready, segment.ready = segment.ready, []
                for entry in ready:
                    emitter.record(entry)
                n += len(ready)
            if segment.in_flight or segment.watermark is None:
                break  # records still in flight, or the segment is still open for records
            emitter.watermark(segment.watermark)
            n += 1
            segments.popleft()
        emitter.flush()
        self._size -= n
        return n

    def values(self) -> List[QueueElement]:
        """The input records and watermarks not emitted yet: per segment its completed records
        (completion order), then those in flight (input order), then its watermark."""
        out: List[QueueElement] = []
        for segment in self._segments:
            out.extend(_element(e) for e in segment.ready)
            out.extend(_element(e) for e in segment.in_flight)
            if segment.watermark is not None:
                out.append(_element(segment.watermark))
        return out
