"""A bounded pool of buffers: where backpressure blocks a writer and becomes measurable.

Follows Flink's ``LocalBufferPool`` (``io/network/buffer``). A pool of ``num_buffers`` slots
bounds how many buffers of one producer are *in flight*: a slot is taken when the writer sends a
buffer (:meth:`LocalBufferPool.request_buffer_blocking`) and returned when the consumer has
processed it (:meth:`~rill.network.buffer.buffer.Buffer.recycle_buffer`). When the consumer falls
behind, every slot sits in a subpartition queue or in the consumer's hands, the writer blocks in
``request_buffer_blocking`` and the time it spends there accumulates in
:attr:`LocalBufferPool.back_pressured_time_ns` (Flink's ``backPressuredTimeMsPerSecond`` is the
rate of that counter).

Differences from Flink: a slot is only a count and buffer objects are created fresh (in-process
buffers hold Python lists, see :mod:`rill.network.buffer.buffer`); the pool size is fixed (no
redistribution). A pool carved from the process's
:class:`~rill.network.buffer.network_buffer_pool.NetworkBufferPool` holds one segment of that
budget per slot and gives the segments back through its ``segment_recycler`` when destroyed.

Thread-safety: every method may be called from any thread. One lock per pool, taken once per
buffer request and once per recycle, never per record.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional

from .buffer import Buffer, BufferRecycler

__all__ = ["LocalBufferPool", "BufferPoolStatistics", "BufferPoolDestroyedError"]


class BufferPoolDestroyedError(RuntimeError):
    """Raised by a request on a destroyed pool, including requests that were blocked when
    :meth:`LocalBufferPool.destroy` was called (Flink throws ``CancelTaskException`` /
    ``IllegalStateException("Buffer pool is destroyed.")``). A task being cancelled sees this
    instead of staying blocked on a full pool."""


@dataclass(frozen=True, slots=True)
class BufferPoolStatistics:
    """A snapshot of a pool (in the spirit of trio's ``MemoryChannelStatistics``).

    :ivar name: the pool's name.
    :ivar total_buffers: the pool size (buffers).
    :ivar used_buffers: buffers requested and not yet recycled (in flight).
    :ivar peak_used_buffers: the highest ``used_buffers`` seen since the pool was created.
    :ivar requesters_blocked: threads blocked in ``request_buffer_blocking`` right now.
    :ivar back_pressured_time_ns: total time requesters spent blocked (ns), including the
        ongoing wait of the currently blocked ones.
    :ivar destroyed: whether :meth:`LocalBufferPool.destroy` was called.
    """

    name: str
    total_buffers: int
    used_buffers: int
    peak_used_buffers: int
    requesters_blocked: int
    back_pressured_time_ns: int
    destroyed: bool


class LocalBufferPool(BufferRecycler):
    """A fixed number of buffer slots shared by one producer's subpartitions.

    :param num_buffers: the number of buffers that may be in flight at once (>= 1).
    :param name: a name for statistics and error messages, e.g. ``"Map (2/4) output"``.
    :param segment_recycler: where the pool's memory segments go back, called with a number
        of segments (outside the pool's lock): on :meth:`destroy` with the free slots, then
        with 1 for each buffer recycled after it. ``None`` (the default) for a pool that is not
        carved from a :class:`~rill.network.buffer.network_buffer_pool.NetworkBufferPool`.
    :raises ValueError: if ``num_buffers < 1``.

    Life cycle: created with the ResultPartition it serves, :meth:`destroy` ed when the task ends
    or is cancelled. Buffers recycled after ``destroy`` are accepted and counted back (and their
    segments returned to the ``segment_recycler``).
    """

    def __init__(self, num_buffers: int, name: str = "LocalBufferPool", *,
                 segment_recycler: Optional[Callable[[int], None]] = None) -> None:
        if not isinstance(num_buffers, int) or isinstance(num_buffers, bool) or num_buffers < 1:
            raise ValueError(f"A buffer pool needs at least 1 buffer, got num_buffers={num_buffers!r}")
        self._name = name
        self._segment_recycler = segment_recycler
        self._total = num_buffers
        self._used = 0
        self._peak = 0
        self._cond = threading.Condition(threading.Lock())
        self._destroyed = False
        self._waiters = 0
        # Sum of the start times (ns) of the waits in progress: the ongoing back-pressured time
        # is ``waiters * now - sum_of_starts``, without a per-waiter structure.
        self._wait_start_sum_ns = 0
        self._back_pressured_done_ns = 0
        self._availability_listeners: list[Callable[[], None]] = []

    # ------------------------------------------------------------------ requests

    @property
    def name(self) -> str:
        """The pool's name (statistics, messages)."""
        return self._name

    def request_buffer(self) -> Optional[Buffer]:
        """Take a slot without blocking (Flink's ``requestBuffer``).

        :returns: an empty :class:`Buffer` (``values == []``, ``timestamps is None``) recycled
            into this pool, or ``None`` if every slot is in flight.
        :raises BufferPoolDestroyedError: if the pool was destroyed.
        """
        with self._cond:
            if self._destroyed:
                raise BufferPoolDestroyedError(f"Buffer pool {self._name!r} is destroyed")
            if self._used >= self._total:
                return None
            self._take_locked()
        return Buffer([], None, self)

    def request_buffer_blocking(self) -> Buffer:
        """Take a slot, blocking while none is free (Flink's ``requestBufferBuilderBlocking``).

        This is where backpressure stops a writer. The time spent blocked is added to
        :attr:`back_pressured_time_ns`.

        :returns: an empty :class:`Buffer` recycled into this pool.
        :raises BufferPoolDestroyedError: if the pool is destroyed before or while waiting.
        """
        cond = self._cond
        with cond:
            if self._destroyed:
                raise BufferPoolDestroyedError(f"Buffer pool {self._name!r} is destroyed")
            if self._used >= self._total:
                start = time.perf_counter_ns()
                self._waiters += 1
                self._wait_start_sum_ns += start
                try:
                    while self._used >= self._total and not self._destroyed:
                        cond.wait()
                finally:
                    self._waiters -= 1
                    self._wait_start_sum_ns -= start
                    self._back_pressured_done_ns += time.perf_counter_ns() - start
                if self._destroyed:
                    raise BufferPoolDestroyedError(
                        f"Buffer pool {self._name!r} was destroyed while waiting for a buffer"
                    )
            self._take_locked()
        return Buffer([], None, self)

    def _take_locked(self) -> None:
        used = self._used + 1
        self._used = used
        if used > self._peak:
            self._peak = used

    # ------------------------------------------------------------------ recycling

    def recycle(self, buffer: Buffer) -> None:
        """Return one slot (called by :meth:`Buffer.recycle_buffer`, from the consumer thread).

        Wakes one blocked requester, and fires the one-shot availability listeners if the pool
        was exhausted.

        :raises RuntimeError: if more buffers are recycled than were requested (a recycling bug).
        """
        listeners: list[Callable[[], None]] = []
        with self._cond:
            if self._used <= 0:
                raise RuntimeError(
                    f"Buffer pool {self._name!r}: {buffer!r} recycled but no buffer is in flight"
                )
            was_exhausted = self._used >= self._total
            self._used -= 1
            if self._waiters:
                self._cond.notify()
            if was_exhausted and self._availability_listeners:
                listeners = self._availability_listeners
                self._availability_listeners = []
            segment_back = self._destroyed and self._segment_recycler is not None
        if segment_back:
            self._segment_recycler(1)  # type: ignore[misc]
        for listener in listeners:
            listener()

    # ------------------------------------------------------------------ availability

    def is_available(self) -> bool:
        """Whether a buffer can be requested right now without blocking (a snapshot: another
        requester may take it first)."""
        return self._used < self._total and not self._destroyed

    def add_availability_listener(self, listener: Callable[[], None]) -> bool:
        """Register a one-shot callback for the next time a slot frees up in an exhausted pool
        (Flink's ``getAvailableFuture()``, as a callback): a task can suspend its default action
        instead of blocking its thread, and resume from a mail posted by ``listener``.

        :param listener: a cheap, thread-safe callable; runs on the recycling (consumer) thread.
        :returns: ``False`` (and does not register) if a buffer is available already, so the
            caller never waits for a notification that will not come.
        """
        with self._cond:
            if self._used < self._total or self._destroyed:
                return False
            self._availability_listeners.append(listener)
            return True

    # ------------------------------------------------------------------ life cycle, metrics

    def destroy(self) -> None:
        """Destroy the pool: every blocked and every later request raises
        :class:`BufferPoolDestroyedError`; pending availability listeners fire once so suspended
        tasks wake up. Idempotent. Buffers still in flight may be recycled afterwards.

        With a ``segment_recycler``, the free slots' segments go back at once and each buffer
        in flight gives its segment back when recycled, so once every buffer is recycled the
        whole pool has been returned."""
        with self._cond:
            if self._destroyed:
                return
            self._destroyed = True
            self._cond.notify_all()
            listeners, self._availability_listeners = self._availability_listeners, []
            free_segments = self._total - self._used
        if free_segments and self._segment_recycler is not None:
            self._segment_recycler(free_segments)
        for listener in listeners:
            listener()

    def is_destroyed(self) -> bool:
        """Whether :meth:`destroy` was called."""
        return self._destroyed

    def get_number_of_buffers(self) -> int:
        """The pool size (buffers)."""
        return self._total

    def get_number_of_available_buffers(self) -> int:
        """Buffers that can be requested now: ``total - in flight``."""
        return self._total - self._used

    def get_number_of_used_buffers(self) -> int:
        """Buffers requested and not yet recycled."""
        return self._used

    def usage(self) -> float:
        """Fraction of the pool in flight, in [0, 1] (Flink's ``outPoolUsage`` for one pool)."""
        return self._used / self._total

    @property
    def back_pressured_time_ns(self) -> int:
        """Total ns requesters spent blocked in :meth:`request_buffer_blocking`, including the
        time so far of waits still in progress (monotonic; read from any thread)."""
        with self._cond:
            return self._back_pressured_time_locked()

    def _back_pressured_time_locked(self) -> int:
        ongoing = 0
        if self._waiters:
            ongoing = self._waiters * time.perf_counter_ns() - self._wait_start_sum_ns
        return self._back_pressured_done_ns + ongoing

    def statistics(self) -> BufferPoolStatistics:
        """A consistent :class:`BufferPoolStatistics` snapshot."""
        with self._cond:
            return BufferPoolStatistics(
                name=self._name,
                total_buffers=self._total,
                used_buffers=self._used,
                peak_used_buffers=self._peak,
                requesters_blocked=self._waiters,
                back_pressured_time_ns=self._back_pressured_time_locked(),
                destroyed=self._destroyed,
            )

    def __repr__(self) -> str:
        return (
            f"LocalBufferPool(name={self._name!r}, used={self._used}/{self._total}"
            f"{', destroyed' if self._destroyed else ''})"
        )
