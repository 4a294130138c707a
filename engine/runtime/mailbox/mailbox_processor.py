"""The task thread's main loop: mails first, then one unit of input, repeat.

Follows Flink's ``MailboxProcessor`` and ``MailboxDefaultAction``
(``org.apache.flink.streaming.runtime.tasks.mailbox``).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional

from .mail import Mail, MailPriority
from .mailbox_executor import MailboxExecutor
from .task_mailbox import MailboxClosedError, MailboxThreadError, TaskMailbox

__all__ = [
    "DefaultAction",
    "MailboxController",
    "MailboxProcessor",
    "MailboxProcessorStatistics",
    "Suspension",
]


class Suspension:
    """Handle on a suspended default action; Flink's ``MailboxDefaultAction.Suspension``.

    Returned by :meth:`MailboxController.suspend_default_action`. Keep it and
    call :meth:`resume` when input (or an output buffer) becomes available.
    """

    __slots__ = ("_processor",)

    def __init__(self, processor: "MailboxProcessor") -> None:
        self._processor = processor

    def resume(self) -> None:
        """Make the default action runnable again; thread-safe, idempotent.

        On the task thread the flag is cleared directly. From any other thread
        a control mail (``MailPriority.CONTROL``, put first) is sent, which
        wakes the loop if it is blocked in ``take()`` and clears the flag on the
        task thread. If the mailbox no longer accepts mails the call is a no-op
        (the task is shutting down). Resuming a suspension that was already
        resumed does nothing, even if the action has been suspended again since
        (that is a new suspension).
        """
        processor = self._processor
        if processor._mailbox.is_mailbox_thread():
            self._resume_on_task_thread()
            return
        try:
            processor._mailbox.put_first(
                Mail(self._resume_on_task_thread, MailPriority.CONTROL, "resume default action")
            )
        except MailboxClosedError:
            pass

    def _resume_on_task_thread(self) -> None:
        if self._processor._suspension is self:
            self._processor._suspension = None


class MailboxController:
    """What the default action may do to the loop; Flink's ``MailboxDefaultAction.Controller``.

    Passed to every call of the default action. Task thread only.
    """

    __slots__ = ("_processor",)

    def __init__(self, processor: "MailboxProcessor") -> None:
        self._processor = processor

    def suspend_default_action(self) -> Suspension:
        """Stop calling the default action until the returned suspension is resumed.

        Call it when no input is available or no output buffer is (backpressure):
        the loop then blocks in ``take()`` for mails instead of spinning.
        Calling it again while suspended returns the same :class:`Suspension`.

        Raises:
            MailboxThreadError: if called from a thread other than the task thread.
        """
        return self._processor._suspend_default_action()

    def all_actions_completed(self) -> None:
        """Declare the input exhausted: the loop ends once no mail is left.

        The default action is not called again; mails already queued, and mails
        put while the loop still drains, are processed; then
        ``run_mailbox_loop`` returns.
        """
        self._processor.all_actions_completed()


DefaultAction = Callable[[MailboxController], None]
"""Processes one unit of input (e.g. one buffer); Flink's ``MailboxDefaultAction``.

