"""Which state each subtask of a (possibly rescaled) job restores from a snapshot (Flink's
``StateAssignmentOperation`` with ``RoundRobinOperatorStateRepartitioner`` and
``KeyGroupRangeAssignment``).

A pure computation over a :class:`~rill.state.checkpoint.metadata.CheckpointMetadata` and the
new job's vertices (:class:`VertexRestoreTarget`); it is the same for a restart after a
failure (same parallelism) and a restore from a savepoint at another parallelism:

- **matching**: the state of an operator is found under its user-defined id
  (``set_uid_hash``) if it has one, else under its generated id (which is the hash of its
  ``uid`` when one was set), as Flink's ``OperatorIDPair``; the result is filed under the
  generated id, which is what a task knows its operators by;
- **keyed state and timers**: new subtask *i* owns
  ``compute_key_group_range_for_operator_index(max_parallelism, parallelism, i)``; it reads
  every old subtask whose range intersects its own, restricted to its own range (Flink's
  ``getKeyGroupsStateHandles``). The reading happens in the task
  (:class:`ReassignedOperatorSubtaskStateHandle`);
- **operator state**: list state round-robin, union state to every subtask, broadcast state
  copied (:func:`rill.state.operator_state.redistribute`); it is read here, from the old
  handles restricted to no key group, because redistribution needs all old subtasks;
- **in-flight data** of an unaligned checkpoint (FLIP-76): restored by the subtask of the same
  index at the same parallelism (:meth:`ReassignedOperatorSubtaskStateHandle.read_channel_state`);
  a restore at another parallelism from a snapshot with in-flight data is refused (Flink
  redistributes it since 1.13; Rill does not yet);
- **checks**: another max parallelism is refused with Flink's message; state that maps to no
  operator of the new job fails the restore naming the operator's id, uid and name, unless
  ``allow_non_restored_state`` (an operator state without any subtask state is skipped, as
  Flink's "Skipping empty savepoint state");
- **fully finished operators** (FLIP-147): a vertex whose every operator was fully finished in
  the snapshot is deployed finished (``JobManagerTaskRestore.finished_on_restore``: nothing of
  it runs again); a vertex that chains fully finished and unfinished operators is refused, as
  Flink's "mixed operator finished state".

Differences from Flink: Flink adopts the snapshot's max parallelism for a vertex whose max
parallelism was not configured (``canRescaleMaxParallelism``); Rill refuses every change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from rill.runtime.checkpoint.job_manager_task_restore import JobManagerTaskRestore
from rill.state.checkpoint.metadata import CheckpointMetadata, OperatorState, OperatorSubtaskStateHandle
from rill.state.checkpoint.operator_subtask_state import ChannelStateSnapshot, OperatorSubtaskState, TimerServiceSnapshot
from rill.state.key_groups import KeyGroupRange, compute_key_group_range_for_operator_index
from rill.state.operator_state import redistribute

__all__ = [
    "VertexRestoreTarget",
    "ReassignedOperatorSubtaskStateHandle",
    "StateAssignment",
    "StateAssignmentOperation",
    "assign_states",
]


@dataclass(frozen=True)
class VertexRestoreTarget:
    """What state assignment needs of one vertex of the new job.

    :param vertex_id: the JobVertex id (hex).
    :param name: the vertex's name, for messages.
    :param parallelism: its new parallelism.
    :param max_parallelism: its number of key groups (effective max parallelism).
    :param operator_ids: ``(generated id, user-defined id or None)`` per chained operator,
        32 hex each (Flink's ``OperatorIDPair`` s).
    """

    vertex_id: str
    name: str
    parallelism: int
    max_parallelism: int
    operator_ids: Tuple[Tuple[str, Optional[str]], ...]

    @classmethod
    def from_job_vertex(cls, vertex) -> "VertexRestoreTarget":
        """The target of a ``JobVertex`` (its operator id pairs, parallelism and effective max
        parallelism)."""
        return cls(
            vertex_id=str(vertex.get_id()), name=vertex.get_name(), parallelism=vertex.get_parallelism(),
            max_parallelism=vertex.get_effective_max_parallelism(),
            operator_ids=tuple((str(p.get_generated_operator_id()),
                                None if p.get_user_defined_operator_id() is None
                                else str(p.get_user_defined_operator_id()))
                               for p in vertex.get_operator_id_pairs()))


class ReassignedOperatorSubtaskStateHandle(OperatorSubtaskStateHandle):
    """The state of one operator in one new subtask, put together from old subtasks' handles
    when read (in the task): the redistributed operator state, already read, plus the keyed
    state and timers of each intersecting old subtask, restricted to the new key-group range.

    :param checkpoint_id: the snapshot's checkpoint id.
    :param operator_state: this subtask's redistributed operator state
        (``{name: (mode, entries)}``).
    :param keyed_sources: ``(old handle, key-group range to read of it)`` per old subtask whose
        range intersects this subtask's, in old subtask order.
    :param channel_source: the old handle of the same subtask whose in-flight data this one
        restores (same parallelism only), or ``None``.
    """

    __slots__ = ("checkpoint_id", "operator_state", "keyed_sources", "channel_source")

    def __init__(self, checkpoint_id: int, operator_state: Mapping[str, Tuple[str, Sequence]],
                 keyed_sources: Sequence[Tuple[OperatorSubtaskStateHandle, KeyGroupRange]],
                 channel_source: Optional[OperatorSubtaskStateHandle] = None) -> None:
        self.checkpoint_id = checkpoint_id
        self.operator_state = dict(operator_state)
        self.keyed_sources = tuple(keyed_sources)
        self.channel_source = channel_source

    def has_channel_state(self) -> bool:
        return self.channel_source is not None and self.channel_source.has_channel_state()

    def read_channel_state(self) -> ChannelStateSnapshot:
        """The in-flight data of the old subtask of the same index (empty without one)."""
        return ChannelStateSnapshot() if self.channel_source is None else self.channel_source.read_channel_state()

    @property
    def state_size(self) -> int:
        """The old handles' sizes (an upper bound: only a range of each is read), bytes."""
        return sum(h.state_size for h, _ in self.keyed_sources)

    def read(self, key_group_range: Optional[KeyGroupRange] = None) -> OperatorSubtaskState:
        keyed = []
        timers: Dict[str, Dict[int, object]] = {}
        for handle, rng in self.keyed_sources:
            if key_group_range is not None:
                rng = rng.get_intersection(key_group_range)
            old = handle.read(rng)
            keyed.extend(old.keyed_state)
            for name, service in old.timers.items():
                timers.setdefault(name, {}).update(service.key_groups)
        return OperatorSubtaskState(
            checkpoint_id=self.checkpoint_id, operator_state=self.operator_state, keyed_state=tuple(keyed),
            timers={name: TimerServiceSnapshot(groups) for name, groups in timers.items()})

    def __repr__(self) -> str:
        return (f"ReassignedOperatorSubtaskStateHandle(checkpoint_id={self.checkpoint_id}, "
                f"keyed_sources={[str(r) for _, r in self.keyed_sources]})")


@dataclass(frozen=True)
class StateAssignment:
    """The result of :func:`assign_states`.

    :param checkpoint_id: the snapshot's checkpoint id.
    :param task_restores: ``(vertex id hex, subtask index)`` -> the subtask's restore; a
        subtask none of whose operators has state is absent.
    :param skipped_operators: ids of the snapshot's operator states that matched no operator
        and were skipped (``allow_non_restored_state``, or empty).
    """

    checkpoint_id: int
    task_restores: Mapping[Tuple[str, int], JobManagerTaskRestore] = field(default_factory=dict)
    skipped_operators: Tuple[str, ...] = ()

    def get_task_restore(self, vertex_id: str, subtask_index: int) -> Optional[JobManagerTaskRestore]:
        """The restore of subtask ``subtask_index`` of vertex ``vertex_id`` (hex), or ``None``."""
        return self.task_restores.get((vertex_id, subtask_index))


class StateAssignmentOperation:
    """Assigns a snapshot's state to the new job's subtasks (Flink's
    ``StateAssignmentOperation``); see the module docstring.

    :param metadata: the completed checkpoint or savepoint.
    :param vertices: the new job's vertices.
    :param allow_non_restored_state: skip state that maps to no operator instead of failing
        (``execution.state-recovery.ignore-unclaimed-state``).
    """

    def __init__(self, metadata: CheckpointMetadata, vertices: Iterable[VertexRestoreTarget],
                 allow_non_restored_state: bool = False) -> None:
        self.metadata = metadata
        self.vertices = list(vertices)
        self.allow_non_restored_state = allow_non_restored_state

    def assign_states(self) -> StateAssignment:
        """:raises ValueError: with Flink's message when an operator's max parallelism changed,
            when state maps to no operator and non-restored state is not allowed, or when a
            vertex chains fully finished and unfinished operators."""
        remaining = dict(self.metadata.operator_states)
        per_subtask: Dict[Tuple[str, int], Dict[str, OperatorSubtaskStateHandle]] = {}
        finished_vertices = []
        for vertex in self.vertices:
            states = [remaining.pop(user_defined or generated, None) for generated, user_defined in vertex.operator_ids]
            finished = [s is not None and s.fully_finished for s in states]
            if finished and all(finished):
                finished_vertices.append(vertex)
                continue
            if any(finished):
                raise ValueError(
                    f"Can not restore vertex {vertex.name} ({vertex.vertex_id}) which contains mixed operator "
                    f"finished state: operators {[g for (g, _), f in zip(vertex.operator_ids, finished) if f]} "
                    "were fully finished in the snapshot, the others were not")
            for (generated, _), state in zip(vertex.operator_ids, states):
                if state is None or not state.subtask_states:
                    continue
                self._check_max_parallelism(state, vertex)
                for index, handle in enumerate(self._reassign(state, vertex)):
                    per_subtask.setdefault((vertex.vertex_id, index), {})[generated] = handle
        skipped = self._check_state_mapping_completeness(remaining)
        cid = self.metadata.checkpoint_id
        restores = {key: JobManagerTaskRestore(cid, states) for key, states in per_subtask.items()}
        for vertex in finished_vertices:
            for index in range(vertex.parallelism):
                restores[(vertex.vertex_id, index)] = JobManagerTaskRestore(cid, finished_on_restore=True)
        return StateAssignment(cid, restores, skipped)

    def _check_max_parallelism(self, state: OperatorState, vertex: VertexRestoreTarget) -> None:
        if state.max_parallelism < vertex.parallelism:
            raise ValueError(
                f"The state for task {vertex.vertex_id} ({vertex.name}) can not be restored. The maximum "
                f"parallelism ({state.max_parallelism}) of the restored state is lower than the configured "
                f"parallelism ({vertex.parallelism}). Please reduce the parallelism of the task to be lower "
                "or equal to the maximum parallelism.")
        if state.max_parallelism != vertex.max_parallelism:
            raise ValueError(
                f"The maximum parallelism ({state.max_parallelism}) with which the latest checkpoint of the "
                f"execution job vertex {vertex.name} ({vertex.vertex_id}) has been taken and the current "
                f"maximum parallelism ({vertex.max_parallelism}) changed. This is currently not supported.")

    def _reassign(self, state: OperatorState, vertex: VertexRestoreTarget) -> List[OperatorSubtaskStateHandle]:
        """One handle per new subtask of ``vertex``."""
        old_p, new_p, max_p = state.parallelism, vertex.parallelism, state.max_parallelism
        nothing = KeyGroupRange.empty()
        old_operator_states = [None if i not in state.subtask_states
                               else state.subtask_states[i].read(nothing).operator_state for i in range(old_p)]
        operator_states = redistribute(old_operator_states, new_p)
        old_ranges = [compute_key_group_range_for_operator_index(max_p, old_p, i) for i in range(old_p)]
        with_channel_state = [i for i, h in sorted(state.subtask_states.items()) if h.has_channel_state()]
        if with_channel_state and old_p != new_p:
            raise ValueError(
                f"Operator {state.uid or state.operator_id} ({vertex.name}): the snapshot is an unaligned "
                f"checkpoint with in-flight data (subtasks {with_channel_state}), which Rill restores only at "
                f"the same parallelism ({old_p}), not at {new_p}: restore it at parallelism {old_p}, or "
                "rescale from a savepoint (savepoints are always aligned)")
        handles: List[OperatorSubtaskStateHandle] = []
        for i in range(new_p):
            new_range = compute_key_group_range_for_operator_index(max_p, new_p, i)
            sources = []
            for old_index, old_range in enumerate(old_ranges):
                overlap = old_range.get_intersection(new_range)
                handle = state.subtask_states.get(old_index)
                if handle is not None and overlap.get_number_of_key_groups() > 0:
                    sources.append((handle, overlap))
            handles.append(ReassignedOperatorSubtaskStateHandle(
                self.metadata.checkpoint_id, operator_states[i], sources,
                state.subtask_states.get(i) if i in with_channel_state else None))
        return handles

    def _check_state_mapping_completeness(self, remaining: Mapping[str, OperatorState]) -> Tuple[str, ...]:
        unmapped = [s for s in remaining.values() if s.subtask_states]
        if unmapped and not self.allow_non_restored_state:
            s = unmapped[0]
            where = self.metadata.external_pointer or f"checkpoint {self.metadata.checkpoint_id}"
            uid = f", uid '{s.uid}'" if s.uid else ""
            name = f", name '{s.name}'" if s.name else ""
            raise ValueError(
                f"Failed to rollback to checkpoint/savepoint {where}. Cannot map checkpoint/savepoint state "
                f"for operator {s.operator_id}{uid}{name} to the new program, because the operator is not "
                "available in the new program. If you want to allow to skip this, you can set the "
                "--allow-non-restored-state option on the CLI "
                "(execution.state-recovery.ignore-unclaimed-state: true).")
        return tuple(s.operator_id for s in unmapped)


def assign_states(metadata: CheckpointMetadata, vertices: Iterable[VertexRestoreTarget],
                  allow_non_restored_state: bool = False) -> StateAssignment:
    """``StateAssignmentOperation(metadata, vertices, allow_non_restored_state).assign_states()``.

    :raises ValueError: see :meth:`StateAssignmentOperation.assign_states`.
    """
    return StateAssignmentOperation(metadata, vertices, allow_non_restored_state).assign_states()
