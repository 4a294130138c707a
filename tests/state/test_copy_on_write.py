"""rill.state.copy_on_write and StateTable.pin: a snapshot pins key groups in O(key groups),
the first access after it copies, and nothing written afterwards reaches the pinned dicts."""

from __future__ import annotations

import datetime
import decimal
import threading

import pytest

from rill.state import VOID_NAMESPACE, KeyGroupRange, StateTable, ValueStateDescriptor
from rill.state.copy_on_write import PinnedKeyGroup, all_immutable, copy_key_group, copy_state_value


class Box:
    def __init__(self, items):
        self.items = items

    def __eq__(self, other):
        return isinstance(other, Box) and self.items == other.items


@pytest.mark.parametrize("values, expected", [
    ([], True),
    ([1, 2.5, "s", b"b", None, True, decimal.Decimal("1.5"), datetime.date(2026, 1, 1)], True),
    ([("w", 1), ("v", 2)], True),
    ([("w", (1, ("deep", 2.0)))], True),
    ([1, ("w", 1)], True),
    ([("w", [1])], False),
    ([1, ("w", {})], False),
    ([[1]], False),
    ([{"a": 1}], False),
    ([Box([1])], False),
    ([frozenset({1})], False),  # not looked into: copied, which is always safe
])
def test_all_immutable(values, expected):
    assert all_immutable(values) is expected


def test_copy_state_value_shares_immutables_and_copies_the_rest_deeply():
    t = ("w", 1)
    assert copy_state_value(t) is t
    assert copy_state_value("s") == "s"
    nested = [1, [2, {"k": [3]}], ("t", [4]), Box([5])]
    copied = copy_state_value(nested)
    assert copied == nested
    assert copied is not nested and copied[1] is not nested[1] and copied[1][1]["k"] is not nested[1][1]["k"]
    assert copied[2][1] is not nested[2][1] and copied[3] is not nested[3] and copied[3].items is not nested[3].items
    flat = [1, 2, 3]
    assert copy_state_value(flat) == flat and copy_state_value(flat) is not flat


def test_copy_key_group_gives_new_dicts_and_shares_immutable_values():
    pinned = {VOID_NAMESPACE: {"a": ("a", 1), "b": 2}, "w": {"a": [1, 2]}}
    copied = copy_key_group(pinned)
    assert copied == pinned
    assert copied[VOID_NAMESPACE] is not pinned[VOID_NAMESPACE] and copied["w"] is not pinned["w"]
    assert copied[VOID_NAMESPACE]["a"] is pinned[VOID_NAMESPACE]["a"]
    assert copied["w"]["a"] is not pinned["w"]["a"]


@pytest.fixture
def table() -> StateTable:
    t = StateTable(ValueStateDescriptor("v"), KeyGroupRange(0, 3))
    t.put("a", 0, VOID_NAMESPACE, [1])
    t.put("b", 0, VOID_NAMESPACE, [2])
    t.put("c", 2, "w", {"x": 1})
    return t


def test_pin_keeps_the_dicts_and_leaves_placeholders_in_non_empty_slots(table):
    slots = list(table.key_group_maps)
    pinned = table.pin()
    assert pinned == [{VOID_NAMESPACE: {"a": [1], "b": [2]}}, None, {"w": {"c": {"x": 1}}}, None]
    assert pinned[0] is slots[0] and pinned[2] is slots[2]
    assert [type(s) for s in table.key_group_maps] == [PinnedKeyGroup, dict, PinnedKeyGroup, dict]
    assert table.pins == 1 and table.has_pinned()
    # reads that hand nothing out do not copy
    assert table.size() == 3 and table.size_of_namespace("w") == 1 and not table.is_empty()
    assert list(table.iter_key_group(0)) == [("a", VOID_NAMESPACE, [1]), ("b", VOID_NAMESPACE, [2])]
    assert list(table.get_keys(VOID_NAMESPACE)) == ["a", "b"]
    assert table.key_group_maps == [{VOID_NAMESPACE: {"a": [1], "b": [2]}}, {}, {"w": {"c": {"x": 1}}}, {}]
    assert [type(s) for s in table.key_group_maps] == [PinnedKeyGroup, dict, PinnedKeyGroup, dict]


