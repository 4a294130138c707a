"""The state of one operator in one subtask, as a checkpoint captures it (Flink's
``OperatorSubtaskState`` with its ``KeyGroupsStateHandle`` and ``OperatorStateHandle``).

Three parts, each a frozen record of plain Python data so that a writer can encode it (Parquet
later) without reaching into live backends:

- managed keyed state, key group by key group (:class:`KeyedStateSnapshot`): what the keyed
  state backend holds, per state name the ``(key, namespace, stored value)`` entries;
- operator state (``{name: (mode, entries)}``, :data:`rill.state.operator_state.OperatorStateSnapshot`):
  list, union list and broadcast state;
- timers, per timer service and key group (:class:`TimerServiceSnapshot`);
- the in-flight data of an unaligned checkpoint (:class:`ChannelStateSnapshot`, FLIP-76), on
  the head operator of the task's chain only.

Keyed state and timers are indexed by key group, so a restore (or a reader) takes the key
groups of one range without the rest; that is how a rescaled subtask picks its share.

Values are captured, not shared: a backend's ``snapshot`` copies what it stores, so later
updates, including in-place mutation of stored lists, dicts or user objects, do not leak into
the record (Flink's heap backend gets the same from copy-on-write tables and serializer copies).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Tuple

from rill.state.checkpoint.key_group_views import PinnedKeyGroups
from rill.state.descriptors import StateDescriptor
from rill.state.key_groups import KeyGroupRange

__all__ = ["KeyedStateSnapshot", "TimersOfKeyGroup", "TimerServiceSnapshot", "ChannelStateSnapshot",
           "OperatorSubtaskState"]

#: ``(key, namespace, stored value)`` of one keyed state entry.
KeyedStateEntry = Tuple[Any, Any, Any]
#: ``(timestamp ms, key, namespace)`` of one timer.
TimerEntry = Tuple[int, Any, Any]
#: ``(gate or partition index, channel or subpartition index, buffer payload)`` of one buffer
#: of in-flight data; the payload is a batch of records as
#: ``rill.network.api.serialization.value_codec.pack_records`` writes it (uncompressed).
ChannelStateEntry = Tuple[int, int, bytes]

_EMPTY: Mapping[Any, Any] = {}


def _frozen(mapping: Mapping[Any, Any]) -> Mapping[Any, Any]:
    # A private copy: the record does not share the caller's dicts. Plain dicts rather than
    # read-only proxies, so that a record pickles (it will travel from task to JobMaster);
    # the records are never mutated after construction.
    return dict(mapping)


@dataclass(frozen=True)
class KeyedStateSnapshot:
    """The managed keyed state of one subtask (Flink's ``KeyGroupsStateHandle`` of a heap
    backend, in memory).

    :param max_parallelism: the number of key groups of the operator.
    :param key_group_range: the key groups the snapshotting subtask owned.
    :param descriptors: every registered state's descriptor by name (what a restore needs to
        recreate the state, and what declares its type).
    :param key_groups: key group -> state name -> ``(key, namespace, stored value)`` entries;
        only key groups and states with entries appear. A heap backend's snapshot gives a
        :class:`~rill.state.checkpoint.key_group_views.PinnedKeyGroups` (kept as it is, read
        column-wise by the file writer); any other mapping is copied. Stored values are in the backend's
        layout (see :mod:`rill.state.state_table`; TTL states store ``(value, last_access_ms)``).
    :param key_type: the declared type of the keys (``key_by(..., key_type)``), or ``None``:
        a snapshot writer then types its ``key`` column, else it writes keys untyped.
    :raises ValueError: if a key group lies outside ``key_group_range``.
    """

    max_parallelism: int
    key_group_range: KeyGroupRange
    descriptors: Mapping[str, StateDescriptor] = field(default_factory=dict)
    key_groups: Mapping[int, Mapping[str, Tuple[KeyedStateEntry, ...]]] = field(default_factory=dict)
    key_type: Any = None

    def __post_init__(self) -> None:
        outside = [kg for kg in self.key_groups if not self.key_group_range.contains(kg)]
        if outside:
            raise ValueError(f"Key groups {sorted(outside)} are not in {self.key_group_range}")
        object.__setattr__(self, "descriptors", _frozen(self.descriptors))
        if not isinstance(self.key_groups, PinnedKeyGroups):  # that one is read-only already
            object.__setattr__(self, "key_groups", _frozen(
                {kg: _frozen(states) for kg, states in self.key_groups.items()}))

    def entries(self, state_name: str, key_group: int) -> Tuple[KeyedStateEntry, ...]:
        """The entries of one state in one key group (empty if it has none)."""
        return self.key_groups.get(key_group, _EMPTY).get(state_name, ())

    def restricted_to(self, key_group_range: KeyGroupRange) -> "KeyedStateSnapshot":
        """The part of this snapshot in ``key_group_range`` (its range is the intersection)."""
        rng = self.key_group_range.get_intersection(key_group_range)
        return KeyedStateSnapshot(self.max_parallelism, rng, self.descriptors,
                                  {kg: s for kg, s in self.key_groups.items() if rng.contains(kg)},
                                  self.key_type)


@dataclass(frozen=True)
class TimersOfKeyGroup:
    """The timers of one timer service in one key group, each in registration order."""

    event_time: Tuple[TimerEntry, ...] = ()
    processing_time: Tuple[TimerEntry, ...] = ()


@dataclass(frozen=True)
class TimerServiceSnapshot:
    """The timers of one named timer service of one subtask (what Flink writes per key group
    through ``InternalTimerServiceSerializationProxy``).

    :param key_groups: key group -> its timers; only key groups with timers appear.
    """

    key_groups: Mapping[int, TimersOfKeyGroup] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key_groups", _frozen(self.key_groups))

    def restricted_to(self, key_group_range: KeyGroupRange) -> "TimerServiceSnapshot":
        """The timers of the key groups in ``key_group_range``."""
        return TimerServiceSnapshot({kg: t for kg, t in self.key_groups.items()
                                     if key_group_range.contains(kg)})


@dataclass(frozen=True)
class ChannelStateSnapshot:
    """The in-flight data one subtask stored with an unaligned checkpoint (FLIP-76; Flink's
    ``InputChannelStateHandle`` s and ``ResultSubpartitionStateHandle`` s), in stream order per
    channel.

    :param input_channels: ``(gate index, channel index, payload)`` of every buffer that had
        reached an input channel before the channel's barrier and was not processed before the
        snapshot: a restore processes them before any new input.
    :param result_subpartitions: ``(partition index, subpartition index, payload)`` of every
        buffer the barrier overtook in an output: a restore sends them first.
    """

    input_channels: Tuple[ChannelStateEntry, ...] = ()
    result_subpartitions: Tuple[ChannelStateEntry, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "input_channels", tuple(self.input_channels))
        object.__setattr__(self, "result_subpartitions", tuple(self.result_subpartitions))

    def is_empty(self) -> bool:
        """Whether no buffer is stored."""
        return not self.input_channels and not self.result_subpartitions

    @property
    def persisted_data_bytes(self) -> int:
        """Payload bytes over all buffers (Flink's ``persistedData`` of a checkpoint)."""
        return (sum(len(p) for _, _, p in self.input_channels)
                + sum(len(p) for _, _, p in self.result_subpartitions))


@dataclass(frozen=True)
class OperatorSubtaskState:
    """Everything one operator of one subtask restores from (Flink's ``OperatorSubtaskState``).

    :param checkpoint_id: the checkpoint it was taken for, or ``None`` when unknown.
    :param operator_state: ``{name: (mode name, entries)}`` as
        ``DefaultOperatorStateBackend.snapshot`` gives it (empty: none).
    :param keyed_state: the keyed state snapshots this subtask restores from (of one old
        subtask, or of several after rescaling; each contributes the key groups in the new
        range), empty for a non-keyed operator.
    :param timers: timer service name -> its timers, empty for a non-keyed operator.
    :param channel_state: the task's in-flight data of an unaligned checkpoint (on the head
        operator of the chain; empty otherwise).
    """

    checkpoint_id: Optional[int] = None
    operator_state: Mapping[str, Tuple[str, Tuple[Any, ...]]] = field(default_factory=dict)
    keyed_state: Tuple[KeyedStateSnapshot, ...] = ()
    timers: Mapping[str, TimerServiceSnapshot] = field(default_factory=dict)
    channel_state: ChannelStateSnapshot = field(default_factory=ChannelStateSnapshot)

    def __post_init__(self) -> None:
        object.__setattr__(self, "operator_state", _frozen(
            {name: (mode, tuple(entries)) for name, (mode, entries) in self.operator_state.items()}))
        object.__setattr__(self, "keyed_state", tuple(self.keyed_state))
        object.__setattr__(self, "timers", _frozen(self.timers))

    def restricted_to(self, key_group_range: KeyGroupRange) -> "OperatorSubtaskState":
        """This state with keyed state and timers only of the key groups in
        ``key_group_range`` (what a rescaled subtask of that range restores); operator state
        is kept whole (its redistribution is by mode, not by key group)."""
        return OperatorSubtaskState(
            checkpoint_id=self.checkpoint_id,
            operator_state=self.operator_state,
            keyed_state=tuple(k.restricted_to(key_group_range) for k in self.keyed_state),
            timers={name: t.restricted_to(key_group_range) for name, t in self.timers.items()},
            channel_state=self.channel_state,
        )

    def has_state(self) -> bool:
        """Whether any part holds something (Flink's ``hasState``)."""
        return bool(self.operator_state) or any(s.key_groups for s in self.keyed_state) or any(
            t.key_groups for t in self.timers.values()) or not self.channel_state.is_empty()
