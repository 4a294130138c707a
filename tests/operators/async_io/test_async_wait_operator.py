"""The AsyncWaitOperator driven directly on this thread with a real TaskMailbox and
MailboxExecutor (the task's own parts): completions come back as mails, a full queue yields to
the mailbox, and a watermark that arrives during such a yield waits for the rest of its batch."""

from __future__ import annotations

import asyncio
import threading

from rill.operators.async_io import AsyncWaitOperator, OutputMode
from rill.operators.context import StreamOperatorContext
from rill.runtime.mailbox import MailboxExecutor, TaskMailbox

try:
    from rill.common.streamrecord import Watermark
except ImportError:  # before the layering move (wip/seams) it lived in the runtime
    from rill.runtime.streamrecord import Watermark


class Recorder:
    def __init__(self):
        self.events = []

    def collect_batch(self, values, timestamps=None):
        self.events.extend(("record", v, t) for v, t in zip(values, timestamps or [None] * len(values)))

    def emit_watermark(self, watermark):
        self.events.append(("watermark", watermark.timestamp))


class EchoAfter5ms:
    calls_on = set()

    def open(self, runtime_context):
        pass

    def close(self):
        pass

    async def async_invoke(self, value):
        EchoAfter5ms.calls_on.add(threading.current_thread().name)
        await asyncio.sleep(0.005)
        return [value]


class NoRetry:
    def can_retry(self, attempts):
        return False

    def get_backoff_time_millis(self, attempts):
        return -1

    def get_retry_predicate(self):
        return self

    def result_predicate(self):
        return None

    def exception_predicate(self):
        return None


class WatermarkDuringFirstYield:
    """A MailboxExecutor whose first yield first delivers a watermark to the operator, as a
    periodic-watermark timer mail of a chained upstream assigner would."""

    def __init__(self, executor, watermark):
        self._executor = executor
        self._watermark = watermark
        self.operator = None
        self.yields = 0

    def execute(self, action, description=""):
        self._executor.execute(action, description)

    def yield_(self):
        self.yields += 1
        if self._watermark is not None:  # a mail, queued ahead of the completions: runs first
            watermark, self._watermark = self._watermark, None
            self._executor.execute(lambda: self.operator.process_watermark(watermark), "periodic watermark")
        self._executor.yield_()


def make_operator(mode, capacity, executor):
    mailbox = TaskMailbox()
    mailbox.bind_to_current_thread()
    wrapper = WatermarkDuringFirstYield(MailboxExecutor(mailbox), executor)
    op = AsyncWaitOperator(EchoAfter5ms(), 10_000, capacity, mode, NoRetry())
    wrapper.operator = op
    ctx = StreamOperatorContext(task_name="Async", operator_name="async wait operator", operator_id="0" * 32,
                                subtask_index=0, parallelism=1, max_parallelism=128, mailbox_executor=wrapper)
    out = Recorder()
    op.setup(ctx, out)
    return op, out, wrapper


def test_a_watermark_during_a_yield_waits_for_the_rest_of_its_batch():
    op, out, wrapper = make_operator(OutputMode.ORDERED, 1, Watermark(25))
    op.open()
    try:
        op.process_batch([1, 2, 3], [10, 20, 30])
        op.end_input()
    finally:
        op.close()
    assert out.events == [("record", 1, 10), ("record", 2, 20), ("record", 3, 30), ("watermark", 25)]
    assert wrapper.yields >= 2  # capacity 1: the task thread waited in the mailbox
    assert EchoAfter5ms.calls_on == {"async-io Async (1/1)"}  # never on this (the task) thread


def test_unordered_mode_with_the_same_interleaving():
    op, out, _ = make_operator(OutputMode.UNORDERED, 2, Watermark(25))
    op.open()
    try:
        op.process_batch([1, 2, 3, 4], [10, 20, 30, 40])
        op.process_watermark(Watermark(45))
        op.end_input()
    finally:
        op.close()
    records = [e for e in out.events if e[0] == "record"]
    assert sorted(records) == [("record", v, v * 10) for v in (1, 2, 3, 4)]
    assert out.events[4:] == [("watermark", 25), ("watermark", 45)]
