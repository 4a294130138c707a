"""Keyed timers: ``InternalTimerService`` and ``InternalTimeServiceManager``.

Follows Flink's ``InternalTimerServiceImpl``, ``InternalTimeServiceManagerImpl``,
``TimerHeapInternalTimer``, ``Triggerable`` and ``TimeDomain``
(``org.apache.flink.streaming.api.operators``).

A timer is ``(timestamp, key, namespace)``: the epoch-ms time it fires at, the key that is
current when it fires, and a namespace (``VOID_NAMESPACE`` for a ``KeyedProcessFunction``, the
window for window operators). Semantics, as Flink:

- registering a timer that already exists does nothing: each ``(timestamp, key, namespace)``
  fires at most once; deleting a timer that does not exist does nothing;
- event-time timers fire from :meth:`InternalTimerService.advance_watermark` for every timer
  with ``timestamp <= watermark``, in timestamp order, with the timer's key set as the backend's
  current key before its ``Triggerable.on_event_time`` call;
- processing-time timers fire from the task's ``ProcessingTimeService``, whose callbacks the
  task runs as mails on the task thread. The service keeps exactly one physical registration:
  for the earliest timer. When that fires, every timer with ``timestamp <=`` the fired time
  runs (``Triggerable.on_processing_time``, key set) and one registration is made for the next
  earliest. A new timer earlier than the current earliest replaces the registration; deleting
  timers never cancels it (it then fires and finds nothing to do);
- a timer registered while timers fire (from ``on_timer``) that is already due fires in the same
  loop, after the timers before it.

Timers are keyed state: each service keeps them per key group of the subtask's range (see
:meth:`InternalTimerService.get_timers_for_key_group`), so snapshots and rescaling move them with
the key group.

Rill difference: Flink orders timers with equal timestamps by key group and heap position;
Rill fires them in registration order, which is deterministic.

Threading: everything here runs on the task thread; nothing takes a lock.
"""

from __future__ import annotations

import enum
import heapq
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from rill.common.streamrecord import MAX_TIMESTAMP, MIN_TIMESTAMP
from rill.state.checkpoint.operator_subtask_state import TimerServiceSnapshot, TimersOfKeyGroup
from rill.state.key_groups import KeyGroupRange

__all__ = [
    "TimeDomain",
    "InternalTimer",
    "Triggerable",
    "InternalTimerService",
    "InternalTimeServiceManager",
    "PreparedTimerSnapshot",
]


class TimeDomain(enum.Enum):
    """The time domain of a firing timer (PyFlink's ``pyflink.datastream.TimeDomain``)."""

    EVENT_TIME = 0
    PROCESSING_TIME = 1


@dataclass(frozen=True, slots=True)
class InternalTimer:
    """A firing timer (Flink's ``InternalTimer``): ``timestamp`` in epoch ms, the ``key`` and
    the ``namespace`` it was registered with."""

    timestamp: int
    key: Any
    namespace: Any

    def get_timestamp(self) -> int:
        return self.timestamp

    def get_key(self) -> Any:
        return self.key

    def get_namespace(self) -> Any:
        return self.namespace


class Triggerable:
    """What a timer service calls when timers fire (Flink's ``Triggerable``); usually the
    operator itself. Both methods run on the task thread with the timer's key current."""

    def on_event_time(self, timer: InternalTimer) -> None:
        raise NotImplementedError

    def on_processing_time(self, timer: InternalTimer) -> None:
        raise NotImplementedError


# An entry of a queue's heap: (timestamp, seq, key_group_offset, key, namespace).
_Entry = Tuple[int, int, int, Any, Any]


