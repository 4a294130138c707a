"""The server side of one remote channel (Flink's ``CreditBasedSequenceNumberingViewReader``).

A reader belongs to one server connection and reads one
:class:`~rill.network.partition.result_subpartition_view.ResultSubpartitionView`. It turns the
view's buffers into BufferResponse frames -- serialized, split into segments of at most
``segment_size_bytes``, each taking one credit, up to ``max_buffers_per_frame`` consecutive
segments per frame as the credit allows -- and its events into one frame each, which need no
credit. With credit 0 it stops: the subpartition fills up, the producer's pool runs dry and
the producing task blocks in its RecordWriter, which is backpressure, for this channel alone.

The time a reader holds data but no credit is its back-pressured time.

Serialization: the reader hands its serializer to the view it reads, so the producer serializes
each buffer as it adds it (on its own thread, as Flink's RecordWriter does); the reader sends
the bytes, serializing only buffers queued before it asked for the view.

Threading model: everything runs on the network thread, except :meth:`CreditBasedViewReader.notify_data_available`,
which the producer calls (through the view) when the subpartition goes from empty to non-empty;
it only marks the reader and queues it on its connection. Without credit the reader leaves a
buffer at the head of the view in the subpartition (``next_is_buffer``), so that a priority
event added meanwhile overtakes it; a view that cannot peek gives its next buffer to a one-entry
stash, so order is kept and the producer's pool slot stays taken until the buffer is
serialized; the slot is freed (the buffer recycled) as soon as the buffer is serialized.

Priority events (the barrier of an unaligned checkpoint) are at the head of the subpartition's
queue; the reader sends one, flagged ``FLAG_PRIORITY`` and without credit, as soon as it has
finished the payload it is sending (and a stash): those left the subpartition before the event
was added, so they must reach the receiver before it (the receiver stores them as the
channel's in-flight data; the producer stored only what the event overtook in its queue).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from ..api.serialization.record_serializer import SpanningRecordSerializer
from ..buffer.buffer import Buffer
from ..credit import SenderCredit
from ..events import EndOfPartitionEvent
from ..partition.result_partition_id import ResultPartitionID
from ..partition.result_partition_manager import ResultPartitionManager
from ..partition.result_subpartition_view import ResultSubpartitionView
from . import messages

if TYPE_CHECKING:
    from .server import ServerConnection

__all__ = ["CreditBasedViewReader", "SubpartitionReaderStatistics"]

_pack_header = messages.BUFFER_RESPONSE_HEADER.pack
_HEADER_FIXED = messages.BUFFER_RESPONSE_HEADER.size - 4
_BUFFER_RESPONSE = messages.BUFFER_RESPONSE
_FLAG_LAST_SEGMENT = messages.FLAG_LAST_SEGMENT
_U32_MAX = 0xFFFFFFFF


@dataclass(frozen=True, slots=True)
class SubpartitionReaderStatistics:
    """A snapshot of one reader (one subpartition served to one remote channel).

    :ivar partition_id: the partition.
    :ivar subpartition_index: the subpartition.
    :ivar receiver_id: the consuming channel's id (hex).
    :ivar buffers_sent: buffers sent (each one or more segments).
    :ivar segments_sent: segments sent (one credit each; a data frame carries one or more).
    :ivar records_sent: records in the buffers sent.
    :ivar bytes_sent: payload bytes sent (data and events).
    :ivar events_sent: events sent.
    :ivar credit_available: credit not used yet (0 with flow control off).
    :ivar credit_received: credit received since the request (initial credit included).
    :ivar backlog: segments still to send, as last announced.
    :ivar back_pressured_time_ns: total time the reader held data but had no credit,
        including the current stall.
    :ivar back_pressured: whether it is stalled without credit now.
    :ivar released: whether the reader is done (EndOfPartition sent, cancelled, failed).
    """

    partition_id: ResultPartitionID
    subpartition_index: int
    receiver_id: str
    buffers_sent: int
    segments_sent: int
    records_sent: int
    bytes_sent: int
    events_sent: int
    credit_available: int
    credit_received: int
    backlog: int
    back_pressured_time_ns: int
    back_pressured: bool
    released: bool


class CreditBasedViewReader:
    """Sends one subpartition to one remote channel, as its credit allows.

    :param connection: the server connection it writes to.
    :param receiver_id: the remote channel's id.
    :param partition_id: the partition read.
    :param subpartition_index: the subpartition read.
    :param initial_credit: the credit announced in the PartitionRequest.
    :param flow_control: credit-based (``True``) or send regardless of credit.
    :param serializer: the channel's :class:`SpanningRecordSerializer`.
    :param max_buffers_per_frame: the most segments per data frame (with flow control; 1 without,
        where the receiver may have room for one buffer only).
    """

    def __init__(
        self,
        connection: "ServerConnection",
        receiver_id: bytes,
        partition_id: ResultPartitionID,
        subpartition_index: int,
        initial_credit: int,
        flow_control: bool,
        serializer: SpanningRecordSerializer,
        max_buffers_per_frame: int = 1,
    ) -> None:
        self._connection = connection
        self.receiver_id = receiver_id
        self.partition_id = partition_id
        self.subpartition_index = subpartition_index
        self.credit = SenderCredit(flow_control)
        self.credit.add(initial_credit)
        self._serializer = serializer
        self._view: Optional[ResultSubpartitionView] = None
        #: The view's live backlog (``get_buffers_in_backlog``), else the one its last poll said.
        self._view_backlog_getter = self._last_view_backlog
        self._stash: Optional[Buffer] = None
        self._segment_size = serializer.segment_size_bytes
        self._max_buffers = max_buffers_per_frame if flow_control else 1
        #: The serialized buffer being sent (``None`` between buffers), its size, and how much
        #: of it is sent: its segments are cut from it frame by frame, never listed.
        self._payload = None
        self._payload_size = 0
        self._offset = 0
        self._segment_flags = 0
        self._sequence = 0
        self._view_backlog = 0
        #: Set by the producer's notification, refreshed from each poll: the view may have data.
        self.view_has_more = False
        #: Guarded by the connection's ready-queue lock: queued for the next pump.
        self.queued = False
        self.released = False
        self._blocked_since: Optional[int] = None
        self._back_pressured_ns = 0
        self.buffers_sent = 0
        self.segments_sent = 0
        self.records_sent = 0
        self.bytes_sent = 0
        self.events_sent = 0

    # ------------------------------------------------------------------ set-up, notifications

    def request_subpartition_view(self, partition_manager: ResultPartitionManager) -> None:
        """Create the view (Flink's ``requestSubpartitionView``).

        :raises PartitionNotFoundError, PartitionReleasedError, ValueError, RuntimeError: as
            :meth:`ResultPartitionManager.create_subpartition_view`.
        """
        view = partition_manager.create_subpartition_view(
            self.partition_id, self.subpartition_index, self.notify_data_available
        )
        self._view = view
        self._view_backlog_getter = getattr(view, "get_buffers_in_backlog", self._last_view_backlog)
        view.set_remote_serializer(self._serializer)  # the producer serializes from now on

    def notify_data_available(self) -> None:
        """The subpartition has data (producer thread): queue this reader on its connection."""
        self.view_has_more = True
        self._connection.notify_reader_non_empty(self)

    def add_credit(self, credit: int) -> None:
        """An AddCredit arrived (network thread)."""
        self.credit.add(credit)
        if self._blocked_since is not None and credit > 0:
            self._back_pressured_ns += time.perf_counter_ns() - self._blocked_since
            self._blocked_since = None

    def is_available(self) -> bool:
        """Whether :meth:`next_frame` may produce a frame now."""
        if self.released:
            return False
        if self._payload is not None or self._stash is not None:
            return self.credit.can_send()
        if not self.view_has_more:
            return False
        view = self._view
        if self.credit.can_send() or view is None or not view.next_is_buffer():
            return True
        self._mark_blocked()  # data queued, no credit: back-pressured from now
        return False

    # ------------------------------------------------------------------ producing frames

    def next_frame(self) -> Optional[tuple]:
        """The next frame to write, as chunks, or ``None`` if there is nothing to send now (no
        data, or no credit for the data). Never blocks.

        May release the reader (EndOfPartition sent, the producer released its partition, a
        buffer could not be serialized); the connection then forgets it.
        """
        if self.released:
            return None
        if self._payload is not None:
            credit = self.credit
            if credit.available < 1 and credit.flow_control:
                self._mark_blocked()
                return None
            return self._next_segment()
        if self._stash is None:
            view = self._view
            if not self.credit.can_send() and view.next_is_buffer():  # type: ignore[union-attr]
                self._mark_blocked()  # the buffer stays queued: a priority event may overtake it
                return None
            result = view.get_next_buffer()  # type: ignore[union-attr]
            if result is None:
                self.view_has_more = False
                if view.is_released():  # type: ignore[union-attr]
                    return self._producer_released()
                return None
            item, self.view_has_more, self._view_backlog, priority = result
            if not isinstance(item, Buffer):
                return self._event_frame(item, priority)
            self._stash = item
        if not self.credit.can_send():
            self._mark_blocked()
            return None
        buffer = self._stash
        self._stash = None
        if buffer.serialized is None:  # queued before this reader asked for the view
            self._serializer.serialize_into(buffer)
        serialized = buffer.serialized  # usually by the producer's thread
        if isinstance(serialized, BaseException):
            records = len(buffer.values)
            buffer.recycle_buffer()
            return self._fail(messages.ERROR_SERIALIZATION, f"{type(serialized).__name__} serializing a "
                              f"buffer of {records} records: {serialized}")
        payload, compressed, records = serialized
        self.records_sent += records
        buffer.recycle_buffer()  # the producer's pool slot is free again
        self.buffers_sent += 1
        self._offset = 0  # before the payload: statistics() may read these from another thread
        self._payload_size = len(payload)
        self._payload = payload
        self._segment_flags = messages.FLAG_COMPRESSED if compressed else 0
        return self._next_segment()

    def _remaining_segments(self) -> int:
        if self._payload is None:
            return 0
        return max(0, -(-(self._payload_size - self._offset) // self._segment_size))

    def _next_segment(self) -> tuple:
        # The data path (one call per frame): the next segments of the payload being sent, as
        # many as the credit and max_buffers_per_frame allow, cut from the payload as one
        # zero-copy slice (they are consecutive), one credit each; _frame and
        # encode_buffer_response_header inlined, the same header.
        payload = self._payload
        offset = self._offset
        total = self._payload_size
        count = self._max_buffers
        if count > 1:
            count = min(count, self.credit.available, self._remaining_segments())
        end = offset + count * self._segment_size
        flags = self._segment_flags
        if end >= total:
            end = total
            flags |= _FLAG_LAST_SEGMENT
            self._payload = None
            chunk = payload if offset == 0 else memoryview(payload)[offset:]  # whole: no view
        else:
            chunk = memoryview(payload)[offset:end]
            self._offset = end
        self.credit.consume(count)
        size = end - offset
        self.segments_sent += count
        self.bytes_sent += size
        self._view.add_bytes_sent(size)  # type: ignore[union-attr]  # the producer's numBytesOut
        self._connection.buffers_sent += count
        backlog = self._remaining_segments() + (self._stash is not None) + self._view_backlog_getter()
        sequence = self._sequence
        self._sequence = sequence + count
        header = _pack_header(_HEADER_FIXED + size, _BUFFER_RESPONSE, self.receiver_id,
                              sequence & _U32_MAX, backlog if backlog < _U32_MAX else _U32_MAX, flags, count)
        return header, chunk

    def _event_frame(self, event, priority: bool = False) -> tuple:
        try:
            payload = self._serializer.serialize_event(event)
        except Exception as error:  # noqa: BLE001
            return self._fail(messages.ERROR_SERIALIZATION,
                              f"{type(error).__name__} serializing event {event!r}: {error}")
        self.events_sent += 1
        self.bytes_sent += len(payload)
        self._view.add_bytes_sent(len(payload))
        flags = messages.FLAG_EVENT | messages.FLAG_LAST_SEGMENT
        frame = self._frame(flags | messages.FLAG_PRIORITY if priority else flags, payload)
        if isinstance(event, EndOfPartitionEvent):
            self.release()  # as Flink: the view is released once EndOfPartition is written
        return frame

    def _frame(self, flags: int, payload) -> tuple:
        backlog = self._remaining_segments() + (self._stash is not None) + self._view_backlog_getter()
        header = messages.encode_buffer_response_header(
            self.receiver_id, self._sequence, backlog, flags, len(payload)
        )
        self._sequence += 1
        return header, payload

    def _last_view_backlog(self) -> int:
        return self._view_backlog

    def _mark_blocked(self) -> None:
        if self._blocked_since is None:
            self._blocked_since = time.perf_counter_ns()

    def _producer_released(self) -> tuple:
        cause = self._view.get_failure_cause()  # type: ignore[union-attr]
        reason = "" if cause is None else f": {type(cause).__name__}: {cause}"
        return self._fail(messages.ERROR_PARTITION_RELEASED,
                          f"the producer released subpartition {self.subpartition_index} of "
                          f"partition {self.partition_id}{reason}")

    def _fail(self, code: int, message: str) -> tuple:
        self.release()
        return (messages.encode_error_response(self.receiver_id, code, message),)

    # ------------------------------------------------------------------ life cycle

    def release(self) -> None:
        """Release the view and drop what is held (consumer gone, cancelled, done). Idempotent."""
        if self.released:
            return
        self.released = True
        if self._blocked_since is not None:
            self._back_pressured_ns += time.perf_counter_ns() - self._blocked_since
            self._blocked_since = None
        stash, self._stash = self._stash, None
        if stash is not None:
            stash.recycle_buffer()
        self._payload = None
        view = self._view
        if view is not None:
            view.release()

    def statistics(self) -> SubpartitionReaderStatistics:
        """A snapshot (read without stopping the network thread)."""
        blocked_since = self._blocked_since
        ongoing = 0 if blocked_since is None else time.perf_counter_ns() - blocked_since
        return SubpartitionReaderStatistics(
            partition_id=self.partition_id,
            subpartition_index=self.subpartition_index,
            receiver_id=self.receiver_id.hex(),
            buffers_sent=self.buffers_sent,
            segments_sent=self.segments_sent,
            records_sent=self.records_sent,
            bytes_sent=self.bytes_sent,
            events_sent=self.events_sent,
            credit_available=self.credit.available,
            credit_received=self.credit.total_received,
            backlog=self._remaining_segments() + (self._stash is not None) + self._view_backlog,
            back_pressured_time_ns=self._back_pressured_ns + ongoing,
            back_pressured=blocked_since is not None,
            released=self.released,
        )

    def __repr__(self) -> str:
        return (
            f"CreditBasedViewReader(partition={self.partition_id}, "
            f"subpartition={self.subpartition_index}, credit={self.credit.available})"
        )
