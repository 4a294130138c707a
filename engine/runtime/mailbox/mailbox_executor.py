"""An executor that runs actions on the task thread by way of its mailbox.

Follows Flink's ``MailboxExecutor`` / ``MailboxExecutorImpl``.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Callable, TypeVar

from .mail import Mail, MailPriority
from .task_mailbox import MailboxThreadError, TaskMailbox

__all__ = ["MailboxExecutor"]

T = TypeVar("T")


class MailboxExecutor:
    """Submits actions as mails of one fixed priority to a :class:`TaskMailbox`.

    Follows Flink's ``MailboxExecutorImpl``. ``execute`` and ``submit`` are
    thread-safe: timer threads, async I/O callbacks and the checkpoint
    coordinator's RPC handler use them to get work onto the task thread.
    ``yield_`` and ``try_yield`` run mails *on* the task thread from inside an
    action (e.g. an operator that waits for async results yields until there
    is room); they only run mails of priority ``>= self.priority``.

    Obtain one from ``MailboxProcessor.get_mailbox_executor(priority)``.

    Args:
        mailbox: the task's mailbox.
        priority: priority of the mails this executor creates, and the lowest
            priority it yields to (an ``int``, see ``MailPriority``).
    """

    __slots__ = ("_mailbox", "_priority")

    def __init__(self, mailbox: TaskMailbox, priority: int = MailPriority.DEFAULT) -> None:
        self._mailbox = mailbox
        self._priority = int(priority)

    @property
    def mailbox(self) -> TaskMailbox:
        """The mailbox mails are put into."""
        return self._mailbox

    @property
    def priority(self) -> int:
        """Priority of the mails created, and the yield threshold."""
        return self._priority

    def with_priority(self, priority: int) -> "MailboxExecutor":
        """An executor on the same mailbox with another priority."""
        return MailboxExecutor(self._mailbox, priority)

    def execute(self, action: Callable[[], object], description: str = "") -> None:
        """Run ``action`` later on the task thread (thread-safe, non-blocking).

        Whatever ``action`` raises propagates out of the mailbox loop and fails
        the task (Flink semantics of ``execute``).

        Raises:
            MailboxClosedError: if the mailbox no longer accepts mails
                (QUIESCED or CLOSED); Flink's ``RejectedExecutionException``.
        """
        self._mailbox.put(Mail(action, self._priority, description))

    def submit(self, fn: Callable[[], T], description: str = "") -> "Future[T]":
        """Run ``fn`` later on the task thread and return a future of its result.

        Thread-safe, non-blocking. Unlike :meth:`execute`, an ``Exception``
        raised by ``fn`` is captured in the future and does not fail the task
        (as Flink's ``submit``). If the mail is dropped because the mailbox is
        closed (``MailboxProcessor.close``), the future is cancelled, so
        nobody waits forever on it.

        Raises:
            MailboxClosedError: if the mailbox no longer accepts mails.
        """
        future: Future[T] = Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                result = fn()
            except Exception as exc:  # noqa: BLE001 - delivered through the future
                future.set_exception(exc)
            else:
                future.set_result(result)

        self._mailbox.put(Mail(run, self._priority, description, future=future))
        return future

    def yield_(self) -> None:
        """Take one mail of priority ``>= self.priority`` and run it; block until one exists.

        Task thread only. Whatever the mail raises propagates unchanged.

        Raises:
            MailboxThreadError: if called from a thread other than the
                mailbox thread (or before the mailbox is bound to one).
            MailboxClosedError: if the mailbox is, or gets, CLOSED.
        """
        self._check_mailbox_thread("yield_")
        mail = self._mailbox.take(self._priority)
        assert mail is not None  # take without timeout never returns None
        mail.run()

    def try_yield(self) -> bool:
        """Run one mail of priority ``>= self.priority`` if one is queued; never blocks.

        Task thread only.

        Returns:
            ``True`` if a mail was run, ``False`` if none was available.

        Raises:
            MailboxThreadError: if called from a thread other than the mailbox thread.
            MailboxClosedError: if the mailbox is CLOSED.
        """
        self._check_mailbox_thread("try_yield")
        mail = self._mailbox.try_take(self._priority)
        if mail is None:
            return False
        mail.run()
        return True

    def is_mailbox_thread(self) -> bool:
        """``True`` iff the caller is the mailbox (task) thread. Any thread."""
        return self._mailbox.is_mailbox_thread()

    def _check_mailbox_thread(self, method: str) -> None:
        if not self._mailbox.is_mailbox_thread():
            bound = self._mailbox.mailbox_thread_id
            where = "is not bound to a thread yet" if bound is None else f"belongs to thread {bound}"
            raise MailboxThreadError(
                f"MailboxExecutor.{method}() must be called from the mailbox (task) thread; "
                f"the mailbox {where}. Use execute()/submit() from other threads."
            )

    def __repr__(self) -> str:
        return f"MailboxExecutor(priority={self._priority}, mailbox={self._mailbox!r})"
