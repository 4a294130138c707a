"""Sources over in-memory data: ``from_collection`` and ``NumberSequenceSource``. Both replay
exactly: a split is a range of indices, and a restored split resumes at its index
``start + records emitted`` without reading what came before."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, List, Optional, Sequence

from rill.common.connector.source import Source, SourceReader, SourceSplit

__all__ = ["CollectionSource", "NumberSequenceSource"]

@dataclass(frozen=True)
class _RangeSplit(SourceSplit):
    start: int
    end: int  # exclusive

    def split_id(self) -> str:
        return f"{self.start}-{self.end}"


class _RangeReader(SourceReader):
    """Resumes a range split by moving its start (no records read and dropped)."""

    def read_from(self, split: _RangeSplit, records_to_skip: int) -> Iterator[List[Any]]:
        if records_to_skip < 0:
            raise ValueError(f"{type(self).__name__}: records_to_skip must be >= 0, got {records_to_skip}")
        return self.read(_RangeSplit(min(split.start + records_to_skip, split.end), split.end))


class _CollectionReader(_RangeReader):
    def __init__(self, elements: Sequence[Any]):
        self._elements = elements

    def read(self, split: _RangeSplit) -> Iterator[List[Any]]:
        els, step = self._elements, self.batch_size
        for i in range(split.start, split.end, step):
            batch = els[i:min(i + step, split.end)]  # a new list: ``els`` is one (see CollectionSource)
            self.progress_units += len(batch)
            yield batch


class CollectionSource(Source):
    """The elements of a list, in order, from one subtask (Flink's ``fromCollection`` is
    non-parallel).

    :param elements: any sequence; it is copied into a list when the source is built.
    """

    non_parallel = True
    runs_on_spark = True

    def __init__(self, elements: Sequence[Any]):
        self.elements = list(elements)

    def create_splits(self, parallelism: int) -> List[SourceSplit]:
        return [_RangeSplit(0, len(self.elements))]

    def create_reader(self) -> SourceReader:
        return _CollectionReader(self.elements)

    def estimated_total_units(self) -> Optional[int]:
        return len(self.elements)


class _SequenceReader(_RangeReader):
    def read(self, split: _RangeSplit) -> Iterator[List[int]]:
        step = self.batch_size
        for i in range(split.start, split.end, step):
            batch = list(range(i, min(i + step, split.end)))
            self.progress_units += len(batch)
            yield batch


class NumberSequenceSource(Source):
    """The numbers ``start .. end`` inclusive (PyFlink's ``NumberSequenceSource``), split into
    one contiguous range per subtask.

    :raises ValueError: if ``end < start``.
    """

    runs_on_spark = True

    def __init__(self, start: int, end: int):
        if end < start:
            raise ValueError(f"NumberSequenceSource: end ({end}) must not be below start ({start})")
        self.start = start
        self.end = end

    def create_splits(self, parallelism: int) -> List[SourceSplit]:
        total = self.end - self.start + 1
        splits = []
        for i in range(parallelism):
            a = self.start + total * i // parallelism
            b = self.start + total * (i + 1) // parallelism
            if b > a:
                splits.append(_RangeSplit(a, b))
        return splits

    def create_reader(self) -> SourceReader:
        return _SequenceReader()

    def estimated_total_units(self) -> Optional[int]:
        return self.end - self.start + 1
