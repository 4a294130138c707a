"""Keyed event-time windows with incremental aggregation over out-of-order events.

    events (key, value, timestamp ms) → assign_timestamps_and_watermarks(bounded
    out-of-orderness 5 s, timestamp assigner) → key_by(key) → window(tumbling 10 s | sliding
    10 s / 5 s) → aggregate(count and sum per key and window) → sink of (result, window)

Input: ``size`` events generated once from a fixed seed, shared by both sides. Keys are
uniform over 1,000 ints, values uniform in 1..100. Event ``i`` happens at ``BASE_MS + i *
SPACING_MS`` (1 ms apart: 1,000,000 events span 1,000 s of event time, 100 tumbling windows
of about 10 events per key each) and carries that time minus a uniform jitter of 0..3,999 ms
(``JITTER_MS``): timestamps increase on average and are out of order by up to 3.999 s.

No element is ever late, whatever the watermark timing: an element's timestamp is at least
``happened - 3,999`` while every watermark so far is at most ``max timestamp seen - 5,000 - 1 <=
happened - 5,001`` (no earlier element has a timestamp above its own happening time, which is
not after this element's). So the window of every element is still open when it arrives, and
the results do not depend on when Rill's periodic watermarks (every 200 ms of processing time)
happen to be emitted. That makes an exact check possible: both sides must produce the same
multiset of ``((key, count, sum), window max timestamp)`` outputs (:class:`WindowResultSink`).

The hand-written loop has the same semantics: per event the same timestamp assigner, key
selector and ``AggregateFunction`` (``create_accumulator`` / ``add``) in a dict of windows of
dicts of keys; its own bounded-out-of-orderness watermark (``max timestamp - 5,000 - 1``)
advances every ``WATERMARK_EVERY`` events (as a periodic watermark between batches), fires
every window whose ``end - 1`` it reached (``get_result`` per key, stamped with the window's
max timestamp), and drops late elements as Rill would (none occur); at the end of input every
remaining window fires, as on Rill's final ``MAX_WATERMARK``.

With ``source="file"`` the events are written once into a file of binary records
(:mod:`bench.workloads.record_file`) that both sides read block by block (1,024 events): the
loop in order, advancing its watermark after each block; Rill with a splittable source whose
subtask *i* of P reads blocks *i*, *i* + P, ... (so at p > 1 the subtasks' event times advance
together). No element is late there either: a subtask's watermark is bounded by its own
elements as above, and a window operator's watermark is the minimum over its inputs.
"""

from __future__ import annotations

import random
from typing import Any, Dict, List, Optional, Tuple

from rill.common import Duration, WatermarkStrategy
from rill.datastream import AggregateFunction
from rill.datastream.window import SlidingEventTimeWindows, TumblingEventTimeWindows

from bench.harness import LoopSinkContext, WindowResultSink
from bench.workloads.record_file import RecordFileCache

__all__ = [
    "TumblingWindowsWorkload",
    "SlidingWindowsWorkload",
    "CountAndSum",
    "event_timestamp",
    "event_key",
    "watermark_strategy",
    "generate_events",
    "OUT_OF_ORDERNESS_MS",
    "JITTER_MS",
]

Event = Tuple[int, int, int]  # (key, value, timestamp ms)

KEYS = 1_000
BASE_MS = 1_700_000_000_000   # 2023-11-14T22:13:20Z, epoch ms
SPACING_MS = 1                # mean event-time distance between consecutive events
JITTER_MS = 4_000             # timestamps are earlier by 0..JITTER_MS - 1 ms
OUT_OF_ORDERNESS_MS = 5_000   # the watermark strategy's bound: > every element's jitter
WINDOW_MS = 10_000
SLIDE_MS = 5_000
WATERMARK_EVERY = 1_000       # the loop advances its watermark every this many events

assert JITTER_MS <= OUT_OF_ORDERNESS_MS, "elements could be late: the check would depend on timing"


# -- the user functions (both sides call these) ------------------------------------------------

def event_timestamp(event: Event, record_timestamp: Optional[int]) -> int:
    """The timestamp assigner."""
    return event[2]


def event_key(event: Event) -> int:
    """The key selector."""
    return event[0]


