"""AsyncWaitOperator checkpoints (Flink's "_async_wait_operator_state_"): a snapshot holds the
queue's records (done or in flight) and watermarks not emitted yet; a fresh operator restored
from it replays them in open, so the output before the snapshot plus the restored operator's
output is every result once, in order. Driven with the operator test harness and a real
TaskMailbox/MailboxExecutor on this thread."""

from __future__ import annotations

import asyncio
import time

import pytest

from rill.common.streamrecord import StreamRecord, Watermark
from rill.datastream.async_retry_strategies import NO_RETRY_STRATEGY
from rill.operators.async_io import AsyncWaitOperator, OutputMode
from rill.operators.async_io.async_wait_operator import STATE_NAME
from rill.operators.testing import OneInputStreamOperatorTestHarness
from rill.runtime.mailbox import MailboxExecutor, TaskMailbox


class Gated:
    """Returns ``[value * 10]`` once ``value`` is released; until then the call is in flight."""

    def __init__(self, released=()):
        self.released = set(released)
        self.calls = []

    def open(self, runtime_context):
        pass

    def close(self):
        pass

    async def async_invoke(self, value):
        self.calls.append(value)
        while value not in self.released:
            await asyncio.sleep(0.001)
        return [value * 10]

    def timeout(self, value):
        raise TimeoutError(value)


def _harness(fn, mode, capacity=10, restored=None):
    mailbox = TaskMailbox()
    mailbox.bind_to_current_thread()
    h = OneInputStreamOperatorTestHarness(AsyncWaitOperator(fn, 0, capacity, mode, NO_RETRY_STRATEGY))
    h.context.mailbox_executor = MailboxExecutor(mailbox)
    h.initialize_state(restored)
    h.open()
    return h


def _drive_until(h, condition, timeout_s=10.0):
    """Run the task's mails (completions) until ``condition()``, with a deadline."""
    executor = h.context.mailbox_executor
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        executor.try_yield() or time.sleep(0.001)


def _out(h):
    return [(e.value, e.timestamp) if isinstance(e, StreamRecord) else ("wm", e.timestamp) for e in h.get_output()]


@pytest.mark.parametrize("mode", [OutputMode.ORDERED, OutputMode.UNORDERED])
def test_snapshot_holds_what_was_not_emitted_and_restore_replays_it(mode):
    fn = Gated(released={1, 3})
    h = _harness(fn, mode)
    h.process_batch([1, 2], [10, 20])
    h.process_watermark(Watermark(25))
    h.process_batch([3, 4], [30, 40])
    _drive_until(h, lambda: (10, 10) in _out(h) and sorted(fn.calls) == [1, 2, 3, 4])
    snap = h.snapshot(1)
    before = _out(h)
    assert before == [(10, 10)]
    _, elements = snap.operator_state[STATE_NAME]
    expected = [("record", 2, 20), ("watermark", 25), ("record", 3, 30), ("record", 4, 40)]
    if mode is OutputMode.UNORDERED:  # per segment: completed (3, if its mail ran) first, then in flight
        assert list(elements) in (expected, [("record", 2, 20), ("watermark", 25), ("record", 4, 40), ("record", 3, 30)])
    else:
        assert list(elements) == expected
    h._close_without_finish()  # the crash: calls still in flight are cancelled

    fn2 = Gated(released={1, 2, 3, 4})
    h2 = _harness(fn2, mode, restored=snap)
    h2.end_input()
    after = _out(h2)
    h2.close()
    assert sorted(fn2.calls) == [2, 3, 4]  # 3 was done but not emitted: called again
    records = [r for r in before + after if r[0] != "wm"]
    assert sorted(records) == [(10, 10), (20, 20), (30, 30), (40, 40)]  # each result once
    assert after.index(("wm", 25)) == 1  # the watermark still after 2's result, before 3's and 4's
    if mode is OutputMode.ORDERED:
        assert after == [(20, 20), ("wm", 25), (30, 30), (40, 40)]


def test_snapshot_during_a_yield_keeps_the_rest_of_the_batch():
    fn = Gated()
    h = _harness(fn, OutputMode.ORDERED, capacity=2)
    snaps = []

    def checkpoint():  # a source task's checkpoint mail, run while process_batch waits for room
        snaps.append(h.snapshot(1))
        fn.released.update({2, 3, 4})

    h.context.mailbox_executor.execute(checkpoint, "checkpoint")
    h.process_batch([2, 3, 4], [20, 30, 40])  # capacity 2: yields before queueing 4
    [snap] = snaps
    assert snap.operator_state[STATE_NAME] == ("SPLIT_DISTRIBUTE", (
        ("record", 2, 20), ("record", 3, 30), ("record", 4, 40)))
    h.end_input()
    assert _out(h) == [(20, 20), (30, 30), (40, 40)]
    h.close()
