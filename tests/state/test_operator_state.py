"""Operator state: DefaultOperatorStateBackend (split and union list state, broadcast state,
read-only view), its snapshot shape, restore, and redistribution as Flink's
RoundRobinOperatorStateRepartitioner (1→3, 3→2, 2→2, 2→1)."""

from __future__ import annotations

import inspect

import pytest

from rill.state import (
    BroadcastState,
    DefaultOperatorStateBackend,
    ListState,
    ListStateDescriptor,
    MapStateDescriptor,
    OperatorStateMode,
    ReadOnlyBroadcastState,
    StateTtlConfig,
    ValueStateDescriptor,
    redistribute,
)

SPLIT, UNION, BROADCAST = "SPLIT_DISTRIBUTE", "UNION", "BROADCAST"


@pytest.fixture
def backend() -> DefaultOperatorStateBackend:
    return DefaultOperatorStateBackend("Map")


# -- the backend --------------------------------------------------------------------------------

def test_list_states(backend):
    split = backend.get_list_state(ListStateDescriptor("split"))
    union = backend.get_union_list_state(ListStateDescriptor("union"))
    assert isinstance(split, ListState) and isinstance(union, ListState)
    assert backend.get_list_state(ListStateDescriptor("split")) is split
    assert split.get() == []
    split.add(1)
    split.add_all([2, 3])
    assert split.get() == [1, 2, 3]
    split.get().append(99)  # get() returns a copy
    assert split.get() == [1, 2, 3]
    split.update([4])
    assert split.get() == [4]
    union.add("u")
    split.clear()
    assert split.get() == []
    assert backend.get_registered_state_names() == ["split", "union"]


def test_list_state_errors(backend):
    split = backend.get_list_state(ListStateDescriptor("split"))
    with pytest.raises(ValueError, match=r"^You cannot add null to a ListState. \(operator state 'split'\)$"):
        split.add(None)
    split.add(1)
    with pytest.raises(ValueError, match=r"element 1\)$"):
        split.update([2, None])
    with pytest.raises(ValueError, match="^List of values to add cannot be null"):
        split.add_all(None)
    assert split.get() == [1]
    with pytest.raises(ValueError, match=r"^Incompatible state assignment modes of operator state 'split'. "
                                         r"Was \[UNION\], registered with \[SPLIT_DISTRIBUTE\]. \(operator 'Map'\)$"):
        backend.get_union_list_state(ListStateDescriptor("split"))
    with pytest.raises(TypeError, match=r"^get_list_state expects a ListStateDescriptor, got "
                                        r"ValueStateDescriptor\(name='v'\) of type ValueStateDescriptor \(operator 'Map'\)$"):
        backend.get_list_state(ValueStateDescriptor("v"))
    with pytest.raises(ValueError, match=r"registered as a SPLIT_DISTRIBUTE list state; it cannot be accessed as a "
                                         r"broadcast state"):
        backend.get_broadcast_state(MapStateDescriptor("split"))
    with_ttl = ListStateDescriptor("ttl")
    with_ttl.enable_time_to_live(StateTtlConfig.new_builder(10).build())
    with pytest.raises(ValueError, match="^State TTL is only supported for keyed state, not for operator state 'ttl'"):
        backend.get_list_state(with_ttl)


def test_broadcast_state_and_read_only_view(backend):
    state = backend.get_broadcast_state(MapStateDescriptor("rules"))
    assert isinstance(state, BroadcastState)
    view = backend.get_read_only_broadcast_state(MapStateDescriptor("rules"))
    assert isinstance(view, ReadOnlyBroadcastState) and not isinstance(view, BroadcastState)
    assert view.is_empty()
    state.put("a", 1)
    state["b"] = 2
    state.put_all({"c": 3})
    del state["c"]
    state.remove("absent")
    assert view.get("a") == 1 and view["b"] == 2 and view.get("c") is None
    assert view.contains("a") and "b" in view and "c" not in view
    assert view.items() == [("a", 1), ("b", 2)] and view.keys() == ["a", "b"] and view.values() == [1, 2]
    assert list(view) == ["a", "b"] and not view.is_empty()
    assert not hasattr(view, "put") and not hasattr(view, "remove")
    with pytest.raises(TypeError, match="^Broadcast state 'rules' is read-only"):
        view.clear()
    with pytest.raises(TypeError, match="^get_broadcast_state expects a MapStateDescriptor"):
        backend.get_broadcast_state(ListStateDescriptor("rules"))
    with pytest.raises(ValueError, match="registered as a broadcast state"):
        backend.get_list_state(ListStateDescriptor("rules"))
    assert backend.get_registered_broadcast_state_names() == ["rules"]
    state.clear()
    assert view.is_empty()


