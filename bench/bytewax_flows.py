"""W1–W3 as bytewax 0.21 dataflows, on the bench workloads' inputs and user functions, ending
in the same sinks as Rill and the hand-written loop (so the outputs are checked alike).

Needs the optional extra ``bench-peers`` (``pip install -e '.[bench-peers]'``: ``bytewax==0.21.*``);
importing this module without bytewax raises ``ImportError`` naming the extra.

Each flow reads the workload's prepared list with ``bytewax.testing.TestingSource`` in batches
of :data:`BATCH_SIZE` records (Rill's ``from_collection`` reads 1,024 per batch; bytewax's
default of 1 would be 2–3× slower, NOTES.md's baseline did not say which it used) and runs in
this thread on one worker (``bytewax.testing.run_main``: bytewax's p=1):

``wordcount`` / ``wordcount_sum`` (W1)
    ``flat_map(split_words)`` → ``map(count_one)`` → ``key_on(word_of)`` → ``stateful_map`` with
    ``add_counts`` (one updated ``(word, count)`` per word, as Rill's rolling reduce) →
    ``map`` dropping the key → sink. ``wordcount_sum``'s flow starts with
    ``flat_map(word_pairs)`` and sums ``count[1]`` inline, as ``key_by(itemgetter(0)).sum(1)``.
``stateless`` (W3)
    ``map(to_euros)`` → ``filter(is_watched_auction)`` → sink.
``tumbling`` (W2 as bench/ defines it: synthetic out-of-order events, 10 s tumbling windows)
    ``key_on(str(event_key))`` → ``fold_window`` (``EventClock`` on ``event_timestamp`` with a
    5 s wait, ``TumblingWindower`` of 10 s aligned to the epoch, ``CountAndSum``'s
    ``create_accumulator``/``add``/``merge``, ``ordered=False``: the aggregate is commutative) →
    ``(result, window max timestamp)`` to the sink. The clock's ``now_getter`` is a constant, so
    the watermark is the largest timestamp seen minus 5 s, as Rill's bounded-out-of-orderness
    strategy (bytewax's default would also advance it with the system time, and then whether an
    element is late would depend on the machine's speed).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Dict, List

try:
    import bytewax.operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.operators.windowing import EventClock, TumblingWindower, fold_window
    from bytewax.outputs import DynamicSink, StatelessSinkPartition
    from bytewax.testing import TestingSource, run_main
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(f"the bytewax side-by-side needs the optional extra: pip install -e '.[bench-peers]' "
                      f"(bytewax==0.21.*): {error}") from error

from bench.harness import CountingSink, LoopSinkContext
from bench.workloads.stateless import is_watched_auction, to_euros
from bench.workloads.windows import OUT_OF_ORDERNESS_MS, WINDOW_MS, CountAndSum, event_key, event_timestamp
from bench.workloads.wordcount import word_of, word_pairs
from rill.examples.word_count import add_counts, count_one, split_words

__all__ = ["BATCH_SIZE", "FLOWS", "run_bytewax"]

#: records per batch read from the prepared list (Rill's from_collection batch)
BATCH_SIZE = 1024

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class _InvokeSink(DynamicSink):
    """Hands every item to ``sink.invoke(item, None)`` (one worker, so one partition)."""

    def __init__(self, sink: CountingSink) -> None:
        self.sink = sink

    def build(self, step_id: str, worker_index: int, worker_count: int) -> StatelessSinkPartition:
        return _InvokePartition(self.sink)


class _InvokePartition(StatelessSinkPartition):
    def __init__(self, sink: CountingSink) -> None:
        self._invoke = sink.invoke

    def write_batch(self, items: List[Any]) -> None:
        invoke = self._invoke
        for item in items:
            invoke(item, None)


class _WindowPartition(StatelessSinkPartition):
    """``(result, window max timestamp)`` items to ``sink.invoke(result, context)``, the context
    carrying the timestamp as Rill's sink context does."""

    def __init__(self, sink: CountingSink) -> None:
        self._invoke = sink.invoke
        self._context = LoopSinkContext()

    def write_batch(self, items: List[Any]) -> None:
        invoke, context = self._invoke, self._context
        for result, ts in items:
            context.ts = ts
            invoke(result, context)