class _TimerQueue:
    """The timers of one time domain, deduplicated and partitioned by key group, with a heap
    for the earliest one (Flink's ``KeyGroupPartitionedPriorityQueue`` of
    ``TimerHeapInternalTimer``).

    ``_by_key_group[offset]`` maps ``(timestamp, key, namespace)`` to the sequence number of its
    heap entry. Deleted timers leave their heap entry behind; an entry counts only while its
    sequence number is the one recorded for its timer, so a timer deleted and registered again
    fires once. The heap is rebuilt when stale entries outnumber live ones.
    """

    __slots__ = ("_heap", "_by_key_group", "_seq", "_size", "_stale")

    def __init__(self, num_key_groups: int) -> None:
        self._heap: List[_Entry] = []
        self._by_key_group: List[Dict[Tuple[int, Any, Any], int]] = [{} for _ in range(num_key_groups)]
        self._seq = 0
        self._size = 0
        self._stale = 0

    def __len__(self) -> int:
        return self._size

    def add(self, offset: int, timestamp: int, key: Any, namespace: Any) -> bool:
        """Add a timer; ``False`` if it exists already."""
        timers = self._by_key_group[offset]
        ident = (timestamp, key, namespace)
        if ident in timers:
            return False
        seq = self._seq
        self._seq = seq + 1
        timers[ident] = seq
        heapq.heappush(self._heap, (timestamp, seq, offset, key, namespace))
        self._size += 1
        return True

    def remove(self, offset: int, timestamp: int, key: Any, namespace: Any) -> bool:
        """Remove a timer; ``False`` if it does not exist."""
        if self._by_key_group[offset].pop((timestamp, key, namespace), None) is None:
            return False
        self._size -= 1
        self._stale += 1
        if self._stale > 64 and self._stale > self._size:
            self._rebuild()
        return True

    def peek(self) -> Optional[_Entry]:
        """The earliest live timer's entry, or ``None``."""
        heap = self._heap
        by_key_group = self._by_key_group
        while heap:
            entry = heap[0]
            if by_key_group[entry[2]].get((entry[0], entry[3], entry[4])) == entry[1]:
                return entry
            heapq.heappop(heap)
            self._stale -= 1
        return None

    def poll_head(self, entry: _Entry) -> None:
        """Remove ``entry``, the result of the last :meth:`peek`."""
        heapq.heappop(self._heap)
        del self._by_key_group[entry[2]][(entry[0], entry[3], entry[4])]
        self._size -= 1

    def _rebuild(self) -> None:
        heap = [
            (ident[0], seq, offset, ident[1], ident[2])
            for offset, timers in enumerate(self._by_key_group)
            for ident, seq in timers.items()
        ]
        heapq.heapify(heap)
        self._heap = heap
        self._stale = 0

    def timers_of(self, offset: int) -> List[Tuple[int, Any, Any]]:
        """``(timestamp, key, namespace)`` of one key group, in registration order."""
        return _in_registration_order(self._by_key_group[offset])

    def copy_key_groups(self) -> List[Dict[Tuple[int, Any, Any], int]]:
        """Per key group (offset), a copy of its ``timer -> sequence number`` dict: the
        synchronous part of a snapshot, C-level copies of immutable entries (Flink's
        ``HeapPriorityQueueSnapshotRestoreWrapper.stateSnapshot`` copies its array as well).
        :func:`_in_registration_order` orders one later, on any thread."""
        return [timers.copy() if timers else None for timers in self._by_key_group]


def _in_registration_order(timers: Dict[Tuple[int, Any, Any], int]) -> List[Tuple[int, Any, Any]]:
    return sorted(timers, key=timers.__getitem__)


