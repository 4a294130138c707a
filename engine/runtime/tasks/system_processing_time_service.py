"""Wall-clock processing-time timers of a task, fired on the task thread through its mailbox
(Flink's ``SystemProcessingTimeService``, ``org.apache.flink.streaming.runtime.tasks``).

The interface and the timer heap it shares with the test harness' manual clock are in
:mod:`rill.operators.processing_time_service`.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time

from rill.operators.processing_time_service import HeapTimer, ServiceStatus, TimerHeapService, TimerState
from rill.runtime.mailbox import MailboxClosedError, MailboxExecutor, MailPriority

__all__ = ["SystemProcessingTimeService"]

_LOG = logging.getLogger(__name__)


class SystemProcessingTimeService(TimerHeapService):
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
            self._stop_locked(ServiceStatus.QUIESCED)
            self._cond.notify_all()

    def shutdown(self) -> None:
        """Quiesce, stop the timer thread and join it (promptly). Idempotent.

        Registering afterwards raises ``RuntimeError``.
        """
        with self._cond:
            self._stop_locked(ServiceStatus.TERMINATED)
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5.0)

    # --------------------------------------------------------------- internals

    def _shut_down_message(self) -> str:
        return f"{self._thread_name}: the timer service is shut down"

    def _push_locked(self, timer: HeapTimer) -> None:
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
        live = [entry for entry in self._heap if entry[2].state is TimerState.PENDING]
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

    def _await_due_timers_locked(self) -> list[HeapTimer] | None:
        """Block until timers are due; pop and return them, or ``None`` once stopped."""
        while self._status is ServiceStatus.RUNNING:
            heap = self._heap
            while heap and heap[0][2].state is not TimerState.PENDING:
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
                if timer.state is TimerState.PENDING:
                    due.append(timer)
            return due
        return None

    def _fire_on_task_thread(self, timer: HeapTimer) -> None:
        with self._lock:
            if not self._claim_locked(timer):
                return
        timestamp_ms = timer._timestamp_ms
        timer.callback(timestamp_ms)
        if timer.period_ms:
            timer._advance(timestamp_ms, self.get_current_processing_time())
            with self._cond:
                if timer.state is TimerState.PENDING and self._status is ServiceStatus.RUNNING:
                    self._push_locked(timer)

    def __repr__(self) -> str:
        return f"SystemProcessingTimeService({self._thread_name!r}, {self._status.value})"
