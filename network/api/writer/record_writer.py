"""Writes a task's output records into a ResultPartition (Flink's ``RecordWriter``,
``ChannelSelectorRecordWriter`` and ``BroadcastRecordWriter`` in one class).

Records arrive in batches (``emit_batch``). The partitioner splits each batch per channel; each
channel accumulates a *pending* list, and when it reaches ``records_per_buffer`` records the
writer takes a buffer from the partition's pool (blocking under backpressure), fills it with
exactly ``records_per_buffer`` records and emits it to that channel's subpartition. Pending
records leave early on :meth:`RecordWriter.flush_all` (the buffer-timeout mail, end of input),
before every event (so events keep their position), and after every emit call when
``flush_always`` is set (buffer timeout 0).

Differences from Flink, and why:

* Records are not serialized in-process (see :mod:`rill.network.buffer.buffer`), and a pending
  list is not yet a pool buffer: the pool slot is taken when the buffer is sent, not when the
  first record is written. A writer therefore never holds a pool buffer while waiting, and a
  pool of 1 buffer cannot deadlock a writer with many channels.
* ``flush_always`` flushes after each *emit call*: every record of a batch becomes available at
  the same moment anyway, so one buffer per record would only add cost, not reduce latency.
* A channel's buffer carries timestamps for all of its records or for none: when a batch with
  timestamps follows pending records without (or the reverse), the pending records are sent
  first, as a smaller buffer.
* Behind a HASH exchange whose partitioner has a ``key_token`` (``key_by``), each buffer's
  values are a :class:`~rill.network.partitioner.keyed_batch.KeyedBatch` carrying the keys and
  key groups the partitioner computed, so the keyed operator does not compute them again (Flink
  computes the key and its key group twice).
"""

from __future__ import annotations

from typing import Any, Optional

from ...buffer.buffer import Buffer
from ...partition.result_partition import ResultPartition
from ...partitioner.keyed_batch import KeyedBatch
from ...partitioner.stream_partitioner import StreamPartitioner

__all__ = ["RecordWriter", "DEFAULT_RECORDS_PER_BUFFER"]

#: Records per full buffer (the in-process analogue of Flink's 32 KiB segment).
DEFAULT_RECORDS_PER_BUFFER = 1024