class CountAndSum(AggregateFunction):
    """Per key and window: ``(key, number of events, sum of values)``."""

    def create_accumulator(self) -> Tuple[Any, int, int]:
        return None, 0, 0

    def add(self, value: Event, accumulator: Tuple[Any, int, int]) -> Tuple[Any, int, int]:
        return value[0], accumulator[1] + 1, accumulator[2] + value[1]

    def get_result(self, accumulator: Tuple[Any, int, int]) -> Tuple[Any, int, int]:
        return accumulator

    def merge(self, a: Tuple[Any, int, int], b: Tuple[Any, int, int]) -> Tuple[Any, int, int]:
        return (a[0] if a[0] is not None else b[0]), a[1] + b[1], a[2] + b[2]


def generate_events(size: int, seed: int = 20240918, keys: int = KEYS) -> List[Event]:
    """``size`` events ``(key, value, timestamp ms)`` with keys uniform over ``range(keys)``."""
    rng = random.Random(seed)
    r = rng.randrange
    return [(r(keys), 1 + r(100), BASE_MS + i * SPACING_MS - r(JITTER_MS)) for i in range(size)]


def watermark_strategy() -> WatermarkStrategy:
    return (WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(OUT_OF_ORDERNESS_MS))
            .with_timestamp_assigner(event_timestamp))


# -- the loop ------------------------------------------------------------------------------------

def _fire(windows: Dict[int, Dict[Any, Any]], upto: int, get_result, invoke, context: LoopSinkContext) -> int:
    """Fire (and drop) every window whose max timestamp is ``<= upto``, earliest first;
    return the smallest max timestamp left (or ``upto`` + 1 if none)."""
    due = sorted(m for m in windows if m <= upto)
    for max_ts in due:
        context.ts = max_ts
        for acc in windows.pop(max_ts).values():
            invoke(get_result(acc), context)
    return min(windows) if windows else _NEVER


_NEVER = 2 ** 63 - 1  # Long.MAX_VALUE: "no window pending"


class _WindowsWorkload:
    unit = "events"
    default_size = 1_000_000
    sink_class = WindowResultSink

    SOURCES = ("collection", "file")
    #: the events' record format in the file: (key, value, timestamp ms)
    FILE_FORMAT = "<iiq"

    def __init__(self, keys: int = KEYS, source: str = "collection") -> None:
        """:param keys: distinct keys of the events (the README's table uses 1,000; the
            checkpoint-overhead benchmark 100,000).
        :param source: ``"collection"`` (``from_collection``, non-parallel) or ``"file"`` (a
            file of binary records both sides read, see the module's docstring).
        :raises ValueError: for ``keys < 1`` or another ``source``."""
        if keys < 1:
            raise ValueError(f"{type(self).__name__}: keys must be at least 1, got {keys}")
        if source not in self.SOURCES:
            raise ValueError(f"{type(self).__name__}: source must be one of {self.SOURCES}, got {source!r}")
        self.keys = keys
        self.source_kind = source
        self._files = RecordFileCache(self.FILE_FORMAT)

    def close(self) -> None:
        """Remove the files written for ``source="file"`` (if any)."""
        self._files.close()

    def materialize(self, data: List[Any]) -> None:
        """Write ``data``'s file now (``source="file"``), so that no timed run pays for it."""
        if self.source_kind == "file":
            self._files.of(data)

    def prepare(self, size: int) -> List[Event]:
        return generate_events(size, keys=self.keys)

    def _assigner(self):
        raise NotImplementedError

    def _chunks(self, data: List[Event]):
        """What the loop reads, in order, advancing its watermark after each chunk: slices of
        ``WATERMARK_EVERY`` events, or the file's blocks."""
        if self.source_kind == "file":
            return self._files.of(data).blocks()
        return (data[begin:begin + WATERMARK_EVERY] for begin in range(0, len(data), WATERMARK_EVERY))

    def _source(self, env, data: List[Event]):
        if self.source_kind == "file":
            return env.from_source(self._files.of(data).source(), None, "Events File Source")
        return env.from_collection(data)

    def run_rill(self, env, data: List[Event], sink) -> None:
        (self._source(env, data)
            .assign_timestamps_and_watermarks(watermark_strategy())
            .key_by(event_key)
            .window(self._assigner())
            .aggregate(CountAndSum())
            .add_sink(sink))


