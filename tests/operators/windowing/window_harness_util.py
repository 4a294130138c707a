"""Helpers for the window operator tests: build an operator through the same
``WindowOperatorBuilder`` the API uses, drive it through the keyed operator test harness with an
explicit script of elements, watermarks and processing times, and check that every input path
(per element, batches of several sizes, with and without the operator's fast path) gives the
same output."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from rill.datastream.functions import AggregateFunction
from rill.operators.output_tag import OutputTag
from rill.operators.testing import KeyedOneInputStreamOperatorTestHarness
from rill.operators.windowing import ProcessWindowFunction, WindowOperatorBuilder
from rill.common.streamrecord import StreamRecord, Watermark

R = StreamRecord
W = Watermark

#: a script step: ("e", value, timestamp) | ("w", watermark) | ("p", processing_time_ms)
Step = Tuple[Any, ...]


# -- window functions on (key, number) records, shared by the window tests ----------------------

def add_pairs(a, b):
    """Reduce function: ``(key, a + b)`` of field 1."""
    return (a[0], a[1] + b[1])


class CountAndSum(AggregateFunction):
    """(count, sum) of field 1."""

    def create_accumulator(self):
        return (0, 0)

    def add(self, value, acc):
        return (acc[0] + 1, acc[1] + value[1])

    def get_result(self, acc):
        return acc

    def merge(self, a, b):
        return (a[0] + b[0], a[1] + b[1])


class Describe(ProcessWindowFunction):
    """(key, window start, window end, elements' field 1 in state order)."""

    def process(self, key, context, elements):
        win = context.window()
        yield (key, win.start, win.end, [v[1] for v in elements])


def builder(assigner, trigger=None, evictor=None, lateness=None, late_tag=None, non_keyed=False) -> WindowOperatorBuilder:
    b = WindowOperatorBuilder(assigner, non_keyed=non_keyed)
    if trigger is not None:
        b.set_trigger(trigger)
    if evictor is not None:
        b.set_evictor(evictor)
    if lateness is not None:
        b.set_allowed_lateness(lateness)
    if late_tag is not None:
        b.set_late_data_output_tag(late_tag)
    return b


def harness(operator, key_selector: Callable[[Any], Any] = lambda v: v[0], **kwargs) -> KeyedOneInputStreamOperatorTestHarness:
    return KeyedOneInputStreamOperatorTestHarness(operator, key_selector, **kwargs)


def _run(make_operator, script: Sequence[Step], batch_size: Optional[int], fast: bool, key_selector,
         inspect: Optional[Callable[[Any], None]]) -> Tuple[List[Any], Dict[OutputTag, List[StreamRecord]]]:
    h = harness(make_operator(), key_selector)
    h.open()
    if not fast:
        h.operator._fast_kind = None
    pending_values: List[Any] = []
    pending_ts: List[Optional[int]] = []

    def flush() -> None:
        if not pending_values:
            return
        if batch_size is None:
            for v, t in zip(pending_values, pending_ts):
                h.process_element(v, t)
        else:
            for i in range(0, len(pending_values), batch_size):
                ts = pending_ts[i:i + batch_size]
                h.process_batch(pending_values[i:i + batch_size], None if all(t is None for t in ts) else ts)
        pending_values.clear()
        pending_ts.clear()

    for step in script:
        if step[0] == "e":
            pending_values.append(step[1])
            pending_ts.append(step[2])
            continue
        flush()
        if step[0] == "w":
            h.process_watermark(step[1])
        elif step[0] == "p":
            h.set_processing_time(step[1])
        else:  # pragma: no cover
            raise ValueError(step)
    flush()
    if inspect is not None:
        inspect(h)
    out = list(h.get_output())
    side = {tag: list(recs) for tag, recs in h.output.side_outputs.items()}
    h.close()
    return out, side


def canonical(output: List[Any]) -> List[Any]:
    """``output`` with the records between two watermarks sorted by (timestamp, repr): the
    fast path emits windows that fire together key group by key group, the general path in
    registration order (see ``rill.operators.windowing.fast_path``)."""
    result: List[Any] = []
    segment: List[Any] = []
    for element in output + [None]:
        if isinstance(element, StreamRecord):
            segment.append(element)
            continue
        result.extend(sorted(segment, key=lambda r: (r.timestamp is None, r.timestamp, repr(r.value))))
        segment = []
        if element is not None:
            result.append(element)
    return result


def run_script(make_operator: Callable[[], Any], script: Sequence[Step], key_selector=lambda v: v[0],
               inspect: Optional[Callable[[Any], None]] = None):
    """Run ``script`` on fresh operators per element, in batches of 1, 2, 3 and all, with the
    fast path on and off; assert that all runs agree (runs with the fast path exactly, runs
    without it up to the order of records that fire together) and return the per-element
    run's ``(output, side_outputs)``. ``inspect(harness)`` runs at the end of each run."""
    expected = _run(make_operator, script, None, True, key_selector, inspect)
    general = _run(make_operator, script, None, False, key_selector, inspect)
    assert (canonical(general[0]), general[1]) == (canonical(expected[0]), expected[1]), (
        f"general path:\n{general}\n!=\nfast path:\n{expected}")
    for batch_size in (1, 2, 3, 10_000):
        for fast, reference in ((True, expected), (False, general)):
            got = _run(make_operator, script, batch_size, fast, key_selector, inspect)
            assert got == reference, f"batch_size={batch_size} fast={fast}:\n{got}\n!=\n{reference}"
    return expected


def e(value: Any, ts: Optional[int] = None) -> Step:
    return ("e", value, ts)


def w(ts: int) -> Step:
    return ("w", ts)


def p(ts: int) -> Step:
    return ("p", ts)
