"""Nexmark queries q0-q8, q11 and q12 as Rill DataStream programs.

Each ``qN(events, config)`` takes the stream of all Nexmark events (``Person``, ``Auction``,
``Bid``, with timestamps and watermarks from :func:`bench.nexmark.source
.nexmark_watermark_strategy`) and returns the query's result stream. Semantics follow
nexmark-flink's SQL (q0-q5, q7, q8, q11, q12) and Beam's Nexmark q6 (nexmark-flink has no q6);
:mod:`bench.nexmark.reference` computes the same results in plain Python. Outputs are tuples:

=====  ===========================================================  ==========================
query  what                                                         output
=====  ===========================================================  ==========================
q0     pass-through of bids                                          ``(auction, bidder, price, date_time, extra)``
q1     prices in euros (``0.908 * price``)                           ``(auction, bidder, price_eur, date_time, extra)``
q2     bids on auctions whose id is a multiple of 123               ``(auction, price)``
q3     people in OR/ID/CA selling in category 10 (regular join)     ``(name, city, state, auction id)``
q4     running average winning price per category                   ``(category, average)`` per closed auction
q5     hot items: auctions with the most bids per sliding window    ``(auction, num, window start, window end)``
       (10 s every 2 s)
q6     average winning price of a seller's last 10 closed auctions  ``(seller, average)`` per closed auction
q7     highest bids per 10 s tumbling window                        ``(auction, price, bidder, date_time, extra)``
q8     people who opened an auction in the 10 s window they          ``(id, name, window start)``
       registered in
q11    bids per bidder session (gap 10 s)                            ``(bidder, count, session start, session end)``
q12    bids per bidder per 10 s processing-time window              ``(bidder, count, window start, window end)``
=====  ===========================================================  ==========================

A *winning bid* (q4, q6; nexmark-flink's q4 SQL): the highest price among an auction's bids
with ``auction[A_DATE_TIME] <= bid[B_DATE_TIME] <= auction[A_EXPIRES]``; an auction without such a bid
has none. An auction closes when the watermark passes its ``expires``. q4's and q6's running
figures take the closed auctions of a key in ``(expires, auction id)`` order, so their outputs
do not depend on the parallelism.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Callable, Dict

from rill.common.co_functions import KeyedCoProcessFunction
from rill.common.functions import AggregateFunction, KeyedProcessFunction, ProcessFunction
from rill.datastream.data_stream import DataStream
from rill.datastream.state import ListStateDescriptor, ValueStateDescriptor
from rill.datastream.window import (EventTimeSessionWindows, ProcessWindowFunction, SlidingEventTimeWindows,
                                    TumblingEventTimeWindows, TumblingProcessingTimeWindows)

from bench.nexmark.config import NexmarkConfiguration
from bench.nexmark.model import (A_CATEGORY, A_DATE_TIME, A_EXPIRES, A_ID, A_SELLER, AUCTION_LEN, B_AUCTION,
                                 B_BIDDER, B_DATE_TIME, B_EXTRA, B_PRICE, BID_LEN, P_CITY, P_ID, P_NAME, P_STATE,
                                 PERSON_LEN, is_auction, is_bid)

__all__ = ["QUERIES", "build_query"]

_Q3_STATES = frozenset(("OR", "ID", "CA"))
_Q3_CATEGORY = 10


def _bids(events: DataStream) -> DataStream:
    return events.filter(is_bid).name("Bids")


# -- q0, q1, q2: stateless ------------------------------------------------------------------

def _q0_project(bid):
    return bid[B_AUCTION], bid[B_BIDDER], bid[B_PRICE], bid[B_DATE_TIME], bid[B_EXTRA]


def q0(events: DataStream, config: NexmarkConfiguration) -> DataStream:
    """Pass-through (nexmark-flink q0): every bid's auction, bidder, price, date_time, extra."""
    return _bids(events).map(_q0_project).name("q0")


def _q1_euros(bid):
    return bid[B_AUCTION], bid[B_BIDDER], 0.908 * bid[B_PRICE], bid[B_DATE_TIME], bid[B_EXTRA]


def q1(events: DataStream, config: NexmarkConfiguration) -> DataStream:
    """Currency conversion (q1): the bid with ``0.908 * price``."""
    return _bids(events).map(_q1_euros).name("q1")


def _q2_selected(event) -> bool:
    return len(event) == BID_LEN and event[B_AUCTION] % 123 == 0


def _q2_project(bid):
    return bid[B_AUCTION], bid[B_PRICE]