def test_snapshot_shape_is_plain_and_copied(backend):
    backend.get_list_state(ListStateDescriptor("split")).add_all([1, 2])
    backend.get_union_list_state(ListStateDescriptor("union")).add("u")
    backend.get_list_state(ListStateDescriptor("empty"))
    backend.get_broadcast_state(MapStateDescriptor("rules")).put("k", {"v": 1})
    snapshot = backend.snapshot()
    assert snapshot == {
        "split": (SPLIT, [1, 2]),
        "union": (UNION, ["u"]),
        "empty": (SPLIT, []),
        "rules": (BROADCAST, [("k", {"v": 1})]),
    }
    backend.get_list_state(ListStateDescriptor("split")).add(3)
    backend.get_broadcast_state(MapStateDescriptor("rules")).put("k2", 2)
    assert snapshot["split"] == (SPLIT, [1, 2]) and snapshot["rules"] == (BROADCAST, [("k", {"v": 1})])
    assert DefaultOperatorStateBackend().snapshot() == {}


def test_restore_registers_states(backend):
    backend.restore({"split": (SPLIT, [1, 2]), "union": ("UNION", ["u"]), "rules": (BROADCAST, [["k", 1]])})
    assert backend.get_list_state(ListStateDescriptor("split")).get() == [1, 2]
    assert backend.get_union_list_state(ListStateDescriptor("union")).get() == ["u"]
    assert backend.get_broadcast_state(MapStateDescriptor("rules")).items() == [("k", 1)]
    backend.restore({"split": (OperatorStateMode.SPLIT_DISTRIBUTE, [3])})  # appends, as Flink with several handles
    assert backend.get_list_state(ListStateDescriptor("split")).get() == [1, 2, 3]


def test_restore_errors_load_nothing(backend):
    backend.get_list_state(ListStateDescriptor("split"))
    with pytest.raises(ValueError, match=r"^Incompatible state assignment modes of operator state 'split'. "
                                         r"Was \[UNION\], registered with \[SPLIT_DISTRIBUTE\]"):
        backend.restore({"other": (SPLIT, [1]), "split": (UNION, [1])})
    with pytest.raises(ValueError, match=r"^Operator state 'x' has unknown redistribution mode 'RANDOM'"):
        backend.restore({"x": ("RANDOM", [])})
    with pytest.raises(ValueError, match=r"^Broadcast state 'b': entry 1 is not a \(key, value\) pair$"):
        backend.restore({"b": (BROADCAST, [1])})
    assert backend.get_registered_state_names() == ["split"]
    assert backend.get_registered_broadcast_state_names() == []


# -- redistribution -----------------------------------------------------------------------------

def test_redistribute_1_to_3():
    old = [{
        "a": (SPLIT, [0, 1, 2, 3, 4, 5, 6]),
        "b": (SPLIT, [10, 11, 12, 13, 14, 15, 16]),
        "u": (UNION, ["x", "y"]),
        "r": (BROADCAST, [("k", 1)]),
    }]
    new = redistribute(old, 3)
    assert new == [
        # "a" starts at subtask 0: chunks 3, 2, 2; subtask 1 got the first smaller chunk,
        # so "b" starts there: chunks 3 (subtask 1), 2 (subtask 2), 2 (subtask 0)
        {"a": (SPLIT, [0, 1, 2]), "b": (SPLIT, [15, 16]), "r": (BROADCAST, [("k", 1)]), "u": (UNION, ["x", "y"])},
        {"a": (SPLIT, [3, 4]), "b": (SPLIT, [10, 11, 12]), "r": (BROADCAST, [("k", 1)]), "u": (UNION, ["x", "y"])},
        {"a": (SPLIT, [5, 6]), "b": (SPLIT, [13, 14]), "r": (BROADCAST, [("k", 1)]), "u": (UNION, ["x", "y"])},
    ]
    assert new[0]["r"][1] is not new[1]["r"][1]  # every subtask gets its own list


