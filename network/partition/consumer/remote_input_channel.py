"""An input channel whose producer runs in another process (Flink's ``RemoteInputChannel``).

It implements the :class:`~rill.network.partition.consumer.input_channel.InputChannel`
interface, so a :class:`~rill.network.partition.consumer.single_input_gate.SingleInputGate`
works with it unchanged, and may mix it with local channels.

Data path: the network thread (:mod:`rill.network.netty`) receives a BufferResponse for this
channel's receiver id, checks its sequence number, takes a receiving buffer (credit) from the
channel's :class:`~rill.network.partition.consumer.buffer_manager.BufferManager`, reassembles
segments into a payload, queues it and notifies the gate (the connection does the credit side
of all data frames of one read first, flushes the AddCredit that freed, then hands the payloads
over: ``_on_data_segment``, then ``_on_data_segment_payload``). The consuming task's
:meth:`RemoteInputChannel.get_next_buffer` decodes the payload -- deserialization runs on the
task thread, as in Flink, so the network thread only moves bytes -- into a
:class:`~rill.network.buffer.buffer.Buffer` whose recycler gives the receiving buffer back (new
credit) when the task recycles it.

Failures -- the connection closed or failed, a corrupt payload, the producer released its
partition, the partition never appeared -- are raised by ``get_next_buffer`` (so from the
gate's ``poll_next``) as errors that name this channel, its partition and the producer's
address. Unlike Flink, which throws at the next poll, the buffers and events that arrived
intact before the failure are delivered first, in order, and the error comes in their place
after them: a task sees exactly what was received, then the failure.

Threading: :meth:`request_subpartition`, :meth:`get_next_buffer` and :meth:`release` run on the
consuming task's thread; methods starting with ``_on`` run on the network thread; a small lock
guards the queue of received payloads (never held while calling out).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from ...api.serialization.record_serializer import AdaptiveSpanningRecordDeserializer, PayloadTooLargeError
from ...buffer.buffer import Buffer
from ...credit import CreditInvariantError
from ...events import EndOfPartitionEvent
from ...netty import messages
from ...netty.exceptions import LocalTransportError, PartitionRequestTimeoutError, RemoteTransportError
from ..exceptions import PartitionReleasedError
from ..result_partition_id import ResultPartitionID
from .buffer_manager import BufferManager, FloatingBufferPool
from .input_channel import BufferAndAvailability, InputChannel

if TYPE_CHECKING:
    from ...netty.client import PartitionRequestClient
    from ...netty.connection import ConnectionStatistics
    from ...netty.connection_manager import NettyConnectionManager

__all__ = ["RemoteInputChannel", "RemoteInputChannelStatistics", "RemoteProducerError"]

_FLAG_LAST_SEGMENT = messages.FLAG_LAST_SEGMENT
#: What _on_data_segment returns for a frame that broke the protocol (see there).
_PROTOCOL_ERROR = object()


class RemoteProducerError(RuntimeError):
    """An error the producer's side reported (its message, as text: nothing is unpickled)."""