def q2(events: DataStream, config: NexmarkConfiguration) -> DataStream:
    """Selection (q2): ``(auction, price)`` of the bids with ``auction % 123 == 0``."""
    return events.filter(_q2_selected).name("Bids on auctions % 123").map(_q2_project).name("q2")


# -- q3: regular join ------------------------------------------------------------------------

def _q3_auction(event) -> bool:
    return len(event) == AUCTION_LEN and event[A_CATEGORY] == _Q3_CATEGORY


def _q3_person(event) -> bool:
    return len(event) == PERSON_LEN and event[P_STATE] in _Q3_STATES


class LocalItemSuggestion(KeyedCoProcessFunction):
    """q3's join on ``auction[A_SELLER] == person[P_ID]`` (keyed by the person id): a person is kept
    once seen; auctions that come before their seller wait in a list state."""

    def open(self, runtime_context):
        self.person = runtime_context.get_state(ValueStateDescriptor("person"))
        self.waiting = runtime_context.get_list_state(ListStateDescriptor("auctions"))

    def process_element1(self, auction, ctx):
        p = self.person.value()
        if p is None:
            self.waiting.add(auction)
        else:
            yield p[P_NAME], p[P_CITY], p[P_STATE], auction[A_ID]

    def process_element2(self, person, ctx):
        self.person.update(person)
        for auction in self.waiting.get() or ():
            yield person[P_NAME], person[P_CITY], person[P_STATE], auction[A_ID]
        self.waiting.clear()


def q3(events: DataStream, config: NexmarkConfiguration) -> DataStream:
    """Local item suggestion (q3): who sells in category 10 from OR, ID or CA."""
    auctions = events.filter(_q3_auction).name("Auctions in category 10")
    persons = events.filter(_q3_person).name("People in OR/ID/CA")
    return (auctions.connect(persons).key_by(itemgetter(A_SELLER), itemgetter(P_ID))
            .process(LocalItemSuggestion()).name("q3"))


# -- winning bids (q4, q6) --------------------------------------------------------------------

class WinningBids(KeyedCoProcessFunction):
    """Per auction id: the auction (input 1) and the best price of its bids (input 2) with
    ``date_time <= bid[B_DATE_TIME] <= expires``; when the watermark passes ``expires`` it emits
    ``(auction id, category, seller, price, expires)`` (if there was such a bid) stamped
    ``expires``. Bids that come before their auction wait in a list; a closed auction leaves a
    marker (its ``expires``) so that later bids are dropped, not kept."""

    def open(self, runtime_context):
        self.auction = runtime_context.get_state(ValueStateDescriptor("auction"))
        self.best = runtime_context.get_state(ValueStateDescriptor("best price"))
        self.waiting = runtime_context.get_list_state(ListStateDescriptor("early bids"))

    def process_element1(self, auction, ctx):
        best = None
        for bid in self.waiting.get() or ():
            if auction[A_DATE_TIME] <= bid[B_DATE_TIME] <= auction[A_EXPIRES] and (best is None or bid[B_PRICE] > best):
                best = bid[B_PRICE]
        self.waiting.clear()
        self.auction.update(auction)
        if best is not None:
            self.best.update(best)
        ctx.timer_service().register_event_time_timer(auction[A_EXPIRES])

    def process_element2(self, bid, ctx):
        a = self.auction.value()
        if a is None:
            self.waiting.add(bid)
        elif type(a) is tuple and a[A_DATE_TIME] <= bid[B_DATE_TIME] <= a[A_EXPIRES]:
            best = self.best.value()
            if best is None or bid[B_PRICE] > best:
                self.best.update(bid[B_PRICE])

    def on_timer(self, timestamp, ctx):
        a = self.auction.value()
        if type(a) is not tuple or timestamp != a[A_EXPIRES]:
            return
        best = self.best.value()
        self.auction.update(a[A_EXPIRES])
        self.best.clear()
        if best is not None:
            yield a[A_ID], a[A_CATEGORY], a[A_SELLER], best, a[A_EXPIRES]


def winning_bids(events: DataStream) -> DataStream:
    """``(auction id, category, seller, price, expires)`` per closed auction with a bid."""
    auctions = events.filter(is_auction).name("Auctions")
    return (auctions.connect(_bids(events)).key_by(itemgetter(A_ID), itemgetter(B_AUCTION))
            .process(WinningBids()).name("Winning bids"))


