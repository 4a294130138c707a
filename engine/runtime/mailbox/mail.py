"""A unit of work for the task thread, and the priorities mails carry.

Follows Flink's ``org.apache.flink.streaming.runtime.tasks.mailbox.Mail``.
"""

from __future__ import annotations

from concurrent.futures import Future
from enum import IntEnum
from typing import Callable

__all__ = ["Mail", "MailPriority"]


class MailPriority(IntEnum):
    """Priorities of mails; a plain ``int`` is accepted wherever a priority is.

    Two orderings exist in the mailbox loop and they must not be confused:

    * **Mails versus input.** Every mail, whatever its priority, runs ahead of
      input processing (the mailbox's *default action*): the task thread drains
      all available mails before it processes the next unit of input. This is
      what guarantees that checkpoint triggers and timers are not starved by a
      busy input, at any priority.
    * **Mails among themselves.** A higher priority runs first; mails of equal
      priority run in FIFO order (the order of ``put``). ``put_first`` puts a
      mail ahead of the mails of its own priority only.

    The priority is also the threshold used by
    :meth:`MailboxExecutor.yield_ <rill.runtime.mailbox.MailboxExecutor.yield_>`:
    an executor of priority ``p`` only yields to mails of priority ``>= p``
    (Flink's ``MailboxExecutor`` priority semantics).

    Constants (higher runs first):

    ``MIN``
        The lowest priority; ``take(min_priority=MIN)`` accepts every mail.
    ``DEFAULT`` = 0
        Ordinary mails (async I/O results, operator-submitted actions).
    ``TIMER``
        Processing-time timer callbacks (see ``SystemProcessingTimeService``).
    ``CHECKPOINT``
        Checkpoint triggers, barrier snapshot actions, checkpoint notifications.
    ``CONTROL``
        The mailbox loop's own control mails (suspend, cancel, resume of the
        default action); the highest priority, Flink's ``MAX_PRIORITY``.
    """

    MIN = -(2**31)
    DEFAULT = 0
    TIMER = 10
    CHECKPOINT = 20
    CONTROL = 2**31 - 1


class Mail:
    """An action to be run on the task (mailbox) thread.

    Follows Flink's ``Mail``: an action, a priority and a description used in
    logs, error messages and ``repr``.

    Args:
        action: a callable without arguments; its return value is ignored.
            Whatever it raises propagates out of :meth:`run` unchanged (the
            mailbox loop lets it fail the task).
        priority: an ``int`` (see :class:`MailPriority`); higher runs first.
        description: a short human-readable description, e.g.
            ``"checkpoint 7 trigger"``.
        future: optional ``concurrent.futures.Future`` whose result the action
            produces (set by ``MailboxExecutor.submit``); :meth:`try_cancel`
            cancels it when the mail is dropped without running.

    Threading: a mail is created on any thread and run on the task thread only.
    """

    __slots__ = ("action", "priority", "description", "future")

    def __init__(
        self,
        action: Callable[[], object],
        priority: int = MailPriority.DEFAULT,
        description: str = "",
        *,
        future: Future | None = None,
    ) -> None:
        if not callable(action):
            raise TypeError(f"Mail action must be callable, got {type(action).__name__}")
        self.action = action
        self.priority = int(priority)
        self.description = description
        self.future = future

    def run(self) -> None:
        """Run the action on the calling thread (the task thread).

        Raises:
            Whatever the action raises, unchanged and with its traceback.
        """
        self.action()

    def try_cancel(self) -> bool:
        """Cancel the attached future, if any, because the mail will not run.

        Returns:
            ``True`` if a future was cancelled, ``False`` otherwise.
        """
        future = self.future
        return future is not None and future.cancel()

    def __repr__(self) -> str:
        return f"Mail({self.description!r}, priority={self.priority})"

    __str__ = __repr__
