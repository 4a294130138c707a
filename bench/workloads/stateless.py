"""Chained stateless pipeline: NOTES.md's W3, Nexmark-style.

    source of (auction, price) bids → map price × 0.908 (dollars to euros, Nexmark Q1)
    → filter auction % 123 == 0 → counting sink

At parallelism 1 Rill chains all four operators into one task ("Source: Collection Source ->
Map -> Filter -> Sink: Unnamed"), so the figure is the per-record cost of the source, the
chain and the operators around the user functions. About 1 in 123 bids reaches the sink.

Input: ``size`` bids generated once from a fixed seed (auction ids 1000..10999, prices
1..99,999 cents), shared by both sides. The loop is the fused hand-written loop (NOTES.md's
3.9 M/s figure), not generator stages (2.1 M/s): the harder baseline.
"""

from __future__ import annotations

import random
from typing import List, Tuple

from bench.workloads.wordcount import ParallelLinesSource

__all__ = ["StatelessWorkload", "to_euros", "is_watched_auction"]

Bid = Tuple[int, float]


def to_euros(bid: Bid) -> Bid:
    return bid[0], bid[1] * 0.908


def is_watched_auction(bid: Bid) -> bool:
    return bid[0] % 123 == 0


class StatelessWorkload:
    name = "stateless"
    description = "source → map(price × 0.908) → filter(auction % 123 == 0) → counting sink"
    unit = "records"
    default_size = 2_000_000
    target_ratio = 1.0  # issue 16: the engine's batches against the fused loop (the first issue: 0.50)

    SOURCES = ("collection", "parallel")

    def __init__(self, source: str = "collection"):
        """:param source: ``"collection"`` (``from_collection``: non-parallel, so at p > 1 a
            rebalance exchange feeds the map) or ``"parallel"`` (:class:`ParallelLinesSource`:
            subtask *i* of P reads the *i*-th contiguous range of the bids, and the whole job
            stays chained; the bids travel inside the job).
        :raises ValueError: for another ``source``."""
        if source not in self.SOURCES:
            raise ValueError(f"StatelessWorkload: source must be one of {self.SOURCES}, got {source!r}")
        self.source_kind = source

    def prepare(self, size: int) -> List[Bid]:
        rng = random.Random(20240917)
        r = rng.randrange
        return [(1000 + r(10_000), 1 + r(99_999)) for _ in range(size)]

    def run_rill(self, env, data: List[Bid], sink) -> None:
        source = (env.from_source(ParallelLinesSource(data), None, "Parallel Bids Source")
                  if self.source_kind == "parallel" else env.from_collection(data))
        source.map(to_euros).filter(is_watched_auction).add_sink(sink)

    def run_baseline(self, data: List[Bid], sink) -> None:
        invoke = sink.invoke
        for bid in data:
            out = to_euros(bid)
            if is_watched_auction(out):
                invoke(out, None)
