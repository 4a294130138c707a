"""Chained stateless pipeline: NOTES.md's W3, Nexmark-style.

    source of (auction, price) bids → map price × 0.908 (dollars to euros, Nexmark Q1)
    → filter auction % 123 == 0 → counting sink

At parallelism 1 Rill chains all four operators into one task ("Source: Collection Source ->
Map -> Filter -> Sink: Unnamed"), so the figure is the per-record cost of the source, the
chain and the operators around the user functions. About 1 in 123 bids reaches the sink.

Input: ``size`` bids generated once from a fixed seed (auction ids 1000..10999, prices
1..99,999 cents), shared by both sides. The loop is the fused hand-written loop (NOTES.md's
3.9 M/s figure), not generator stages (2.1 M/s): the harder baseline.

With ``source="file"`` the bids are written once into a file of fixed-size binary records
(:mod:`bench.workloads.record_file`) that **both** sides read, block by block: the loop in
order, Rill with a splittable source whose subtasks read every P-th block. Nothing is shipped
inside the job, which is how a cluster job reads (the cluster comparison's default).
"""

from __future__ import annotations

import random
from typing import Any, List, Tuple

from bench.workloads.record_file import RecordFileCache
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

    SOURCES = ("collection", "parallel", "file")
    #: the bids' record format in the file: (auction, price)
    FILE_FORMAT = "<ii"

    def __init__(self, source: str = "collection"):
        """:param source: ``"collection"`` (``from_collection``: non-parallel, so at p > 1 a
            rebalance exchange feeds the map), ``"parallel"`` (:class:`ParallelLinesSource`:
            subtask *i* of P reads the *i*-th contiguous range of the bids, and the whole job
            stays chained; the bids travel inside the job) or ``"file"`` (a file of binary
            records both sides read; the job stays chained and carries the path only).
        :raises ValueError: for another ``source``."""
        if source not in self.SOURCES:
            raise ValueError(f"StatelessWorkload: source must be one of {self.SOURCES}, got {source!r}")
        self.source_kind = source
        self._files = RecordFileCache(self.FILE_FORMAT)

    def close(self) -> None:
        """Remove the files written for ``source="file"`` (if any)."""
        self._files.close()

    def materialize(self, data: List[Any]) -> None:
        """Write ``data``'s file now (``source="file"``), so that no timed run pays for it."""
        if self.source_kind == "file":
            self._files.of(data)

    def prepare(self, size: int) -> List[Bid]:
        rng = random.Random(20240917)
        r = rng.randrange
        return [(1000 + r(10_000), 1 + r(99_999)) for _ in range(size)]

    def run_rill(self, env, data: List[Bid], sink) -> None:
        if self.source_kind == "file":
            source = env.from_source(self._files.of(data).source(), None, "Bids File Source")
        elif self.source_kind == "parallel":
            source = env.from_source(ParallelLinesSource(data), None, "Parallel Bids Source")
        else:
            source = env.from_collection(data)
        source.map(to_euros).filter(is_watched_auction).add_sink(sink)

    def run_baseline(self, data: List[Bid], sink) -> None:
        invoke = sink.invoke
        if self.source_kind == "file":
            for block in self._files.of(data).blocks():
                for bid in block:
                    out = to_euros(bid)
                    if is_watched_auction(out):
                        invoke(out, None)
            return
        for bid in data:
            out = to_euros(bid)
            if is_watched_auction(out):
                invoke(out, None)
