"""The Nexmark generator as a splittable, bounded, replayable Rill source (FLIP-27, see
:mod:`rill.common.connector.source`), and Nexmark's watermark strategy.

A split is every ``step``-th block from ``first_block`` (round-robin: with P subtasks, subtask
i generates blocks i, i+P, ...), so the subtasks' event times advance together, as
nexmark-flink's parallel generators do, and no subtask holds the watermark back by a whole
half of the input. The split's position in a checkpoint is the number of events it emitted
(the SourceOperator counts them); :meth:`NexmarkReader.read_from` regenerates from the block
that position falls in, without generating the blocks before it.

Latency sampling (optional, for the benchmark): with ``emission_log_dir`` each reader writes,
at ``close()``, one file ``emissions-<uuid>.pkl`` with ``(first event time, last event time,
time.time() at emission)`` per block it emitted, so an output stamped with event time ``T``
can be traced back to when the source emitted the events of time ``T``.
"""

from __future__ import annotations

import os
import pickle
import time
import uuid
from dataclasses import dataclass
from typing import Iterator, List, Optional

from rill.common.connector.source import Source, SourceReader, SourceSplit, SplitEnumerator
from rill.common.time import Duration
from rill.common.watermark_strategy import WatermarkStrategy

from bench.nexmark.config import NexmarkConfiguration
from bench.nexmark.generator import block_events, generate_block, num_blocks
from bench.nexmark.model import date_time

__all__ = ["NexmarkSource", "NexmarkSplit", "NexmarkReader", "NexmarkSplitEnumerator", "event_date_time", "nexmark_watermark_strategy"]


@dataclass(frozen=True)
class NexmarkSplit(SourceSplit):
    """Blocks ``first_block, first_block + step, ...`` below the configuration's block count."""

    first_block: int
    step: int

    def split_id(self) -> str:
        return f"nexmark-{self.first_block}/{self.step}"


class NexmarkReader(SourceReader):
    """Generates a split's blocks in order, one batch per block (about 1,024 events)."""

    def __init__(self, config: NexmarkConfiguration, emission_log_dir: Optional[str]):
        self.config = config
        self.emission_log_dir = emission_log_dir
        self._emissions: List[tuple] = []

    def read(self, split: NexmarkSplit) -> Iterator[List[object]]:
        return self._blocks(split, 0)

    def read_from(self, split: NexmarkSplit, records_to_skip: int) -> Iterator[List[object]]:
        if records_to_skip < 0:
            raise ValueError(f"NexmarkReader: records_to_skip must be >= 0, got {records_to_skip}")
        return self._blocks(split, records_to_skip)

    def _blocks(self, split: NexmarkSplit, skip: int) -> Iterator[List[object]]:
        config, size = self.config, block_events(self.config)
        # every block but the input's last is full, so whole blocks are skipped by arithmetic
        blocks = range(split.first_block + (skip // size) * split.step, num_blocks(config), split.step)
        skip %= size
        log = self._emissions if self.emission_log_dir is not None else None
        for block in blocks:
            events = generate_block(config, block)
            if skip:
                events, skip = events[skip:], 0
            self.progress_units += len(events)
            if log is not None and events:
                log.append((date_time(events[0]), date_time(events[-1]), time.time()))
            yield events

    def close(self) -> None:
        if self.emission_log_dir is None or not self._emissions:
            return
        name = os.path.join(self.emission_log_dir, f"emissions-{uuid.uuid4().hex}")
        with open(name + ".tmp", "wb") as f:
            pickle.dump(self._emissions, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(name + ".tmp", name + ".pkl")


class NexmarkSplitEnumerator(SplitEnumerator):
    """Split ``first_block`` goes to subtask ``first_block % parallelism`` only, as each of
    nexmark-flink's parallel generators generates its own share. Handed out first come, first
    served, a subtask that started late (its process forked later, on a loaded machine) could
    find its split taken by a subtask that had finished its own: that reader would read it after
    its first, behind its own watermark, and the windows would drop those events as late.

    :param splits: the splits not assigned yet.
    :param parallelism: the source's parallelism (a restore at another one reassigns by it).
    """

    def __init__(self, splits: List[NexmarkSplit], parallelism: int):
        self._pending = {i: [] for i in range(parallelism)}
        for split in splits:
            self._pending[split.first_block % parallelism].append(split)

    def handle_split_request(self, subtask_index: int) -> Optional[NexmarkSplit]:
        pending = self._pending.get(subtask_index)
        return pending.pop(0) if pending else None

    def snapshot_state(self, checkpoint_id: int) -> List[NexmarkSplit]:
        """The splits not assigned yet."""
        return [split for pending in self._pending.values() for split in pending]


class NexmarkSource(Source):
    """Nexmark's events (tuples of ``Person``, ``Auction``, ``Bid`` of :mod:`bench.nexmark.model`) for a
    :class:`NexmarkConfiguration`, bounded at ``config.num_events``; one split per subtask.
    The events and their order within each block do not depend on the parallelism.

    :param emission_log_dir: a directory for the readers' emission logs (latency sampling),
        or ``None``.
    :raises TypeError: if ``config`` is not a :class:`NexmarkConfiguration`.
    """

    def __init__(self, config: NexmarkConfiguration, emission_log_dir: Optional[str] = None):
        if not isinstance(config, NexmarkConfiguration):
            raise TypeError(f"NexmarkSource expects a NexmarkConfiguration, got {config!r}")
        self.config = config
        self.emission_log_dir = emission_log_dir

    def create_splits(self, parallelism: int) -> List[SourceSplit]:
        n = num_blocks(self.config)
        return [NexmarkSplit(i, parallelism) for i in range(min(parallelism, n))]

    def create_enumerator(self, parallelism: int) -> NexmarkSplitEnumerator:
        return NexmarkSplitEnumerator(self.create_splits(parallelism), parallelism)

    def restore_enumerator(self, parallelism: int, checkpoint: List[NexmarkSplit]) -> NexmarkSplitEnumerator:
        return NexmarkSplitEnumerator(list(checkpoint), parallelism)

    def create_reader(self) -> SourceReader:
        return NexmarkReader(self.config, self.emission_log_dir)

    def estimated_total_units(self) -> Optional[int]:
        return self.config.num_events


def event_date_time(event, record_timestamp) -> int:
    """The timestamp assigner of Nexmark events: their ``date_time`` (ms)."""
    return event[6] if len(event) == 8 else event[5]  # model.date_time, inlined: once per event


def nexmark_watermark_strategy(config: NexmarkConfiguration) -> WatermarkStrategy:
    """Bounded out-of-orderness of ``config.max_out_of_orderness_ms`` (4 s: nexmark-flink's
    ``WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND``) on ``date_time``."""
    return (WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(config.max_out_of_orderness_ms))
            .with_timestamp_assigner(event_date_time))