@dataclass(frozen=True, slots=True)
class RemoteInputChannelStatistics:
    """A snapshot of one remote channel.

    :ivar channel_index: index in its gate (-1 before attached).
    :ivar partition_id: the partition read.
    :ivar subpartition_index: the subpartition read.
    :ivar producer_address: the producer's server ``(host, port)``.
    :ivar buffers_received: buffers received (complete payloads).
    :ivar segments_received: segments received in data frames (one credit each).
    :ivar bytes_received: payload bytes received (data and events).
    :ivar events_received: events received.
    :ivar records_received: records decoded by the consumer.
    :ivar queued: buffers and events received, not yet polled.
    :ivar credit_available: credit announced to the sender and not yet used, as known here.
    :ivar unannounced_credit: free buffers not announced yet.
    :ivar sender_backlog: the sender's backlog as last reported.
    :ivar exclusive_buffers: exclusive buffers owned.
    :ivar exclusive_buffers_in_use: exclusive buffers holding data.
    :ivar floating_buffers: floating buffers held.
    :ivar floating_buffers_in_use: floating buffers holding data.
    :ivar blocking_connection: flow control off: this channel has no buffer and the whole
        connection waits for it.
    :ivar finished: EndOfPartition was read.
    :ivar released: the channel was released.
    :ivar error: the failure, if any.
    """

    channel_index: int
    partition_id: ResultPartitionID
    subpartition_index: int
    producer_address: tuple
    buffers_received: int
    segments_received: int
    bytes_received: int
    events_received: int
    records_received: int
    queued: int
    credit_available: int
    unannounced_credit: int
    sender_backlog: int
    exclusive_buffers: int
    exclusive_buffers_in_use: int
    floating_buffers: int
    floating_buffers_in_use: int
    blocking_connection: bool
    finished: bool
    released: bool
    error: Optional[str]


