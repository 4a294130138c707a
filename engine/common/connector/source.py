"""The Source API (FLIP-27: ``org.apache.flink.api.connector.source``), pull-based.

A :class:`Source` is a factory for a :class:`SplitEnumerator` (one per job, in the JobMaster's
``SourceCoordinator``, :mod:`rill.runtime.source_coordinator`) and for :class:`SourceReader` s
(one per source subtask). A reader asks the coordinator for a split when it has none (Flink's
``SourceReaderContext.sendSplitRequest``, as FileSource does), reads it to the end, and asks again; when the enumerator answers ``None``
a bounded source's subtask has reached the end of its input.

Rill difference, for speed: :meth:`SourceReader.read` yields *batches* (lists) of records, so
the per-record work of a source is only what producing the record costs. A reader of an
unbounded source that has nothing to hand over yields an empty list; the SourceOperator then
waits ~1 ms on the mailbox (no spinning) before polling again.
"""

from __future__ import annotations

import enum
from typing import Any, Iterator, List, Optional

__all__ = [
    "Boundedness",
    "SourceSplit",
    "SplitEnumerator",
    "SourceReader",
    "Source",
]


class Boundedness(enum.Enum):
    """Whether a source ends (``BOUNDED``) or runs forever (``CONTINUOUS_UNBOUNDED``)."""

    BOUNDED = "BOUNDED"
    CONTINUOUS_UNBOUNDED = "CONTINUOUS_UNBOUNDED"


class SourceSplit:
    """A piece of a source's input; ``split_id()`` must be unique within the source."""

    def split_id(self) -> str:
        raise NotImplementedError


class SplitEnumerator:
    """Hands out splits on request (runs in the JobMaster; thread-safe through the
    coordinator)."""

    def handle_split_request(self, subtask_index: int) -> Optional[SourceSplit]:
        """The next split for ``subtask_index``, or ``None`` when there are no more."""
        raise NotImplementedError


class _ListEnumerator(SplitEnumerator):
    """Assigns a fixed list of splits first-come first-served."""

    def __init__(self, splits: List[SourceSplit]):
        self._splits = list(splits)
        self._next = 0

    def handle_split_request(self, subtask_index: int) -> Optional[SourceSplit]:
        if self._next >= len(self._splits):
            return None
        split = self._splits[self._next]
        self._next += 1
        return split


class SourceReader:
    """Reads splits inside one source subtask."""

    #: units of work done so far (records, or bytes for files); read for progress reporting
    progress_units: int = 0
    #: records per batch :meth:`read` should yield at most (``rill.source.batch-size``; set by
    #: the SourceOperator before :meth:`open`)
    batch_size: int = 1024

    def open(self, subtask_index: int, parallelism: int) -> None:
        pass

    def read(self, split: SourceSplit) -> Iterator[List[Any]]:
        """Yield the records of ``split`` in batches (lists), in order. An empty list means
        "nothing available right now" (unbounded sources only)."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class Source:
    """Base of sources. Subclasses implement :meth:`create_splits` (or
    :meth:`create_enumerator`) and :meth:`create_reader`."""

    #: a non-parallel source (Flink: from_collection) only runs with parallelism 1
    non_parallel: bool = False
    #: whether its readers count ``progress_units`` in bytes (files) rather than records; the
    #: progress bar's unit
    progress_units_are_bytes: bool = False
    #: sources are immutable factories: subtasks in one process share the object (see
    #: ``SimpleOperatorFactory``) and each creates its own reader
    _rill_shared_plan_object = True

    def get_boundedness(self) -> Boundedness:
        return Boundedness.BOUNDED

    def create_splits(self, parallelism: int) -> List[SourceSplit]:
        raise NotImplementedError

    def create_enumerator(self, parallelism: int) -> SplitEnumerator:
        return _ListEnumerator(self.create_splits(parallelism))

    def create_reader(self) -> SourceReader:
        raise NotImplementedError

    def estimated_total_units(self) -> Optional[int]:
        """Total units of work (as counted by ``SourceReader.progress_units``) for progress
        bars, or ``None`` when unknown or unbounded."""
        return None
