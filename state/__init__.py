"""Keyed and operator state: key groups, state descriptors and interfaces, the heap keyed state
backend with state TTL, and the operator state backend (Flink's
``org.apache.flink.runtime.state`` and ``pyflink.datastream.state``).

Modules: :mod:`~rill.state.key_groups` (key groups and their assignment),
:mod:`~rill.state.descriptors` (state descriptors), :mod:`~rill.state.api` (the state
interfaces user functions see), :mod:`~rill.state.backend` (the keyed and operator state
backend interfaces), :mod:`~rill.state.checkpoint` (the snapshot record of one operator
subtask), :mod:`~rill.state.state_table` (per-state storage by key
group), :mod:`~rill.state.heap_states` (heap state objects), :mod:`~rill.state.heap`
(``HeapKeyedStateBackend``), :mod:`~rill.state.ttl` (``StateTtlConfig`` and the TTL states) and
:mod:`~rill.state.operator_state` (``DefaultOperatorStateBackend``, broadcast state,
redistribution on rescaling).
"""

from rill.state.api import (
    VOID_NAMESPACE,
    AggregatingState,
    AppendingState,
    InternalKvState,
    ListState,
    MapState,
    MergingState,
    ReducingState,
    State,
    ValueState,
    VoidNamespace,
)
from rill.state.backend import KeyedStateBackend, OperatorStateBackend
from rill.state.checkpoint import KeyedStateSnapshot, OperatorSubtaskState, TimerServiceSnapshot, TimersOfKeyGroup
from rill.state.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    StateType,
    ValueStateDescriptor,
)
from rill.state.heap import DEFAULT_KEY_GROUP_CACHE_SIZE, HeapKeyedStateBackend
from rill.state.heap_states import (
    AbstractHeapMergingState,
    AbstractHeapState,
    HeapAggregatingState,
    HeapListState,
    HeapMapState,
    HeapReducingState,
    HeapValueState,
)
from rill.state.key_groups import (
    DEFAULT_LOWER_BOUND_MAX_PARALLELISM,
    UPPER_BOUND_MAX_PARALLELISM,
    KeyGroupRange,
    UnsupportedKeyError,
    assign_key_to_parallel_operator,
    assign_to_key_group,
    check_parallelism_preconditions,
    compute_default_max_parallelism,
    compute_key_group_range_for_operator_index,
    compute_operator_index_for_key_group,
    stable_key_hash,
)
from rill.state.operator_state import (
    BroadcastState,
    DefaultOperatorStateBackend,
    HeapBroadcastState,
    OperatorStateMode,
    OperatorStateStore,
    PartitionableListState,
    ReadOnlyBroadcastState,
    ReadOnlyBroadcastStateView,
    redistribute,
)
from rill.state.state_table import StateTable
from rill.state.ttl import (
    AbstractTtlState,
    StateTtlConfig,
    TtlAggregatingState,
    TtlListState,
    TtlMapState,
    TtlReducingState,
    TtlValueState,
)

__all__ = [
    # key groups
    "UPPER_BOUND_MAX_PARALLELISM",
    "DEFAULT_LOWER_BOUND_MAX_PARALLELISM",
    "KeyGroupRange",
    "UnsupportedKeyError",
    "stable_key_hash",
    "assign_to_key_group",
    "assign_key_to_parallel_operator",
    "compute_key_group_range_for_operator_index",
    "compute_operator_index_for_key_group",
    "compute_default_max_parallelism",
    "check_parallelism_preconditions",
    # descriptors
    "StateType",
    "StateDescriptor",
    "ValueStateDescriptor",
    "ListStateDescriptor",
    "MapStateDescriptor",
    "ReducingStateDescriptor",
    "AggregatingStateDescriptor",
    # state interfaces
    "VoidNamespace",
    "VOID_NAMESPACE",
    "State",
    "ValueState",
    "AppendingState",
    "MergingState",
    "ListState",
    "ReducingState",
    "AggregatingState",
    "MapState",
    "InternalKvState",
    # backend interfaces and the snapshot record they meet in
    "KeyedStateBackend",
    "OperatorStateBackend",
    "OperatorSubtaskState",
    "KeyedStateSnapshot",
    "TimerServiceSnapshot",
    "TimersOfKeyGroup",
    # heap backend
    "StateTable",
    "AbstractHeapState",
    "AbstractHeapMergingState",
    "HeapValueState",
    "HeapListState",
    "HeapMapState",
    "HeapReducingState",
    "HeapAggregatingState",
    "HeapKeyedStateBackend",
    "DEFAULT_KEY_GROUP_CACHE_SIZE",
    # state TTL
    "StateTtlConfig",
    "AbstractTtlState",
    "TtlValueState",
    "TtlListState",
    "TtlMapState",
    "TtlReducingState",
    "TtlAggregatingState",
    # operator state
    "OperatorStateMode",
    "OperatorStateStore",
    "ReadOnlyBroadcastState",
    "BroadcastState",
    "PartitionableListState",
    "HeapBroadcastState",
    "ReadOnlyBroadcastStateView",
    "DefaultOperatorStateBackend",
    "redistribute",
]
