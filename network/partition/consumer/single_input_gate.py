"""An input gate over the channels of one consumed intermediate result (Flink's
``SingleInputGate``)."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from ...buffer.buffer import Buffer
from ...events import EndOfDataEvent, EndOfPartitionEvent
from .buffer_or_event import BufferOrEvent
from .input_channel import InputChannel
from .input_gate import InputGate

__all__ = ["SingleInputGate", "InputGateStatistics"]


@dataclass(frozen=True, slots=True)
class InputGateStatistics:
    """A snapshot of a gate.

    :ivar gate_index: the gate's index in its task.
    :ivar owning_task_name: e.g. ``"Window (2/4)"``.
    :ivar num_channels: input channels.
    :ivar channels_with_data: channels queued as having data right now.
    :ivar finished_channels: channels that delivered EndOfPartition.
    :ivar num_buffers_in: buffers returned by ``poll_next`` since creation (Flink's
        ``numBuffersIn``).
    :ivar num_records_in: records in those buffers (Flink counts ``numRecordsIn`` per task).
    :ivar closed: whether :meth:`SingleInputGate.close` was called.
    """

    gate_index: int
    owning_task_name: str
    num_channels: int
    channels_with_data: int
    finished_channels: int
    num_buffers_in: int
    num_records_in: int
    closed: bool


class SingleInputGate(InputGate):
    """Multiplexes the input channels of one consumed intermediate result.

    :param gate_index: the gate's index among its task's gates.
    :param channels: one :class:`InputChannel` per producer subpartition read, in channel-index
        order; the gate attaches each and sets its ``channel_index`` to its position.
    :param owning_task_name: for messages and statistics.
    :raises ValueError: if ``channels`` is empty.
    :raises RuntimeError: if a channel already belongs to another gate.

    How data is found (Flink's ``inputChannelsWithData``): a channel that goes from empty to
    non-empty notifies the gate, which appends it to a FIFO queue of channels with data (at most
    once: a per-channel flag). :meth:`poll_next` pops the first channel, takes one entry from it
    and re-appends the channel if it holds more, so a poll costs O(1) per buffer, never a scan
    over channels, and busy channels are served round robin.

    Threading model: :meth:`poll_next`, :meth:`setup` and :meth:`close` run on the consuming
    task's thread; :meth:`notify_channel_non_empty` and the availability listener run on producer
    threads. One lock guards the queue; it is taken at most twice per buffer and never held while
    calling a channel or the listener. Channel locks are never held while taking the gate's lock
    (channels notify after releasing theirs), so there is no lock-order cycle.

    Availability contract: the listener fires whenever the queue goes from empty to non-empty
    because of a producer's notification. So once :meth:`poll_next` returned ``None``, the next
    arriving entry fires the listener: a task may suspend its input processing after a ``None``
    and resume from the listener without missing data, provided the listener's signal is
    level-triggered (sets an event, posts a mail).
    """

    def __init__(self, gate_index: int, channels: Sequence[InputChannel], owning_task_name: str = "") -> None:
        channels = list(channels)
        if not channels:
            raise ValueError(f"Input gate {gate_index} of {owning_task_name!r} needs at least one channel")
        self.gate_index = gate_index
        self.owning_task_name = owning_task_name
        self._channels = channels
        for index, channel in enumerate(channels):
            channel.attach_to_gate(self, index)
        n = len(channels)
        self._lock = threading.Lock()
        # Held for the whole of close() (Flink closes a gate under its requestLock): a second
        # caller returns only once every channel is released, never while the first is still
        # releasing them.
        self._close_lock = threading.Lock()
        self._channels_with_data: deque[InputChannel] = deque()
        self._queued = [False] * n
        self._finished_channels = [False] * n
        self._num_finished_channels = 0
        self._end_of_data_channels = [False] * n
        self._num_end_of_data_channels = 0
        # channels held back by checkpoint alignment: never queued, so never polled
        self._blocked = [False] * n
        self._listener: Optional[Callable[[], None]] = None
        self._priority_listener: Optional[Callable[[], None]] = None
        self._closed = False
        self._set_up = False
        #: Buffers returned by poll_next (Flink's ``numBuffersIn``); written by the consumer thread.
        self.num_buffers_in = 0
        #: Records in those buffers; written by the consumer thread.
        self.num_records_in = 0

    # ------------------------------------------------------------------ set-up

    def setup(self) -> None:
        """Request the subpartition of every channel (Flink's ``requestPartitions``). Idempotent.

        :raises PartitionNotFoundError: if a producer's partition is not registered.
        :raises RuntimeError: if the gate is closed.
        """
        if self._closed:
            raise RuntimeError(f"{self!r} is closed")
        for channel in self._channels:
            channel.request_subpartition()
        self._set_up = True

    def set_availability_listener(self, listener: Optional[Callable[[], None]]) -> None:
        """Set (or clear, with ``None``) the callback fired when the gate goes from
        nothing-to-read to something-to-read.

        :param listener: a no-argument callable; cheap, thread-safe, must not raise: it runs on
            a producer's thread, e.g. to post a "resume input" mail to the consuming task.
            If the gate already has data when the listener is set, it is called at once (on the
            caller's thread), so no availability is missed.
        """
        with self._lock:
            self._listener = listener
            fire = listener is not None and bool(self._channels_with_data)
        if fire:
            listener()  # type: ignore[misc]

    # ------------------------------------------------------------------ data path

    def notify_channel_non_empty(self, channel: InputChannel) -> None:
        """Queue ``channel`` as having data (called through the channel by the producer side).
        Fires the availability listener if the gate had nothing to read. Thread-safe."""
        index = channel.channel_index
        with self._lock:
            if self._closed or self._queued[index] or self._finished_channels[index] or self._blocked[index]:
                return
            self._queued[index] = True
            queue = self._channels_with_data
            queue.append(channel)
            listener = self._listener if len(queue) == 1 else None
        if listener is not None:
            listener()

    def notify_priority_event(self, channel: InputChannel) -> None:
        """``channel`` has a priority event at its head (the barrier of an unaligned checkpoint):
        queue it first, ahead of every channel with data, so that the next poll returns the
        event (Flink's ``SingleInputGate.notifyPriorityEvent``). Fires the availability
        listener if the gate had nothing to read. Thread-safe; O(channels) per event."""
        index = channel.channel_index
        with self._lock:
            if self._closed or self._finished_channels[index] or self._blocked[index]:
                return
            queue = self._channels_with_data
            if self._queued[index]:
                queue.remove(channel)
            self._queued[index] = True
            queue.appendleft(channel)
            listener = self._listener if len(queue) == 1 else None
            priority_listener = self._priority_listener
        if listener is not None:
            listener()
        if priority_listener is not None:
            priority_listener()

    def set_priority_listener(self, listener: Optional[Callable[[], None]]) -> None:
        """Call ``listener`` (any thread; cheap, must not raise) whenever a channel queued a
        priority event, also while the gate has other data: a task whose input processing is
        suspended (its output is full) handles the event in a mail (Flink's
        ``getPriorityEventAvailableFuture``)."""
        self._priority_listener = listener

    def has_priority_event(self) -> bool:
        """Whether the next :meth:`poll_next` returns a priority event (consuming-task thread)."""
        with self._lock:
            first = self._channels_with_data[0] if self._channels_with_data else None
        return first is not None and first.has_priority_event()

    def poll_next(self) -> Optional[BufferOrEvent]:
        """The next buffer or event, or ``None`` if no channel has data (never blocks).

        EndOfPartition is returned like any event (the task uses it to retire the channel, e.g.
        from watermark alignment); the gate then releases that channel and, after the last one,
        :meth:`is_finished` is true. The caller must recycle every returned buffer once it has
        processed the records.

        :raises PartitionReleasedError: if a producer released its partition before finishing
            (the producer failed or was cancelled): the consuming task should fail.
        :raises RuntimeError: if called before :meth:`setup`.
        """
        lock = self._lock
        queue = self._channels_with_data
        queued = self._queued
        while True:
            with lock:
                if not queue:
                    if not self._set_up and not self._closed:
                        raise RuntimeError(f"{self!r} was polled before setup()")
                    return None
                channel = queue.popleft()
                index = channel.channel_index
                queued[index] = False
            result = channel.get_next_buffer()
            if result is None:
                continue  # a stale notification (e.g. a release we caused ourselves)
            item, more = result
            if more:
                with lock:
                    if not queued[index] and not self._closed:
                        queued[index] = True
                        queue.append(channel)
            gate_more = bool(queue)
            if isinstance(item, Buffer):
                self.num_buffers_in += 1
                self.num_records_in += len(item.values)
                return BufferOrEvent(index, item, None, gate_more)
            if isinstance(item, EndOfPartitionEvent):
                self._on_end_of_partition(channel)
                gate_more = bool(queue)
            elif isinstance(item, EndOfDataEvent) and not self._end_of_data_channels[index]:
                self._end_of_data_channels[index] = True
                self._num_end_of_data_channels += 1
            return BufferOrEvent(index, None, item, gate_more)

    def _on_end_of_partition(self, channel: InputChannel) -> None:
        index = channel.channel_index
        with self._lock:
            if not self._finished_channels[index]:
                self._finished_channels[index] = True
                self._num_finished_channels += 1
            if self._queued[index]:
                self._queued[index] = False
                self._channels_with_data.remove(channel)
        channel.release()

    # ------------------------------------------------------------------ alignment

    def block_consumption(self, channel_index: int) -> None:
        """Stop returning entries of channel ``channel_index`` until
        :meth:`resume_consumption` (Flink's blocked channel after a barrier of an aligned
        checkpoint: what follows the barrier waits in the channel, and its producer is
        back-pressured once the channel's credit is used). Task thread; idempotent.

        :raises IndexError: for an index outside ``[0, channels)``.
        """
        channel = self._channels[channel_index]
        with self._lock:
            self._blocked[channel_index] = True
            if self._queued[channel_index]:
                self._queued[channel_index] = False
                self._channels_with_data.remove(channel)

    def resume_consumption(self, channel_index: int) -> None:
        """Return entries of channel ``channel_index`` again (Flink's ``resumeConsumption``).
        The channel is queued as having data whether or not it has some: a poll that finds it
        empty skips it. Task thread; idempotent.

        :raises IndexError: for an index outside ``[0, channels)``.
        """
        channel = self._channels[channel_index]
        with self._lock:
            if not self._blocked[channel_index]:
                return
            self._blocked[channel_index] = False
            if not (self._closed or self._queued[channel_index] or self._finished_channels[channel_index]):
                self._queued[channel_index] = True
                self._channels_with_data.append(channel)

    def is_blocked(self, channel_index: int) -> bool:
        """Whether channel ``channel_index`` is held back by :meth:`block_consumption`."""
        return self._blocked[channel_index]

    # ------------------------------------------------------------------ state

    def is_available(self) -> bool:
        return bool(self._channels_with_data)

    def is_finished(self) -> bool:
        """Whether every channel delivered EndOfPartition (all producers finished)."""
        return self._num_finished_channels == len(self._channels)

    def has_received_end_of_data(self) -> bool:
        """Whether every channel delivered EndOfDataEvent (Flink's ``hasReceivedEndOfData``)."""
        return self._num_end_of_data_channels == len(self._channels)

    def is_channel_finished(self, channel_index: int) -> bool:
        """Whether channel ``channel_index`` delivered EndOfPartition."""
        return self._finished_channels[channel_index]

    def get_number_of_input_channels(self) -> int:
        """The number of input channels."""
        return len(self._channels)

    def get_channel(self, channel_index: int) -> InputChannel:
        """The channel with index ``channel_index``."""
        return self._channels[channel_index]

    def statistics(self) -> InputGateStatistics:
        """An :class:`InputGateStatistics` snapshot (any thread)."""
        with self._lock:
            with_data = len(self._channels_with_data)
            closed = self._closed
        return InputGateStatistics(
            gate_index=self.gate_index,
            owning_task_name=self.owning_task_name,
            num_channels=len(self._channels),
            channels_with_data=with_data,
            finished_channels=self._num_finished_channels,
            num_buffers_in=self.num_buffers_in,
            num_records_in=self.num_records_in,
            closed=closed,
        )

    def close(self) -> None:
        """Release every channel (their queued buffers are recycled on the producer side) and
        stop reporting availability. Later polls return ``None``. Idempotent. Buffers already
        returned by :meth:`poll_next` must still be recycled by the caller.

        Any thread; when it returns every channel is released, also if another thread was
        closing the gate at the same time (a task cancelled from outside closes its gates while
        its own thread does the same before reporting CANCELED: that report must come after the
        channels gave their buffers back)."""
        with self._close_lock:
            with self._lock:
                if self._closed:
                    return
                self._closed = True
                self._channels_with_data.clear()
                queued = self._queued
                for index in range(len(queued)):
                    queued[index] = False
            for channel in self._channels:
                channel.release()

    def __repr__(self) -> str:
        return (
            f"SingleInputGate(index={self.gate_index}, task={self.owning_task_name!r}, "
            f"channels={len(self._channels)})"
        )
