"""Compaction of a ``FileSink`` 's small files (Flink's ``FileCompactStrategy``,
``FileCompactor`` and the ``CompactorOperator``; PyFlink's names): enabled with
``FileSink.for_row_format(...).enable_compact(strategy, compactor)``.

When a sink subtask commits its part files, they are grouped per bucket in the order written;
a group is closed when its files reach the strategy's size threshold (bytes), and the rest form
the last group (at the end of input Flink compacts whatever is pending). Each group, even of
one file, is compacted into ``compacted-<name of its first file>`` (written hidden, then
renamed), and its files are deleted: Flink's ``CompactService`` names and cleans up the same way.

Rill differences: Rill commits files when a subtask's input ends (until checkpoints commit
them), so ``enable_compaction_on_checkpoint(n)`` is kept in the strategy and compaction happens
at that commit; and each sink subtask compacts its own files, where Flink's single
``CompactCoordinator`` groups the files of all subtasks of a bucket (the same result at
parallelism 1). ``set_num_compact_threads`` is kept; Rill compacts in the sink's thread.
"""

from __future__ import annotations

import os
import shutil
from typing import Any, BinaryIO, List, Optional

from rill.datastream.connectors.base import SinkWriter

__all__ = ["FileCompactStrategy", "FileCompactor", "CompactingFileSinkWriter"]

#: Flink's ``CompactService.COMPACTED_PREFIX``
COMPACTED_PREFIX = "compacted-"


class FileCompactStrategy:
    """When files are compacted (Flink's ``FileCompactStrategy``); build with
    ``FileCompactStrategy.builder()``.

    :param size_threshold: bytes of files that trigger a compaction (-1: unlimited).
    :param num_checkpoints_before_compaction: checkpoints between compactions (-1: none).
    :param num_compact_threads: compacting threads (-1: Flink's default, 1).
    """

    def __init__(self, size_threshold: int, num_checkpoints_before_compaction: int, num_compact_threads: int):
        self.size_threshold = size_threshold
        self.num_checkpoints_before_compaction = num_checkpoints_before_compaction
        self.num_compact_threads = num_compact_threads

    @staticmethod
    def builder() -> "FileCompactStrategy.Builder":
        return FileCompactStrategy.Builder()

    class Builder:
        """Builds a :class:`FileCompactStrategy` (Flink's rules).

        :raises ValueError: from the setters for a count below 1; from :meth:`build` when
            neither trigger is set ("At least one trigger condition must be configured.").
        """

        def __init__(self):
            self._size_threshold = -1
            self._num_checkpoints = -1
            self._num_threads = -1

        def enable_compaction_on_checkpoint(self, num_checkpoints_before_compaction: int) -> "FileCompactStrategy.Builder":
            if num_checkpoints_before_compaction <= 0:
                raise ValueError(f"FileCompactStrategy: number of checkpoints before compaction should be more "
                                 f"than 0, got {num_checkpoints_before_compaction}")
            self._num_checkpoints = num_checkpoints_before_compaction
            return self

        def set_size_threshold(self, size_threshold: int) -> "FileCompactStrategy.Builder":
            """Compact once the files to compact reach ``size_threshold`` bytes (-1: unlimited)."""
            self._size_threshold = size_threshold
            return self

        def set_num_compact_threads(self, num_compact_threads: int) -> "FileCompactStrategy.Builder":
            if num_compact_threads <= 0:
                raise ValueError(f"FileCompactStrategy: compact threads should be more than 0, got {num_compact_threads}")
            self._num_threads = num_compact_threads
            return self

        def build(self) -> "FileCompactStrategy":
            if self._size_threshold < 0 and self._num_checkpoints <= 0:
                raise ValueError("FileCompactStrategy: at least one trigger condition must be configured.")
            return FileCompactStrategy(self._size_threshold, self._num_checkpoints, self._num_threads)


class FileCompactor:
    """Writes the content of several files into one stream (Flink's ``FileCompactor``):
    :meth:`concat_file_compactor` or :meth:`identical_file_compactor`."""

    def __init__(self, delimiter: Optional[bytes], single_file_only: bool):
        self.delimiter = delimiter
        self.single_file_only = single_file_only

    @staticmethod
    def concat_file_compactor(file_delimiter: bytes = None) -> "FileCompactor":
        """The files' bytes one after the other, ``file_delimiter`` between neighbours (Flink's
        ``ConcatFileCompactor``): right for row formats, not for bulk formats with footers."""
        return FileCompactor(file_delimiter or None, False)

    @staticmethod
    def identical_file_compactor() -> "FileCompactor":
        """The only file's bytes, copied (Flink's ``IdenticalFileCompactor``)."""
        return FileCompactor(None, True)

    def compact(self, input_files: List[str], output: BinaryIO) -> None:
        """:raises ValueError: for the identical compactor given more than one file."""
        if self.single_file_only and len(input_files) != 1:
            raise ValueError(f"FileCompactor.identical_file_compactor compacts exactly one file, got {len(input_files)}")
        for i, path in enumerate(input_files):
            if i and self.delimiter:
                output.write(self.delimiter)
            with open(path, "rb") as f:
                shutil.copyfileobj(f, output)


class CompactingFileSinkWriter(SinkWriter):
    """Wraps a file sink's writer: on :meth:`commit`, the files it committed are compacted
    (see the module docstring)."""

    def __init__(self, writer: Any, strategy: FileCompactStrategy, compactor: FileCompactor):
        self._writer = writer
        self._strategy = strategy
        self._compactor = compactor

    def open(self, subtask_index: int) -> None:
        self._writer.open(subtask_index)

    def write_batch(self, values: List[Any]) -> None:
        self._writer.write_batch(values)

    def commit(self) -> List[str]:
        committed = self._writer.commit()
        by_bucket: dict = {}
        for path in committed:
            by_bucket.setdefault(os.path.dirname(path), []).append(path)
        result: List[str] = []
        for files in by_bucket.values():
            for group in self._groups(files):
                result.append(self._compact(group))
        return result

    def _groups(self, files: List[str]) -> List[List[str]]:
        threshold = self._strategy.size_threshold
        groups, current, size = [], [], 0
        for path in files:
            current.append(path)
            size += os.path.getsize(path)
            if 0 <= threshold <= size:
                groups.append(current)
                current, size = [], 0
        if current:
            groups.append(current)
        return groups

    def _compact(self, group: List[str]) -> str:
        directory, first = os.path.split(group[0])
        target = os.path.join(directory, COMPACTED_PREFIX + first)
        hidden = os.path.join(directory, f".{COMPACTED_PREFIX}{first}.inprogress")
        with open(hidden, "wb") as out:
            self._compactor.compact(group, out)
        os.replace(hidden, target)
        for path in group:
            if path != target:
                os.remove(path)
        return target

    def abort(self) -> None:
        self._writer.abort()