class _InCloseOrder(KeyedProcessFunction):
    """Buffers a key's winning bids until the watermark passes their ``expires`` and hands
    them to :meth:`closed` in ``(expires, auction id)`` order."""

    def open(self, runtime_context):
        self.pending = runtime_context.get_list_state(ListStateDescriptor("pending winners"))

    def process_element(self, winner, ctx):
        self.pending.add(winner)
        ctx.timer_service().register_event_time_timer(winner[4])

    def on_timer(self, timestamp, ctx):
        ready, later = [], []
        for w in self.pending.get() or ():
            (ready if w[4] <= timestamp else later).append(w)
        self.pending.update(later)
        ready.sort(key=_close_order)
        for w in ready:
            yield self.closed(w)


def _close_order(winner):
    return winner[4], winner[0]


class AveragePriceByCategory(_InCloseOrder):
    """q4's second step: per category, the running average of the winning prices."""

    def open(self, runtime_context):
        super().open(runtime_context)
        self.sums = runtime_context.get_state(ValueStateDescriptor("count and sum"))

    def closed(self, winner):
        count, total = self.sums.value() or (0, 0)
        count, total = count + 1, total + winner[3]
        self.sums.update((count, total))
        return winner[1], total / count


class AveragePriceBySeller(_InCloseOrder):
    """q6's second step: per seller, the average winning price of its last 10 closed
    auctions (Beam's Query6)."""

    def open(self, runtime_context):
        super().open(runtime_context)
        self.last = runtime_context.get_state(ValueStateDescriptor("last prices"))

    def closed(self, winner):
        prices = ((self.last.value() or ()) + (winner[3],))[-10:]
        self.last.update(prices)
        return winner[2], sum(prices) / len(prices)


def q4(events: DataStream, config: NexmarkConfiguration) -> DataStream:
    """Average price for a category (q4): per closed auction, its category's running average
    of winning prices."""
    return winning_bids(events).key_by(itemgetter(1)).process(AveragePriceByCategory()).name("q4")


def q6(events: DataStream, config: NexmarkConfiguration) -> DataStream:
    """Average selling price by seller (q6, Beam): per closed auction, its seller's average
    winning price over the seller's last 10 closed auctions."""
    return winning_bids(events).key_by(itemgetter(2)).process(AveragePriceBySeller()).name("q6")


# -- q5: hot items ----------------------------------------------------------------------------

class CountBids(AggregateFunction):
    """``(auction, number of bids)`` of a window; no window function, so the window operator's
    fast path applies."""

    def create_accumulator(self):
        return (None, 0)

    def add(self, bid, acc):
        return bid[B_AUCTION], acc[1] + 1

    def get_result(self, acc):
        return acc

    def merge(self, a, b):
        return (a[0] if a[0] is not None else b[0]), a[1] + b[1]


class _WithWindowEnd(ProcessFunction):
    """Prefixes a window result with its window's end, read from the record's timestamp (the
    window's max timestamp, ``end - 1``)."""

    def process_element(self, value, ctx):
        yield ctx.timestamp() + 1, value[0], value[1]


class HottestInWindow(KeyedProcessFunction):
    """Per window end: once the watermark passes the window, the auctions with the most bids
    (every one that ties), as ``(auction, num, start, end)``."""

    def __init__(self, size_ms: int):
        self.size_ms = size_ms

    def open(self, runtime_context):
        self.counts = runtime_context.get_list_state(ListStateDescriptor("window counts"))

    def process_element(self, value, ctx):
        self.counts.add(value)
        ctx.timer_service().register_event_time_timer(value[0] - 1)

    def on_timer(self, timestamp, ctx):
        counts = list(self.counts.get() or ())
        self.counts.clear()
        if counts:
            top = max(c[2] for c in counts)
            end = timestamp + 1
            for _, auction, num in counts:
                if num == top:
                    yield auction, num, end - self.size_ms, end


def q5(events: DataStream, config: NexmarkConfiguration) -> DataStream:
    """Hot items (q5): per sliding window (``window_size_sec`` every ``window_period_sec``) the
    auctions with the most bids."""
    size, slide = config.window_size_sec * 1000, config.window_period_sec * 1000
    counts = (_bids(events).key_by(itemgetter(B_AUCTION))
              .window(SlidingEventTimeWindows.of(size, slide)).aggregate(CountBids()).name("Bids per auction"))
    return (counts.process(_WithWindowEnd()).name("Window end")
            .key_by(itemgetter(0)).process(HottestInWindow(size)).name("q5"))


# -- q7: highest bid ---------------------------------------------------------------------------

class HighestBids(AggregateFunction):
    """The highest price of a window and every bid that has it (``(price, [bids])``)."""

    def create_accumulator(self):
        return (-1, [])

    def add(self, bid, acc):
        price = bid[B_PRICE]
        if price > acc[0]:
            return price, [bid]
        if price == acc[0]:
            acc[1].append(bid)
        return acc

    def get_result(self, acc):
        return acc[1]

    def merge(self, a, b):
        if a[0] != b[0]:
            return a if a[0] > b[0] else b
        return a[0], a[1] + b[1]


