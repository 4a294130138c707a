"""Compaction of a ``FileSink`` 's small files (Flink's ``FileCompactStrategy`` and
``FileCompactor``; PyFlink's names): enabled with
``FileSink.for_row_format(...).enable_compact(strategy, compactor)``; the sink then runs as a
:class:`~rill.operators.compacting_file_sink.CompactingFileSinkOperator`, which compacts the
files of each commit (see there for grouping, names and clean-up).

Rill differences: Rill compacts the files of every commit (each completed checkpoint, or the
end of input), so ``enable_compaction_on_checkpoint(n)`` is kept but does not space compactions
``n`` checkpoints apart; each sink subtask compacts its own files, where Flink's single
``CompactCoordinator`` groups the files of all subtasks of a bucket (the same result at
parallelism 1); ``set_num_compact_threads`` is kept, Rill compacts in the sink's thread.
"""

from __future__ import annotations

import shutil
from typing import BinaryIO, List, Optional

__all__ = ["FileCompactStrategy", "FileCompactor"]


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
