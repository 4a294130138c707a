"""The task's mailbox: a thread-safe priority queue of mails with a life cycle.

Follows Flink's ``TaskMailbox`` / ``TaskMailboxImpl``
(``org.apache.flink.streaming.runtime.tasks.mailbox``).
"""

from __future__ import annotations

import enum
import heapq
import threading
import time
from dataclasses import dataclass

from .mail import Mail, MailPriority

__all__ = [
    "MailboxClosedError",
    "MailboxState",
    "MailboxStatistics",
    "MailboxThreadError",
    "TaskMailbox",
]


class MailboxClosedError(RuntimeError):
    """Raised by mailbox operations that the mailbox's state forbids.

    ``put``/``put_first`` raise it unless the mailbox is OPEN; ``take``,
    ``try_take`` raise it once the mailbox is CLOSED, including takers that
    were blocked when ``close()`` was called. Flink's ``MailboxClosedException``.
    """


class MailboxThreadError(RuntimeError):
    """Raised when a task-thread-only operation is called from another thread.

    Flink raises ``IllegalStateException("Illegal thread detected...")`` in the
    same situations.
    """


class MailboxState(enum.Enum):
    """Life cycle of a :class:`TaskMailbox`: OPEN -> QUIESCED -> CLOSED."""

    OPEN = "OPEN"
    QUIESCED = "QUIESCED"
    CLOSED = "CLOSED"


@dataclass(frozen=True, slots=True)
class MailboxStatistics:
    """A snapshot of a mailbox's counters (see :meth:`TaskMailbox.statistics`).

    Attributes:
        state: the life-cycle state.
        size: mails currently queued.
        peak_size: the largest ``size`` ever observed.
        total_put: mails accepted by ``put``/``put_first`` since creation.
        blocked_takers: threads currently blocked in :meth:`TaskMailbox.take`.
    """

    state: MailboxState
    size: int
    peak_size: int
    total_put: int
    blocked_takers: int


