"""The public surface of rill.state: every name in __all__ exists and is documented, and the
state kinds implement PyFlink's interfaces."""

from __future__ import annotations

import inspect
import pickle

import rill.state
from rill.state import VOID_NAMESPACE, VoidNamespace

EXPECTED = {
    "HeapKeyedStateBackend", "StateTable", "KeyGroupRange", "UnsupportedKeyError",
    "ValueStateDescriptor", "ListStateDescriptor", "MapStateDescriptor", "ReducingStateDescriptor",
    "AggregatingStateDescriptor", "StateDescriptor", "ValueState", "ListState", "MapState",
    "ReducingState", "AggregatingState", "VOID_NAMESPACE", "assign_to_key_group", "stable_key_hash",
    "compute_key_group_range_for_operator_index", "compute_operator_index_for_key_group",
    "compute_default_max_parallelism",
}


def test_all_names_exist_and_are_documented():
    assert EXPECTED <= set(rill.state.__all__)
    assert len(rill.state.__all__) == len(set(rill.state.__all__))
    for name in rill.state.__all__:
        obj = getattr(rill.state, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), name


def test_public_methods_are_documented():
    for name in ("HeapKeyedStateBackend", "StateTable", "HeapValueState", "HeapListState",
                 "HeapMapState", "HeapReducingState", "HeapAggregatingState", "ValueStateDescriptor",
                 "ListStateDescriptor", "MapStateDescriptor", "ReducingStateDescriptor",
                 "AggregatingStateDescriptor"):
        cls = getattr(rill.state, name)
        for attr in dir(cls):
            member = inspect.getattr_static(cls, attr)
            if not attr.startswith("_") and (callable(member) or isinstance(member, property)):
                assert inspect.getdoc(getattr(cls, attr) if callable(member) else member), f"{name}.{attr}"


def test_void_namespace_is_a_singleton():
    assert VoidNamespace() is VOID_NAMESPACE
    assert pickle.loads(pickle.dumps(VOID_NAMESPACE)) is VOID_NAMESPACE
    assert repr(VOID_NAMESPACE) == "VoidNamespace"