def _q7_rows(bids):
    return [(b[B_AUCTION], b[B_PRICE], b[B_BIDDER], b[B_DATE_TIME], b[B_EXTRA]) for b in bids]


def q7(events: DataStream, config: NexmarkConfiguration) -> DataStream:
    """Highest bid (q7): per tumbling window of ``window_size_sec``, the bids with the highest
    price (nexmark-flink q7; a bid belongs to the window ``[start, end)`` it falls in)."""
    return (_bids(events).window_all(TumblingEventTimeWindows.of(config.window_size_sec * 1000))
            .aggregate(HighestBids()).name("Highest bids").flat_map(_q7_rows).name("q7"))


# -- q8: monitor new users --------------------------------------------------------------------

def _q8_tag(event):
    """``(person id, name)`` for a person, ``(seller, None)`` for an auction."""
    if len(event) == PERSON_LEN:
        return event[P_ID], event[P_NAME]
    return event[A_SELLER], None


class NewUsersInWindow(ProcessWindowFunction):
    """Emits ``(id, name, window start)`` if the window holds the person and an auction of
    theirs."""

    def process(self, key, context, elements):
        name, sells = None, False
        for _, n in elements:
            if n is None:
                sells = True
            else:
                name = n
        if name is not None and sells:
            yield key, name, context.window().start


def _is_person_or_auction(event) -> bool:
    return len(event) != BID_LEN


def q8(events: DataStream, config: NexmarkConfiguration) -> DataStream:
    """Monitor new users (q8): people who opened an auction within the tumbling window of
    ``window_size_sec`` in which they registered."""
    return (events.filter(_is_person_or_auction).name("People and auctions").map(_q8_tag).name("Id and name")
            .key_by(itemgetter(0)).window(TumblingEventTimeWindows.of(config.window_size_sec * 1000))
            .process(NewUsersInWindow()).name("q8"))


# -- q11, q12: bids per bidder -----------------------------------------------------------------

class CountPerKey(AggregateFunction):
    """Counts a window's elements."""

    def create_accumulator(self):
        return 0

    def add(self, value, acc):
        return acc + 1

    def get_result(self, acc):
        return acc

    def merge(self, a, b):
        return a + b


class WithWindow(ProcessWindowFunction):
    """``(key, count, window start, window end)``."""

    def process(self, key, context, elements):
        w = context.window()
        for count in elements:
            yield key, count, w.start, w.end


def q11(events: DataStream, config: NexmarkConfiguration) -> DataStream:
    """User sessions (q11): bids per bidder per session window (gap ``session_gap_sec``)."""
    return (_bids(events).key_by(itemgetter(B_BIDDER))
            .window(EventTimeSessionWindows.with_gap(config.session_gap_sec * 1000))
            .aggregate(CountPerKey(), WithWindow()).name("q11"))


def q12(events: DataStream, config: NexmarkConfiguration) -> DataStream:
    """Processing-time windows (q12): bids per bidder per tumbling processing-time window of
    ``window_size_sec`` (which window a bid counts in depends on when it is processed)."""
    return (_bids(events).key_by(itemgetter(B_BIDDER))
            .window(TumblingProcessingTimeWindows.of(config.window_size_sec * 1000))
            .aggregate(CountPerKey(), WithWindow()).name("q12"))


#: query name -> builder ``(events, config) -> result stream``
QUERIES: Dict[str, Callable[[DataStream, NexmarkConfiguration], DataStream]] = {
    "q0": q0, "q1": q1, "q2": q2, "q3": q3, "q4": q4, "q5": q5, "q6": q6, "q7": q7, "q8": q8,
    "q11": q11, "q12": q12,
}


def build_query(name: str, events: DataStream, config: NexmarkConfiguration) -> DataStream:
    """The result stream of query ``name`` over ``events``.

    :raises NotImplementedError: for q9 and q10 (not built: q9 is the winning-bids table
        itself, q10 writes to a file system sink), naming them.
    :raises ValueError: for any other unknown name, listing the known ones.
    """
    if name in ("q9", "q10"):
        raise NotImplementedError(f"Nexmark {name} is not built on Rill (built: {', '.join(QUERIES)})")
    if name not in QUERIES:
        raise ValueError(f"unknown Nexmark query {name!r}: expected one of {', '.join(QUERIES)}")
    return QUERIES[name](events, config)
