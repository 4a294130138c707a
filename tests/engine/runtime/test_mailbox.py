"""Tests of rill.runtime.mailbox: TaskMailbox, MailboxProcessor, MailboxExecutor.

Real threads, no mocks. Timing assertions are upper bounds only, generous enough
for a loaded 2-core machine; ordering is checked through events and counters.
"""

from __future__ import annotations

import threading
import time
import traceback
from concurrent.futures import CancelledError

import pytest

import rill.runtime.mailbox as mailbox_pkg
from rill.runtime.mailbox import (
    Mail,
    MailboxClosedError,
    MailboxController,
    MailboxExecutor,
    MailboxProcessor,
    MailboxState,
    MailboxThreadError,
    MailPriority,
    TaskMailbox,
)

TIMEOUT_S = 10.0  # upper bound for anything that should happen "promptly"


def wait_until(predicate, timeout_s: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.001)


class LoopThread:
    """Runs ``processor.run_mailbox_loop()`` on a new thread and records the outcome."""

    def __init__(self, processor: MailboxProcessor) -> None:
        self.processor = processor
        self.error: BaseException | None = None
        self.ident: int | None = None
        self.thread = threading.Thread(target=self._run, name="task-thread", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.ident = threading.get_ident()
        try:
            self.processor.run_mailbox_loop()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            self.error = exc

    def join(self, timeout_s: float = TIMEOUT_S) -> None:
        self.thread.join(timeout_s)
        assert not self.thread.is_alive(), "mailbox loop did not return"
        if self.error is not None:
            raise self.error


def recording_mail(log: list, label: str, priority: int = MailPriority.DEFAULT) -> Mail:
    return Mail(lambda: log.append(label), priority, label)


class SuspendingAction:
    """A default action that suspends itself on every call (until ``finish``) and counts calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.finish = False  # when set, the next call ends the loop instead
        self.suspension = None
        self.suspended = threading.Event()

    def __call__(self, controller: MailboxController) -> None:
        self.calls += 1
        if self.finish:
            controller.all_actions_completed()
            return
        self.suspension = controller.suspend_default_action()
        self.suspended.set()


def wait_until_blocked(processor: MailboxProcessor) -> None:
    wait_until(lambda: processor.mailbox.statistics().blocked_takers == 1)


# --------------------------------------------------------------------- public surface


def test_public_surface():
    assert set(mailbox_pkg.__all__) == {
        "DefaultAction",
        "Mail",
        "MailPriority",
        "MailboxClosedError",
        "MailboxController",
        "MailboxExecutor",
        "MailboxProcessor",
        "MailboxProcessorStatistics",
        "MailboxState",
        "MailboxStatistics",
        "MailboxThreadError",
        "Suspension",
        "TaskMailbox",
    }
    for name in set(mailbox_pkg.__all__) - {"DefaultAction"}:  # a type alias
        assert getattr(mailbox_pkg, name).__doc__


def test_priority_constants_order():
    assert (
        MailPriority.MIN
        < MailPriority.DEFAULT
        == 0
        < MailPriority.TIMER
        < MailPriority.CHECKPOINT
        < MailPriority.CONTROL
    )


# ------------------------------------------------------------------------ TaskMailbox


def test_mails_are_taken_by_priority_and_fifo_within_a_priority():
    mailbox = TaskMailbox()
    log: list[str] = []
    for label, priority in [
        ("d1", MailPriority.DEFAULT),
        ("t1", MailPriority.TIMER),
        ("d2", MailPriority.DEFAULT),
        ("c1", MailPriority.CHECKPOINT),
        ("t2", MailPriority.TIMER),
        ("d3", MailPriority.DEFAULT),
        ("low", -5),
        ("c2", MailPriority.CHECKPOINT),
    ]:
        mailbox.put(recording_mail(log, label, priority))
    taken = []
    while (mail := mailbox.try_take()) is not None:
        taken.append(mail.description)
    assert taken == ["c1", "c2", "t1", "t2", "d1", "d2", "d3", "low"]
    assert not mailbox.has_mail()


def test_put_first_goes_ahead_of_its_own_priority_only():
    mailbox = TaskMailbox()
    log: list[str] = []
    mailbox.put(recording_mail(log, "d1"))
    mailbox.put(recording_mail(log, "t1", MailPriority.TIMER))
    mailbox.put_first(recording_mail(log, "d0"))
    mailbox.put_first(recording_mail(log, "d-1"))
    taken = [mailbox.try_take().description for _ in range(4)]
    assert taken == ["t1", "d-1", "d0", "d1"]


def test_min_priority_filters_take():
    mailbox = TaskMailbox()
    log: list[str] = []
    mailbox.put(recording_mail(log, "d"))
    assert mailbox.try_take(MailPriority.TIMER) is None
    assert mailbox.take(MailPriority.TIMER, timeout_s=0.01) is None
    mailbox.put(recording_mail(log, "t", MailPriority.TIMER))
    assert mailbox.try_take(MailPriority.TIMER).description == "t"
    assert mailbox.try_take(MailPriority.DEFAULT).description == "d"


def test_has_mail_and_size_follow_the_queue():
    mailbox = TaskMailbox()
    assert not mailbox.has_mail() and mailbox.size() == 0
    mailbox.put(Mail(lambda: None, MailPriority.DEFAULT, "a"))
    mailbox.put(Mail(lambda: None, MailPriority.DEFAULT, "b"))
    assert mailbox.has_mail() and mailbox.size() == 2
    mailbox.try_take()
    assert mailbox.has_mail() and mailbox.size() == 1
    mailbox.try_take()
    assert not mailbox.has_mail() and mailbox.size() == 0
    stats = mailbox.statistics()
    assert (stats.total_put, stats.peak_size, stats.state) == (2, 2, MailboxState.OPEN)


def test_take_blocks_until_a_mail_is_put_from_another_thread():
    mailbox = TaskMailbox()
    result: list[Mail | None] = []
    taker = threading.Thread(target=lambda: result.append(mailbox.take()))
    taker.start()
    wait_until(lambda: mailbox.statistics().blocked_takers == 1)
    mailbox.put(Mail(lambda: None, MailPriority.DEFAULT, "wake"))
    taker.join(TIMEOUT_S)
    assert not taker.is_alive()
    assert result[0].description == "wake"


def test_quiesce_rejects_puts_but_keeps_queued_mails_takeable():
    mailbox = TaskMailbox()
    mailbox.put(Mail(lambda: None, MailPriority.DEFAULT, "queued"))
    mailbox.quiesce()
    assert mailbox.state is MailboxState.QUIESCED
    with pytest.raises(MailboxClosedError, match="QUIESCED"):
        mailbox.put(Mail(lambda: None, MailPriority.DEFAULT, "late"))
    assert mailbox.try_take().description == "queued"


def test_close_drops_mails_and_rejects_everything_with_a_clear_message():
    mailbox = TaskMailbox()
    mailbox.put(Mail(lambda: None, MailPriority.DEFAULT, "a"))
    mailbox.put(Mail(lambda: None, MailPriority.CHECKPOINT, "b"))
    dropped = mailbox.close()
    assert [m.description for m in dropped] == ["b", "a"]
    assert mailbox.state is MailboxState.CLOSED
    assert mailbox.close() == []
    with pytest.raises(MailboxClosedError, match="state CLOSED.*OPEN for put.*'late'"):
        mailbox.put(Mail(lambda: None, MailPriority.DEFAULT, "late"))
    with pytest.raises(MailboxClosedError):
        mailbox.put_first(Mail(lambda: None, MailPriority.DEFAULT, "late"))
    with pytest.raises(MailboxClosedError):
        mailbox.try_take()
    with pytest.raises(MailboxClosedError):
        mailbox.take(timeout_s=0)


def test_close_wakes_blocked_takers_which_raise():
    mailbox = TaskMailbox()
    outcomes: list[BaseException | Mail | None] = []
    lock = threading.Lock()

    def taker() -> None:
        try:
            mail = mailbox.take()
        except BaseException as exc:  # noqa: BLE001
            mail = exc
        with lock:
            outcomes.append(mail)

    takers = [threading.Thread(target=taker) for _ in range(2)]
    for t in takers:
        t.start()
    wait_until(lambda: mailbox.statistics().blocked_takers == 2)
    started = time.monotonic()
    mailbox.close()
    for t in takers:
        t.join(TIMEOUT_S)
        assert not t.is_alive()
    assert time.monotonic() - started < 5.0
    assert len(outcomes) == 2
    assert all(isinstance(o, MailboxClosedError) for o in outcomes)


def test_drain_returns_mails_in_take_order_and_keeps_state():
    mailbox = TaskMailbox()
    log: list[str] = []
    mailbox.put(recording_mail(log, "d"))
    mailbox.put(recording_mail(log, "c", MailPriority.CHECKPOINT))
    assert [m.description for m in mailbox.drain()] == ["c", "d"]
    assert mailbox.state is MailboxState.OPEN and not mailbox.has_mail()


def test_taking_from_a_thread_other_than_the_bound_one_raises():
    mailbox = TaskMailbox()
    mailbox.bind_to_current_thread()
    errors: list[BaseException] = []

    def other() -> None:
        try:
            mailbox.try_take()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        mailbox.put(Mail(lambda: None, MailPriority.DEFAULT, "from other thread"))

    t = threading.Thread(target=other)
    t.start()
    t.join(TIMEOUT_S)
    assert isinstance(errors[0], MailboxThreadError)
    assert "mailbox thread" in str(errors[0])
    assert mailbox.try_take().description == "from other thread"


# ------------------------------------------------------------------- MailboxProcessor


def test_mails_run_ahead_of_the_default_action():
    log: list[str] = []

    def default_action(controller: MailboxController) -> None:
        log.append(f"input{len([x for x in log if x.startswith('input')]) + 1}")
        if log[-1] == "input1":
            executor.execute(lambda: log.append("mail-during-input"), "m")
        if log[-1] == "input2":
            controller.all_actions_completed()

    processor = MailboxProcessor(default_action)
    executor = processor.get_mailbox_executor()
    for label, prio in [("m-default", 0), ("m-timer", MailPriority.TIMER), ("m-cp", MailPriority.CHECKPOINT)]:
        processor.mailbox.put(recording_mail(log, label, prio))
    processor.run_mailbox_loop()
    assert log == ["m-cp", "m-timer", "m-default", "input1", "mail-during-input", "input2"]


def test_suspended_loop_blocks_instead_of_spinning_and_resumes_from_another_thread():
    action = SuspendingAction()
    processor = MailboxProcessor(action)
    loop = LoopThread(processor)
    assert action.suspended.wait(TIMEOUT_S)
    wait_until_blocked(processor)

    blocked_from_ns = time.monotonic_ns()
    cpu_before = time.process_time()
    time.sleep(0.2)
    cpu_used = time.process_time() - cpu_before
    assert action.calls == 1  # the default action is not called while suspended
    assert cpu_used < 0.1  # a spinning loop burns ~0.2 s of CPU here
    blocked_until_ns = time.monotonic_ns()

    action.finish = True
    action.suspension.resume()  # from the test's thread
    loop.join()
    assert action.calls == 2
    # The loop was blocked in take() during the whole measured window.
    assert processor.idle_time_ns >= blocked_until_ns - blocked_from_ns
    assert processor.statistics().default_action_calls == 2


def test_resume_from_a_third_thread_wakes_the_loop():
    calls = []

    def default_action(controller: MailboxController) -> None:
        calls.append(threading.get_ident())
        if len(calls) == 1:
            suspension = controller.suspend_default_action()
            threading.Thread(target=suspension.resume).start()
        else:
            controller.all_actions_completed()

    processor = MailboxProcessor(default_action)
    loop = LoopThread(processor)
    loop.join()
    assert calls == [loop.ident, loop.ident]


def test_suspend_default_action_twice_returns_the_same_suspension_and_resume_is_idempotent():
    seen = []

    def default_action(controller: MailboxController) -> None:
        first = controller.suspend_default_action()
        seen.append(first is controller.suspend_default_action())
        first.resume()
        first.resume()
        controller.all_actions_completed()

    MailboxProcessor(default_action).run_mailbox_loop()
    assert seen == [True]


def test_cancel_while_blocked_returns_promptly_and_leaves_mails():
    action = SuspendingAction()
    processor = MailboxProcessor(action)
    loop = LoopThread(processor)
    wait_until_blocked(processor)
    started = time.monotonic()
    processor.cancel()
    loop.join()
    assert time.monotonic() - started < 5.0
    assert action.calls == 1
    processor.mailbox.put(Mail(lambda: None, MailPriority.DEFAULT, "after cancel"))
    assert processor.mailbox.size() == 1


def test_cancelled_processor_does_not_run_again():
    processor = MailboxProcessor(lambda controller: pytest.fail("default action ran"))
    processor.cancel()
    processor.run_mailbox_loop()  # returns at once


def test_suspend_from_another_thread_and_run_the_loop_again():
    action = SuspendingAction()
    processor = MailboxProcessor(action)
    first_run_done = threading.Event()
    second_run = threading.Event()
    log: list[str] = []

    def task_thread() -> None:
        processor.run_mailbox_loop()
        first_run_done.set()
        assert second_run.wait(TIMEOUT_S)
        processor.run_mailbox_loop()

    t = threading.Thread(target=task_thread)
    t.start()
    wait_until_blocked(processor)
    processor.suspend()
    assert first_run_done.wait(TIMEOUT_S)
    processor.mailbox.put(recording_mail(log, "after suspend"))
    processor.mailbox.put(Mail(processor.all_actions_completed, MailPriority.DEFAULT, "complete"))
    second_run.set()
    t.join(TIMEOUT_S)
    assert not t.is_alive()
    assert log == ["after suspend"]


def test_all_actions_completed_runs_remaining_mails_first():
    log: list[str] = []

    def default_action(controller: MailboxController) -> None:
        log.append("input")
        controller.all_actions_completed()
        processor.mailbox.put(recording_mail(log, "queued after completion"))

    processor = MailboxProcessor(default_action)
    processor.run_mailbox_loop()
    assert log == ["input", "queued after completion"]


def test_all_actions_completed_from_another_thread_ends_a_blocked_loop():
    action = SuspendingAction()
    processor = MailboxProcessor(action)
    loop = LoopThread(processor)
    wait_until_blocked(processor)
    processor.all_actions_completed()
    loop.join()
    assert action.calls == 1


class _Boom(Exception):
    pass


def failing_mail_action() -> None:
    raise _Boom("from a mail")


def test_exception_from_a_mail_propagates_unchanged_with_its_traceback():
    processor = MailboxProcessor(lambda controller: None)
    processor.mailbox.put(Mail(failing_mail_action, MailPriority.DEFAULT, "failing"))
    with pytest.raises(_Boom) as info:
        processor.run_mailbox_loop()
    assert type(info.value) is _Boom and str(info.value) == "from a mail"
    frames = [frame.name for frame in traceback.extract_tb(info.value.__traceback__)]
    assert frames[-1] == "failing_mail_action"
    assert "run_mailbox_loop" in frames
    assert not processor.is_mailbox_loop_running()


def test_exception_from_the_default_action_propagates_unchanged():
    original = _Boom("from input")

    def default_action(controller: MailboxController) -> None:
        raise original

    processor = MailboxProcessor(default_action)
    with pytest.raises(_Boom) as info:
        processor.run_mailbox_loop()
    assert info.value is original
    assert traceback.extract_tb(info.value.__traceback__)[-1].name == "default_action"


def test_exception_on_the_task_thread_reaches_the_caller_of_the_loop():
    action = SuspendingAction()
    processor = MailboxProcessor(action)
    loop = LoopThread(processor)
    wait_until_blocked(processor)
    processor.get_mailbox_executor().execute(failing_mail_action, "failing")
    with pytest.raises(_Boom):
        loop.join()


def test_close_while_blocked_ends_the_loop_and_cancels_dropped_futures():
    action = SuspendingAction()
    processor = MailboxProcessor(action)
    loop = LoopThread(processor)
    wait_until_blocked(processor)
    # Queue work the loop will not get to: a checkpoint mail runs first and closes.
    executor = processor.get_mailbox_executor()
    gate = threading.Event()
    processor.mailbox.put(Mail(lambda: gate.wait(TIMEOUT_S), MailPriority.CHECKPOINT, "hold"))
    wait_until(lambda: processor.mailbox.size() == 0)  # the loop runs "hold"
    future = executor.submit(lambda: 42, "never runs")
    dropped = processor.close()
    gate.set()
    loop.join()
    assert [m.description for m in dropped] == ["never runs"]
    assert future.cancelled()
    with pytest.raises(CancelledError):
        future.result(0)


def test_run_mailbox_loop_on_a_thread_other_than_the_bound_one_raises():
    mailbox = TaskMailbox(mailbox_thread_id=threading.get_ident() + 1)
    processor = MailboxProcessor(lambda controller: None, mailbox)
    with pytest.raises(MailboxThreadError, match="bound to thread"):
        processor.run_mailbox_loop()


def test_suspend_default_action_outside_the_task_thread_raises():
    captured: list[MailboxController] = []

    def default_action(controller: MailboxController) -> None:
        captured.append(controller)
        controller.all_actions_completed()

    processor = MailboxProcessor(default_action)
    LoopThread(processor).join()
    with pytest.raises(MailboxThreadError, match="task thread"):
        captured[0].suspend_default_action()


def test_run_mailbox_step_runs_one_mail_or_one_default_action():
    log: list[str] = []
    processor = MailboxProcessor(lambda controller: log.append("input"))
    processor.mailbox.put(recording_mail(log, "m"))
    assert processor.run_mailbox_step() and log == ["m"]
    assert processor.run_mailbox_step() and log == ["m", "input"]


# -------------------------------------------------------------------- MailboxExecutor


def test_submit_runs_on_the_task_thread_and_returns_the_result():
    action = SuspendingAction()
    processor = MailboxProcessor(action)
    loop = LoopThread(processor)
    executor = processor.get_mailbox_executor()
    assert executor.submit(threading.get_ident, "ident").result(TIMEOUT_S) == loop.ident
    assert not executor.is_mailbox_thread()
    assert executor.submit(executor.is_mailbox_thread, "is mailbox thread").result(TIMEOUT_S)
    processor.cancel()
    loop.join()


def test_submit_captures_exceptions_in_the_future_without_failing_the_task():
    action = SuspendingAction()
    processor = MailboxProcessor(action)
    loop = LoopThread(processor)
    executor = processor.get_mailbox_executor()
    future = executor.submit(failing_mail_action, "failing submit")
    with pytest.raises(_Boom):
        future.result(TIMEOUT_S)
    assert executor.submit(lambda: "still alive", "ok").result(TIMEOUT_S) == "still alive"
    processor.cancel()
    loop.join()


def test_execute_and_submit_after_close_raise():
    processor = MailboxProcessor(lambda controller: None)
    processor.close()
    executor = processor.get_mailbox_executor()
    with pytest.raises(MailboxClosedError):
        executor.execute(lambda: None, "late")
    with pytest.raises(MailboxClosedError):
        executor.submit(lambda: None, "late")


def test_yield_from_another_thread_raises_a_clear_error():
    mailbox = TaskMailbox()
    executor = MailboxExecutor(mailbox, MailPriority.DEFAULT)
    with pytest.raises(MailboxThreadError, match=r"yield_\(\) must be called from the mailbox"):
        executor.yield_()  # unbound mailbox
    mailbox.bind_to_current_thread()
    errors: list[BaseException] = []

    def other() -> None:
        for method in (executor.yield_, executor.try_yield):
            try:
                method()
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

    t = threading.Thread(target=other)
    t.start()
    t.join(TIMEOUT_S)
    assert len(errors) == 2 and all(isinstance(e, MailboxThreadError) for e in errors)


def test_yield_runs_only_mails_of_at_least_the_executor_priority():
    log: list[str] = []
    result: list[object] = []

    def default_action(controller: MailboxController) -> None:
        timer_executor = processor.get_mailbox_executor(MailPriority.TIMER)
        processor.mailbox.put(recording_mail(log, "default"))
        processor.mailbox.put(recording_mail(log, "timer", MailPriority.TIMER))
        result.append(timer_executor.try_yield())
        result.append(timer_executor.try_yield())  # only "default" is left: not eligible
        processor.get_mailbox_executor(MailPriority.DEFAULT).yield_()
        controller.all_actions_completed()

    processor = MailboxProcessor(default_action)
    processor.run_mailbox_loop()
    assert result == [True, False]
    assert log == ["timer", "default"]


def test_yield_blocks_until_another_thread_puts_a_mail():
    log: list[str] = []

    def default_action(controller: MailboxController) -> None:
        executor = processor.get_mailbox_executor()
        threading.Thread(target=lambda: executor.execute(lambda: log.append("async result"), "r")).start()
        executor.yield_()
        log.append("after yield")
        controller.all_actions_completed()

    processor = MailboxProcessor(default_action)
    LoopThread(processor).join()
    assert log == ["async result", "after yield"]
