"""Helpers (imported as ``_two_input_util``) for the two-input operator tests: drive a script of
inputs through the per-record path and through the batch path in several batch sizes, and check
that every path gives the same output."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from rill.common.streamrecord import StreamRecord

#: batch sizes every operator is driven with (None = each run of same-input records as one batch)
BATCH_SIZES = (None, 1, 2, 3)


def records(values: Sequence[Any], timestamps: Optional[Sequence[Optional[int]]] = None) -> List[StreamRecord]:
    if timestamps is None:
        return [StreamRecord(v, None) for v in values]
    return [StreamRecord(v, t) for v, t in zip(values, timestamps)]


def _snapshot(h) -> Tuple[List[Any], Dict[Any, List[StreamRecord]]]:
    return list(h.get_output()), {tag: list(recs) for tag, recs in h.output.side_outputs.items()}


def run_script(h, script: Sequence[tuple], batch_size: Optional[int] = 0) -> None:
    """Run ``script`` on an open harness. Steps: ``(1, value, ts)`` / ``(2, value, ts)`` records,
    ``("w1", ts)`` / ``("w2", ts)`` watermarks, ``("pt", ms)`` processing time. ``batch_size``
    0: record by record; ``None`` or n: consecutive records of one input (all with or all
    without timestamps) in batches of up to n."""
    i = 0
    while i < len(script):
        step = script[i]
        if step[0] in (1, 2):
            if batch_size == 0:
                getattr(h, f"process_element{step[0]}")(step[1], step[2])
                i += 1
                continue
            j = i
            while (j < len(script) and script[j][0] == step[0] and (script[j][2] is None) == (step[2] is None)
                   and (batch_size is None or j - i < batch_size)):
                j += 1
            chunk = script[i:j]
            ts = None if step[2] is None else [s[2] for s in chunk]
            getattr(h, f"process_batch{step[0]}")([s[1] for s in chunk], ts)
            i = j
            continue
        if step[0] == "w1":
            h.process_watermark1(step[1])
        elif step[0] == "w2":
            h.process_watermark2(step[1])
        elif step[0] == "pt":
            h.set_processing_time(step[1])
        else:  # pragma: no cover
            raise ValueError(step)
        i += 1


def run_all_paths(make_harness: Callable[[], Any], script: Sequence[tuple],
                  after: Optional[Callable[[Any], None]] = None):
    """Output and side outputs of ``script`` per record; asserts every batch size gives the same."""
    results = []
    for batch_size in (0,) + BATCH_SIZES:
        with make_harness() as h:
            run_script(h, script, batch_size)
            if after is not None:
                after(h)
            results.append(_snapshot(h))
    for r, batch_size in zip(results[1:], BATCH_SIZES):
        assert r == results[0], f"batch size {batch_size} differs from record-by-record"
    return results[0]
