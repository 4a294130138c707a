"""StateTable: the per-key-group layout and its methods."""

from __future__ import annotations

import pytest

from rill.state import VOID_NAMESPACE, KeyGroupRange, StateTable, ValueStateDescriptor


@pytest.fixture
def table() -> StateTable:
    return StateTable(ValueStateDescriptor("v"), KeyGroupRange(10, 13))


def test_layout(table):
    assert table.name == "v"
    assert table.key_group_maps == [{}, {}, {}, {}]
    table.put("a", 10, VOID_NAMESPACE, 1)
    table.put("b", 10, VOID_NAMESPACE, 2)
    table.put("a", 12, "w", 3)
    assert table.key_group_maps == [{VOID_NAMESPACE: {"a": 1, "b": 2}}, {}, {"w": {"a": 3}}, {}]
    assert table.size() == 3
    assert table.size_of_namespace(VOID_NAMESPACE) == 2


def test_get_put_remove(table):
    assert table.get("a", 11, VOID_NAMESPACE) is None
    table.put("a", 11, VOID_NAMESPACE, "x")
    assert table.get("a", 11, VOID_NAMESPACE) == "x"
    assert table.contains_key("a", 11, VOID_NAMESPACE)
    assert table.get("a", 11, "other") is None
    assert table.remove("a", 11, VOID_NAMESPACE) == "x"
    assert table.remove("a", 11, VOID_NAMESPACE) is None
    assert table.key_group_maps[1] == {}
    table.put("a", 11, VOID_NAMESPACE, "y")
    table.put("a", 11, VOID_NAMESPACE, None)
    assert table.is_empty()


def test_iteration_per_key_group(table):
    table.put("a", 10, "w1", 1)
    table.put("b", 10, "w2", 2)
    table.put("c", 13, "w1", 3)
    assert list(table.iter_key_group(10)) == [("a", "w1", 1), ("b", "w2", 2)]
    assert list(table.iter_key_group(11)) == []
    assert list(table.iter_key_group(13)) == [("c", "w1", 3)]
    assert list(table) == [("a", "w1", 1), ("b", "w2", 2), ("c", "w1", 3)]
    assert list(table.get_keys("w1")) == ["a", "c"]


@pytest.mark.parametrize("key_group", [9, 14, -1])
def test_key_group_outside_range(table, key_group):
    message = rf"^Key group {key_group} is not in KeyGroupRange\{{startKeyGroup=10, endKeyGroup=13\}}\.$"
    with pytest.raises(ValueError, match=message):
        table.get("a", key_group, VOID_NAMESPACE)
    with pytest.raises(ValueError, match=message):
        table.put("a", key_group, VOID_NAMESPACE, 1)
    with pytest.raises(ValueError, match=message):
        list(table.iter_key_group(key_group))


def test_clear_keeps_slots(table):
    slot = table.key_group_maps[0]
    table.put("a", 10, VOID_NAMESPACE, 1)
    table.clear()
    assert table.is_empty() and table.key_group_maps[0] is slot