Must return promptly (it is called in a loop and mails wait for it) and must
not block waiting for input: it suspends itself through the controller instead.
"""


@dataclass(frozen=True, slots=True)
class MailboxProcessorStatistics:
    """Counters of a :class:`MailboxProcessor` (see :meth:`MailboxProcessor.statistics`).

    Attributes:
        idle_time_ns: total monotonic nanoseconds the task thread was blocked in
            ``take()`` while the default action was suspended.
        mails_processed: mails run by the loop, ``run_mailbox_step``, ``drain``.
        default_action_calls: calls of the default action.
    """

    idle_time_ns: int
    mails_processed: int
    default_action_calls: int


class MailboxProcessor:
    """Runs mails and the default action on the task thread; Flink's ``MailboxProcessor``.

    The loop (:meth:`run_mailbox_loop`) repeats:

    1. process every available mail, in priority order, without blocking
       (the "is there mail?" check is a lock-free flag read, once per round);
    2. return if :meth:`suspend` or :meth:`cancel` was called, or if
       :meth:`all_actions_completed` was called and no mail is left;
    3. if the default action is suspended, block in ``mailbox.take()`` for the
       next mail and run it (no spinning: the thread sleeps on a condition
       variable, and the time is added to :attr:`idle_time_ns`);
    4. otherwise call the default action once.

    So every mail (checkpoint, timer, control) runs ahead of the next unit of
    input, and a task without input costs no CPU.

    Threading: ``run_mailbox_loop``, ``run_mailbox_step`` and ``drain`` run on
    the task thread, to which they bind the mailbox the first time (a mailbox
    bound to another thread makes them raise :class:`MailboxThreadError`).
    ``suspend``, ``cancel``, ``all_actions_completed``, ``close``,
    ``get_mailbox_executor`` and the statistics are thread-safe; from another
    thread they act through control mails (``MailPriority.CONTROL``, put first),
    which also wake a blocked loop.

    Errors: an exception raised by a mail or by the default action propagates
    out of ``run_mailbox_loop`` unchanged, with its traceback; the loop stops
    and can be run again after the caller handled it.

    Args:
        default_action: called with the :class:`MailboxController` to process
            one unit of input.
        mailbox: the task's mailbox; a new unbound :class:`TaskMailbox` if
            ``None``.
    """

    def __init__(self, default_action: DefaultAction, mailbox: TaskMailbox | None = None) -> None:
        if not callable(default_action):
            raise TypeError("default_action must be callable with a MailboxController")
        self._default_action = default_action
        self._mailbox = mailbox if mailbox is not None else TaskMailbox()
        self._controller = MailboxController(self)
        # Written on the task thread only (directly or by control mails), except
        # _cancelled, which any thread may set (a bool store is atomic).
        self._suspension: Suspension | None = None
        self._suspend_requested = False
        self._completed = False
        self._cancelled = False
        self._running = False
        # Counters, written on the task thread, read anywhere.
        self._idle_time_ns = 0
        self._idle_start_ns: Optional[int] = None  # set while blocked in take()
        self._mails_processed = 0
        self._default_action_calls = 0

    # ---------------------------------------------------------------- accessors

    @property
    def mailbox(self) -> TaskMailbox:
        """The task's mailbox."""
        return self._mailbox

    @property
    def idle_time_ns(self) -> int:
        """Monotonic ns spent blocked in ``take()`` while suspended (any thread).

        Flink derives the ``idleTimeMsPerSecond`` metric from this counter.
        """
        # Includes the wait in progress, as Flink's TimerGauge does: a task blocked since long
        # (no input at all) reads as idle now, not when it next wakes. The total is read before
        # the start: if the wait ends in between, this undercounts once instead of counting the
        # wait twice.
        total = self._idle_time_ns
        start = self._idle_start_ns
        return total + (time.monotonic_ns() - start if start is not None else 0)

    def statistics(self) -> MailboxProcessorStatistics:
        """A snapshot of the loop's counters (any thread)."""
        return MailboxProcessorStatistics(
            idle_time_ns=self._idle_time_ns,
            mails_processed=self._mails_processed,
            default_action_calls=self._default_action_calls,
        )

    def get_mailbox_executor(self, priority: int = MailPriority.DEFAULT) -> MailboxExecutor:
        """An executor putting mails of ``priority`` into this processor's mailbox."""
        return MailboxExecutor(self._mailbox, priority)

    def is_mailbox_thread(self) -> bool:
        """``True`` iff the caller is the task thread the mailbox is bound to."""
        return self._mailbox.is_mailbox_thread()

    def is_default_action_available(self) -> bool:
        """``False`` while the default action is suspended (task thread)."""
        return self._suspension is None

    def is_mailbox_loop_running(self) -> bool:
        """``True`` while ``run_mailbox_loop`` executes (any thread; may lag)."""
        return self._running

    def has_mail(self) -> bool:
        """Lock-free: whether the mailbox holds mail (see ``TaskMailbox.has_mail``)."""
        return self._mailbox.has_mail()

    # --------------------------------------------------------------- main loop

    def run_mailbox_loop(self) -> None:
        """Run the loop on the calling (task) thread until it is asked to stop.

        Returns after :meth:`suspend` (the loop may be run again later),
        :meth:`cancel` / :meth:`close` (it may not: later calls return at
        once), or :meth:`all_actions_completed` once no mail is left.

        Raises:
            Exception: whatever a mail or the default action raised, unchanged.
            MailboxThreadError: if the mailbox is bound to another thread.
            RuntimeError: if called while the loop already runs (from a mail).
            MailboxClosedError: if the mailbox was closed by someone other than
                :meth:`close` while the loop ran and the loop was not cancelled.
        """
        self._enter_task_thread()
        if self._running:
            raise RuntimeError("run_mailbox_loop() is already running on this thread")
        mailbox = self._mailbox
        controller = self._controller
        default_action = self._default_action
        self._suspend_requested = False
        self._running = True
        try:
            while not self._cancelled:
                if mailbox.has_mail():
                    self._process_available_mails()
                if self._suspend_requested or self._cancelled:
                    return
                if self._completed:
                    if mailbox.has_mail():
                        continue
                    return
                if self._suspension is not None:
                    self._process_mails_while_suspended()
                    continue
                self._default_action_calls += 1
                default_action(controller)
        except MailboxClosedError:
            if self._cancelled:
                return
            raise
        finally:
            self._running = False

    def run_mailbox_step(self) -> bool:
        """Run one mail if any, else the default action once if it is available.

        Never blocks on the mailbox. Task thread only (binds the mailbox like
        ``run_mailbox_loop``). Meant for test harnesses and for tasks that
        interleave the loop with other work. Flink's ``runMailboxStep``.

        Returns:
            ``True`` if something was run.

        Raises:
            Exception: whatever the mail or default action raised, unchanged.
            MailboxThreadError: if the mailbox is bound to another thread.
        """
        self._enter_task_thread()
        mail = self._mailbox.try_take()
        if mail is not None:
            self._mails_processed += 1
            mail.run()
            return True
        if self._suspension is None and not (self._completed or self._cancelled):
            self._default_action_calls += 1
            self._default_action(self._controller)
            return True
        return False

    def _process_available_mails(self) -> None:
        mailbox = self._mailbox
        while not (self._suspend_requested or self._cancelled):
            mail = mailbox.try_take()
            if mail is None:
                return
            self._mails_processed += 1
            mail.run()

    def _process_mails_while_suspended(self) -> None:
        mailbox = self._mailbox
        while (
            self._suspension is not None
            and not (self._suspend_requested or self._cancelled or self._completed)
        ):
            mail = mailbox.try_take()
            if mail is None:
                start_ns = self._idle_start_ns = time.monotonic_ns()
                try:
                    mail = mailbox.take()
                finally:
                    self._idle_start_ns = None
                    self._idle_time_ns += time.monotonic_ns() - start_ns
            self._mails_processed += 1
            mail.run()  # type: ignore[union-attr]  # take() without timeout never returns None

    def _enter_task_thread(self) -> None:
        mailbox = self._mailbox
        bound = mailbox.mailbox_thread_id
        if bound is None:
            mailbox.bind_to_current_thread()
        elif bound != threading.get_ident():
            raise MailboxThreadError(
                f"The mailbox is bound to thread {bound}; the mailbox loop cannot run on "
                f"thread {threading.current_thread().name!r} ({threading.get_ident()}). "
                "Call mailbox.bind_to_current_thread() to hand the task over explicitly."
            )

    def _suspend_default_action(self) -> Suspension:
        if not self._mailbox.is_mailbox_thread():
            raise MailboxThreadError(
                "suspend_default_action() must be called on the task thread (from the default action)"
            )
        if self._suspension is None:
            self._suspension = Suspension(self)
        return self._suspension

    # ------------------------------------------------------------ loop control

    def suspend(self) -> None:
        """Make ``run_mailbox_loop`` return soon; it may be run again later.

        Thread-safe. On the task thread the loop returns after the current
        mail or default action. From another thread a control mail is put
        first; the loop returns once it has run (promptly, even if the loop is
        blocked). If the loop is not running, the next run returns right after
        that mail (Flink's poison mail). No-op if the mailbox is closed.
        """
        if self._mailbox.is_mailbox_thread():
            self._suspend_requested = True
            return
        self._send_control_mail(self._request_suspend, "suspend mailbox loop")

    def _request_suspend(self) -> None:
        self._suspend_requested = True

    def cancel(self) -> None:
        """Stop the loop for good, promptly, from any thread.

        ``run_mailbox_loop`` returns after the mail or default action in
        progress (a blocked loop is woken by a control mail); queued mails are
        left in the mailbox (see :meth:`close`). Later calls of
        ``run_mailbox_loop`` return immediately.
        """
        self._cancelled = True
        if not self._mailbox.is_mailbox_thread():
            self._send_control_mail(_noop, "wake up mailbox loop for cancellation")

    def all_actions_completed(self) -> None:
        """End the loop once the mails left are processed; thread-safe.

        Used when the input is exhausted (end of partition on every input):
        the default action is not called again. Flink's ``allActionsCompleted``.
        """
        if self._mailbox.is_mailbox_thread():
            self._completed = True
            return
        self._send_control_mail(self._complete, "all actions completed")

    def _complete(self) -> None:
        self._completed = True

    def _send_control_mail(self, action: Callable[[], None], description: str) -> None:
        try:
            self._mailbox.put_first(Mail(action, MailPriority.CONTROL, description))
        except MailboxClosedError:
            pass

    # -------------------------------------------------------------- shutdown

    def drain(self) -> None:
        """Run every queued mail now, in order, on the task thread (Flink's ``drain``).

        Mails put while draining are not run. Typically called after the loop
        returned and the mailbox was quiesced.

        Raises:
            Exception: whatever a mail raised; the mails after it stay dropped.
            MailboxThreadError: if the mailbox is bound to another thread.
        """
        self._enter_task_thread()
        for mail in self._mailbox.drain():
            self._mails_processed += 1
            mail.run()

    def close(self) -> list[Mail]:
        """Cancel the loop, close the mailbox, and return the dropped mails.

        Thread-safe and idempotent. Futures of dropped ``submit`` mails are
        cancelled. A loop blocked in ``take()`` wakes and returns normally.
        """
        self._cancelled = True
        mails = self._mailbox.close()
        for mail in mails:
            mail.try_cancel()
        return mails

    def __repr__(self) -> str:
        return (
            f"MailboxProcessor(running={self._running}, suspended={self._suspension is not None}, "
            f"mailbox={self._mailbox!r})"
        )


def _noop() -> None:
    pass
