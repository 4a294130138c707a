"""The JobMaster's side of a source: its split enumerator (Flink's runtime
``org.apache.flink.runtime.source.coordinator.SourceCoordinator``) and its subtasks' part in
watermark alignment.

Checkpoints (Flink's ``OperatorCoordinator.checkpointCoordinator`` / ``resetToCheckpoint``):
the checkpoint coordinator calls :meth:`SourceCoordinator.snapshot_state` for checkpoint ``n``
*before* it triggers the source tasks for ``n``, stores the bytes with the checkpoint, and on a
restore calls :meth:`SourceCoordinator.reset_to_checkpoint` before the restored tasks start.
Every split assignment carries the id of the coordinator's latest checkpoint
(:meth:`SourceCoordinator.assign_split`): a split assigned after the snapshot of ``n`` is in the
enumerator's state of ``n``, and the ``SourceOperator`` does not read it before its own snapshot
``n`` (or the notification that ``n`` completed or was aborted), so no split is in both states
and none in neither. The runtime must therefore notify source tasks of aborted checkpoints too.
"""

from __future__ import annotations

import threading
from typing import Optional, Tuple

from rill.common.connector.source import (
    Source,
    SourceSplit,
    read_version_and_deserialize,
    write_version_and_serialize,
)
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
        self.parallelism = parallelism
        self._enumerator = source.create_enumerator(parallelism)
        self._lock = threading.Lock()
        self._alignment_groups = alignment_groups
        self._checkpoint_id = 0  # the latest checkpoint snapshotted or reset to
        self._stamp = 0  # what assignments are stamped with (see reset_to_checkpoint)

    def request_split(self, subtask_index: int) -> Optional[SourceSplit]:
        """The enumerator's next split for ``subtask_index``, or ``None`` when it has no more."""
        return self.assign_split(subtask_index)[0]

    def assign_split(self, subtask_index: int) -> Tuple[Optional[SourceSplit], int]:
        """``(split, checkpoint_id)``: the enumerator's next split for ``subtask_index`` (``None``
        when it has no more) and the id of the latest checkpoint this coordinator snapshotted
        when it assigned it (0: none since it was created or reset), taken atomically; the
        ``SourceOperator`` needs both (see the module docstring)."""
        with self._lock:
            return self._enumerator.handle_split_request(subtask_index), self._stamp

    def snapshot_state(self, checkpoint_id: int) -> bytes:
        """The enumerator's state for checkpoint ``checkpoint_id`` (Flink's
        ``SourceCoordinator.checkpointCoordinator``), serialized with the source's enumerator
        checkpoint serializer in ``write_version_and_serialize`` layout. Call it before the
        source tasks are triggered for the same checkpoint.

        :raises NotImplementedError: if the source's enumerator cannot be checkpointed.
        :raises ValueError: if ``checkpoint_id`` is not above the last one snapshotted.
        """
        with self._lock:
            if checkpoint_id <= self._checkpoint_id:
                raise ValueError(f"Source coordinator of node {self.node_id}: checkpoint {checkpoint_id} is not "
                                 f"after checkpoint {self._checkpoint_id}, snapshotted before")
            state = self._enumerator.snapshot_state(checkpoint_id)
            data = write_version_and_serialize(self.source.get_enumerator_checkpoint_serializer(), state)
            self._checkpoint_id = self._stamp = checkpoint_id
            return data

    def reset_to_checkpoint(self, checkpoint_id: int, checkpoint_data: Optional[bytes]) -> None:
        """Replace the enumerator by the one restored from ``checkpoint_data`` (what
        :meth:`snapshot_state` returned for ``checkpoint_id``), or by a new one when
        ``checkpoint_data`` is ``None`` (Flink's ``resetToCheckpoint``). Call it before the
        restored source tasks run. Assignments are stamped 0 again until the next snapshot: no
        reader takes a snapshot ``<= checkpoint_id`` any more (ids go on after it), so no split
        needs holding, and a reader that restored no state of its own (last checkpoint 0) must
        not hold one either.

        :raises ValueError, TypeError: if the data cannot be read or the source cannot restore
            from it.
        """
        with self._lock:
            if checkpoint_data is None:
                self._enumerator = self.source.create_enumerator(self.parallelism)
            else:
                state = read_version_and_deserialize(self.source.get_enumerator_checkpoint_serializer(),
                                                     checkpoint_data)
                self._enumerator = self.source.restore_enumerator(self.parallelism, state)
            self._checkpoint_id = checkpoint_id
            self._stamp = 0

    def report_watermark(self, subtask_index: int, group: str, watermark_ms: int) -> int:
        """A subtask's current watermark for its watermark group (Flink's
        ``ReportedWatermarkEvent``); returns the group's minimum (``WatermarkAlignmentEvent``).

        :raises RuntimeError: if the coordinator was built without alignment groups.
        """
        if self._alignment_groups is None:
            raise RuntimeError(f"The coordinator of source node {self.node_id} was built without "
                               "watermark alignment groups")
        return self._alignment_groups.report(group, (self.node_id, subtask_index), watermark_ms)
