"""An in-memory, pipelined subpartition (Flink's ``PipelinedSubpartition``)."""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Optional

from ..buffer.buffer import Buffer
from ..events import END_OF_PARTITION_EVENT
from .exceptions import PartitionReleasedError
from .result_subpartition import BufferAndBacklog, BufferAvailabilityListener, ResultSubpartition
from .result_subpartition_view import ResultSubpartitionView

if TYPE_CHECKING:
    from .result_partition import ResultPartition

__all__ = ["PipelinedSubpartition", "PipelinedSubpartitionView"]


class PipelinedSubpartition(ResultSubpartition):
    """A thread-safe deque of buffers and events, read by one :class:`PipelinedSubpartitionView`.

    :param index: the subpartition's index in ``parent``.
    :param parent: the owning :class:`~rill.network.partition.result_partition.ResultPartition`
        (told when the subpartition is consumed).

    Threading model: the producer calls :meth:`add` / :meth:`finish`, the consumer polls through
    the view; a ``threading.Lock`` guards the deque and counters and is taken once per entry
    (buffer or event). The view's listener is called outside the lock, only on the transition
    from empty to non-empty (and on producer-side release), as Flink does; a consumer that
    polled ``None`` is therefore always notified of the next entry.

    Read remotely (:meth:`set_remote_serializer`), it serializes each buffer in :meth:`add`, on
    the producer's thread, as Flink's RecordWriter serializes into its buffers: the records
    were just made there and are still in that core's cache (serializing the same 1,024
    ``(word, 1)`` records on the network thread cost 3x the CPU), they are freed there, and the
    network thread only moves bytes. A local consumer takes the records unserialized.
    """

    def __init__(self, index: int, parent: "ResultPartition") -> None:
        self._index = index
        self._parent = parent
        self._lock = threading.Lock()
        self._queue: deque = deque()
        self._backlog = 0
        self._view: Optional[PipelinedSubpartitionView] = None
        self._finished = False
        self._released = False
        self._consumed = False
        self._release_cause: Optional[BaseException] = None
        self._num_buffers = 0
        self._num_records = 0
        self._num_events = 0
        self._num_bytes_sent = 0
        self._serializer = None
        #: priority events at the head of the queue, not yet polled
        self._num_priority = 0
        #: an event whose polling is reported (add_timeoutable_event), and to whom
        self._watched_event: Any = None
        self._watched_callback: Optional[Callable[[], None]] = None

    @property
    def subpartition_index(self) -> int:
        return self._index

    # ------------------------------------------------------------------ producer side

    def add(self, item: Any) -> bool:
        is_buffer = isinstance(item, Buffer)
        if is_buffer:
            records = len(item.values)
            serializer = self._serializer
            if serializer is not None and not self._released:  # (a released one recycles it below)
                serializer.serialize_into(item)
        view = None
        with self._lock:
            released = self._released
            finished = self._finished
            if not released and not finished:
                queue = self._queue
                queue.append(item)
                if is_buffer:
                    self._backlog += 1
                    self._num_buffers += 1
                    self._num_records += records
                else:
                    self._num_events += 1
                if len(queue) == 1:
                    view = self._view
        if released or finished:
            if is_buffer:
                item.recycle_buffer()
            if released:
                return False
            raise RuntimeError(
                f"Cannot add {item!r} to subpartition {self._index} of partition "
                f"{self._parent.partition_id}: it is finished (EndOfPartition was added)"
            )
        if view is not None:
            view.notify_data_available()
        return True

    def add_timeoutable_event(self, event: Any, on_polled: Callable[[], None]) -> bool:
        """Append ``event`` (the barrier of an aligned checkpoint that may time out, Flink's
        timeoutable barrier) and call ``on_polled()`` (on the consumer's or network thread)
        when the consumer takes it, unless :meth:`convert_to_priority_event` moved it first.
        One event is watched at a time (a newer one replaces an older one's watch).

        :returns: ``False`` if the subpartition was released (nothing is added or reported).
        :raises RuntimeError: if the subpartition is finished.
        """
        with self._lock:
            if not self._released and not self._finished:
                self._watched_event, self._watched_callback = event, on_polled
        return self.add(event)

    def convert_to_priority_event(self, event: Any, replacement: Any) -> Optional[list]:
        """If ``event`` is still queued, take it out and put ``replacement`` ahead of the queue
        as a priority event (Flink's ``PipelinedSubpartition.alignedBarrierTimeout``: the
        barrier of an aligned checkpoint that timed out overtakes the data before it).

        :returns: the buffers ``replacement`` overtook (as :meth:`add_priority_event`: those
            that were ahead of ``event``), or ``None`` if ``event`` is no longer queued.
        """
        with self._lock:
            queue = self._queue
            if self._released or not any(item is event for item in queue):
                return None
            overtaken = []
            for item in queue:
                if item is event:
                    break
                if isinstance(item, Buffer):
                    overtaken.append((item.values, item.timestamps, item.serialized))
            queue.remove(event)
            queue.appendleft(replacement)
            self._num_priority += 1
            if self._watched_event is event:
                self._watched_event = self._watched_callback = None
            view = self._view
        if view is not None:
            view.notify_priority_event()
        return overtaken

    def add_priority_event(self, event: Any) -> Optional[list]:
        """See :meth:`ResultSubpartition.add_priority_event`. One lock acquisition; the
        overtaken buffers are listed, not copied (a buffer's lists are never mutated once it
        is queued: a sender rebinds them when it serializes or recycles)."""
        with self._lock:
            if self._released:
                return None
            if self._finished:
                raise RuntimeError(
                    f"Cannot add priority event {event!r} to subpartition {self._index} of partition "
                    f"{self._parent.partition_id}: it is finished (EndOfPartition was added)")
            queue = self._queue
            overtaken = [(b.values, b.timestamps, b.serialized) for b in queue if isinstance(b, Buffer)]
            queue.appendleft(event)
            self._num_priority += 1
            self._num_events += 1
            view = self._view
        if view is not None:
            view.notify_priority_event()
        return overtaken

    def finish(self) -> None:
        view = None
        with self._lock:
            if self._released or self._finished:
                return
            self._finished = True
            self._queue.append(END_OF_PARTITION_EVENT)
            self._num_events += 1
            if len(self._queue) == 1:
                view = self._view
        if view is not None:
            view.notify_data_available()

    def release(self, cause: Optional[BaseException] = None) -> None:
        with self._lock:
            if self._released:
                return
            self._released = True
            self._release_cause = cause
            buffers = [item for item in self._queue if isinstance(item, Buffer)]
            self._queue.clear()
            self._backlog = 0
            self._num_priority = 0
            view = self._view
        for buffer in buffers:
            buffer.recycle_buffer()
        if view is not None:
            view.notify_data_available()

    # ------------------------------------------------------------------ consumer side

    def create_read_view(self, availability_listener: BufferAvailabilityListener) -> "PipelinedSubpartitionView":
        with self._lock:
            if self._released:
                raise PartitionReleasedError(self._parent.partition_id, self._index, self._release_cause)
            if self._view is not None:
                raise RuntimeError(
                    f"Subpartition {self._index} of partition {self._parent.partition_id} is being "
                    "(or already has been) consumed, but pipelined subpartitions can only be "
                    "consumed once."
                )
            view = PipelinedSubpartitionView(self, availability_listener)
            self._view = view
            notify = bool(self._queue)
        if notify:
            view.notify_data_available()
        return view

    def _poll(self) -> Optional[BufferAndBacklog]:
        with self._lock:
            queue = self._queue
            if not queue:
                return None
            item = queue.popleft()
            if isinstance(item, Buffer):
                self._backlog -= 1
                return BufferAndBacklog(item, bool(queue), self._backlog)
            if self._num_priority:  # priority events are the head of the queue
                self._num_priority -= 1
                return BufferAndBacklog(item, bool(queue), self._backlog, True)
            if item is not self._watched_event:
                return BufferAndBacklog(item, bool(queue), self._backlog)
            callback, self._watched_event, self._watched_callback = self._watched_callback, None, None
            result = BufferAndBacklog(item, bool(queue), self._backlog)
        callback()
        return result

    def set_remote_serializer(self, serializer) -> None:
        """Serialize the buffers added from now on with ``serializer``, on the adding thread
        (buffers already queued are serialized by the sender)."""
        self._serializer = serializer

    def _on_view_released(self) -> None:
        """The reader is done or cancelled: drop what is queued and report consumption once."""
        with self._lock:
            self._released = True
            buffers = [item for item in self._queue if isinstance(item, Buffer)]
            self._queue.clear()
            self._backlog = 0
            self._num_priority = 0
            first = not self._consumed
            self._consumed = True
        for buffer in buffers:
            buffer.recycle_buffer()
        if first:
            self._parent.on_consumed_subpartition(self._index)

    # ------------------------------------------------------------------ state, metrics

    def is_released(self) -> bool:
        """Whether the producer or the reader released this subpartition."""
        return self._released

    def is_finished(self) -> bool:
        """Whether EndOfPartition was added."""
        return self._finished

    def get_release_cause(self) -> Optional[BaseException]:
        """The cause given to a producer-side :meth:`release`, if any."""
        return self._release_cause

    def get_buffers_in_backlog(self) -> int:
        return self._backlog

    def get_total_number_of_buffers(self) -> int:
        return self._num_buffers

    def get_total_number_of_records(self) -> int:
        return self._num_records

    def get_total_number_of_events(self) -> int:
        """Events added since creation (EndOfPartition included)."""
        return self._num_events

    def get_total_number_of_bytes_sent(self) -> int:
        """Payload bytes a network sender serialized from this subpartition since creation
        (0 for a local consumer, which takes the buffers without serializing them)."""
        return self._num_bytes_sent

    def get_number_of_queued_entries(self) -> int:
        """Buffers and events queued now."""
        return len(self._queue)

    def __repr__(self) -> str:
        return (
            f"PipelinedSubpartition(index={self._index}, partition={self._parent.partition_id}, "
            f"queued={len(self._queue)}, backlog={self._backlog}, finished={self._finished}, "
            f"released={self._released})"
        )


