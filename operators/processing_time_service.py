"""Processing-time timers: the service operators register them with, the timer heap the
services share, and the manual clock of the operator test harnesses.

Follows Flink's ``ProcessingTimeService`` (``org.apache.flink.streaming.api.operators``, the
operator-facing interface) and ``TestProcessingTimeService``. The task's wall-clock service,
whose timers fire as mails on the task thread, is
:class:`rill.runtime.tasks.system_processing_time_service.SystemProcessingTimeService`, in the
runtime, since it needs the task's mailbox.
"""

from __future__ import annotations

import enum
import heapq
import operator
import threading
from abc import ABC, abstractmethod
from typing import Callable

__all__ = [
    "ProcessingTimeCallback",
    "ProcessingTimeService",
    "ScheduledTimer",
    "TimerHeapService",
    "HeapTimer",
    "TimerState",
    "ServiceStatus",
    "TestProcessingTimeService",
]

ProcessingTimeCallback = Callable[[int], None]
"""Called with the timer's timestamp (epoch ms); Flink's ``ProcessingTimeCallback``."""


class ScheduledTimer(ABC):
    """Handle on a registered timer; Flink's ``ScheduledFuture`` of a timer."""

    __slots__ = ()

    @property
    @abstractmethod
    def timestamp_ms(self) -> int:
        """The timestamp (ms) the timer fires at next; for periodic timers it advances."""

    @abstractmethod
    def cancel(self) -> bool:
        """Prevent every future firing; thread-safe.

        A callback already running is not interrupted. Called on the task
        thread, it is guaranteed that the callback does not run afterwards
        (the check happens on the task thread right before the callback).

        Returns:
            ``True`` if the timer was pending and is now cancelled, ``False`` if
            it had already fired (one-shot) or been cancelled.
        """

    @abstractmethod
    def is_cancelled(self) -> bool:
        """``True`` once :meth:`cancel` succeeded (or the timer is a no-op timer)."""

    @abstractmethod
    def is_done(self) -> bool:
        """``True`` once the timer fired (one-shot) or was cancelled."""


class ProcessingTimeService(ABC):
    """Clock and timers of one task; Flink's ``ProcessingTimeService``.

    Callbacks receive the timer's timestamp in epoch milliseconds and, in the
    production implementation, always run on the task thread, so they never
    race with record processing and need no lock.

    Life cycle: running -> quiesced (:meth:`quiesce`: no timer fires any more,
    registering returns a no-op timer) -> terminated (:meth:`shutdown`).
    """

    __slots__ = ()

    @abstractmethod
    def get_current_processing_time(self) -> int:
        """The current processing time in epoch milliseconds."""

    @abstractmethod
    def register_timer(self, timestamp_ms: int, callback: ProcessingTimeCallback) -> ScheduledTimer:
        """Call ``callback(timestamp_ms)`` once the processing time reaches ``timestamp_ms``.

        A timestamp in the past fires as soon as possible. Timers fire in
        timestamp order (registration order among equal timestamps).

        Raises:
            TypeError: if ``timestamp_ms`` is not an integer.
            RuntimeError: if the service has been shut down (a quiesced service
                returns a no-op timer instead).
        """

    @abstractmethod
    def schedule_with_fixed_delay(
        self, callback: ProcessingTimeCallback, initial_delay_ms: int, period_ms: int
    ) -> ScheduledTimer:
        """Fire first after ``initial_delay_ms``, then ``period_ms`` after each firing's end.

        The callback receives the scheduled timestamp. Missed periods are not
        caught up. Runs until cancelled or the service is quiesced.

        Raises:
            ValueError: if ``initial_delay_ms < 0`` or ``period_ms <= 0``.
            RuntimeError: if the service has been shut down.
        """

    @abstractmethod
    def schedule_at_fixed_rate(
        self, callback: ProcessingTimeCallback, initial_delay_ms: int, period_ms: int
    ) -> ScheduledTimer:
        """Fire at ``start + initial_delay_ms + k * period_ms`` for k = 0, 1, ...

        The callback receives the scheduled timestamp. Late firings are caught
        up one after the other (never concurrently). Runs until cancelled or
        the service is quiesced.

        Raises:
            ValueError: if ``initial_delay_ms < 0`` or ``period_ms <= 0``.
            RuntimeError: if the service has been shut down.
        """

    @abstractmethod
    def quiesce(self) -> None:
        """Stop firing timers; later registrations return a no-op timer. Idempotent."""

    @abstractmethod
    def shutdown(self) -> None:
        """Quiesce and release resources (threads). Idempotent."""

    @abstractmethod
    def is_terminated(self) -> bool:
        """``True`` after :meth:`shutdown`."""


