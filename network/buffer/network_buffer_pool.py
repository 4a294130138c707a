"""The process's budget of network buffers (Flink's ``NetworkBufferPool``).

A :class:`NetworkBufferPool` holds ``total_segments`` fixed-size memory segments of
``segment_size_bytes`` each: everything one TaskExecutor process may keep in network buffers.
Every buffer pool of the network stack takes its segments from it and gives them back:

* a produced partition's :class:`~rill.network.buffer.buffer_pool.LocalBufferPool`, carved by
  :meth:`NetworkBufferPool.create_buffer_pool` (Flink's ``createBufferPool``); destroying the
  pool returns its free segments at once, and each buffer still in flight when it was destroyed
  returns its segment when the consumer recycles it;
* an input gate's receiving buffers for remote channels -- each remote channel's exclusive
  buffers and the gate's floating buffers -- taken with :meth:`NetworkBufferPool.request_segments`
  (Flink's ``requestUnpooledMemorySegments`` at gate set-up) and returned through the
  :class:`SegmentLease` as the channels are released.

When a request cannot get its *required* segments it raises
:class:`InsufficientNetworkBuffersError` with Flink's message, so a job whose network needs do
not fit fails at deployment instead of deadlocking later.

Rill's accounting unit: **one buffer is one segment.** A remote exchange serializes each buffer
into segments of ``segment_size_bytes`` (as Flink's 32 KiB segments), so the budget is real
memory there. A *local* buffer holds a batch of up to ``records_per_buffer`` Python records,
not bytes (see :mod:`rill.network.buffer.buffer`): it still counts as one segment, which bounds
the number of batches in flight, not their size in bytes.

Differences from Flink: no memory is allocated up front (a segment is a count); pools have a
fixed size chosen when they are carved (no later redistribution of excess segments between
pools), see :meth:`NetworkBufferPool.create_buffer_pool`.

Thread-safety: every method may be called from any thread (one lock, taken once per request
and once per returned batch of segments; never on a buffer's hot path while its pool lives).
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from typing import Optional

from .buffer_pool import LocalBufferPool

__all__ = [
    "NetworkBufferPool",
    "NetworkBufferPoolStatistics",
    "SegmentLease",
    "InsufficientNetworkBuffersError",
    "DEFAULT_MEMORY_SEGMENT_SIZE_BYTES",
    "NETWORK_MEMORY_MAX_KEY",
]

#: Flink's default ``taskmanager.memory.segment-size`` (32 KiB).
DEFAULT_MEMORY_SEGMENT_SIZE_BYTES = 32 * 1024

#: The configuration key that sets the budget, named in :class:`InsufficientNetworkBuffersError`
#: (Rill's ``ConfigOptions.NETWORK_MEMORY_MAX``).
NETWORK_MEMORY_MAX_KEY = "taskmanager.memory.network.max"


class InsufficientNetworkBuffersError(IOError):
    """A request needs more segments than the :class:`NetworkBufferPool` has available
    (Flink's ``IOException: Insufficient number of network buffers``).

    :param required: segments the request needed at least.
    :param available: segments available when it was made.
    :param total: the pool's ``total_segments``.
    :param segment_size_bytes: the size of one segment (bytes).
    :param detail: an optional sentence appended to the message (e.g. which task asked).

    The message (``str(error)``) is Flink's, with Rill's option key::

        Insufficient number of network buffers: required 17, but only 5 available. The total
        number of network buffers is currently set to 64 of 32768 bytes each. You can increase
        this number by setting the configuration key 'taskmanager.memory.network.max'.

    :ivar required: as given. :ivar available: as given. :ivar total: as given.
    :ivar segment_size_bytes: as given.
    """

    def __init__(self, required: int, available: int, total: int, segment_size_bytes: int,
                 detail: str = "") -> None:
        message = (
            f"Insufficient number of network buffers: required {required}, but only {available} "
            f"available. The total number of network buffers is currently set to {total} of "
            f"{segment_size_bytes} bytes each. You can increase this number by setting the "
            f"configuration key '{NETWORK_MEMORY_MAX_KEY}'."
        )
        if detail:
            message = f"{message} {detail}"
        super().__init__(message)
        self.required = required
        self.available = available
        self.total = total
        self.segment_size_bytes = segment_size_bytes

    def __str__(self) -> str:  # OSError's str would prefix an errno for two-argument forms
        return self.args[0]

    def __reduce__(self):  # picklable (a deployment error may cross a process boundary)
        return (_rebuild_insufficient, (self.args[0], self.required, self.available, self.total,
                                        self.segment_size_bytes))


def _rebuild_insufficient(message, required, available, total, segment_size_bytes):
    error = InsufficientNetworkBuffersError(required, available, total, segment_size_bytes)
    error.args = (message,)
    return error


@dataclass(frozen=True, slots=True)
class NetworkBufferPoolStatistics:
    """A consistent snapshot of a :class:`NetworkBufferPool` (Flink's ``TotalMemorySegments``,
    ``AvailableMemorySegments``, ``UsedMemorySegments`` gauges).

    :ivar total_segments: the budget (segments).
    :ivar available_segments: segments no holder has now.
    :ivar used_segments: ``total - available``: segments held by pools and gates.
    :ivar peak_used_segments: the highest ``used_segments`` seen.
    :ivar segment_size_bytes: bytes per segment.
    :ivar holders: ``(name, segments)`` of every holder with segments now, in request order
        (a local buffer pool or a gate's receiving buffers).
    """

    total_segments: int
    available_segments: int
    used_segments: int
    peak_used_segments: int
    segment_size_bytes: int
    holders: tuple[tuple[str, int], ...]

    @property
    def total_bytes(self) -> int:
        """``total_segments * segment_size_bytes``."""
        return self.total_segments * self.segment_size_bytes

    @property
    def usage(self) -> float:
        """``used / total`` in [0, 1] (0.0 for an empty budget)."""
        return self.used_segments / self.total_segments if self.total_segments else 0.0


class SegmentLease:
    """Segments taken from a :class:`NetworkBufferPool` by one holder; give them back with
    :meth:`recycle` (all at once or a few at a time).

    Created by :meth:`NetworkBufferPool.request_segments` only.

    :ivar name: the holder's name (statistics, messages).
    """

    __slots__ = ("name", "_pool", "_key", "_segments", "_granted")

    def __init__(self, pool: "NetworkBufferPool", key: int, name: str, segments: int) -> None:
        self.name = name
        self._pool = pool
        self._key = key
        self._segments = segments
        self._granted = segments

    @property
    def segments(self) -> int:
        """Segments still held (``granted`` minus those recycled)."""
        return self._segments

    @property
    def granted(self) -> int:
        """Segments granted by the request."""
        return self._granted

    def recycle(self, count: Optional[int] = None) -> None:
        """Give ``count`` segments back (``None``: all still held). Thread-safe; recycling
        ``None`` from a lease holding nothing is a no-op.

        :raises ValueError: if ``count`` is negative or more than the lease holds.
        """
        self._pool._recycle(self, count)

    def __repr__(self) -> str:
        return f"SegmentLease({self.name!r}, {self._segments}/{self._granted} segments)"


class NetworkBufferPool:
    """The process's budget of network memory segments (Flink's ``NetworkBufferPool``).

    :param total_segments: segments in the budget (>= 0), e.g.
        ``taskmanager.memory.network.max // taskmanager.memory.segment-size``.
    :param segment_size_bytes: bytes per segment (> 0; Flink's default 32 KiB). Only reported
        (statistics, messages): a segment is a count, no memory is allocated.
    :raises ValueError: for a negative ``total_segments`` or a non-positive segment size.
    """

    def __init__(self, total_segments: int, segment_size_bytes: int = DEFAULT_MEMORY_SEGMENT_SIZE_BYTES) -> None:
        for name, value, minimum in (("total_segments", total_segments, 0),
                                     ("segment_size_bytes", segment_size_bytes, 1)):
            if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                raise ValueError(f"NetworkBufferPool {name} must be an int >= {minimum}, got {value!r}")
        self._total = total_segments
        self._segment_size = segment_size_bytes
        self._available = total_segments
        self._peak_used = 0
        self._lock = threading.Lock()
        self._holders: dict[int, SegmentLease] = {}
        self._keys = itertools.count()

    @classmethod
    def from_memory_size(cls, max_bytes: int,
                         segment_size_bytes: int = DEFAULT_MEMORY_SEGMENT_SIZE_BYTES) -> "NetworkBufferPool":
        """A budget of ``max_bytes // segment_size_bytes`` segments (Flink derives the number
        of segments from the network memory size the same way).

        :raises ValueError: for a negative ``max_bytes`` or a non-positive segment size.
        """
        if not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes < 0:
            raise ValueError(f"The network memory size must be an int >= 0 (bytes), got {max_bytes!r}")
        if not isinstance(segment_size_bytes, int) or isinstance(segment_size_bytes, bool) or segment_size_bytes < 1:
            raise ValueError(f"The segment size must be an int >= 1 (bytes), got {segment_size_bytes!r}")
        return cls(max_bytes // segment_size_bytes, segment_size_bytes)

    # ------------------------------------------------------------------ requests

    def create_buffer_pool(self, num_required: int, max_buffers: int, name: str = "LocalBufferPool") -> LocalBufferPool:
        """Carve a :class:`LocalBufferPool` for a produced partition (Flink's
        ``createBufferPool(numRequiredBuffers, maxUsedBuffers)``).

        The pool gets ``min(max_buffers, available)`` segments, at least ``num_required``, and
        keeps that size (no redistribution: a pool created when the budget is tight stays
        small). Destroying it gives its segments back (see the module's docstring).

        :param num_required: buffers the pool needs at least (>= 1).
        :param max_buffers: buffers it may use at most (>= ``num_required``).
        :param name: the pool's name.
        :raises InsufficientNetworkBuffersError: if fewer than ``num_required`` segments are
            available.
        :raises ValueError: for ``num_required < 1`` or ``max_buffers < num_required``.
        """
        if not isinstance(num_required, int) or isinstance(num_required, bool) or num_required < 1:
            raise ValueError(f"A buffer pool needs num_required >= 1, got {num_required!r}")
        lease = self.request_segments(num_required, max_buffers, name)
        return LocalBufferPool(lease.granted, name, segment_recycler=lease.recycle)

    def request_segments(self, num_required: int, max_segments: Optional[int] = None,
                         name: str = "segments") -> SegmentLease:
        """Take between ``num_required`` and ``max_segments`` segments, as many as available
        (Flink's ``requestUnpooledMemorySegments``, used for an input gate's exclusive and
        floating buffers).

        :param num_required: segments needed at least (>= 0).
        :param max_segments: segments wanted at most (>= ``num_required``); ``None``: exactly
            ``num_required``.
        :param name: the holder's name (statistics).
        :returns: a :class:`SegmentLease` with ``granted`` segments.
        :raises InsufficientNetworkBuffersError: if fewer than ``num_required`` are available.
        :raises ValueError: for a negative ``num_required`` or ``max_segments < num_required``.
        """
        if max_segments is None:
            max_segments = num_required
        if not isinstance(num_required, int) or isinstance(num_required, bool) or num_required < 0:
            raise ValueError(f"num_required must be an int >= 0, got {num_required!r}")
        if not isinstance(max_segments, int) or isinstance(max_segments, bool) or max_segments < num_required:
            raise ValueError(
                f"max_segments must be an int >= num_required ({num_required}), got {max_segments!r}")
        with self._lock:
            available = self._available
            if num_required > available:
                raise InsufficientNetworkBuffersError(num_required, available, self._total, self._segment_size)
            granted = min(max_segments, available)
            self._available = available - granted
            used = self._total - self._available
            if used > self._peak_used:
                self._peak_used = used
            lease = SegmentLease(self, next(self._keys), name, granted)
            if granted:
                self._holders[lease._key] = lease
        return lease

    def _recycle(self, lease: SegmentLease, count: Optional[int]) -> None:
        with self._lock:
            held = lease._segments
            if count is None:
                count = held
            if not isinstance(count, int) or count < 0 or count > held:
                raise ValueError(f"{lease!r}: cannot recycle {count!r} segments (holds {held})")
            lease._segments = held - count
            self._available += count
            if lease._segments == 0:
                self._holders.pop(lease._key, None)

    # ------------------------------------------------------------------ statistics

    def get_total_number_of_memory_segments(self) -> int:
        """The budget (segments)."""
        return self._total

    def get_number_of_available_memory_segments(self) -> int:
        """Segments no holder has now."""
        return self._available

    def get_number_of_used_memory_segments(self) -> int:
        """Segments held by pools and gates now."""
        return self._total - self._available

    def get_memory_segment_size(self) -> int:
        """Bytes per segment."""
        return self._segment_size

    def statistics(self) -> NetworkBufferPoolStatistics:
        """A consistent :class:`NetworkBufferPoolStatistics` snapshot."""
        with self._lock:
            return NetworkBufferPoolStatistics(
                total_segments=self._total,
                available_segments=self._available,
                used_segments=self._total - self._available,
                peak_used_segments=self._peak_used,
                segment_size_bytes=self._segment_size,
                holders=tuple((h.name, h._segments) for h in self._holders.values()),
            )

    def __repr__(self) -> str:
        return (
            f"NetworkBufferPool(available={self._available}/{self._total} segments of "
            f"{self._segment_size} bytes)"
        )
