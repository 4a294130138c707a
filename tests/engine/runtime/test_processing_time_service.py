"""Tests of rill.operators.processing_time_service.

SystemProcessingTimeService runs against a real MailboxProcessor on a real task
thread; ordering is asserted, time only with generous upper bounds.
"""

from __future__ import annotations

import threading
import time

import pytest

from rill.runtime.mailbox import (
    Mail,
    MailboxController,
    MailboxProcessor,
    MailPriority,
)
from rill.operators.processing_time_service import (
    ProcessingTimeService,
    ScheduledTimer,
    TestProcessingTimeService,
)
from rill.runtime.tasks.system_processing_time_service import SystemProcessingTimeService

TIMEOUT_S = 10.0


def wait_until(predicate, timeout_s: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.001)


class IdleTask:
    """A task whose input is never available: its loop only runs mails."""

    def __init__(self, task_name: str = "idle-task") -> None:
        self.processor = MailboxProcessor(self._default_action)
        self.timers = SystemProcessingTimeService(
            self.processor.get_mailbox_executor(), task_name=task_name
        )
        self.error: BaseException | None = None
        self.ident: int | None = None
        self.thread = threading.Thread(target=self._run, name=task_name, daemon=True)

    @staticmethod
    def _default_action(controller: MailboxController) -> None:
        controller.suspend_default_action()

    def _run(self) -> None:
        self.ident = threading.get_ident()
        try:
            self.processor.run_mailbox_loop()
        except BaseException as exc:  # noqa: BLE001
            self.error = exc

    def start(self) -> "IdleTask":
        self.thread.start()
        wait_until(lambda: self.ident is not None)
        return self

    def join(self) -> None:
        self.thread.join(TIMEOUT_S)
        assert not self.thread.is_alive(), "task loop did not return"
        self.timers.shutdown()
        if self.error is not None:
            raise self.error


# ------------------------------------------------------------ SystemProcessingTimeService


def test_system_timers_fire_on_the_task_thread_in_timestamp_order():
    task = IdleTask().start()
    fired: list[tuple[int, int]] = []
    now = task.timers.get_current_processing_time()
    assert abs(now - time.time() * 1000) < 1000  # epoch milliseconds

    def record(timestamp_ms: int) -> None:
        fired.append((timestamp_ms, threading.get_ident()))

    def record_and_finish(timestamp_ms: int) -> None:
        record(timestamp_ms)
        task.processor.all_actions_completed()

    task.timers.register_timer(now + 60, record_and_finish)
    task.timers.register_timer(now + 20, record)
    cancelled = task.timers.register_timer(now + 30, record)
    task.timers.register_timer(now + 40, record)
    task.timers.register_timer(now - 1000, record)  # in the past: as soon as possible
    assert cancelled.cancel() is True
    assert cancelled.cancel() is False
    assert cancelled.is_cancelled() and cancelled.is_done()
    task.join()
    assert [ts for ts, _ in fired] == [now - 1000, now + 20, now + 40, now + 60]
    assert {ident for _, ident in fired} == {task.ident}


def test_timers_with_equal_timestamps_fire_in_registration_order():
    task = IdleTask().start()
    fired: list[str] = []
    ts = task.timers.get_current_processing_time() + 10
    for label in "abc":
        task.timers.register_timer(ts, lambda _ts, label=label: fired.append(label))
    task.timers.register_timer(ts + 1, lambda _ts: task.processor.all_actions_completed())
    task.join()
    assert fired == ["a", "b", "c"]


def test_cancel_on_the_task_thread_wins_over_an_already_queued_timer_mail():
    task = IdleTask()
    fired: list[int] = []
    queued = threading.Event()
    outcome: list[bool] = []
    timer_box: list[ScheduledTimer] = []

    def hold_then_cancel() -> None:
        assert queued.wait(TIMEOUT_S)
        outcome.append(timer_box[0].cancel())

    # The task thread is busy in this mail while the timer mail gets queued.
    task.processor.mailbox.put(Mail(hold_then_cancel, MailPriority.CONTROL, "hold"))
    task.start()
    wait_until(lambda: task.processor.mailbox.size() == 0)  # "hold" is running
    timer_box.append(task.timers.register_timer(0, fired.append))  # due at once
    wait_until(lambda: task.processor.mailbox.size() == 1)  # its mail is queued
    queued.set()
    task.processor.get_mailbox_executor().execute(task.processor.all_actions_completed, "end")
    task.join()
    assert outcome == [True]
    assert fired == []


def test_exception_from_a_timer_callback_fails_the_task():
    task = IdleTask().start()

    def failing(timestamp_ms: int) -> None:
        raise ValueError(f"timer {timestamp_ms} failed")

    task.timers.register_timer(0, failing)
    with pytest.raises(ValueError, match="timer 0 failed"):
        task.join()