class TaskMailbox:
    """The mailbox of one task: mails in priority order, FIFO within a priority.

    Follows Flink's ``TaskMailboxImpl``, with one difference: Flink's queue is
    FIFO and priority only filters ``take``; here mails are *ordered* by
    priority (higher first), FIFO among equal priorities, and ``min_priority``
    filters as in Flink.

    Threading model
        Any thread may ``put``/``put_first`` mails, and ``quiesce``, ``close``,
        ``drain``, ``size`` and ``statistics`` are thread-safe. Taking mails is
        meant for the single *mailbox thread* (the task thread). The mailbox is
        bound to that thread either at construction (``mailbox_thread_id``) or
        by :meth:`bind_to_current_thread`, which ``MailboxProcessor`` calls when
        its loop starts. Once bound, ``take``/``try_take`` from any other thread
        raise :class:`MailboxThreadError`; while unbound, any thread may take
        (useful in tests and for a mailbox used as a plain blocking queue).
        All mutable state is guarded by one ``threading.Condition``; blocked
        takers wait on it, so a blocked task thread uses no CPU.

    Life cycle
        ``OPEN``: mails are accepted and taken. ``QUIESCED`` (after
        :meth:`quiesce`): ``put`` raises :class:`MailboxClosedError` (as in
        Flink), mails already queued can still be taken, so the task can finish
        what was accepted. ``CLOSED`` (after :meth:`close`): queued mails are
        dropped and returned to the caller, ``put`` and every take raise
        :class:`MailboxClosedError`, and takers blocked at the time are woken
        and raise it too. States only move forward; ``close`` is idempotent.

    Batching
        The task thread processes input in units (one buffer, a batch of
        records) and asks "is there any mail?" once per unit. :meth:`has_mail`
        answers with a plain attribute read, without taking the lock (Flink's
        volatile ``hasNewMail`` flag); the flag is written under the lock on
        every change of the queue. A mail put concurrently may be seen one unit
        later, never lost: a blocked ``take`` re-checks the queue under the
        lock. Only when the flag is set does the task thread take the lock, and
        then it drains every available mail before it returns to input.
    """

    __slots__ = (
        "_lock",
        "_cond",
        "_queue",
        "_seq",
        "_first_seq",
        "_has_mail",
        "_state",
        "_thread_id",
        "_peak_size",
        "_total_put",
        "_blocked_takers",
    )

    def __init__(self, mailbox_thread_id: int | None = None) -> None:
        """Create an OPEN, empty mailbox.

        Args:
            mailbox_thread_id: ``threading.get_ident()`` of the task thread, or
                ``None`` to leave the mailbox unbound until
                :meth:`bind_to_current_thread`.
        """
        self._lock = threading.Lock()  # ``with self._lock`` is cheaper than ``with self._cond``
        self._cond = threading.Condition(self._lock)
        # Heap of (-priority, sequence, mail): highest priority first, then FIFO.
        self._queue: list[tuple[int, int, Mail]] = []
        self._seq = 0  # increasing: put() appends behind its priority class
        self._first_seq = 0  # decreasing: put_first() goes ahead of its class
        self._has_mail = False  # read without the lock, written under it
        self._state = MailboxState.OPEN
        self._thread_id = mailbox_thread_id
        self._peak_size = 0
        self._total_put = 0
        self._blocked_takers = 0

    # ------------------------------------------------------------------ thread

    @property
    def mailbox_thread_id(self) -> int | None:
        """``threading.get_ident()`` of the bound task thread, or ``None``."""
        return self._thread_id

    def bind_to_current_thread(self) -> None:
        """Make the calling thread the mailbox thread (thread-safe)."""
        self._thread_id = threading.get_ident()

    def is_mailbox_thread(self) -> bool:
        """``True`` iff the mailbox is bound and the caller is its thread."""
        return self._thread_id == threading.get_ident()

    def _check_take_thread(self) -> None:
        bound = self._thread_id
        if bound is not None and bound != threading.get_ident():
            raise MailboxThreadError(
                "Illegal thread detected: mails can only be taken by the mailbox "
                f"thread (ident {bound}), not by thread "
                f"{threading.current_thread().name!r} (ident {threading.get_ident()})."
            )

    # -------------------------------------------------------------------- put

    def put(self, mail: Mail) -> None:
        """Enqueue ``mail`` behind the queued mails of the same priority.

        Thread-safe; wakes a blocked taker.

        Raises:
            MailboxClosedError: if the mailbox is QUIESCED or CLOSED.
        """
        with self._lock:
            self._check_put_state(mail)
            self._seq += 1
            self._push((-mail.priority, self._seq, mail))

    def put_first(self, mail: Mail) -> None:
        """Enqueue ``mail`` ahead of the queued mails of the same priority.

        Mails of a higher priority still run before it. Used for the loop's
        control mails (priority ``MailPriority.CONTROL``), which thus run
        before anything else. Thread-safe; wakes a blocked taker.

        Raises:
            MailboxClosedError: if the mailbox is QUIESCED or CLOSED.
        """
        with self._lock:
            self._check_put_state(mail)
            self._first_seq -= 1
            self._push((-mail.priority, self._first_seq, mail))

    def _push(self, entry: tuple[int, int, Mail]) -> None:
        queue = self._queue
        heapq.heappush(queue, entry)
        self._has_mail = True
        self._total_put += 1
        if len(queue) > self._peak_size:
            self._peak_size = len(queue)
        if self._blocked_takers:
            self._cond.notify_all()  # takers may filter on different priorities

    def _check_put_state(self, mail: Mail) -> None:
        if self._state is not MailboxState.OPEN:
            raise MailboxClosedError(
                f"Mailbox is in state {self._state.value}, but is required to be in "
                f"state OPEN for put operations; rejected {mail!r}."
            )

    # ------------------------------------------------------------------- take

    def try_take(self, min_priority: int = MailPriority.MIN) -> Mail | None:
        """Remove and return the next mail of priority ``>= min_priority``.

        Never blocks. Returns ``None`` if there is no such mail.

        Raises:
            MailboxClosedError: if the mailbox is CLOSED.
            MailboxThreadError: if bound and called from another thread.
        """
        self._check_take_thread()
        with self._lock:
            self._check_take_state()
            return self._poll(min_priority)

    def take(
        self, min_priority: int = MailPriority.MIN, timeout_s: float | None = None
    ) -> Mail | None:
        """Remove and return the next mail of priority ``>= min_priority``, blocking.

        Blocks (without spinning) until such a mail is available, the timeout
        elapses or the mailbox is closed.

        Args:
            min_priority: lowest priority accepted.
            timeout_s: seconds to wait at most; ``None`` waits indefinitely.

        Returns:
            The mail, or ``None`` if ``timeout_s`` elapsed first.

        Raises:
            MailboxClosedError: if the mailbox is CLOSED, or is closed while
                the caller is blocked.
            MailboxThreadError: if bound and called from another thread.
        """
        self._check_take_thread()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._lock:
            while True:
                self._check_take_state()
                mail = self._poll(min_priority)
                if mail is not None:
                    return mail
                remaining = None
                if deadline is not None:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return None
                self._blocked_takers += 1
                try:
                    self._cond.wait(remaining)
                finally:
                    self._blocked_takers -= 1

    def _poll(self, min_priority: int) -> Mail | None:
        queue = self._queue
        if not queue or -queue[0][0] < min_priority:
            return None
        mail = heapq.heappop(queue)[2]
        self._has_mail = bool(queue)
        return mail

    def _check_take_state(self) -> None:
        if self._state is MailboxState.CLOSED:
            raise MailboxClosedError(
                "Mailbox is in state CLOSED, but is required to be in state OPEN or "
                "QUIESCED for take operations."
            )

    # ---------------------------------------------------------------- queries

    def has_mail(self) -> bool:
        """Whether any mail is queued; a lock-free attribute read (any thread).

        May lag a concurrent ``put`` by one call; see "Batching" above.
        """
        return self._has_mail

    def size(self) -> int:
        """Number of queued mails (thread-safe)."""
        with self._lock:
            return len(self._queue)

    @property
    def state(self) -> MailboxState:
        """The current life-cycle state."""
        return self._state

    def statistics(self) -> MailboxStatistics:
        """A consistent snapshot of the mailbox's counters (thread-safe)."""
        with self._lock:
            return MailboxStatistics(
                state=self._state,
                size=len(self._queue),
                peak_size=self._peak_size,
                total_put=self._total_put,
                blocked_takers=self._blocked_takers,
            )

    # -------------------------------------------------------------- life cycle

    def quiesce(self) -> None:
        """Move OPEN -> QUIESCED: later puts raise, queued mails stay takeable.

        No effect in QUIESCED or CLOSED. Thread-safe.
        """
        with self._lock:
            if self._state is MailboxState.OPEN:
                self._state = MailboxState.QUIESCED

    def drain(self) -> list[Mail]:
        """Remove and return all queued mails in take order; the state is unchanged.

        Thread-safe. The caller decides whether to run the mails (Flink's
        ``MailboxProcessor.drain`` does, on the task thread) or drop them.
        """
        with self._lock:
            return self._drain_locked()

    def _drain_locked(self) -> list[Mail]:
        queue = self._queue
        queue.sort()
        mails = [entry[2] for entry in queue]
        queue.clear()
        self._has_mail = False
        return mails

    def close(self) -> list[Mail]:
        """Move to CLOSED, drop and return the queued mails, wake blocked takers.

        The woken takers raise :class:`MailboxClosedError`. Idempotent: a
        second call returns ``[]``. Thread-safe. The caller should
        ``try_cancel()`` the returned mails (``MailboxProcessor.close`` does).
        """
        with self._lock:
            if self._state is MailboxState.CLOSED:
                return []
            mails = self._drain_locked()
            self._state = MailboxState.CLOSED
            self._cond.notify_all()
            return mails

    def __repr__(self) -> str:
        return f"TaskMailbox(state={self._state.value}, size={len(self._queue)})"
