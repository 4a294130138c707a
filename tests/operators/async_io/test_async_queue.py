"""The async wait operator's queues against first principles: ordered emits the complete head
in input order; unordered emits completed records at once but only within the first
watermark-separated segment; sizes count records and watermarks; batches keep timestamps."""

from __future__ import annotations

from rill.operators.async_io.queue import OrderedQueue, UnorderedQueue

try:
    from rill.common.streamrecord import Watermark
except ImportError:  # before the layering move (wip/seams) it lived in the runtime
    from rill.runtime.streamrecord import Watermark


class Recorder:
    """An Output that records what it gets, batches as lists."""

    def __init__(self):
        self.events = []

    def collect_batch(self, values, timestamps=None):
        self.events.append(("batch", list(values), None if timestamps is None else list(timestamps)))

    def emit_watermark(self, watermark):
        self.events.append(("wm", watermark.timestamp))


def test_ordered_queue_waits_for_its_head():
    q, out = OrderedQueue(), Recorder()
    a, b = q.add_record("a", 1), q.add_record("b", 2)
    q.add_watermark(Watermark(2))
    c = q.add_record("c", 3)
    assert q.size() == 4
    q.complete(b, ["B"])
    assert q.emit(out) == 0 and out.events == []
    q.complete(a, ["A1", "A2"])
    assert q.emit(out) == 3
    assert out.events == [("batch", ["A1", "A2", "B"], [1, 1, 2]), ("wm", 2)]
    q.complete(c, [])
    assert q.emit(out) == 1 and q.is_empty()
    assert len(out.events) == 2  # an empty result emits nothing


def test_unordered_queue_emits_as_completed_within_a_segment():
    q, out = UnorderedQueue(), Recorder()
    a, b = q.add_record("a", None), q.add_record("b", None)
    q.complete(b, ["B"])
    assert q.emit(out) == 1
    assert out.events == [("batch", ["B"], None)]
    q.complete(a, ["A"])
    q.emit(out)
    assert out.events[-1] == ("batch", ["A"], None) and q.is_empty()


def test_unordered_queue_never_emits_across_a_watermark():
    q, out = UnorderedQueue(), Recorder()
    a = q.add_record("a", 1)
    q.add_watermark(Watermark(1))
    b = q.add_record("b", 2)
    q.add_watermark(Watermark(2))
    c = q.add_record("c", 3)
    assert q.size() == 5
    q.complete(c, ["C"])
    q.complete(b, ["B"])
    assert q.emit(out) == 0 and out.events == []  # "a" still holds the first segment
    q.complete(a, ["A"])
    assert q.emit(out) == 5
    assert out.events == [("batch", ["A"], [1]), ("wm", 1), ("batch", ["B"], [2]), ("wm", 2),
                          ("batch", ["C"], [3])]


def test_a_watermark_with_nothing_ahead_is_emitted_at_once():
    q, out = UnorderedQueue(), Recorder()
    q.add_watermark(Watermark(5))
    assert q.emit(out) == 1 and out.events == [("wm", 5)] and q.is_empty()
    q2, out2 = OrderedQueue(), Recorder()
    q2.add_watermark(Watermark(6))
    assert q2.emit(out2) == 1 and out2.events == [("wm", 6)]


def test_records_with_and_without_timestamps_go_out_in_separate_batches():
    q, out = OrderedQueue(), Recorder()
    entries = [q.add_record("x", 10), q.add_record("y", None), q.add_record("z", None)]
    for e, v in zip(entries, ["X", "Y", "Z"]):
        q.complete(e, [v])
    q.emit(out)
    assert out.events == [("batch", ["X"], [10]), ("batch", ["Y", "Z"], None)]