def test_fixed_rate_fires_at_exact_multiples_of_the_period_until_cancelled():
    task = IdleTask().start()
    fired: list[tuple[int, int]] = []
    timer_box: list[ScheduledTimer] = []

    def tick(timestamp_ms: int) -> None:
        fired.append((timestamp_ms, threading.get_ident()))
        if len(fired) == 3:
            timer_box[0].cancel()
            task.processor.all_actions_completed()

    start = task.timers.get_current_processing_time()
    timer_box.append(task.timers.schedule_at_fixed_rate(tick, 5, 10))
    task.join()
    stamps = [ts for ts, _ in fired]
    assert len(stamps) == 3
    assert stamps[0] >= start + 5
    assert [b - a for a, b in zip(stamps, stamps[1:])] == [10, 10]
    assert {ident for _, ident in fired} == {task.ident}
    assert timer_box[0].is_cancelled()


def test_fixed_delay_waits_a_period_after_each_firing():
    task = IdleTask().start()
    fired: list[int] = []
    ends: list[int] = []
    timer_box: list[ScheduledTimer] = []

    def tick(timestamp_ms: int) -> None:
        fired.append(timestamp_ms)
        ends.append(task.timers.get_current_processing_time())
        if len(fired) == 3:
            timer_box[0].cancel()
            task.processor.all_actions_completed()

    timer_box.append(task.timers.schedule_with_fixed_delay(tick, 0, 10))
    task.join()
    assert len(fired) == 3
    for end_of_previous, next_start in zip(ends, fired[1:]):
        assert next_start >= end_of_previous + 10


def test_one_timer_thread_per_service_named_after_the_task():
    task = IdleTask(task_name="Map (1/2)").start()
    threads_before = threading.active_count()
    far = task.timers.get_current_processing_time() + 60_000
    timers = [task.timers.register_timer(far + i, lambda ts: None) for i in range(50)]
    assert threading.active_count() == threads_before + 1
    names = [t.name for t in threading.enumerate()]
    assert "Time Trigger for Map (1/2)" in names
    assert task.timers.get_number_of_registered_timers() == 50
    timers[0].cancel()
    assert task.timers.get_number_of_registered_timers() == 49
    task.processor.cancel()
    task.join()


def test_shutdown_joins_the_timer_thread_promptly():
    task = IdleTask(task_name="shutdown-task").start()
    task.timers.register_timer(task.timers.get_current_processing_time() + 60_000, lambda ts: None)
    timer_thread = next(t for t in threading.enumerate() if t.name == "Time Trigger for shutdown-task")
    started = time.monotonic()
    task.timers.shutdown()
    elapsed = time.monotonic() - started
    assert not timer_thread.is_alive()
    assert elapsed < 1.0  # typically well under 10 ms; generous for loaded machines
    assert task.timers.is_terminated()
    with pytest.raises(RuntimeError, match="shut down"):
        task.timers.register_timer(0, lambda ts: None)
    task.timers.shutdown()  # idempotent
    task.processor.cancel()
    task.join()


def test_quiesce_stops_firing_even_for_queued_timer_mails():
    # The loop is not running: timer mails stay queued in the mailbox.
    processor = MailboxProcessor(lambda controller: controller.all_actions_completed())
    timers = SystemProcessingTimeService(processor.get_mailbox_executor(), task_name="quiesce")
    fired: list[int] = []
    queued = timers.register_timer(0, fired.append)
    wait_until(lambda: processor.mailbox.size() == 1)
    pending = timers.register_timer(timers.get_current_processing_time() + 60_000, fired.append)
    timers.quiesce()
    # dropped timers end cancelled (Flink's executor cancels its delayed tasks on shutdown)
    assert pending.is_cancelled() and pending.is_done() and pending.cancel() is False
    noop = timers.register_timer(0, fired.append)
    assert noop.is_cancelled() and noop.is_done() and noop.cancel() is False
    assert timers.get_number_of_registered_timers() == 0
    assert not queued.is_done()  # its mail is queued
    processor.run_mailbox_loop()  # runs the queued timer mail: it must do nothing
    assert fired == []
    assert queued.is_cancelled()
    timers.shutdown()


def test_timer_mails_use_the_configured_priority():
    processor = MailboxProcessor(lambda controller: controller.all_actions_completed())
    timers = SystemProcessingTimeService(
        processor.get_mailbox_executor(MailPriority.DEFAULT), MailPriority.CHECKPOINT
    )
    log: list[str] = []
    processor.mailbox.put(Mail(lambda: log.append("timer-priority mail"), MailPriority.TIMER, "t"))
    timers.register_timer(0, lambda ts: log.append("timer"))
    wait_until(lambda: processor.mailbox.size() == 2)
    processor.run_mailbox_loop()
    assert log == ["timer", "timer-priority mail"]
    timers.shutdown()


def test_closed_mailbox_drops_due_timers_without_killing_the_timer_thread(monkeypatch):
    thread_errors: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: thread_errors.append(args.exc_value))
    processor = MailboxProcessor(lambda controller: None)
    timers = SystemProcessingTimeService(processor.get_mailbox_executor(), task_name="closed")
    processor.close()
    timers.register_timer(0, lambda ts: None)
    due_later = timers.register_timer(timers.get_current_processing_time() + 5, lambda ts: None)
    wait_until(lambda: timers.get_number_of_registered_timers() == 0)
    timer_thread = next(t for t in threading.enumerate() if t.name == "Time Trigger for closed")
    assert timer_thread.is_alive()
    timers.shutdown()
    assert thread_errors == []
    assert not due_later.is_cancelled()


