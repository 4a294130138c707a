"""A triggered checkpoint waiting for its acknowledgements (Flink's ``PendingCheckpoint``).

Acknowledgements are counted per execution attempt: an acknowledgement of an attempt the
checkpoint does not wait for (a restarted task's old attempt, say) is refused.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import Dict, Iterable, Mapping, Optional, Set, Tuple

from rill.state.checkpoint.metadata import (
    CheckpointMetadata,
    OperatorState,
    OperatorSubtaskStateHandle,
    SnapshotType,
)
from rill.state.checkpoint.storage import CheckpointStorageLocation

__all__ = ["PendingCheckpoint", "TaskAcknowledgeResult", "OperatorInfo"]

_LOG = logging.getLogger(__name__)


class TaskAcknowledgeResult(enum.Enum):
    """Flink's ``PendingCheckpoint.TaskAcknowledgeResult``."""

    SUCCESS = "SUCCESS"
    DUPLICATE = "DUPLICATE"
    UNKNOWN = "UNKNOWN"
    DISCARDED = "DISCARDED"


@dataclass(frozen=True)
class OperatorInfo:
    """What the metadata says about one operator besides its handles.

    :param operator_id: 32 hex digits.
    :param parallelism: its vertex's parallelism.
    :param max_parallelism: its number of key groups.
    :param name: the operator's name.
    :param uid: the user's uid when known.
    :param vertex_id: the job vertex (task) that runs it: its subtasks finish together with
        their tasks.
    """

    operator_id: str
    parallelism: int
    max_parallelism: int
    name: str
    uid: Optional[str] = None
    vertex_id: str = ""


class PendingCheckpoint:
    """
    :param job_id: the job (32 hex digits).
    :param checkpoint_id: 1, 2, ...
    :param timestamp: trigger time, epoch ms.
    :param tasks_to_ack: attempt id -> the task's name with subtask (what it waits for).
    :param operators: every operator of the job (the metadata lists each).
    :param location: where the tasks write; disposed of on abort.
    :param snapshot_type: checkpoint or savepoint.
    :param coordinator_states: operator id -> the state of its coordinator (a source's
        enumerator), taken before the sources were triggered.
    :param finished_subtasks: ``(vertex id, subtask index)`` of the tasks that had finished when
        it was triggered (FLIP-147); with the tasks that acknowledge as finished, an operator
        whose every subtask finished is fully finished in the metadata.
    """

    def __init__(self, job_id: str, checkpoint_id: int, timestamp: int, tasks_to_ack: Mapping[str, str],
                 operators: Iterable[OperatorInfo], location: CheckpointStorageLocation,
                 snapshot_type: SnapshotType = SnapshotType.CHECKPOINT,
                 coordinator_states: Optional[Mapping[str, bytes]] = None,
                 finished_subtasks: Iterable[Tuple[str, int]] = ()) -> None:
        self._coordinator_states = dict(coordinator_states or {})
        self._finished_subtasks: Dict[str, Set[int]] = {}
        for vertex_id, index in finished_subtasks:
            self._finished_subtasks.setdefault(vertex_id, set()).add(index)
        #: attempt ids that acknowledged with their operators finished
        self.finished_attempts: Set[str] = set()
        self.job_id = job_id
        self.checkpoint_id = checkpoint_id
        self.timestamp = timestamp
        self.location = location
        self.snapshot_type = snapshot_type
        self._not_yet_acknowledged: Dict[str, str] = dict(tasks_to_ack)
        self._acknowledged: Set[str] = set()
        self._operators = {op.operator_id: op for op in operators}
        self._handles: Dict[str, Dict[int, OperatorSubtaskStateHandle]] = {oid: {} for oid in self._operators}
        self.disposed = False
        #: the timeout timer, cancelled on completion or abort
        self.cancellable = None

    @property
    def number_of_subtasks(self) -> int:
        """Tasks it waits for in all."""
        return len(self._not_yet_acknowledged) + len(self._acknowledged)

    @property
    def number_of_acknowledged_subtasks(self) -> int:
        return len(self._acknowledged)

    def is_fully_acknowledged(self) -> bool:
        """Whether every task acknowledged (Flink's ``isFullyAcknowledged``)."""
        return not self._not_yet_acknowledged and not self.disposed

    def is_waiting_for(self, attempt_id: str) -> bool:
        """Whether ``attempt_id`` has not acknowledged yet."""
        return attempt_id in self._not_yet_acknowledged

    def acknowledge_task(self, attempt_id: str, subtask_index: int,
                         subtask_state: Mapping[str, Optional[OperatorSubtaskStateHandle]],
                         finished_vertex: Optional[str] = None) -> TaskAcknowledgeResult:
        """Record one task's acknowledgement.

        :param subtask_state: operator id -> handle (``None``: the operator had no state).
        :param finished_vertex: the task's vertex id when its operators had finished (Flink's
            ``reportTaskHasFinishedOperators``), else ``None``.
        :raises ValueError: if an operator id is not one of the job's.
        """
        if self.disposed:
            return TaskAcknowledgeResult.DISCARDED
        if attempt_id not in self._not_yet_acknowledged:
            return TaskAcknowledgeResult.DUPLICATE if attempt_id in self._acknowledged else TaskAcknowledgeResult.UNKNOWN
        unknown = [oid for oid in subtask_state if oid not in self._handles]
        if unknown:
            raise ValueError(f"Checkpoint {self.checkpoint_id}: task {self._not_yet_acknowledged[attempt_id]} "
                             f"acknowledged state of operators {unknown} that are not in the job")
        del self._not_yet_acknowledged[attempt_id]
        self._acknowledged.add(attempt_id)
        for oid, handle in subtask_state.items():
            if handle is not None:
                self._handles[oid][subtask_index] = handle
        if finished_vertex is not None:
            self._finished_subtasks.setdefault(finished_vertex, set()).add(subtask_index)
            self.finished_attempts.add(attempt_id)
        return TaskAcknowledgeResult.SUCCESS

    def _fully_finished(self, op: OperatorInfo) -> bool:
        return len(self._finished_subtasks.get(op.vertex_id, ())) >= op.parallelism

    def metadata(self, external_pointer: Optional[str] = None) -> CheckpointMetadata:
        """The metadata of the completed checkpoint (every operator of the job, with the handles
        of the subtasks that had state; an operator whose every subtask finished is fully
        finished, without state: Flink's ``FullyFinishedOperatorState``)."""
        states = {}
        for oid, op in self._operators.items():
            if self._fully_finished(op):
                states[oid] = OperatorState(oid, op.parallelism, op.max_parallelism, {}, op.uid, op.name,
                                            fully_finished=True)
            else:
                states[oid] = OperatorState(oid, op.parallelism, op.max_parallelism, self._handles[oid],
                                            op.uid, op.name, self._coordinator_states.get(oid))
        return CheckpointMetadata(
            checkpoint_id=self.checkpoint_id, timestamp=self.timestamp,
            operator_states=states,
            snapshot_type=self.snapshot_type, job_id=self.job_id, external_pointer=external_pointer)

    def dispose(self) -> None:
        """Abandon it: cancel the timeout, delete what was written (idempotent)."""
        if self.disposed:
            return
        self.disposed = True
        if self.cancellable is not None:
            self.cancellable.cancel()
        try:
            self.location.dispose()
        except Exception:  # noqa: BLE001 - as Flink's discard of an aborted checkpoint: logged, the job goes on
            _LOG.exception("Could not discard aborted checkpoint %d at %s", self.checkpoint_id,
                           self.location.location_reference)
