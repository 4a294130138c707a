"""The window operator's fast path under copy-on-write snapshots: a snapshot taken between
batches keeps the window contents of its time while the fast path adds to them, fires and
cleans windows up; restored, it fires exactly what it held."""

from __future__ import annotations

from rill.operators.state_initializer import snapshot_operator_state_sync
from rill.operators.windowing import TumblingEventTimeWindows

from window_harness_util import CountAndSum, builder, harness

KEYS = [f"k{i}" for i in range(300)]


def _operator():
    return builder(TumblingEventTimeWindows.of(10)).aggregate(CountAndSum())[0]


def _values(output):
    return sorted((r.value, r.timestamp) for r in output if hasattr(r, "value"))


def test_a_snapshot_keeps_window_contents_while_the_fast_path_fires_and_cleans_up():
    h = harness(_operator())
    h.open()
    assert h.operator._fast_kind is not None
    h.process_batch([(k, 1) for k in KEYS], [5] * len(KEYS))        # window [0, 10)
    h.process_batch([(k, 2) for k in KEYS[:50]], [15] * 50)         # window [10, 20)
    futures = snapshot_operator_state_sync(h.operator, 3, 0)
    h.process_batch([(k, 10) for k in KEYS], [7] * len(KEYS))       # into a pinned window
    h.process_watermark(9)                                          # fires [0, 10), cleans it up
    h.process_batch([(k, 100) for k in KEYS[:50]], [16] * 50)
    h.process_watermark(19)
    live = _values(h.get_output())
    h.close()
    assert live == sorted([((2, 11), 9)] * len(KEYS) + [((2, 102), 19)] * 50)
    snapshot = futures.finalize()

    restored = harness(_operator())
    restored.initialize_state(snapshot)
    restored.open()
    restored.process_watermark(19)
    assert _values(restored.get_output()) == sorted([((1, 1), 9)] * len(KEYS) + [((1, 2), 19)] * 50)
    restored.close()
