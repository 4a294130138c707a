"""Processing-time timers for a task, fired on the task thread through its mailbox.

Follows Flink's ``ProcessingTimeService``, ``SystemProcessingTimeService`` and
``TestProcessingTimeService`` (``org.apache.flink.streaming.runtime.tasks``).
"""

from __future__ import annotations

import enum
import heapq
import logging
import operator
import threading
import time
from abc import ABC, abstractmethod
from typing import Callable

from rill.runtime.mailbox import MailboxClosedError, MailboxExecutor, MailPriority

__all__ = [
    "ProcessingTimeCallback",
    "ProcessingTimeService",
    "ScheduledTimer",
    "SystemProcessingTimeService",
    "TestProcessingTimeService",
]

_LOG = logging.getLogger(__name__)

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


class _TimerState(enum.Enum):
    PENDING = 0
    FIRED = 1
    CANCELLED = 2


class _Timer(ScheduledTimer):
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
        self.state = _TimerState.PENDING
        self._lock = lock  # the owning service's lock guards state transitions

    @property
    def timestamp_ms(self) -> int:
        return self._timestamp_ms

    def cancel(self) -> bool:
        with self._lock:
            if self.state is not _TimerState.PENDING:
                return False
            self.state = _TimerState.CANCELLED
            return True

    def is_cancelled(self) -> bool:
        return self.state is _TimerState.CANCELLED

    def is_done(self) -> bool:
        return self.state is not _TimerState.PENDING

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


class _Status(enum.Enum):
    RUNNING = "RUNNING"
    QUIESCED = "QUIESCED"
    TERMINATED = "TERMINATED"