class PreparedTimerSnapshot:
    """The synchronous part of one timer service's snapshot: per domain and key group a copy
    of the timers (:meth:`_TimerQueue.copy_key_groups`); :meth:`get` orders them into the
    :class:`TimerServiceSnapshot` on any thread (the checkpoint's asynchronous part).

    :param start: the first key group of the service's range (offset 0).
    """

    __slots__ = ("_start", "_event_time", "_processing_time")

    def __init__(self, start: int, event_time: List[Any], processing_time: List[Any]) -> None:
        self._start = start
        self._event_time = event_time
        self._processing_time = processing_time

    def get(self) -> TimerServiceSnapshot:
        """Every timer, key group by key group, each domain in registration order."""
        key_groups = {}
        for offset, (event, processing) in enumerate(zip(self._event_time, self._processing_time)):
            if event or processing:
                key_groups[self._start + offset] = TimersOfKeyGroup(
                    tuple(_in_registration_order(event)) if event else (),
                    tuple(_in_registration_order(processing)) if processing else ())
        return TimerServiceSnapshot(key_groups)


class InternalTimerService:
    """Event-time and processing-time timers of one operator under one name
    (Flink's ``InternalTimerServiceImpl``). Create through
    :meth:`InternalTimeServiceManager.get_internal_timer_service`.

    :param name: the service's name, unique per operator (``"user-timers"`` for a
        ``KeyedProcessOperator``, ``"window-timers"`` for window operators).
    :param key_group_range: the subtask's key groups (as its keyed state backend's).
    :param key_context: the keyed state backend; it gives the current key (and its key group)
        at registration and gets the timer's key set before each firing.
    :param processing_time_service: the task's ``ProcessingTimeService``
        (``get_current_processing_time() -> ms``, ``register_timer(ts_ms, callback) -> timer``
        with ``cancel()``).
    :param triggerable: called when timers fire.

    Times are epoch ms. Registration and deletion need a current key (they run inside
    ``process_element`` or ``on_timer`` of a keyed operator): without one they raise
    ``RuntimeError`` (Flink's "No key set" message, from the backend).
    """

    def __init__(
        self,
        name: str,
        key_group_range: KeyGroupRange,
        key_context: Any,
        processing_time_service: Any,
        triggerable: Triggerable,
    ) -> None:
        self.name = name
        self.key_group_range = key_group_range
        self._start = key_group_range.start_key_group
        self._key_context = key_context
        self._processing_time_service = processing_time_service
        self._triggerable = triggerable
        n = key_group_range.get_number_of_key_groups()
        self._event_time_timers = _TimerQueue(n)
        self._processing_time_timers = _TimerQueue(n)
        self._current_watermark = MIN_TIMESTAMP
        #: the one physical registration with the ProcessingTimeService (or None)
        self._next_timer: Any = None

    # -- time -----------------------------------------------------------------------------
    def current_processing_time(self) -> int:
        """The task's processing time, epoch ms."""
        return self._processing_time_service.get_current_processing_time()

    def current_watermark(self) -> int:
        """The last watermark passed to :meth:`advance_watermark` (``MIN_TIMESTAMP`` before)."""
        return self._current_watermark

    # -- registration ----------------------------------------------------------------------
    def _current(self) -> Tuple[int, Any]:
        kc = self._key_context
        return kc.get_current_key_group_index() - self._start, kc.get_current_key()

    def register_event_time_timer(self, namespace: Any, time: int) -> None:
        """Register an event-time timer at ``time`` (ms) for the current key and ``namespace``;
        it fires when a watermark >= ``time`` arrives (at once on the next watermark if that
        has passed already)."""
        offset, key = self._current()
        self._event_time_timers.add(offset, time, key, namespace)

    def delete_event_time_timer(self, namespace: Any, time: int) -> None:
        """Delete the current key's event-time timer at ``time`` in ``namespace`` (no-op if absent)."""
        offset, key = self._current()
        self._event_time_timers.remove(offset, time, key, namespace)

    def register_processing_time_timer(self, namespace: Any, time: int) -> None:
        """Register a processing-time timer at ``time`` (ms) for the current key and
        ``namespace``; it fires when the task's processing time reaches ``time``."""
        offset, key = self._current()
        queue = self._processing_time_timers
        old_head = queue.peek()
        if queue.add(offset, time, key, namespace):
            next_trigger_time = MAX_TIMESTAMP if old_head is None else old_head[0]
            if time < next_trigger_time:
                self._schedule(time)

    def delete_processing_time_timer(self, namespace: Any, time: int) -> None:
        """Delete the current key's processing-time timer at ``time`` in ``namespace`` (no-op
        if absent). The physical registration stays (as Flink)."""
        offset, key = self._current()
        self._processing_time_timers.remove(offset, time, key, namespace)

    # -- firing ---------------------------------------------------------------------------
    def advance_watermark(self, time: int) -> None:
        """Set the current watermark to ``time`` (ms) and fire every event-time timer with
        ``timestamp <= time``, earliest first, each with its key current.

        :raises: whatever the triggerable raises; the failing timer is removed already.
        """
        self._current_watermark = time
        self._fire_due(self._event_time_timers, time, self._triggerable.on_event_time)

    def fire_all_for_batch_key(self) -> None:
        """BATCH execution, at the end of one key's input (Flink's
        ``BatchExecutionInternalTimeService`` on a key switch): event time jumps to the end of
        time, firing every event-time timer, then every processing-time timer fires (processing
        time jumps too), until neither domain has one left (a firing timer may register more);
        then the watermark is back at ``MIN_TIMESTAMP`` for the next key, so none of its
        records is late.

        Only the current key has timers here: the previous keys' fired at their own end.
        """
        event, processing = self._event_time_timers, self._processing_time_timers
        while len(event) or len(processing):
            self._current_watermark = MAX_TIMESTAMP
            self._fire_due(event, MAX_TIMESTAMP, self._triggerable.on_event_time)
            self._fire_due(processing, MAX_TIMESTAMP, self._triggerable.on_processing_time)
        self._current_watermark = MIN_TIMESTAMP

    def _on_processing_time(self, time: int) -> None:
        """The ProcessingTimeService callback: fire every processing-time timer with
        ``timestamp <= time`` and register for the next one."""
        self._next_timer = None  # the triggerable may register timers
        entry = self._fire_due(self._processing_time_timers, time, self._triggerable.on_processing_time)
        if entry is not None and self._next_timer is None:
            self._schedule(entry[0])

    def _fire_due(self, queue: Any, time: int, on_timer: Callable[[InternalTimer], None]) -> Any:
        """Remove and fire (``on_timer``) every timer of ``queue`` with ``timestamp <= time``,
        earliest first, each with its key current; return the first entry not due (or
        ``None``). A timer is removed before it fires, so a failing one is gone already."""
        set_key = self._key_context.set_current_key
        while True:
            entry = queue.peek()
            if entry is None or entry[0] > time:
                return entry
            queue.poll_head(entry)
            key = entry[3]
            set_key(key)
            on_timer(InternalTimer(entry[0], key, entry[4]))

    def _schedule(self, time: int) -> None:
        """Make the one physical registration fire at ``time`` (replacing an earlier one)."""
        if self._next_timer is not None:
            self._next_timer.cancel()
            self._next_timer = None
        handle = self._processing_time_service.register_timer(time, self._on_processing_time)
        # A service may fire a due timer inside register_timer (the test service does); the
        # callback then has made the registration for the next timer itself.
        is_done = getattr(handle, "is_done", None)
        if self._next_timer is None and not (is_done is not None and is_done()):
            self._next_timer = handle

    def close(self) -> None:
        """Cancel the physical processing-time registration (the timers themselves stay)."""
        if self._next_timer is not None:
            self._next_timer.cancel()
            self._next_timer = None

    # -- introspection, snapshots --------------------------------------------------------
    def num_event_time_timers(self) -> int:
        return len(self._event_time_timers)

    def num_processing_time_timers(self) -> int:
        return len(self._processing_time_timers)

    def for_each_event_time_timer(self, consumer: Callable[[Any, int], None]) -> None:
        """Call ``consumer(namespace, timestamp)`` for every event-time timer of the current
        key (Flink's ``forEachEventTimeTimer``)."""
        self._for_each(self._event_time_timers, consumer)

    def for_each_processing_time_timer(self, consumer: Callable[[Any, int], None]) -> None:
        """As :meth:`for_each_event_time_timer` for processing-time timers."""
        self._for_each(self._processing_time_timers, consumer)

    def _for_each(self, queue: _TimerQueue, consumer: Callable[[Any, int], None]) -> None:
        offset, key = self._current()
        for timestamp, timer_key, namespace in queue.timers_of(offset):
            if timer_key == key:
                consumer(namespace, timestamp)

    def get_timers_for_key_group(self, key_group: int) -> Tuple[List[InternalTimer], List[InternalTimer]]:
        """``(event_time_timers, processing_time_timers)`` of one key group (absolute index),
        for snapshots.

        :raises ValueError: if ``key_group`` is outside the service's range.
        """
        offset = self._offset_of(key_group)
        return (
            [InternalTimer(*t) for t in self._event_time_timers.timers_of(offset)],
            [InternalTimer(*t) for t in self._processing_time_timers.timers_of(offset)],
        )

    def restore_timers_for_key_group(
        self,
        key_group: int,
        event_time_timers: List[InternalTimer],
        processing_time_timers: List[InternalTimer],
    ) -> None:
        """Add the timers of a restored key group and make sure the earliest processing-time
        timer has a physical registration.

        :raises ValueError: if ``key_group`` is outside the service's range.
        """
        offset = self._offset_of(key_group)
        for t in event_time_timers:
            self._event_time_timers.add(offset, t.timestamp, t.key, t.namespace)
        queue = self._processing_time_timers
        for t in processing_time_timers:
            queue.add(offset, t.timestamp, t.key, t.namespace)
        head = queue.peek()
        if head is not None and (self._next_timer is None or head[0] < _scheduled_time(self._next_timer)):
            self._schedule(head[0])

    def snapshot(self) -> TimerServiceSnapshot:
        """Every timer, key group by key group, each domain in registration order (what
        Flink writes per key group through ``InternalTimerServiceSerializationProxy``)."""
        return self.snapshot_sync().get()

    def snapshot_sync(self) -> PreparedTimerSnapshot:
        """The synchronous part of :meth:`snapshot`: a C-level copy of every key group's
        timers (no ordering, no records); :meth:`PreparedTimerSnapshot.get` gives the
        snapshot on any thread."""
        return PreparedTimerSnapshot(self._start, self._event_time_timers.copy_key_groups(),
                                     self._processing_time_timers.copy_key_groups())

    def restore(self, snapshot: TimerServiceSnapshot) -> None:
        """Add the timers of ``snapshot``'s key groups that lie in this service's range (the
        others belong to another subtask after rescaling)."""
        for key_group, timers in snapshot.key_groups.items():
            if self.key_group_range.contains(key_group):
                self.restore_timers_for_key_group(
                    key_group,
                    [InternalTimer(*t) for t in timers.event_time],
                    [InternalTimer(*t) for t in timers.processing_time],
                )

    def _offset_of(self, key_group: int) -> int:
        if not self.key_group_range.contains(key_group):
            raise ValueError(f"Key group {key_group} is not in {self.key_group_range}.")
        return key_group - self._start

    def __repr__(self) -> str:
        return (
            f"InternalTimerService(name={self.name!r}, event_time_timers={self.num_event_time_timers()}, "
            f"processing_time_timers={self.num_processing_time_timers()}, "
            f"watermark={self._current_watermark})"
        )