def test_the_first_access_copies_and_later_writes_do_not_reach_the_pinned_dicts(table):
    pinned = table.pin()
    table.get("a", 0, VOID_NAMESPACE).append(99)         # a read hands out a stored list: copied first
    table.put("b", 0, VOID_NAMESPACE, [3])
    table.put("d", 0, "w2", [4])
    table.remove("c", 2, "w")
    table.put("e", 1, VOID_NAMESPACE, [5])               # an empty slot was not pinned: written in place
    assert pinned == [{VOID_NAMESPACE: {"a": [1], "b": [2]}}, None, {"w": {"c": {"x": 1}}}, None]
    assert table.key_group_maps == [{VOID_NAMESPACE: {"a": [1, 99], "b": [3]}, "w2": {"d": [4]}},
                                     {VOID_NAMESPACE: {"e": [5]}}, {}, {}]
    assert all(type(s) is dict for s in table.key_group_maps) and not table.has_pinned()


def test_a_placeholder_forwards_every_dict_operation_to_the_live_copy(table):
    pinned = table.pin()[0]
    held = table.key_group_maps[0]  # as a fast path holds it within one batch
    assert held.get(VOID_NAMESPACE) == {"a": [1], "b": [2]}
    live = table.key_group_maps[0]
    assert type(live) is dict and live is not pinned
    held["w"] = {"x": 1}
    assert held.setdefault("w", None) == {"x": 1} and held.pop("w") == {"x": 1}
    held.update({"u": {"y": 2}})
    del held["u"]
    assert "w" not in held and VOID_NAMESPACE in held and len(held) == 1 and list(held) == [VOID_NAMESPACE]
    assert list(held.items()) == list(live.items()) and list(held.values()) == list(live.values())
    assert held.copy() == live and held == live and list(held.keys()) == [VOID_NAMESPACE]
    assert pinned == {VOID_NAMESPACE: {"a": [1], "b": [2]}}


def test_a_stale_placeholder_follows_the_slot_through_a_newer_snapshot(table):
    first = table.pin()[0]
    held = table.key_group_maps[0]
    held.get(VOID_NAMESPACE)            # copied into the slot
    second = table.pin()[0]             # pins that copy
    held[VOID_NAMESPACE]["z"] = [7]     # through the stale placeholder: copies again
    assert first == second == {VOID_NAMESPACE: {"a": [1], "b": [2]}}
    assert table.get("z", 0, VOID_NAMESPACE) == [7]


def test_a_second_pin_without_access_shares_the_pinned_dict(table):
    first = table.pin()
    second = table.pin()
    assert first[0] is second[0] and first[2] is second[2] and table.pins == 2


def test_clear_and_unpin(table):
    pinned = table.pin()
    table.unpin()
    assert all(type(s) is dict for s in table.key_group_maps) and table.key_group_maps[0] is not pinned[0]
    pinned = table.pin()
    table.clear()
    assert table.is_empty() and pinned[0] == {VOID_NAMESPACE: {"a": [1], "b": [2]}}


def test_pinned_dicts_can_be_read_on_another_thread_while_the_task_writes():
    table = StateTable(ValueStateDescriptor("v"), KeyGroupRange(0, 127))
    keys = range(20_000)
    for k in keys:
        table.put(k, k % 128, VOID_NAMESPACE, [k])
    pinned = table.pin()
    read = {}

    def reader():
        for by_namespace in pinned:
            for by_key in (by_namespace or {}).values():
                read.update((k, list(v)) for k, v in by_key.items())

    thread = threading.Thread(target=reader)
    thread.start()
    for k in keys:
        table.get(k, k % 128, VOID_NAMESPACE).append(-1)
        table.put(k + 100_000, k % 128, VOID_NAMESPACE, [0])
    thread.join()
    assert read == {k: [k] for k in keys}
    assert table.get(5, 5, VOID_NAMESPACE) == [5, -1] and table.size() == 40_000
