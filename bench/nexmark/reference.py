"""Plain-Python reference computations of the Nexmark queries (no Rill): each
``reference(name, events, config)`` returns the list of outputs the DataStream query of
:mod:`bench.nexmark.queries` must produce, as a multiset (order is not compared).

They read all events at once and apply each query's definition directly (windows by
arithmetic on the event time, joins by dictionaries), so they share no code with the queries
beyond the record classes. q12's windows depend on processing time; its reference is the
number of bids per bidder, which the sum of q12's counts per bidder must equal.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Callable, Dict, List, Sequence

from bench.nexmark.config import NexmarkConfiguration
from bench.nexmark.model import Auction, Bid, Person, is_auction, is_bid, is_person

__all__ = ["REFERENCES", "reference"]


def _bids(events):
    return [Bid._make(e) for e in events if is_bid(e)]


def _auctions(events):
    return [Auction._make(e) for e in events if is_auction(e)]


def _people(events):
    return [Person._make(e) for e in events if is_person(e)]


def r0(events, config):
    return [(b.auction, b.bidder, b.price, b.date_time, b.extra) for b in _bids(events)]


def r1(events, config):
    return [(b.auction, b.bidder, 0.908 * b.price, b.date_time, b.extra) for b in _bids(events)]


def r2(events, config):
    return [(b.auction, b.price) for b in _bids(events) if b.auction % 123 == 0]


def r3(events, config):
    people = {p.id: p for p in _people(events) if p.state in ("OR", "ID", "CA")}
    return [(people[a.seller].name, people[a.seller].city, people[a.seller].state, a.id)
            for a in _auctions(events) if a.category == 10 and a.seller in people]


def _winners(events):
    """``(id, category, seller, price, expires)`` of every auction with a bid in its time."""
    bids_by_auction = defaultdict(list)
    for b in _bids(events):
        bids_by_auction[b.auction].append(b)
    out = []
    for a in _auctions(events):
        prices = [b.price for b in bids_by_auction[a.id] if a.date_time <= b.date_time <= a.expires]
        if prices:
            out.append((a.id, a.category, a.seller, max(prices), a.expires))
    return sorted(out, key=lambda w: (w[4], w[0]))


def r4(events, config):
    sums, out = {}, []
    for w in _winners(events):
        count, total = sums.get(w[1], (0, 0))
        sums[w[1]] = count + 1, total + w[3]
        out.append((w[1], (total + w[3]) / (count + 1)))
    return out


def r5(events, config):
    size, slide = config.window_size_sec * 1000, config.window_period_sec * 1000
    counts: Dict[int, Counter] = defaultdict(Counter)  # window start -> auction -> bids
    for b in _bids(events):
        last = b.date_time - b.date_time % slide
        for start in range(last, b.date_time - size, -slide):
            counts[start][b.auction] += 1
    out = []
    for start, per_auction in counts.items():
        top = max(per_auction.values())
        out += [(auction, n, start, start + size) for auction, n in per_auction.items() if n == top]
    return out


def r6(events, config):
    last, out = defaultdict(tuple), []
    for w in _winners(events):
        prices = (last[w[2]] + (w[3],))[-10:]
        last[w[2]] = prices
        out.append((w[2], sum(prices) / len(prices)))
    return out


def r7(events, config):
    size = config.window_size_sec * 1000
    windows = defaultdict(list)
    for b in _bids(events):
        windows[b.date_time - b.date_time % size].append(b)
    out = []
    for bids in windows.values():
        top = max(b.price for b in bids)
        out += [(b.auction, b.price, b.bidder, b.date_time, b.extra) for b in bids if b.price == top]
    return out


def r8(events, config):
    size = config.window_size_sec * 1000
    sold = {(a.seller, a.date_time - a.date_time % size) for a in _auctions(events)}
    return [(p.id, p.name, p.date_time - p.date_time % size) for p in _people(events)
            if (p.id, p.date_time - p.date_time % size) in sold]


def r11(events, config):
    gap = config.session_gap_sec * 1000
    times = defaultdict(list)
    for b in _bids(events):
        times[b.bidder].append(b.date_time)
    out = []
    for bidder, ts in times.items():
        ts.sort()
        start, end, n = ts[0], ts[0] + gap, 0
        for t in ts:
            if t > end:  # Flink merges session windows [t, t + gap) that overlap or touch (TimeWindow.intersects)
                out.append((bidder, n, start, end))
                start, n = t, 0
            end, n = max(end, t + gap), n + 1
        out.append((bidder, n, start, end))
    return out


def r12(events, config):
    """Bids per bidder (q12's per-bidder sums of its window counts)."""
    return list(Counter(b.bidder for b in _bids(events)).items())


REFERENCES: Dict[str, Callable[[Sequence[object], NexmarkConfiguration], List[tuple]]] = {
    "q0": r0, "q1": r1, "q2": r2, "q3": r3, "q4": r4, "q5": r5, "q6": r6, "q7": r7, "q8": r8,
    "q11": r11, "q12": r12,
}


def reference(name: str, events: Sequence[object], config: NexmarkConfiguration) -> List[tuple]:
    """The expected outputs of query ``name`` for ``events`` (all events of ``config``).

    :raises ValueError: for a query without a reference.
    """
    if name not in REFERENCES:
        raise ValueError(f"no Nexmark reference for {name!r}: expected one of {', '.join(REFERENCES)}")
    return REFERENCES[name](events, config)
