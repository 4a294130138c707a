"""A ``FileSink`` with compaction (Flink's ``CompactCoordinator`` + ``CompactorOperator`` after
the ``FileWriter``, here folded into the commit): the ``FileSinkOperator`` whose committer
compacts the files of each commit.

Each commit (a completed checkpoint's pending files, or everything at the end of input without
checkpointing) renames its files to their final names as the plain committer does; then, per
bucket in commit order, the files are grouped, a group closing when its bytes reach the
strategy's ``size_threshold`` (-1: one group), and each group is written by the compactor into
``compacted-<name of its first file>`` (hidden while written, then renamed) and its files are
deleted, as Flink's ``CompactService`` names and cleans up. A failure between the rename and
the compaction leaves the committed parts visible and uncompacted (Flink's compactor may also
leave them, it retries from its state; Rill does not compact files of an earlier attempt).
"""

from __future__ import annotations

import os
from typing import Any, Iterable, List

from rill.operators.file_sink import FileCommitter, FileSinkCommittable, FileSinkOperator

__all__ = ["COMPACTED_PREFIX", "CompactingFileCommitter", "CompactingFileSinkOperator"]

#: Flink's ``CompactService.COMPACTED_PREFIX``
COMPACTED_PREFIX = "compacted-"


class CompactingFileCommitter(FileCommitter):
    """Commits as :class:`FileCommitter`, then compacts what it committed.

    :param strategy: has ``size_threshold`` (bytes, -1 for unlimited).
    :param compactor: has ``compact(input_paths, binary_output)``.
    """

    def __init__(self, operator_name: str, strategy: Any, compactor: Any) -> None:
        super().__init__(operator_name)
        self._strategy = strategy
        self._compactor = compactor

    def commit(self, committables: Iterable[FileSinkCommittable]) -> List[str]:
        committed = super().commit(committables)
        by_bucket: dict = {}
        for path in committed:
            by_bucket.setdefault(os.path.dirname(path), []).append(path)
        return [self._compact(group) for files in by_bucket.values() for group in self._groups(files)]

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
            os.remove(path)
        return target


class CompactingFileSinkOperator(FileSinkOperator):
    """The ``FileSinkOperator`` of a sink built with ``enable_compact(strategy, compactor)``
    (``sink.compaction``): its commits go through a :class:`CompactingFileCommitter`. Files a
    restore commits (of an earlier attempt) are committed without compaction."""

    def initialize_state(self) -> None:
        super().initialize_state()
        strategy, compactor = self.sink.compaction
        self._committer = CompactingFileCommitter(self.context.operator_name, strategy, compactor)