# --------------------------------------------------------------------------- timers


class TimerState(enum.Enum):
    """Where a :class:`HeapTimer` is: waiting, fired (one-shot), or cancelled."""

    PENDING = 0
    FIRED = 1
    CANCELLED = 2


class HeapTimer(ScheduledTimer):
    """A one-shot (``period_ms == 0``) or periodic timer of one of the services below."""

    __slots__ = ("callback", "_timestamp_ms", "period_ms", "fixed_rate", "state", "_lock")

    def __init__(
        self,
        callback: ProcessingTimeCallback,
        timestamp_ms: int,
        period_ms: int,
        fixed_rate: bool,
        lock: threading.Lock,
    ) -> None:
        self.callback = callback
        self._timestamp_ms = timestamp_ms
        self.period_ms = period_ms
        self.fixed_rate = fixed_rate
        self.state = TimerState.PENDING
        self._lock = lock  # the owning service's lock guards state transitions

    @property
    def timestamp_ms(self) -> int:
        return self._timestamp_ms

    def cancel(self) -> bool:
        with self._lock:
            if self.state is not TimerState.PENDING:
                return False
            self.state = TimerState.CANCELLED
            return True

    def is_cancelled(self) -> bool:
        return self.state is TimerState.CANCELLED

    def is_done(self) -> bool:
        return self.state is not TimerState.PENDING

    def _advance(self, fired_at_ms: int, now_ms: int) -> None:
        """Move a periodic timer to its next timestamp after firing at ``fired_at_ms``."""
        if self.fixed_rate:
            self._timestamp_ms = fired_at_ms + self.period_ms
        else:
            self._timestamp_ms = now_ms + self.period_ms

    def __repr__(self) -> str:
        kind = "periodic" if self.period_ms else "one-shot"
        return f"ScheduledTimer({kind}, timestamp_ms={self._timestamp_ms}, {self.state.name})"


