"""The JobMaster's side of a source: its split enumerator (Flink's runtime
``org.apache.flink.runtime.source.coordinator.SourceCoordinator``) and its subtasks' part in
watermark alignment."""

from __future__ import annotations

import threading
from typing import Optional

from rill.common.connector.source import Source, SourceSplit
from rill.runtime.watermark_alignment import WatermarkAlignmentGroups

__all__ = ["SourceCoordinator"]


class SourceCoordinator:
    """Holds a source's enumerator for a job and serves split requests (Flink's
    ``SourceCoordinator``). Thread-safe: subtasks call from their task threads.

    :param node_id: the source's StreamNode id (names its subtasks in watermark groups).
    :param alignment_groups: the job's watermark groups (shared by its source coordinators).
    """

    def __init__(self, source: Source, parallelism: int, node_id: int = 0,
                 alignment_groups: Optional[WatermarkAlignmentGroups] = None):
        self.source = source
        self.node_id = node_id
        self._enumerator = source.create_enumerator(parallelism)
        self._lock = threading.Lock()
        self._alignment_groups = alignment_groups

    def request_split(self, subtask_index: int) -> Optional[SourceSplit]:
        """The enumerator's next split for ``subtask_index``, or ``None`` when it has no more."""
        with self._lock:
            return self._enumerator.handle_split_request(subtask_index)

    def report_watermark(self, subtask_index: int, group: str, watermark_ms: int) -> int:
        """A subtask's current watermark for its watermark group (Flink's
        ``ReportedWatermarkEvent``); returns the group's minimum (``WatermarkAlignmentEvent``).

        :raises RuntimeError: if the coordinator was built without alignment groups.
        """
        if self._alignment_groups is None:
            raise RuntimeError(f"The coordinator of source node {self.node_id} was built without "
                               "watermark alignment groups")
        return self._alignment_groups.report(group, (self.node_id, subtask_index), watermark_ms)