class RecordWriter:
    """Routes records to the subpartitions of one :class:`ResultPartition`.

    :param partition: the output partition; its subpartition count is the number of channels.
    :param partitioner: a :class:`StreamPartitioner` owned by this writer (pass a ``copy()`` if
        it is shared); the writer calls its ``setup``.
    :param records_per_buffer: records per full buffer (>= 1).
    :param flush_always: send pending records at the end of every emit call (Flink's buffer
        timeout 0).
    :param carry_keys: hand a HASH exchange's keys and key groups to the consumers in
        ``KeyedBatch`` es (default); ``False`` when every consumer is in another process (the
        cluster mode), where the batch is serialized as a plain list and the keys would only be
        bucketed for nothing.
    :raises ValueError: for ``records_per_buffer < 1`` or a partitioner that cannot serve the
        partition's channel count.

    Threading: used by the producing task's thread only. It blocks only in the pool's
    ``request_buffer_blocking`` (backpressure); a ``BufferPoolDestroyedError`` or
    ``PartitionReleasedError`` from there means the task is being cancelled.
    Per-record cost: the partitioner's split plus a C-level ``list.extend``; everything else
    (buffer requests, locks, counters) is paid per buffer or per batch.
    """

    def __init__(
        self,
        partition: ResultPartition,
        partitioner: StreamPartitioner,
        records_per_buffer: int = DEFAULT_RECORDS_PER_BUFFER,
        flush_always: bool = False,
        carry_keys: bool = True,
    ) -> None:
        if not isinstance(records_per_buffer, int) or records_per_buffer < 1:
            raise ValueError(f"records_per_buffer must be an int >= 1, got {records_per_buffer!r}")
        n = partition.get_number_of_subpartitions()
        partitioner.setup(n)
        self.partition = partition
        self.partitioner = partitioner
        self.records_per_buffer = records_per_buffer
        self.flush_always = flush_always
        self._n = n
        #: the key_by token when keys travel with the records (a partitioner with split_keyed)
        self._key_token = (getattr(partitioner, "key_token", None)
                           if carry_keys and hasattr(partitioner, "split_keyed") else None)
        self._pending_values: list[list] = [self._new_pending() for _ in range(n)]
        # Per channel: None while the pending records carry no timestamps, else their list.
        self._pending_timestamps: list[Optional[list]] = [None] * n
        self._closed = False
        #: Records emitted (counted per emit call; a broadcast record counts once).
        self.num_records_out = 0
        #: Buffers sent to the partition (all channels).
        self.num_buffers_out = 0

    # ------------------------------------------------------------------ records

    def emit_batch(self, values: list, timestamps: Optional[list] = None) -> None:
        """Route a batch of records.

        :param values: the records, in order; the writer copies what it keeps, so the caller
            may reuse the list afterwards (but not mutate the records).
        :param timestamps: ``None`` or one int timestamp (epoch ms) per value.
        :raises ValueError: if ``timestamps`` has a different length than ``values``.
        :raises KeySelectionError, ValueError: from the partitioner, before anything of the
            batch was accepted.
        :raises BufferPoolDestroyedError, PartitionReleasedError: if the task is cancelled while
            the writer waits for a buffer (records of the batch may be lost: the job is failing).
        :raises RuntimeError: after :meth:`close`.
        """
        if self._closed:
            raise RuntimeError(f"{self!r} is closed")
        if timestamps is not None and len(timestamps) != len(values):
            raise ValueError(
                f"emit_batch got {len(timestamps)} timestamps for {len(values)} values; "
                "there must be one timestamp per value"
            )
        if not values:
            return
        keyed = self._key_token is not None
        if keyed:
            parts = self.partitioner.split_keyed(values, timestamps)
        else:
            parts = self.partitioner.split(values, timestamps)
        self.num_records_out += len(values)
        limit = self.records_per_buffer
        pending_values = self._pending_values
        pending_timestamps = self._pending_timestamps
        for part in parts:
            channel, part_values, part_timestamps = part[0], part[1], part[2]
            pending = pending_values[channel]
            if pending and (pending_timestamps[channel] is None) != (part_timestamps is None):
                self._send_pending(channel)
                pending = pending_values[channel]
            pending.extend(part_values)
            if keyed:
                pending.keys.extend(part[3])
                pending.key_groups.extend(part[4])
            if part_timestamps is not None:
                pending_ts = pending_timestamps[channel]
                if pending_ts is None:
                    pending_timestamps[channel] = list(part_timestamps)
                else:
                    pending_ts.extend(part_timestamps)
            if len(pending) >= limit:
                self._send_full_buffers(channel)
        if self.flush_always:
            self.flush_all()

    def emit(self, value: Any, timestamp: Optional[int] = None) -> None:
        """Route one record (a batch of one; prefer :meth:`emit_batch`)."""
        self.emit_batch([value], None if timestamp is None else [timestamp])

    # ------------------------------------------------------------------ flushing, events

    def flush_all(self) -> None:
        """Send every channel's pending records now (Flink's ``flushAll``): called by the
        buffer-timeout mail, before events and at end of input. Sends nothing for channels with
        no pending records.

        :raises BufferPoolDestroyedError, PartitionReleasedError: as :meth:`emit_batch`.
        """
        pending_values = self._pending_values
        for channel in range(self._n):
            if pending_values[channel]:
                self._send_pending(channel)

    def flush(self, channel: int) -> None:
        """Send the pending records of one channel, if any."""
        if self._pending_values[channel]:
            self._send_pending(channel)

    def broadcast_event(self, event: Any) -> None:
        """Flush every channel, then add ``event`` to every subpartition, so it follows every
        record emitted before it (Flink's ``broadcastEvent``).

        :raises TypeError: if ``event`` is ``None`` or a Buffer.
        :raises RuntimeError: after :meth:`close`, or if the partition is finished.
        """
        if self._closed:
            raise RuntimeError(f"{self!r} is closed")
        self.flush_all()
        self.partition.broadcast_event(event)

    def broadcast_priority_event(self, event: Any) -> list:
        """Put ``event`` ahead of every channel's in-flight data without flushing (the barrier
        of an unaligned checkpoint, FLIP-76; Flink's ``broadcastEvent(event, true)``).

        :returns: per channel, the data the event overtook, oldest first, as ``(values,
            timestamps, serialized)`` entries (see
            :meth:`~rill.network.partition.pipelined_subpartition.PipelinedSubpartition.add_priority_event`):
            the buffers queued in its subpartition, then the channel's pending records (copied:
            they stay pending and are sent after the event, as Flink's partly filled buffer).
        :raises TypeError: if ``event`` is ``None`` or a Buffer.
        :raises RuntimeError: after :meth:`close`, or if the partition is finished.
        """
        if self._closed:
            raise RuntimeError(f"{self!r} is closed")
        overtaken = self.partition.broadcast_priority_event(event)
        pending_values, pending_timestamps = self._pending_values, self._pending_timestamps
        for channel, entries in enumerate(overtaken):
            if pending_values[channel]:
                timestamps = pending_timestamps[channel]
                entries.append((list(pending_values[channel]), None if timestamps is None else list(timestamps),
                                None))
        return overtaken

    def broadcast_timeoutable_event(self, event: Any, on_polled) -> None:
        """:meth:`broadcast_event`, reporting ``on_polled(channel)`` as each consumer takes the
        event (:meth:`ResultPartition.broadcast_timeoutable_event`).

        :raises TypeError, RuntimeError: as :meth:`broadcast_event`.
        """
        if self._closed:
            raise RuntimeError(f"{self!r} is closed")
        self.flush_all()
        self.partition.broadcast_timeoutable_event(event, on_polled)

    def emit_watermark(self, watermark: Any) -> None:
        """Broadcast a :class:`~rill.common.streamrecord.Watermark` in order with the records
        (Flink's ``RecordWriterOutput.emitWatermark``)."""
        self.broadcast_event(watermark)

    def get_number_of_pending_records(self) -> int:
        """Records accepted but not yet sent in a buffer (all channels)."""
        return sum(map(len, self._pending_values))

    @property
    def back_pressured_time_ns(self) -> int:
        """Total ns this writer's partition pool kept requesters blocked (0 if unbounded)."""
        pool = self.partition.buffer_pool
        return 0 if pool is None else pool.back_pressured_time_ns

    def is_available(self) -> bool:
        """Whether the partition's pool can hand out a buffer without blocking (Flink's
        ``RecordWriter.isAvailable``); a batch may still need more than one buffer."""
        pool = self.partition.buffer_pool
        return pool is None or pool.is_available()

    def close(self) -> None:
        """Stop the writer and drop pending records (Flink's ``close`` does not flush either:
        call :meth:`flush_all` first at the end of input; after a failure the records are not
        wanted). Idempotent. Does not finish the partition."""
        self._closed = True
        self._pending_values = [self._new_pending() for _ in range(self._n)]
        self._pending_timestamps = [None] * self._n

    # ------------------------------------------------------------------ sending

    def _new_pending(self) -> list:
        token = self._key_token
        return [] if token is None else KeyedBatch(key_token=token, key_groups=[])

    @staticmethod
    def _slice(values: list, start: int, stop: int) -> list:
        return values.slice(start, stop) if values.__class__ is KeyedBatch else values[start:stop]

    def _send(self, channel: int, values: list, timestamps: Optional[list]) -> None:
        buffer: Buffer = self.partition.request_buffer_blocking()
        buffer.values = values
        buffer.timestamps = timestamps
        self.partition.emit_buffer(buffer, channel)
        self.num_buffers_out += 1

    def _send_pending(self, channel: int) -> None:
        values = self._pending_values[channel]
        timestamps = self._pending_timestamps[channel]
        self._pending_values[channel] = self._new_pending()
        self._pending_timestamps[channel] = None
        limit = self.records_per_buffer
        if len(values) <= limit:
            self._send(channel, values, timestamps)
        else:
            for start in range(0, len(values), limit):
                self._send(
                    channel,
                    self._slice(values, start, start + limit),
                    None if timestamps is None else timestamps[start:start + limit],
                )

    def _send_full_buffers(self, channel: int) -> None:
        """Send every complete ``records_per_buffer`` chunk of the channel's pending list; keep
        the remainder pending."""
        values = self._pending_values[channel]
        timestamps = self._pending_timestamps[channel]
        limit = self.records_per_buffer
        full = len(values) - len(values) % limit
        if full == len(values):
            self._pending_values[channel] = self._new_pending()
            self._pending_timestamps[channel] = None
            if full == limit:
                self._send(channel, values, timestamps)
                return
        else:
            self._pending_values[channel] = self._slice(values, full, len(values))
            self._pending_timestamps[channel] = None if timestamps is None else timestamps[full:]
        for start in range(0, full, limit):
            self._send(
                channel,
                self._slice(values, start, start + limit),
                None if timestamps is None else timestamps[start:start + limit],
            )

    def __repr__(self) -> str:
        return (
            f"RecordWriter({self.partition.partition_id}, {self.partitioner}, "
            f"records_per_buffer={self.records_per_buffer}, flush_always={self.flush_always})"
        )
