"""Fixed-size binary records in a file, read block by block: the input of W2 and W3 on a
cluster, which neither side gets shipped inside the job.

The records (tuples of ints, one ``struct`` format) are written once per input into a temporary
file (:class:`RecordFile`, removed by :meth:`RecordFile.close` or at exit). Both sides read that
file in blocks of :data:`BLOCK` records, each block one ``os.pread`` and one
``struct.iter_unpack`` (C speed, a tuple per record):

- the hand-written loop reads blocks ``0, 1, 2, ...`` in order (:meth:`RecordFile.blocks`);
- Rill reads them with :class:`RecordFileSource`, a splittable, bounded, replayable source:
  at parallelism P, subtask *i* reads blocks ``i, i + P, i + 2P, ...`` (as
  :class:`bench.nexmark.source.NexmarkSource` generates its blocks), so the subtasks' event
  times advance together and a window's watermark is never held back by a subtask that is a
  whole half of the input behind. The job carries the file's path, not its records.

A checkpointed split position (records emitted so far) resumes at the block it falls in.
"""

from __future__ import annotations

import atexit
import os
import shutil
import struct
import tempfile
from dataclasses import dataclass
from typing import Iterator, List, Optional, Sequence, Tuple

from rill.common.connector.source import Source, SourceReader, SourceSplit, SplitEnumerator

__all__ = ["BLOCK", "RecordFile", "RecordFileCache", "RecordFileSource", "RecordFileSplit"]

#: records per block: one ``pread`` and one batch of the source
BLOCK = 1024


class RecordFile:
    """``records`` packed with ``struct`` format ``fmt`` (little-endian, e.g. ``"<ii"``) into
    one file in a new temporary directory.

    :param records: tuples matching ``fmt``.
    :param fmt: a ``struct`` format of fixed size.
    :raises struct.error: if a record does not match ``fmt``.
    """

    def __init__(self, records: Sequence[Tuple[int, ...]], fmt: str):
        self.fmt = fmt
        self.record_size = struct.calcsize(fmt)
        self.count = len(records)
        self.directory = tempfile.mkdtemp(prefix="rill-bench-records-")
        atexit.register(shutil.rmtree, self.directory, True)
        self.path = os.path.join(self.directory, "records.bin")
        pack = struct.Struct(fmt).pack
        with open(self.path, "wb") as f:
            for start in range(0, self.count, 65536):
                f.write(b"".join(pack(*r) for r in records[start:start + 65536]))

    @property
    def num_blocks(self) -> int:
        return -(-self.count // BLOCK)

    def blocks(self) -> Iterator[List[tuple]]:
        """Every block in order: what the loop reads."""
        fd = os.open(self.path, os.O_RDONLY)
        try:
            yield from _read_blocks(fd, self.fmt, self.record_size, range(self.num_blocks))
        finally:
            os.close(fd)

    def source(self) -> "RecordFileSource":
        return RecordFileSource(self.path, self.fmt, self.count)

    def close(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


class RecordFileCache:
    """One :class:`RecordFile` per input list a workload is given (the full input, the
    marginal measurement's small one, the warm-up's), written on first use. The cache holds
    each list, so its ``id`` cannot be reused by another while its file exists."""

    def __init__(self, fmt: str):
        self.fmt = fmt
        self._files: dict = {}  # id(records) -> (records, RecordFile)

    def of(self, records: List[tuple]) -> RecordFile:
        known = self._files.get(id(records))
        if known is not None and known[0] is records:
            return known[1]
        record_file = RecordFile(records, self.fmt)
        self._files[id(records)] = (records, record_file)
        return record_file

    def close(self) -> None:
        for _, record_file in self._files.values():
            record_file.close()
        self._files.clear()


def _read_blocks(fd: int, fmt: str, record_size: int, blocks) -> Iterator[List[tuple]]:
    size = BLOCK * record_size
    iter_unpack, pread = struct.iter_unpack, os.pread
    for block in blocks:
        yield list(iter_unpack(fmt, pread(fd, size, block * size)))


@dataclass(frozen=True)
class RecordFileSplit(SourceSplit):
    """Blocks ``first_block, first_block + step, ...`` of the file."""

    first_block: int
    step: int

    def split_id(self) -> str:
        return f"records-{self.first_block}/{self.step}"


class _RecordFileReader(SourceReader):
    def __init__(self, path: str, fmt: str, count: int):
        self.path, self.fmt, self.count = path, fmt, count
        self._fd: Optional[int] = None

    def read(self, split: RecordFileSplit) -> Iterator[List[tuple]]:
        return self.read_from(split, 0)

    def read_from(self, split: RecordFileSplit, records_to_skip: int) -> Iterator[List[tuple]]:
        if records_to_skip < 0:
            raise ValueError(f"RecordFileSource: records_to_skip must be >= 0, got {records_to_skip}")
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY)
        num_blocks = -(-self.count // BLOCK)
        # every block but the file's last is full: whole blocks are skipped by arithmetic
        blocks = range(split.first_block + (records_to_skip // BLOCK) * split.step, num_blocks, split.step)
        skip = records_to_skip % BLOCK
        for records in _read_blocks(self._fd, self.fmt, struct.calcsize(self.fmt), blocks):
            if skip:
                records, skip = records[skip:], 0
            self.progress_units += len(records)
            yield records

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class _OwnSplitEnumerator(SplitEnumerator):
    """Split *i* goes to subtask *i* only (a subtask that started late must not find its
    blocks read by another, behind that one's watermark)."""

    def __init__(self, splits: List[RecordFileSplit], parallelism: int):
        self._pending = {i: [] for i in range(parallelism)}
        for split in splits:
            self._pending[split.first_block % parallelism].append(split)

    def handle_split_request(self, subtask_index: int) -> Optional[RecordFileSplit]:
        pending = self._pending.get(subtask_index)
        return pending.pop(0) if pending else None

    def snapshot_state(self, checkpoint_id: int) -> List[RecordFileSplit]:
        return [split for pending in self._pending.values() for split in pending]


class RecordFileSource(Source):
    """The records of a :class:`RecordFile` (``path``, ``fmt``, ``count``), one split per
    subtask, round-robin by block; batches of :data:`BLOCK` records."""

    def __init__(self, path: str, fmt: str, count: int):
        self.path, self.fmt, self.count = path, fmt, count

    def create_splits(self, parallelism: int) -> List[RecordFileSplit]:
        n = -(-self.count // BLOCK)
        return [RecordFileSplit(i, parallelism) for i in range(min(parallelism, n))]

    def create_enumerator(self, parallelism: int) -> SplitEnumerator:
        return _OwnSplitEnumerator(self.create_splits(parallelism), parallelism)

    def restore_enumerator(self, parallelism: int, checkpoint: List[RecordFileSplit]) -> SplitEnumerator:
        return _OwnSplitEnumerator(list(checkpoint), parallelism)

    def create_reader(self) -> SourceReader:
        return _RecordFileReader(self.path, self.fmt, self.count)

    def estimated_total_units(self) -> Optional[int]:
        return self.count
