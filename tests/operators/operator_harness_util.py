"""Helpers for operator tests: run the same input through ``process_element`` and through
``process_batch`` (in several batch sizes) and check that every path gives the same output."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from rill.operators.testing import OneInputStreamOperatorTestHarness
from rill.common.streamrecord import StreamRecord

Harness = OneInputStreamOperatorTestHarness

#: batch sizes every operator is driven with (None = the whole input as one batch)
BATCH_SIZES = (None, 1, 2, 3)


def _snapshot(h: Harness) -> Tuple[List[Any], Dict[Any, List[StreamRecord]]]:
    return list(h.get_output()), {tag: list(recs) for tag, recs in h.output.side_outputs.items()}


def run_per_element(make_harness: Callable[[], Harness], values: Sequence[Any],
                    timestamps: Optional[Sequence[int]] = None, after: Optional[Callable[[Harness], None]] = None):
    with make_harness() as h:
        for i, v in enumerate(values):
            h.process_element(v, None if timestamps is None else timestamps[i])
        if after is not None:
            after(h)
        return _snapshot(h)


def run_batches(make_harness: Callable[[], Harness], values: Sequence[Any],
                timestamps: Optional[Sequence[int]] = None, batch_size: Optional[int] = None,
                after: Optional[Callable[[Harness], None]] = None):
    n = len(values)
    size = n if batch_size is None else batch_size
    with make_harness() as h:
        for start in range(0, n, max(size, 1)):
            h.process_batch(list(values[start:start + size]),
                            None if timestamps is None else list(timestamps[start:start + size]))
        if after is not None:
            after(h)
        return _snapshot(h)


def run_all_paths(make_harness: Callable[[], Harness], values: Sequence[Any],
                  timestamps: Optional[Sequence[int]] = None,
                  after: Optional[Callable[[Harness], None]] = None):
    """Run every path, assert they agree, return ``(output, side_outputs)``."""
    expected = run_per_element(make_harness, values, timestamps, after)
    for size in BATCH_SIZES:
        got = run_batches(make_harness, values, timestamps, size, after)
        assert got == expected, f"process_batch (batch size {size}) differs from process_element"
    return expected


def records(values: Sequence[Any], timestamps: Optional[Sequence[int]] = None) -> List[StreamRecord]:
    if timestamps is None:
        return [StreamRecord(v, None) for v in values]
    return [StreamRecord(v, t) for v, t in zip(values, timestamps)]