class _NoOpTimer(ScheduledTimer):
    """Returned by a quiesced service: never fires, counts as cancelled."""

    __slots__ = ("_timestamp_ms",)

    def __init__(self, timestamp_ms: int) -> None:
        self._timestamp_ms = timestamp_ms

    @property
    def timestamp_ms(self) -> int:
        return self._timestamp_ms

    def cancel(self) -> bool:
        return False

    def is_cancelled(self) -> bool:
        return True

    def is_done(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"ScheduledTimer(no-op, timestamp_ms={self._timestamp_ms})"


def _check_timestamp(timestamp_ms: int) -> int:
    if isinstance(timestamp_ms, bool):
        raise TypeError("timestamp_ms must be an int (epoch ms), got bool")
    try:
        return operator.index(timestamp_ms)
    except TypeError:
        raise TypeError(
            f"timestamp_ms must be an int (epoch ms), got {type(timestamp_ms).__name__}"
        ) from None


def _check_period(initial_delay_ms: int, period_ms: int) -> tuple[int, int]:
    initial_delay_ms = _check_timestamp(initial_delay_ms)
    period_ms = _check_timestamp(period_ms)
    if initial_delay_ms < 0:
        raise ValueError(f"initial_delay_ms must be >= 0, got {initial_delay_ms}")
    if period_ms <= 0:
        raise ValueError(f"period_ms must be > 0, got {period_ms}")
    return initial_delay_ms, period_ms


class ServiceStatus(enum.Enum):
    """Life cycle of a :class:`TimerHeapService`: RUNNING, then QUIESCED (registrations return
    no-op timers) and/or TERMINATED (registrations raise ``RuntimeError``)."""

    RUNNING = "RUNNING"
    QUIESCED = "QUIESCED"
    TERMINATED = "TERMINATED"


class TimerHeapService(ProcessingTimeService):
    """Timer bookkeeping shared by the services below.

    Holds a heap of ``(timestamp_ms, seq, timer)`` entries and the life-cycle
    status, both guarded by ``self._lock`` (also the lock of every ``HeapTimer``).
    Subclasses decide what happens once a timer is registered
    (:meth:`_push_locked`, :meth:`_after_register`) and how timers fire.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._heap: list[tuple[int, int, HeapTimer]] = []
        self._seq = 0
        self._status = ServiceStatus.RUNNING

    def register_timer(self, timestamp_ms: int, callback: ProcessingTimeCallback) -> ScheduledTimer:
        timestamp_ms = _check_timestamp(timestamp_ms)
        return self._register(callback, timestamp_ms, 0, False)

    def schedule_with_fixed_delay(
        self, callback: ProcessingTimeCallback, initial_delay_ms: int, period_ms: int
    ) -> ScheduledTimer:
        initial_delay_ms, period_ms = _check_period(initial_delay_ms, period_ms)
        first = self.get_current_processing_time() + initial_delay_ms
        return self._register(callback, first, period_ms, False)

    def schedule_at_fixed_rate(
        self, callback: ProcessingTimeCallback, initial_delay_ms: int, period_ms: int
    ) -> ScheduledTimer:
        initial_delay_ms, period_ms = _check_period(initial_delay_ms, period_ms)
        first = self.get_current_processing_time() + initial_delay_ms
        return self._register(callback, first, period_ms, True)

    def is_terminated(self) -> bool:
        return self._status is ServiceStatus.TERMINATED

    def get_number_of_registered_timers(self) -> int:
        """Timers registered and not cancelled (a periodic timer counts once); thread-safe."""
        with self._lock:
            return sum(1 for _, _, t in self._heap if t.state is TimerState.PENDING)

    def _stop_locked(self, status: ServiceStatus) -> None:
        """Move to QUIESCED (only from RUNNING) or TERMINATED and drop pending timers, which
        end cancelled (as the delayed tasks of Flink's timer executor on shutdown): whoever
        holds one sees it done and never fired."""
        if status is ServiceStatus.TERMINATED or self._status is ServiceStatus.RUNNING:
            self._status = status
        for _, _, timer in self._heap:
            if timer.state is TimerState.PENDING:
                timer.state = TimerState.CANCELLED
        self._heap.clear()

    def _register(
        self, callback: ProcessingTimeCallback, timestamp_ms: int, period_ms: int, fixed_rate: bool
    ) -> ScheduledTimer:
        if not callable(callback):
            raise TypeError("callback must be callable with the timestamp (ms)")
        with self._lock:
            if self._status is ServiceStatus.QUIESCED:
                return _NoOpTimer(timestamp_ms)
            if self._status is ServiceStatus.TERMINATED:
                raise RuntimeError(self._shut_down_message())
            timer = HeapTimer(callback, timestamp_ms, period_ms, fixed_rate, self._lock)
            self._push_locked(timer)
        self._after_register(timer)
        return timer

    def _shut_down_message(self) -> str:
        return f"{type(self).__name__} is shut down"

    def _push_locked(self, timer: HeapTimer) -> None:
        """Push a new or rescheduled timer (``self._lock`` held)."""
        self._seq += 1
        heapq.heappush(self._heap, (timer._timestamp_ms, self._seq, timer))

    def _after_register(self, timer: HeapTimer) -> None:
        """Called after a registration, with ``self._lock`` released."""

    def _claim_locked(self, timer: HeapTimer) -> bool:
        """Whether ``timer`` may fire now (``self._lock`` held); a one-shot one becomes FIRED."""
        if timer.state is not TimerState.PENDING:
            return False
        if self._status is not ServiceStatus.RUNNING:
            timer.state = TimerState.CANCELLED  # its mail was queued before the quiesce
            return False
        if not timer.period_ms:
            timer.state = TimerState.FIRED
        return True


# ------------------------------------------------------------------ system service


# -------------------------------------------------------------------- test service


class TestProcessingTimeService(TimerHeapService):
    """A manual clock for tests; Flink's ``TestProcessingTimeService``.

    The clock starts at ``start_time_ms`` (0) and only moves through
    :meth:`set_current_time`, which fires every due timer synchronously on the
    caller's thread, in timestamp order (registration order among equal
    timestamps). Timers that callbacks register, if already due, fire within
    the same call; periodic timers catch up (fixed rate) or fire once and move
    relative to the new time (fixed delay). Registering a due timer outside
    ``set_current_time`` fires it immediately, as Flink's does.

    Threading: meant for one thread (the test's); internal structures are
    locked, but ``set_current_time`` must not be called concurrently.
    """

    __test__ = False  # not a pytest test class

    def __init__(self, start_time_ms: int = 0) -> None:
        super().__init__()
        self._current_time_ms = _check_timestamp(start_time_ms)
        self._firing = False

    def get_current_processing_time(self) -> int:
        return self._current_time_ms

    def set_current_time(self, timestamp_ms: int) -> None:
        """Set the clock to ``timestamp_ms`` and fire all due timers (caller's thread).

        Setting an earlier time is allowed (as in Flink) and fires nothing.

        Raises:
            TypeError: if ``timestamp_ms`` is not an integer.
            Exception: whatever a callback raises; timers not yet fired stay
                registered.
        """
        self._current_time_ms = _check_timestamp(timestamp_ms)
        self._fire_due_timers()

    def quiesce(self) -> None:
        with self._lock:
            self._stop_locked(ServiceStatus.QUIESCED)

    def shutdown(self) -> None:
        with self._lock:
            self._stop_locked(ServiceStatus.TERMINATED)

    def get_active_timer_timestamps(self) -> list[int]:
        """Sorted timestamps (ms) of the registered, not cancelled timers."""
        with self._lock:
            return sorted(ts for ts, _, t in self._heap if t.state is TimerState.PENDING)

    def _after_register(self, timer: HeapTimer) -> None:
        if timer._timestamp_ms <= self._current_time_ms:
            self._fire_due_timers()  # a due timer fires at once, as in Flink

    def _fire_due_timers(self) -> None:
        if self._firing:
            return  # the outer call picks up timers registered by callbacks
        self._firing = True
        try:
            while True:
                with self._lock:
                    heap = self._heap
                    if (
                        self._status is not ServiceStatus.RUNNING
                        or not heap
                        or heap[0][0] > self._current_time_ms
                    ):
                        return
                    timer = heapq.heappop(heap)[2]
                    if not self._claim_locked(timer):
                        continue
                timestamp_ms = timer._timestamp_ms
                timer.callback(timestamp_ms)
                if timer.period_ms:
                    with self._lock:
                        if timer.state is TimerState.PENDING and self._status is ServiceStatus.RUNNING:
                            timer._advance(timestamp_ms, self._current_time_ms)
                            self._push_locked(timer)
        finally:
            self._firing = False

    def __repr__(self) -> str:
        return f"TestProcessingTimeService(time_ms={self._current_time_ms}, {self._status.value})"