class _TimerHeapService(ProcessingTimeService):
    """Timer bookkeeping shared by the services below.

    Holds a heap of ``(timestamp_ms, seq, timer)`` entries and the life-cycle
    status, both guarded by ``self._lock`` (also the lock of every ``_Timer``).
    Subclasses decide what happens once a timer is registered
    (:meth:`_push_locked`, :meth:`_after_register`) and how timers fire.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._heap: list[tuple[int, int, _Timer]] = []
        self._seq = 0
        self._status = _Status.RUNNING

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
        return self._status is _Status.TERMINATED

    def get_number_of_registered_timers(self) -> int:
        """Timers registered and not cancelled (a periodic timer counts once); thread-safe."""
        with self._lock:
            return sum(1 for _, _, t in self._heap if t.state is _TimerState.PENDING)

    def _stop_locked(self, status: _Status) -> None:
        """Move to QUIESCED (only from RUNNING) or TERMINATED and drop pending timers, which
        end cancelled (as the delayed tasks of Flink's timer executor on shutdown): whoever
        holds one sees it done and never fired."""
        if status is _Status.TERMINATED or self._status is _Status.RUNNING:
            self._status = status
        for _, _, timer in self._heap:
            if timer.state is _TimerState.PENDING:
                timer.state = _TimerState.CANCELLED
        self._heap.clear()

    def _register(
        self, callback: ProcessingTimeCallback, timestamp_ms: int, period_ms: int, fixed_rate: bool
    ) -> ScheduledTimer:
        if not callable(callback):
            raise TypeError("callback must be callable with the timestamp (ms)")
        with self._lock:
            if self._status is _Status.QUIESCED:
                return _NoOpTimer(timestamp_ms)
            if self._status is _Status.TERMINATED:
                raise RuntimeError(self._shut_down_message())
            timer = _Timer(callback, timestamp_ms, period_ms, fixed_rate, self._lock)
            self._push_locked(timer)
        self._after_register(timer)
        return timer

    def _shut_down_message(self) -> str:
        return f"{type(self).__name__} is shut down"

    def _push_locked(self, timer: _Timer) -> None:
        """Push a new or rescheduled timer (``self._lock`` held)."""
        self._seq += 1
        heapq.heappush(self._heap, (timer._timestamp_ms, self._seq, timer))

    def _after_register(self, timer: _Timer) -> None:
        """Called after a registration, with ``self._lock`` released."""

    def _claim_locked(self, timer: _Timer) -> bool:
        """Whether ``timer`` may fire now (``self._lock`` held); a one-shot one becomes FIRED."""
        if timer.state is not _TimerState.PENDING:
            return False
        if self._status is not _Status.RUNNING:
            timer.state = _TimerState.CANCELLED  # its mail was queued before the quiesce
            return False
        if not timer.period_ms:
            timer.state = _TimerState.FIRED
        return True


# ------------------------------------------------------------------ system service


class SystemProcessingTimeService(_TimerHeapService):
    """Wall-clock timers whose callbacks run as mails on the task thread.

    Follows Flink's ``SystemProcessingTimeService`` together with StreamTask's
    ``deferCallbackToMailbox``: one daemon thread per service (named
    ``"Time Trigger for <task_name>"``, started on the first registration)
    sleeps on a heap of deadlines. When timers are due it does not call them:
    it puts one mail per timer, in timestamp order, into the task's mailbox
    through ``mailbox_executor`` with ``priority``; the task thread then runs
    the callback ahead of its next unit of input. Hence callbacks never race
    with record processing, and a callback that raises fails the task (the
    exception propagates out of the mailbox loop).

    Threading: every method is thread-safe. Callbacks run on the task thread.
    Cancelling on the task thread guarantees the callback will not run, even
    if its mail is already queued. Timer mails that the mailbox rejects
    (quiesced or closed) are dropped.

    Clock: ``time.time_ns() // 1_000_000`` (epoch ms). Deadlines are awaited on
    a condition variable; a wall-clock jump backwards delays timers.

    Args:
        mailbox_executor: executor of the task whose thread runs the callbacks.
        priority: priority of the timer mails (default ``MailPriority.TIMER``).
        task_name: used in the timer thread's name.
    """

    def __init__(
        self,
        mailbox_executor: MailboxExecutor,
        priority: int = MailPriority.TIMER,
        *,
        task_name: str = "task",
    ) -> None:
        if mailbox_executor.priority != priority:
            mailbox_executor = mailbox_executor.with_priority(priority)
        super().__init__()
        self._executor = mailbox_executor
        self._cond = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._thread_name = f"Time Trigger for {task_name}"
        self._compact_threshold = 64  # heap size that triggers dropping cancelled timers

    # -------------------------------------------------------------- public API

    def get_current_processing_time(self) -> int:
        return time.time_ns() // 1_000_000

    def quiesce(self) -> None:
        """Stop firing: pending timers are dropped and queued timer mails do nothing.

        A callback already running on the task thread completes. Later
        registrations return a no-op timer. Thread-safe, idempotent.
        """
        with self._cond:
            self._stop_locked(_Status.QUIESCED)
            self._cond.notify_all()

    def shutdown(self) -> None:
        """Quiesce, stop the timer thread and join it (promptly). Idempotent.

        Registering afterwards raises ``RuntimeError``.
        """
        with self._cond:
            self._stop_locked(_Status.TERMINATED)
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5.0)

    # --------------------------------------------------------------- internals

    def _shut_down_message(self) -> str:
        return f"{self._thread_name}: the timer service is shut down"

    def _push_locked(self, timer: _Timer) -> None:
        """Push, wake the timer thread on a new earliest deadline; start it on first use."""
        heap = self._heap
        self._seq += 1
        heapq.heappush(heap, (timer._timestamp_ms, self._seq, timer))
        if heap[0][2] is timer:
            self._cond.notify_all()  # new earliest deadline: re-arm the wait
        if len(heap) > self._compact_threshold:
            self._compact_locked()
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run_timer_thread, name=self._thread_name, daemon=True
            )
            self._thread.start()

    def _compact_locked(self) -> None:
        # Cancelled timers stay in the heap until popped; drop them when the heap
        # has doubled since the last compaction (amortised O(1) per push).
        live = [entry for entry in self._heap if entry[2].state is _TimerState.PENDING]
        heapq.heapify(live)
        self._heap = live
        self._compact_threshold = max(64, 2 * len(live))

    def _run_timer_thread(self) -> None:
        executor = self._executor
        while True:
            with self._cond:
                due = self._await_due_timers_locked()
            if due is None:
                return
            for timer in due:
                try:
                    executor.execute(
                        lambda t=timer: self._fire_on_task_thread(t),
                        f"processing-time timer @{timer._timestamp_ms}",
                    )
                except MailboxClosedError:
                    _LOG.debug("%s: mailbox closed, dropping %r", self._thread_name, timer)

    def _await_due_timers_locked(self) -> list[_Timer] | None:
        """Block until timers are due; pop and return them, or ``None`` once stopped."""
        while self._status is _Status.RUNNING:
            heap = self._heap
            while heap and heap[0][2].state is not _TimerState.PENDING:
                heapq.heappop(heap)
            if not heap:
                self._cond.wait()
                continue
            now = self.get_current_processing_time()
            if heap[0][0] > now:
                self._cond.wait((heap[0][0] - now) / 1000.0)
                continue
            due = []
            while heap and heap[0][0] <= now:
                timer = heapq.heappop(heap)[2]
                if timer.state is _TimerState.PENDING:
                    due.append(timer)
            return due
        return None

    def _fire_on_task_thread(self, timer: _Timer) -> None:
        with self._lock:
            if not self._claim_locked(timer):
                return
        timestamp_ms = timer._timestamp_ms
        timer.callback(timestamp_ms)
        if timer.period_ms:
            timer._advance(timestamp_ms, self.get_current_processing_time())
            with self._cond:
                if timer.state is _TimerState.PENDING and self._status is _Status.RUNNING:
                    self._push_locked(timer)

    def __repr__(self) -> str:
        return f"SystemProcessingTimeService({self._thread_name!r}, {self._status.value})"


# -------------------------------------------------------------------- test service


class TestProcessingTimeService(_TimerHeapService):
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
            self._stop_locked(_Status.QUIESCED)

    def shutdown(self) -> None:
        with self._lock:
            self._stop_locked(_Status.TERMINATED)

    def get_active_timer_timestamps(self) -> list[int]:
        """Sorted timestamps (ms) of the registered, not cancelled timers."""
        with self._lock:
            return sorted(ts for ts, _, t in self._heap if t.state is _TimerState.PENDING)

    def _after_register(self, timer: _Timer) -> None:
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
                        self._status is not _Status.RUNNING
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
                        if timer.state is _TimerState.PENDING and self._status is _Status.RUNNING:
                            timer._advance(timestamp_ms, self._current_time_ms)
                            self._push_locked(timer)
        finally:
            self._firing = False

    def __repr__(self) -> str:
        return f"TestProcessingTimeService(time_ms={self._current_time_ms}, {self._status.value})"