class _WindowSink(_InvokeSink):
    def build(self, step_id: str, worker_index: int, worker_count: int) -> StatelessSinkPartition:
        return _WindowPartition(self.sink)


def _rolling(state, value):
    value = value if state is None else add_counts(state, value)
    return value, value


def _rolling_sum(state, value):
    value = value if state is None else (state[0], state[1] + value[1])
    return value, value


def _drop_key(key_value):
    return key_value[1]


def _wordcount(flow: Dataflow, data: List[str], sink: CountingSink) -> None:
    lines = op.input("lines", flow, TestingSource(data, BATCH_SIZE))
    pairs = op.map("count_one", op.flat_map("split", lines, split_words), count_one)
    counts = op.stateful_map("reduce", op.key_on("key_by", pairs, word_of), _rolling)
    op.output("sink", op.map("values", counts, _drop_key), _InvokeSink(sink))


def _wordcount_sum(flow: Dataflow, data: List[str], sink: CountingSink) -> None:
    lines = op.input("lines", flow, TestingSource(data, BATCH_SIZE))
    pairs = op.flat_map("word_pairs", lines, word_pairs)
    counts = op.stateful_map("sum", op.key_on("key_by", pairs, word_of), _rolling_sum)
    op.output("sink", op.map("values", counts, _drop_key), _InvokeSink(sink))


def _stateless(flow: Dataflow, data: List[Any], sink: CountingSink) -> None:
    bids = op.input("bids", flow, TestingSource(data, BATCH_SIZE))
    watched = op.filter("filter", op.map("to_euros", bids, to_euros), is_watched_auction)
    op.output("sink", watched, _InvokeSink(sink))


def _event_time(event) -> datetime:
    return _EPOCH + timedelta(milliseconds=event_timestamp(event, None))


def _str_key(event) -> str:
    return str(event_key(event))  # bytewax keys are str


def _tumbling(flow: Dataflow, data: List[Any], sink: CountingSink) -> None:
    aggregate = CountAndSum()
    now = _EPOCH  # a constant system time: the watermark moves with the events only
    clock = EventClock(_event_time, wait_for_system_duration=timedelta(milliseconds=OUT_OF_ORDERNESS_MS),
                       now_getter=lambda: now)
    windower = TumblingWindower(length=timedelta(milliseconds=WINDOW_MS), align_to=_EPOCH)
    events = op.key_on("key_by", op.input("events", flow, TestingSource(data, BATCH_SIZE)), _str_key)
    out = fold_window("window", events, clock, windower, aggregate.create_accumulator,
                      lambda acc, event: aggregate.add(event, acc), aggregate.merge, ordered=False)

    def result_and_window_max(key_window):
        window_id, accumulator = key_window[1]
        return aggregate.get_result(accumulator), (window_id + 1) * WINDOW_MS - 1

    op.output("sink", op.map("results", out.down, result_and_window_max), _WindowSink(sink))


#: workload name -> ``build(flow, data, sink)``
FLOWS: Dict[str, Callable[[Dataflow, List[Any], CountingSink], None]] = {
    "wordcount": _wordcount,
    "wordcount_sum": _wordcount_sum,
    "stateless": _stateless,
    "tumbling": _tumbling,
}


def run_bytewax(workload_name: str, data: List[Any], sink: CountingSink) -> None:
    """Build the bytewax flow of ``workload_name`` on ``data`` and run it to the end on one
    worker in this thread; every output goes to ``sink.invoke``.

    :raises KeyError: for a workload without a bytewax flow (see :data:`FLOWS`).
    """
    if workload_name not in FLOWS:
        raise KeyError(f"no bytewax flow for workload {workload_name!r}; there are {sorted(FLOWS)}")
    flow = Dataflow(f"bench-{workload_name}")
    FLOWS[workload_name](flow, data, sink)
    run_main(flow)