class TumblingWindowsWorkload(_WindowsWorkload):
    name = "tumbling"
    description = ("events → timestamps/watermarks (5 s bound) → key_by → tumbling 10 s event-time "
                   "windows → aggregate(count, sum) → sink")
    target_ratio = 0.35

    def _assigner(self):
        return TumblingEventTimeWindows.of(WINDOW_MS)

    def run_baseline(self, data: List[Event], sink) -> None:
        agg = CountAndSum()
        create, add, get_result = agg.create_accumulator, agg.add, agg.get_result
        extract, key_of = event_timestamp, event_key
        invoke, context = sink.invoke, LoopSinkContext()
        size, last, bound = WINDOW_MS, WINDOW_MS - 1, OUT_OF_ORDERNESS_MS
        windows: Dict[int, Dict[Any, Any]] = {}  # window max timestamp -> {key: accumulator}
        max_seen = -_NEVER
        watermark = -_NEVER - 1
        next_due = _NEVER  # the smallest max timestamp of a pending window
        late = 0
        for chunk in self._chunks(data):
            for event in chunk:
                ts = extract(event, None)
                if ts > max_seen:
                    max_seen = ts
                max_ts = ts - ts % size + last  # TumblingEventTimeWindows, offset 0
                if max_ts <= watermark:  # the window has fired: late, dropped
                    late += 1
                    continue
                key = key_of(event)
                by_key = windows.get(max_ts)
                if by_key is None:
                    by_key = windows[max_ts] = {}
                    if max_ts < next_due:
                        next_due = max_ts
                acc = by_key.get(key)
                by_key[key] = add(event, create() if acc is None else acc)
            watermark = max_seen - bound - 1
            if watermark >= next_due:
                next_due = _fire(windows, watermark, get_result, invoke, context)
        _fire(windows, _NEVER, get_result, invoke, context)
        assert late == 0, f"{late} late events: the data generator broke its promise"


class SlidingWindowsWorkload(_WindowsWorkload):
    name = "sliding"
    description = ("events → timestamps/watermarks (5 s bound) → key_by → sliding 10 s / 5 s event-time "
                   "windows → aggregate(count, sum) → sink")
    target_ratio = None

    def _assigner(self):
        return SlidingEventTimeWindows.of(WINDOW_MS, SLIDE_MS)

    def run_baseline(self, data: List[Event], sink) -> None:
        agg = CountAndSum()
        create, add, get_result = agg.create_accumulator, agg.add, agg.get_result
        extract, key_of = event_timestamp, event_key
        invoke, context = sink.invoke, LoopSinkContext()
        size, slide, bound = WINDOW_MS, SLIDE_MS, OUT_OF_ORDERNESS_MS
        windows: Dict[int, Dict[Any, Any]] = {}  # window max timestamp -> {key: accumulator}
        max_seen = -_NEVER
        watermark = -_NEVER - 1
        next_due = _NEVER
        late = 0
        for chunk in self._chunks(data):
            for event in chunk:
                ts = extract(event, None)
                if ts > max_seen:
                    max_seen = ts
                # SlidingEventTimeWindows, offset 0: every start on the slide grid in (ts - size, ts]
                latest = ts - ts % slide + size - 1  # max timestamp of the latest window
                key = key_of(event)
                for max_ts in range(latest, ts - 1, -slide):  # latest first, as Flink
                    if max_ts <= watermark:  # this window has fired: skipped, as Rill does
                        late += 1  # (Rill drops the element if all its windows are skipped)
                        continue
                    by_key = windows.get(max_ts)
                    if by_key is None:
                        by_key = windows[max_ts] = {}
                        if max_ts < next_due:
                            next_due = max_ts
                    acc = by_key.get(key)
                    by_key[key] = add(event, create() if acc is None else acc)
            watermark = max_seen - bound - 1
            if watermark >= next_due:
                next_due = _fire(windows, watermark, get_result, invoke, context)
        _fire(windows, _NEVER, get_result, invoke, context)
        assert late == 0, f"{late} late events: the data generator broke its promise"


class TypedTumblingWindowsWorkload(TumblingWindowsWorkload):
    """``tumbling`` with its types declared (``key_type=``, ``accumulator_type=``): the same
    functions, input and output; the window state is written in typed columns (``key``
    bigint, ``value`` struct of three bigints). For the checkpoint benchmark (issue 11)."""

    name = "tumbling_typed"

    def run_rill(self, env, data: List[Event], sink) -> None:
        from rill.common.typeinfo import Types  # noqa: PLC0415 - only this variant declares types
        (self._source(env, data)
            .assign_timestamps_and_watermarks(watermark_strategy())
            .key_by(event_key, key_type=Types.LONG())
            .window(self._assigner())
            .aggregate(CountAndSum(), accumulator_type=Types.TUPLE([Types.LONG(), Types.LONG(), Types.LONG()]))
            .add_sink(sink))