def test_invalid_arguments_are_rejected():
    processor = MailboxProcessor(lambda controller: None)
    timers = SystemProcessingTimeService(processor.get_mailbox_executor())
    with pytest.raises(TypeError, match="int"):
        timers.register_timer(1.5, lambda ts: None)
    with pytest.raises(ValueError, match="period_ms"):
        timers.schedule_at_fixed_rate(lambda ts: None, 0, 0)
    with pytest.raises(ValueError, match="initial_delay_ms"):
        timers.schedule_with_fixed_delay(lambda ts: None, -1, 10)
    timers.shutdown()


# -------------------------------------------------------------- TestProcessingTimeService


def test_manual_clock_starts_at_zero_and_fires_due_timers_in_timestamp_order():
    service = TestProcessingTimeService()
    assert isinstance(service, ProcessingTimeService)
    assert service.get_current_processing_time() == 0
    fired: list[tuple[int, int]] = []
    caller = threading.get_ident()
    for ts in (30, 10, 20, 50):
        service.register_timer(ts, lambda t: fired.append((t, threading.get_ident())))
    assert service.get_active_timer_timestamps() == [10, 20, 30, 50]
    assert service.get_number_of_registered_timers() == 4

    service.set_current_time(30)
    assert fired == [(10, caller), (20, caller), (30, caller)]
    assert service.get_active_timer_timestamps() == [50]
    assert service.get_number_of_registered_timers() == 1
    assert service.get_current_processing_time() == 30


def test_manual_clock_fires_due_timers_registered_by_callbacks_in_the_same_call():
    service = TestProcessingTimeService()
    fired: list[int] = []

    def at_50(ts: int) -> None:
        fired.append(ts)
        service.register_timer(70, fired.append)  # due: fires in this call
        service.register_timer(40, fired.append)  # already in the past: as soon as possible
        service.register_timer(200, fired.append)  # not due

    service.register_timer(50, at_50)
    service.register_timer(80, fired.append)
    service.set_current_time(100)
    assert fired == [50, 40, 70, 80]
    assert service.get_active_timer_timestamps() == [200]


def test_manual_clock_fires_a_past_timer_on_registration():
    service = TestProcessingTimeService()
    service.set_current_time(100)
    fired: list[int] = []
    timer = service.register_timer(60, fired.append)
    assert fired == [60]
    assert timer.is_done() and not timer.is_cancelled()
    assert timer.cancel() is False


def test_manual_clock_equal_timestamps_fire_in_registration_order():
    service = TestProcessingTimeService()
    fired: list[str] = []
    for label in "xyz":
        service.register_timer(10, lambda ts, label=label: fired.append(label))
    service.set_current_time(10)
    assert fired == ["x", "y", "z"]


def test_manual_clock_cancelled_timers_do_not_fire():
    service = TestProcessingTimeService()
    fired: list[int] = []
    keep = service.register_timer(10, fired.append)
    drop = service.register_timer(20, fired.append)
    assert drop.cancel() is True
    assert service.get_active_timer_timestamps() == [10]
    assert service.get_number_of_registered_timers() == 1
    service.set_current_time(100)
    assert fired == [10]
    assert keep.is_done() and not keep.is_cancelled()


def test_manual_clock_periodic_timers_fixed_rate_catches_up_fixed_delay_does_not():
    service = TestProcessingTimeService()
    rate: list[int] = []
    delay: list[int] = []
    rate_timer = service.schedule_at_fixed_rate(rate.append, 10, 10)
    service.schedule_with_fixed_delay(delay.append, 10, 10)
    service.set_current_time(35)
    assert rate == [10, 20, 30]
    assert delay == [10]
    assert service.get_active_timer_timestamps() == [40, 45]
    rate_timer.cancel()
    service.set_current_time(50)
    assert rate == [10, 20, 30]
    assert delay == [10, 45]


def test_manual_clock_quiesce_and_shutdown():
    service = TestProcessingTimeService()
    fired: list[int] = []
    service.register_timer(10, fired.append)
    service.quiesce()
    service.set_current_time(100)
    assert fired == []
    noop = service.register_timer(5, fired.append)
    assert noop.is_cancelled() and fired == []
    assert service.get_number_of_registered_timers() == 0
    service.shutdown()
    assert service.is_terminated()
    with pytest.raises(RuntimeError, match="shut down"):
        service.register_timer(5, fired.append)


def test_manual_clock_callback_exception_propagates_and_later_timers_stay():
    service = TestProcessingTimeService()
    fired: list[int] = []

    def failing(ts: int) -> None:
        raise KeyError(ts)

    service.register_timer(10, failing)
    service.register_timer(20, fired.append)
    with pytest.raises(KeyError):
        service.set_current_time(30)
    assert fired == []
    assert service.get_active_timer_timestamps() == [20]
    service.set_current_time(30)
    assert fired == [20]