def _scheduled_time(handle: Any) -> int:
    return getattr(handle, "timestamp_ms", MIN_TIMESTAMP)


class _Taken:
    """A snapshot taken already, behind the same ``get()`` as :class:`PreparedTimerSnapshot`."""

    __slots__ = ("_snapshot",)

    def __init__(self, snapshot: TimerServiceSnapshot) -> None:
        self._snapshot = snapshot

    def get(self) -> TimerServiceSnapshot:
        return self._snapshot


class InternalTimeServiceManager:
    """The timer services of one keyed operator in one subtask, by name
    (Flink's ``InternalTimeServiceManagerImpl``). The task creates one per keyed operator and
    hands it over as ``StreamOperatorContext.timer_service_manager``;
    ``AbstractStreamOperator.process_watermark`` calls :meth:`advance_watermark` before it
    forwards the watermark.

    :param key_group_range: the subtask's key groups.
    :param key_context: the operator's keyed state backend (current key, key group).
    :param processing_time_service: the task's ``ProcessingTimeService``.
    :param restored: timer service name -> its restored timers; a service gets them when the
        operator first asks for it (as Flink's ``InternalTimeServiceManagerImpl``), so timers
        only fire once their triggerable is bound.
    """

    def __init__(self, key_group_range: KeyGroupRange, key_context: Any, processing_time_service: Any,
                 restored: Optional[Mapping[str, TimerServiceSnapshot]] = None) -> None:
        self.key_group_range = key_group_range
        self._key_context = key_context
        self._processing_time_service = processing_time_service
        self._services: Dict[str, InternalTimerService] = {}
        self._restored: Dict[str, TimerServiceSnapshot] = dict(restored or {})

    def get_internal_timer_service(self, name: str, triggerable: Triggerable) -> InternalTimerService:
        """The service called ``name``, created on first use; ``triggerable`` receives its
        firings (a later call rebinds it, as Flink's ``startTimerService``)."""
        service = self._services.get(name)
        if service is None:
            service = InternalTimerService(
                name, self.key_group_range, self._key_context, self._processing_time_service, triggerable
            )
            self._services[name] = service
            restored = self._restored.pop(name, None)
            if restored is not None:
                service.restore(restored)
        else:
            service._triggerable = triggerable
        return service

    def get_timer_services(self) -> Dict[str, InternalTimerService]:
        """The services by name, in creation order (for snapshots)."""
        return dict(self._services)

    def snapshot(self) -> Dict[str, TimerServiceSnapshot]:
        """Every service's timers by name; restored timers of a service the operator has not
        asked for yet are kept as they were restored."""
        return {name: prepared.get() for name, prepared in self.snapshot_sync().items()}

    def snapshot_sync(self) -> Dict[str, Any]:
        """The synchronous part of :meth:`snapshot`: by name, an object whose ``get()`` gives
        the service's :class:`TimerServiceSnapshot` on any thread (a
        :class:`PreparedTimerSnapshot`, or the restored snapshot of a service not asked for)."""
        prepared: Dict[str, Any] = {name: _Taken(snapshot) for name, snapshot in self._restored.items()}
        prepared.update((name, service.snapshot_sync()) for name, service in self._services.items())
        return prepared

    def advance_watermark(self, timestamp: int) -> None:
        """Advance every service's watermark to ``timestamp`` (ms), firing due event-time
        timers (Flink's ``advanceWatermark``)."""
        for service in self._services.values():
            service.advance_watermark(timestamp)

    def fire_all_for_batch_key(self) -> None:
        """BATCH execution: :meth:`InternalTimerService.fire_all_for_batch_key` of every
        service, until none has a timer left (a timer of one service may register one in
        another)."""
        services = list(self._services.values())
        for service in services:
            service.fire_all_for_batch_key()
        while any(s.num_event_time_timers() or s.num_processing_time_timers() for s in services):
            for service in services:
                service.fire_all_for_batch_key()

    def num_event_time_timers(self) -> int:
        return sum(s.num_event_time_timers() for s in self._services.values())

    def num_processing_time_timers(self) -> int:
        return sum(s.num_processing_time_timers() for s in self._services.values())

    def close(self) -> None:
        """Cancel the services' physical processing-time registrations."""
        for service in self._services.values():
            service.close()