class PipelinedSubpartitionView(ResultSubpartitionView):
    """The reader of a :class:`PipelinedSubpartition` (Flink's ``PipelinedSubpartitionView``).

    Polled by one consumer thread; ``notify_data_available`` comes from the producer's thread.
    """

    def __init__(self, parent: PipelinedSubpartition, availability_listener: BufferAvailabilityListener) -> None:
        self._parent = parent
        self._listener = availability_listener
        self._priority_listener: Optional[BufferAvailabilityListener] = None
        self._released = False

    def set_priority_listener(self, listener: Optional[BufferAvailabilityListener]) -> None:
        """Call ``listener`` (instead of the availability listener) when a priority event was
        put ahead of the queue: a local input channel has its gate poll it next (Flink's
        ``notifyPriorityEvent``). Set right after the view was created."""
        self._priority_listener = listener

    def notify_priority_event(self) -> None:
        if self._released:
            return
        listener = self._priority_listener
        (listener or self._listener)()

    def get_next_buffer(self) -> Optional[BufferAndBacklog]:
        if self._released:
            return None
        return self._parent._poll()

    def set_remote_serializer(self, serializer) -> None:
        """See :meth:`ResultSubpartitionView.set_remote_serializer`."""
        self._parent.set_remote_serializer(serializer)

    def has_priority_event(self) -> bool:
        """See :meth:`ResultSubpartitionView.has_priority_event` (lock-free, as :meth:`next_is_buffer`)."""
        return not self._released and self._parent._num_priority > 0

    def next_is_buffer(self) -> bool:
        """See :meth:`ResultSubpartitionView.next_is_buffer`. Lock-free: only this view's
        reader takes entries, and an entry put ahead meanwhile notifies it again."""
        try:
            return not self._released and isinstance(self._parent._queue[0], Buffer)
        except IndexError:
            return False

    def poll_next(self) -> Optional[Any]:
        if self._released:
            return None
        result = self._parent._poll()
        return None if result is None else result.item

    def notify_data_available(self) -> None:
        if not self._released:
            self._listener()

    def is_released(self) -> bool:
        return self._released or self._parent.is_released()

    def get_failure_cause(self) -> Optional[BaseException]:
        return self._parent.get_release_cause()

    def get_buffers_in_backlog(self) -> int:
        """Buffers queued and not yet read (a credit-based sender's backlog)."""
        return self._parent.get_buffers_in_backlog()

    def add_bytes_sent(self, num_bytes: int) -> None:
        """Count bytes a network sender serialized from this view (see
        :meth:`ResultSubpartitionView.add_bytes_sent`); adds to the subpartition's total."""
        self._parent._num_bytes_sent += num_bytes

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        self._parent._on_view_released()

    def __repr__(self) -> str:
        return f"PipelinedSubpartitionView({self._parent!r}, released={self._released})"