def test_redistribute_3_to_2():
    old = [
        {"s": (SPLIT, ["a0", "a1"]), "u": (UNION, ["ua"]), "r": (BROADCAST, [("copy", 0)])},
        {"s": (SPLIT, ["b0"]), "u": (UNION, []), "r": (BROADCAST, [("copy", 1)])},
        {"s": (SPLIT, ["c0", "c1", "c2"]), "u": (UNION, ["uc1", "uc2"]), "r": (BROADCAST, [("copy", 2)])},
    ]
    assert redistribute(old, 2) == [
        {"s": (SPLIT, ["a0", "a1", "b0"]), "u": (UNION, ["ua", "uc1", "uc2"]), "r": (BROADCAST, [("copy", 0)])},
        {"s": (SPLIT, ["c0", "c1", "c2"]), "u": (UNION, ["ua", "uc1", "uc2"]), "r": (BROADCAST, [("copy", 1)])},
    ]


def test_redistribute_2_to_2_keeps_split_state_in_place():
    old = [
        {"s": (SPLIT, [1, 2, 3]), "u": (UNION, ["u0"]), "r": (BROADCAST, [("copy", 0)])},
        {"s": (SPLIT, [4]), "u": (UNION, ["u1"]), "r": (BROADCAST, [("copy", 1)])},
    ]
    assert redistribute(old, 2) == [
        {"s": (SPLIT, [1, 2, 3]), "u": (UNION, ["u0", "u1"]), "r": (BROADCAST, [("copy", 0)])},
        {"s": (SPLIT, [4]), "u": (UNION, ["u0", "u1"]), "r": (BROADCAST, [("copy", 1)])},
    ]


def test_redistribute_2_to_1_and_missing_states():
    old = [{"s": (SPLIT, [1, 2]), "only0": (SPLIT, ["x"])}, None]
    assert redistribute(old, 1) == [{"s": (SPLIT, [1, 2]), "only0": (SPLIT, ["x"])}]
    old = [{"r": (BROADCAST, [("k", 0)])}, {}, {"r": (BROADCAST, [("k", 2)])}]
    # broadcast copies come from the old subtasks that hold the state, round robin
    assert [s["r"][1] for s in redistribute(old, 4)] == [[("k", 0)], [("k", 2)], [("k", 0)], [("k", 2)]]
    assert redistribute([{"s": (SPLIT, [1])}], 3) == [{"s": (SPLIT, [1])}, {"s": (SPLIT, [])}, {"s": (SPLIT, [])}]


def test_redistribute_errors():
    with pytest.raises(ValueError, match="^new_parallelism must be an int >= 1, got 0$"):
        redistribute([{}], 0)
    with pytest.raises(ValueError, match="^redistribute\\(\\) needs the snapshots of at least one old subtask$"):
        redistribute([], 2)
    with pytest.raises(ValueError, match="^Operator state 's' has mode SPLIT_DISTRIBUTE in one snapshot and UNION "
                                         "in that of old subtask 1$"):
        redistribute([{"s": (SPLIT, [])}, {"s": (UNION, [])}], 2)


def test_snapshot_redistribute_restore_round_trip():
    olds = []
    for subtask in range(2):
        backend = DefaultOperatorStateBackend()
        backend.get_list_state(ListStateDescriptor("offsets")).add_all([f"{subtask}-{i}" for i in range(3)])
        backend.get_union_list_state(ListStateDescriptor("seen")).add(subtask)
        backend.get_broadcast_state(MapStateDescriptor("rules")).put("r", "same")
        olds.append(backend.snapshot())
    restored = []
    for share in redistribute(olds, 3):
        backend = DefaultOperatorStateBackend()
        backend.restore(share)
        restored.append((
            backend.get_list_state(ListStateDescriptor("offsets")).get(),
            backend.get_union_list_state(ListStateDescriptor("seen")).get(),
            backend.get_broadcast_state(MapStateDescriptor("rules")).items(),
        ))
    assert restored == [
        (["0-0", "0-1"], [0, 1], [("r", "same")]),
        (["0-2", "1-0"], [0, 1], [("r", "same")]),
        (["1-1", "1-2"], [0, 1], [("r", "same")]),
    ]


def test_public_classes_are_documented():
    import rill.state.operator_state as module

    for name in module.__all__:
        obj = getattr(module, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), name
        if inspect.isclass(obj):
            for attr in dir(obj):
                member = inspect.getattr_static(obj, attr)
                if not attr.startswith("_") and callable(member) and not isinstance(member, type):
                    assert inspect.getdoc(getattr(obj, attr)), f"{name}.{attr}"