class RemoteInputChannel(InputChannel):
    """Reads one subpartition of a partition produced in another process.

    :param connection_manager: this process's
        :class:`~rill.network.netty.connection_manager.NettyConnectionManager` (started).
    :param producer_address: ``(host, port)`` of the producer process's server.
    :param partition_id: the producer's :class:`ResultPartitionID`.
    :param subpartition_index: which subpartition to read.
    :param floating_buffer_pool: the gate's :class:`FloatingBufferPool`, shared by all remote
        channels of the gate.
    :param exclusive_buffers: buffers owned by this channel (the initial credit); default
        ``config.exclusive_buffers_per_channel``.
    :raises ValueError: for ``exclusive_buffers < 1`` with flow control on.
    """

    def __init__(
        self,
        connection_manager: "NettyConnectionManager",
        producer_address: tuple,
        partition_id: ResultPartitionID,
        subpartition_index: int,
        floating_buffer_pool: FloatingBufferPool,
        exclusive_buffers: Optional[int] = None,
    ) -> None:
        super().__init__(partition_id)
        config = connection_manager.config
        if exclusive_buffers is None:
            exclusive_buffers = config.exclusive_buffers_per_channel
        if not isinstance(exclusive_buffers, int) or exclusive_buffers < (1 if config.flow_control else 0):
            raise ValueError(
                f"A remote input channel needs exclusive_buffers >= 1 with flow control (its initial "
                f"credit), got {exclusive_buffers!r}"
            )
        if not isinstance(subpartition_index, int) or subpartition_index < 0:
            raise ValueError(f"subpartition_index must be an int >= 0, got {subpartition_index!r}")
        self.connection_manager = connection_manager
        self.producer_address = tuple(producer_address)
        self.subpartition_index = subpartition_index
        #: This channel's id on the wire (Flink's ``InputChannelID``).
        self.receiver_id = uuid.uuid4().bytes
        self._config = config
        self._flow_control = config.flow_control
        self._buffer_manager = BufferManager(
            exclusive_buffers, floating_buffer_pool, config.flow_control, config.credit_announce_batch,
            self._notify_credit_available, self._notify_buffer_available,
        )
        self._deserializer = AdaptiveSpanningRecordDeserializer(config.max_payload_size_bytes, self.describe())
        self._lock = threading.Lock()
        self._queue: deque = deque()
        #: the data entries queued when the last priority event arrived (see take_inflight_buffers)
        self._inflight_before_priority: list = []
        self._error: Optional[BaseException] = None
        #: A data frame broke the protocol; the channel fails once the frames before it are in.
        self._pending_failure: Optional[BaseException] = None
        self._requested = False
        self._released = False
        self._finished = False
        self._client: Optional["PartitionRequestClient"] = None
        self._expected_sequence = 0
        self._request_started: Optional[float] = None
        self._request_backoff_s = config.retry_initial_backoff_s
        self._retry_timer = None
        self.buffers_received = 0
        self.segments_received = 0
        self.bytes_received = 0
        self.events_received = 0
        self.records_received = 0

    # ------------------------------------------------------------------ InputChannel

    def request_subpartition(self) -> None:
        """Ask the producer's server for the subpartition. Never blocks: connecting, the
        handshake and retries happen on the network thread; a failure is raised by a later
        :meth:`get_next_buffer`. Idempotent.

        :raises RuntimeError: if the channel is released.
        """
        if self._requested:
            return
        if self._released:
            raise RuntimeError(f"{self!r} is released")
        self._requested = True
        self.connection_manager._request_subpartition(self)

    def get_next_buffer(self) -> Optional[BufferAndAvailability]:
        """The next buffer or event, decoded on the caller's thread, or ``None``. Never blocks.

        :raises RemoteTransportError: the connection failed or a payload is corrupt.
        :raises LocalTransportError: connecting failed.
        :raises PartitionRequestTimeoutError: the producer never registered the partition.
        :raises PartitionReleasedError: the producer released the partition before finishing.
        :raises RuntimeError: before :meth:`request_subpartition`.
        """
        if not self._requested:
            if self._released:
                return None
            raise RuntimeError(f"{self!r} was polled before request_subpartition()")
        with self._lock:
            queue = self._queue
            if not queue:
                error = self._error
                if error is not None:
                    raise error
                return None
            kind, payload, flags = queue.popleft()
            more = bool(queue) or self._error is not None
        if flags & messages.FLAG_EVENT:
            try:
                event = self._deserializer.decode_event(payload)
            except Exception as decode_error:  # noqa: BLE001 - corrupt payload
                raise self._fail_on_task_thread(decode_error, "an event") from decode_error
            if isinstance(event, EndOfPartitionEvent):
                self._finished = True
            return BufferAndAvailability(event, more)
        try:
            values, timestamps = self._deserializer.decode_buffer(payload, bool(flags & messages.FLAG_COMPRESSED))
        except Exception as decode_error:  # noqa: BLE001 - corrupt payload
            self._buffer_manager.recycle(kind)
            raise self._fail_on_task_thread(decode_error, "a buffer") from decode_error
        self._deserializer.give_back(payload)  # decoded into new objects: its memory may be reused
        self.records_received += len(values)
        return BufferAndAvailability(Buffer(values, timestamps, self._buffer_manager.recycler_for(kind)), more)

    def release(self) -> None:
        """Stop reading: queued buffers are dropped (their receiving buffers freed), floating
        buffers go back to the gate's pool, the server is told to release the subpartition
        (unless it was read to the end) and the connection is closed if no channel uses it any
        more. Buffers the task still holds are freed when it recycles them. Idempotent."""
        with self._lock:
            if self._released:
                return
            self._released = True
            entries = list(self._queue)
            self._queue.clear()
        for kind, _, _ in entries:
            if kind is not None:
                self._buffer_manager.recycle(kind)
        self._buffer_manager.release()
        if self._requested:
            self.connection_manager._release_channel(self, cancel=not self._finished)

    def is_released(self) -> bool:
        """Whether :meth:`release` was called."""
        return self._released

    def attach_to_gate(self, input_gate, channel_index: int) -> None:
        """Called by the gate's constructor (see :meth:`InputChannel.attach_to_gate`)."""
        super().attach_to_gate(input_gate, channel_index)
        self._deserializer.channel = self.describe()

    # ------------------------------------------------------------------ description, stats

    def describe(self) -> str:
        """Names the channel for error messages: gate, index, partition, subpartition, address."""
        gate = self._input_gate
        where = "" if gate is None else f" of gate {gate.gate_index} of {gate.owning_task_name!r}"
        host, port = self.producer_address[:2]
        return (
            f"remote input channel {self.channel_index}{where} reading subpartition "
            f"{self.subpartition_index} of partition {self.partition_id} from {host}:{port}"
        )

    def is_finished(self) -> bool:
        """Whether EndOfPartition was read."""
        return self._finished

    @property
    def buffer_manager(self) -> BufferManager:
        """The channel's receiving buffers and credit."""
        return self._buffer_manager

    def statistics(self) -> RemoteInputChannelStatistics:
        """A snapshot (any thread)."""
        buffers = self._buffer_manager.statistics()
        error = self._error
        return RemoteInputChannelStatistics(
            channel_index=self.channel_index,
            partition_id=self.partition_id,
            subpartition_index=self.subpartition_index,
            producer_address=self.producer_address,
            buffers_received=self.buffers_received,
            segments_received=self.segments_received,
            bytes_received=self.bytes_received,
            events_received=self.events_received,
            records_received=self.records_received,
            queued=len(self._queue),
            credit_available=buffers.announced_credit,
            unannounced_credit=buffers.unannounced_credit,
            sender_backlog=buffers.sender_backlog,
            exclusive_buffers=buffers.exclusive_buffers,
            exclusive_buffers_in_use=buffers.exclusive_buffers_in_use,
            floating_buffers=buffers.floating_buffers,
            floating_buffers_in_use=buffers.floating_buffers_in_use,
            blocking_connection=buffers.blocking_connection,
            finished=self._finished,
            released=self._released,
            error=None if error is None else str(error),
        )

    def connection_statistics(self) -> Optional["ConnectionStatistics"]:
        """A snapshot of the connection this channel reads through (shared with the other
        channels to the same producer process), ``None`` before it was attached to one. Still
        answers after the channel was released and the connection closed: the counters are
        then the connection's totals (e.g. the bytes it moved, framing and handshake
        included). Any thread."""
        client = self._client
        return None if client is None else client.statistics()

    def __repr__(self) -> str:
        return (
            f"RemoteInputChannel(index={self.channel_index}, partition={self.partition_id}, "
            f"subpartition={self.subpartition_index}, producer={self.producer_address})"
        )

    # ------------------------------------------------------------------ failing

    def _fail(self, error: BaseException) -> None:
        """Record the first failure and wake the gate so the task sees it (any thread)."""
        with self._lock:
            if self._error is not None or self._released:
                return
            self._error = error
        self.notify_channel_non_empty()
        if self._client is not None:
            self.connection_manager._release_channel(self, cancel=True)

    def _fail_on_task_thread(self, cause: BaseException, what: str) -> BaseException:
        error = RemoteTransportError(
            f"{self.describe()}: could not decode {what} received: {type(cause).__name__}: {cause}",
            self.partition_id, self.producer_address, cause,
        )
        self._fail(error)
        return self._error or error

    # ------------------------------------------------------------------ network thread

    def _attach_client(self, client: "PartitionRequestClient") -> None:
        self._client = client
        if self._request_started is None:
            self._request_started = time.monotonic()

    def _initial_credit(self) -> int:
        return self._buffer_manager.ledger.announced_credit

    def _take_unannounced_credit(self) -> int:
        return self._buffer_manager.take_unannounced_credit()

    def _notify_credit_available(self) -> None:
        client = self._client
        if client is not None:
            client.notify_credit_available(self)

    def _notify_buffer_available(self) -> None:
        client = self._client
        if client is not None:
            self.connection_manager._call_soon(client.resume_reading)

    def _on_buffer_response(self, sequence: int, backlog: int, flags: int, payload, buffers: int = 1) -> bool:
        """A BufferResponse of ``buffers`` segments for this channel; ``payload`` is a
        bytes-like view valid during the call only (it is copied: once, into the reassembly
        buffer, for data). :returns: ``False`` if it cannot be taken now (flow control off and
        no free buffer): the connection pauses and re-delivers it."""
        if flags & messages.FLAG_EVENT:
            if self._released or self._error is not None:
                return True
            if sequence != self._expected_sequence:
                self._fail(RemoteTransportError(
                    f"{self.describe()}: buffer reordering: expected sequence number "
                    f"{self._expected_sequence}, received {sequence}",
                    self.partition_id, self.producer_address,
                ))
                return True
            manager = self._buffer_manager
            self._expected_sequence += 1
            self.events_received += 1
            self.bytes_received += len(payload)
            if flags & messages.FLAG_PRIORITY:
                self._enqueue_priority((None, bytes(payload), flags))
            else:
                self._enqueue((None, bytes(payload), flags))
            if self._flow_control:
                manager.on_sender_backlog(backlog)
            return True
        kind = self._on_data_segment(sequence, backlog, flags, len(payload), buffers)
        if kind is None:
            return False
        if kind is not False:
            self._on_data_segment_payload(payload, flags, kind)
        return True

    def _on_data_segment(self, sequence: int, backlog: int, flags: int, size: int, buffers: int = 1):
        """The credit side of a data frame of ``buffers`` segments (:meth:`_on_buffer_response`
        without the payload): the sequence check and one receiving buffer per segment. The
        connection calls it for every data frame of a read, announces the credit they freed,
        then hands the payloads over with :meth:`_on_data_segment_payload`, so the sender gets
        its credit before the copies.

        A frame of several segments goes through the ledger as that many frames of one would:
        every segment but a payload's last is taken and given back at once (all are copied
        into the reassembly buffer before the next read), with the backlog the sender would
        have reported after each.

        :returns: the :class:`BufferKind` taken (pass it on with the payload); ``False``: drop
            the frame (released or failed); ``None``: no buffer (flow control off only),
            re-deliver the frame later; :data:`_PROTOCOL_ERROR`: the frame broke the protocol,
            the channel fails when this is passed on as the kind (after the payloads of the
            frames before it: the task sees what arrived intact, then the failure) and drops
            every frame until then.
        """
        if self._released or self._error is not None or self._pending_failure is not None:
            return False
        if sequence != self._expected_sequence:
            self._pending_failure = RemoteTransportError(
                f"{self.describe()}: buffer reordering: expected sequence number "
                f"{self._expected_sequence}, received {sequence}",
                self.partition_id, self.producer_address,
            )
            return _PROTOCOL_ERROR
        if buffers != 1 and (buffers < 1 or buffers > size or not self._flow_control):
            self._pending_failure = RemoteTransportError(
                f"{self.describe()}: a data frame of {size} bytes announced {buffers} buffers (a frame "
                f"carries 1 to one per byte, and more than 1 only with credit-based flow control)",
                self.partition_id, self.producer_address,
            )
            return _PROTOCOL_ERROR
        manager = self._buffer_manager
        try:
            # a segment before the last is copied into the reassembly buffer before the
            # connection reads again: its receiving buffer is taken and given back in one step
            for before_last in range(buffers - 1, 0, -1):
                if manager.on_segment_copied(backlog + before_last) is False:
                    return False
            if flags & _FLAG_LAST_SEGMENT:
                kind = manager.on_buffer_received(backlog)
            else:
                kind = manager.on_segment_copied(backlog)
        except CreditInvariantError as error:
            self._pending_failure = RemoteTransportError(
                f"{self.describe()}: {error}", self.partition_id, self.producer_address, error)
            return _PROTOCOL_ERROR
        if kind is None or kind is False:
            return kind
        self._expected_sequence = sequence + buffers
        self.segments_received += buffers
        self.bytes_received += size
        return kind

    def _on_data_segment_payload(self, payload, flags: int, kind) -> None:
        """The payload of a data frame :meth:`_on_data_segment` took a buffer for: copied into
        the reassembly buffer; a complete payload is queued for the task."""
        if kind is _PROTOCOL_ERROR:
            error, self._pending_failure = self._pending_failure, None
            self._fail(error)  # type: ignore[arg-type]
            return
        last = flags & _FLAG_LAST_SEGMENT
        try:
            complete = self._deserializer.add_segment(payload, last)
        except PayloadTooLargeError as error:  # names this channel already
            if last:
                self._buffer_manager.recycle(kind)
            self._fail(RemoteTransportError(str(error), self.partition_id, self.producer_address, error))
            return
        if complete is not None:
            self.buffers_received += 1
            self._enqueue((kind, complete, flags))

    def _enqueue(self, entry: tuple) -> None:
        with self._lock:
            if self._released:
                dropped = True
            else:
                dropped = False
                self._queue.append(entry)
                notify = len(self._queue) == 1
        if dropped:
            if entry[0] is not None:
                self._buffer_manager.recycle(entry[0])
            return
        if notify:
            self.notify_channel_non_empty()

    def _enqueue_priority(self, entry: tuple) -> None:
        """A priority event (network thread): ahead of the queue, and the gate polls this
        channel next. The data entries queued now arrived before it: they are this channel's
        in-flight data for the event's checkpoint (:meth:`take_inflight_buffers`)."""
        with self._lock:
            if self._released:
                return
            queue = self._queue
            self._inflight_before_priority = [e for e in queue if e[0] is not None]
            queue.appendleft(entry)
        self.notify_priority_event()

    def has_priority_event(self) -> bool:
        """Whether the next queued entry is a priority event."""
        with self._lock:
            queue = self._queue
            return bool(queue) and queue[0][0] is None and bool(queue[0][2] & messages.FLAG_PRIORITY)

    def take_inflight_buffers(self) -> list:
        """See :meth:`InputChannel.take_inflight_buffers`: the payloads queued when the last
        priority event arrived, copied (a payload's memory is reused once it is decoded)."""
        with self._lock:
            entries, self._inflight_before_priority = self._inflight_before_priority, []
        return [(bytes(payload), bool(flags & messages.FLAG_COMPRESSED)) for _, payload, flags in entries]

    def _on_error_response(self, code: int, message: str) -> None:
        if code == messages.ERROR_PARTITION_NOT_FOUND:
            self._retry_request(message)
            return
        if code == messages.ERROR_PARTITION_RELEASED:
            cause = RemoteProducerError(message)
            error: BaseException = PartitionReleasedError(self.partition_id, self.subpartition_index, cause)
            error.__cause__ = cause
        else:
            error = RemoteTransportError(
                f"{self.describe()}: the producer's server reported: {message}",
                self.partition_id, self.producer_address, RemoteProducerError(message),
            )
        self._fail(error)

    def _retry_request(self, message: str) -> None:
        started = self._request_started or time.monotonic()
        elapsed = time.monotonic() - started
        backoff = self._request_backoff_s
        timeout = self._config.partition_request_timeout_s
        if elapsed + backoff > timeout:
            self._fail(PartitionRequestTimeoutError(
                f"{self.describe()}: the producer's server did not know the partition for "
                f"{elapsed:.2f}s (partition request timeout {timeout}s): {message}",
                self.partition_id, self.producer_address,
            ))
            return
        self._request_backoff_s = min(backoff * 2, self._config.retry_max_backoff_s)
        client = self._client
        if client is not None:
            self._retry_timer = client._io.call_later(backoff, lambda: client.send_partition_request(self))

    def _on_connection_failed(self, address: tuple, cause: BaseException) -> None:
        if self._finished or self._released:
            return
        host, port = address[:2]
        # Connecting failed, or this process's own network stack went away: local; the peer
        # closed, refused our secret or sent garbage: remote.
        local = isinstance(cause, (ConnectionRefusedError, ConnectionAbortedError))
        kind = LocalTransportError if local else RemoteTransportError
        self._fail(kind(f"{self.describe()}: connection to {host}:{port} failed: {cause}",
                        self.partition_id, address, cause))

    def _on_released_in_network_thread(self) -> None:
        self._deserializer.clear()
        timer = self._retry_timer
        if timer is not None:
            timer.cancel()
            self._retry_timer = None
