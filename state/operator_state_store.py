"""The interfaces of operator state (Flink's ``OperatorStateStore``, PyFlink's
``BroadcastState`` / ``ReadOnlyBroadcastState``): where a function registers operator state and
what broadcast state offers. The implementations are in :mod:`rill.state.operator_state`."""

from __future__ import annotations

import abc
from typing import List

from rill.state.api import ListState, _ReadableMap, _WritableMap
from rill.state.descriptors import ListStateDescriptor, MapStateDescriptor

__all__ = ["OperatorStateStore", "ReadOnlyBroadcastState", "BroadcastState"]


class OperatorStateStore(abc.ABC):
    """Where a function registers operator state (Flink's ``OperatorStateStore``)."""

    @abc.abstractmethod
    def get_list_state(self, state_descriptor: ListStateDescriptor) -> ListState:
        """The ``SPLIT_DISTRIBUTE`` list state of ``state_descriptor``, created on first use."""

    @abc.abstractmethod
    def get_union_list_state(self, state_descriptor: ListStateDescriptor) -> ListState:
        """The ``UNION`` list state of ``state_descriptor``, created on first use."""

    @abc.abstractmethod
    def get_broadcast_state(self, state_descriptor: MapStateDescriptor) -> "BroadcastState":
        """The broadcast state of ``state_descriptor``, created on first use."""

    @abc.abstractmethod
    def get_registered_state_names(self) -> List[str]:
        """Names of the registered list states (split and union)."""

    @abc.abstractmethod
    def get_registered_broadcast_state_names(self) -> List[str]:
        """Names of the registered broadcast states."""


class ReadOnlyBroadcastState(_ReadableMap):
    """Read access to a broadcast state (PyFlink's ``ReadOnlyBroadcastState``): what the
    non-broadcast side of a broadcast operator sees. Do not modify returned values.

    ``get``, ``contains``, ``items``, ``keys``, ``values``, ``is_empty``, ``[key]``, ``in`` and
    iteration (over the keys) come from the shared map interface in :mod:`rill.state.api`."""

    __slots__ = ()


class BroadcastState(ReadOnlyBroadcastState, _WritableMap):
    """A map that every subtask of an operator holds identically (PyFlink's ``BroadcastState``).
    The user must guarantee that all subtasks store the same mappings: on restore each new
    subtask gets the copy of one old subtask.

    Adds ``put``, ``put_all``, ``remove``, ``[key] = value`` and ``del [key]``."""

    __slots__ = ()
