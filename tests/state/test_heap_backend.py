"""Conformance suite for keyed state on HeapKeyedStateBackend, run on every state kind, plus
the backend's key context, registration errors and whole-backend operations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import pytest

from rill.datastream.functions import AggregateFunction, ReduceFunction
from rill.state import (
    VOID_NAMESPACE,
    AggregatingState,
    AggregatingStateDescriptor,
    HeapKeyedStateBackend,
    KeyGroupRange,
    ListState,
    ListStateDescriptor,
    MapState,
    MapStateDescriptor,
    ReducingState,
    ReducingStateDescriptor,
    UnsupportedKeyError,
    ValueState,
    ValueStateDescriptor,
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
)

MAX_PARALLELISM = 128


# -- user functions -------------------------------------------------------------------------

class SumReduce(ReduceFunction):
    def reduce(self, value1, value2):
        return value1 + value2


class AverageAggregate(AggregateFunction):
    """Accumulator (sum, count); result sum / count."""

    def create_accumulator(self):
        return (0, 0)

    def add(self, value, accumulator):
        return (accumulator[0] + value, accumulator[1] + 1)

    def get_result(self, accumulator):
        return accumulator[0] / accumulator[1]

    def merge(self, acc_a, acc_b):
        return (acc_a[0] + acc_b[0], acc_a[1] + acc_b[1])


class DuckTypedMaxAggregate:
    """Not an AggregateFunction subclass; accumulator is a one-element list."""

    def create_accumulator(self):
        return [float("-inf")]

    def add(self, value, accumulator):
        return [max(accumulator[0], value)]

    def get_result(self, accumulator):
        return ("max", accumulator[0])


# -- the kinds under test ---------------------------------------------------------------------

@dataclass(frozen=True)
class Kind:
    """How to write one int into a state kind and what reading it back must give."""

    id: str
    make: Callable[[str], Any]
    interface: type
    write: Callable[[Any, int], None]
    read: Callable[[Any], Any]
    expected: Callable[[int], Any]
    empty: Any


def _map_write(state, i):
    state.put(f"u{i}", i)


KINDS = [
    Kind("value", lambda n: ValueStateDescriptor(n), ValueState,
         lambda s, i: s.update(i), lambda s: s.value(), lambda i: i, None),
    Kind("list", lambda n: ListStateDescriptor(n), ListState,
         lambda s, i: s.add(i), lambda s: list(s.get()), lambda i: [i], []),
    Kind("map", lambda n: MapStateDescriptor(n), MapState,
         _map_write, lambda s: dict(s.items()), lambda i: {f"u{i}": i}, {}),
    Kind("reducing-callable", lambda n: ReducingStateDescriptor(n, lambda a, b: a + b), ReducingState,
         lambda s, i: s.add(i), lambda s: s.get(), lambda i: i, None),
    Kind("reducing-function", lambda n: ReducingStateDescriptor(n, SumReduce()), ReducingState,
         lambda s, i: s.add(i), lambda s: s.get(), lambda i: i, None),
    Kind("aggregating-function", lambda n: AggregatingStateDescriptor(n, AverageAggregate()),
         AggregatingState, lambda s, i: s.add(i), lambda s: s.get(), lambda i: float(i), None),
    Kind("aggregating-duck", lambda n: AggregatingStateDescriptor(n, DuckTypedMaxAggregate()),
         AggregatingState, lambda s, i: s.add(i), lambda s: s.get(), lambda i: ("max", i), None),
]


@pytest.fixture(params=KINDS, ids=[k.id for k in KINDS])
def kind(request) -> Kind:
    return request.param


@pytest.fixture
def backend() -> HeapKeyedStateBackend:
    return HeapKeyedStateBackend(KeyGroupRange(0, MAX_PARALLELISM - 1), MAX_PARALLELISM)


KEYS = ["a", "b", "hello", 0, 1, 42, -7, None, ("a", 1), b"xy", 1.5] + [f"key-{i}" for i in range(40)]


# -- conformance: every kind --------------------------------------------------------------------

def test_state_implements_its_interface(backend, kind):
    state = backend.get_or_create_keyed_state(kind.make("s"))
    assert isinstance(state, kind.interface)
    assert state.get_current_namespace() is VOID_NAMESPACE


def test_empty_entry_reads_as_empty(backend, kind):
    state = backend.get_or_create_keyed_state(kind.make("s"))
    backend.set_current_key("nobody")
    assert kind.read(state) == kind.empty


def test_set_get_clear_one_key(backend, kind):
    state = backend.get_or_create_keyed_state(kind.make("s"))
    backend.set_current_key("a")
    kind.write(state, 5)
    assert kind.read(state) == kind.expected(5)
    assert backend.num_key_value_state_entries() == 1
    state.clear()
    assert kind.read(state) == kind.empty
    assert backend.num_key_value_state_entries() == 0
    state.clear()  # clearing an absent entry is a no-op
    assert kind.read(state) == kind.empty


def test_keys_are_isolated(backend, kind):
    state = backend.get_or_create_keyed_state(kind.make("s"))
    for i, key in enumerate(KEYS):
        backend.set_current_key(key)
        kind.write(state, i)
    for i, key in enumerate(KEYS):
        backend.set_current_key(key)
        assert kind.read(state) == kind.expected(i), key
    backend.set_current_key("a")
    state.clear()
    assert kind.read(state) == kind.empty
    backend.set_current_key("b")
    assert kind.read(state) == kind.expected(KEYS.index("b"))
    assert backend.num_key_value_state_entries() == len(KEYS) - 1


def test_namespaces_are_isolated(backend, kind):
    descriptor = kind.make("s")
    state = backend.get_partitioned_state("window-1", descriptor)
    assert state.get_current_namespace() == "window-1"
    backend.set_current_key("k")
    kind.write(state, 1)
    state.set_current_namespace(("window", 2))
    assert kind.read(state) == kind.empty
    kind.write(state, 2)
    assert kind.read(state) == kind.expected(2)
    state.set_current_namespace("window-1")
    assert kind.read(state) == kind.expected(1)
    same = backend.get_or_create_keyed_state(descriptor)
    assert same is state and state.get_current_namespace() is VOID_NAMESPACE
    assert kind.read(state) == kind.empty
    assert backend.num_key_value_state_entries() == 2
    assert backend.num_key_value_state_entries("window-1") == 1
    assert list(backend.get_keys("s", ("window", 2))) == ["k"]
    assert list(backend.get_keys("s", VOID_NAMESPACE)) == []


@pytest.mark.parametrize("subtask", [0, 3])
def test_entries_land_in_their_key_group_slot(kind, subtask):
    key_group_range = compute_key_group_range_for_operator_index(MAX_PARALLELISM, 4, subtask)
    backend = HeapKeyedStateBackend(key_group_range, MAX_PARALLELISM)
    state = backend.get_or_create_keyed_state(kind.make("s"))
    mine = [k for k in (f"user-{i}" for i in range(400))
            if key_group_range.contains(assign_to_key_group(k, MAX_PARALLELISM))]
    assert len(mine) > 50
    for i, key in enumerate(mine):
        backend.set_current_key(key)
        kind.write(state, i)
        assert backend.get_current_key_group_index() == assign_to_key_group(key, MAX_PARALLELISM)
    maps = backend.get_state_table("s").key_group_maps
    assert len(maps) == 32
    for i, key in enumerate(mine):
        offset = assign_to_key_group(key, MAX_PARALLELISM) - key_group_range.start_key_group
        for slot, by_namespace in enumerate(maps):
            present = key in by_namespace.get(VOID_NAMESPACE, {})
            assert present == (slot == offset), (key, slot)
        backend.set_current_key(key)
        assert kind.read(state) == kind.expected(i)


def test_clear_leaves_no_empty_containers(backend, kind):
    state = backend.get_partitioned_state("w", kind.make("s"))
    for key in KEYS:
        backend.set_current_key(key)
        kind.write(state, 1)
        state.clear()
    assert all(by_namespace == {} for by_namespace in backend.get_state_table("s").key_group_maps)
    assert backend.get_state_table("s").is_empty()


def test_same_name_returns_same_object(backend, kind):
    first = backend.get_or_create_keyed_state(kind.make("s"))
    second = backend.get_or_create_keyed_state(kind.make("s"))
    third = backend.get_partitioned_state("n", kind.make("s"))
    assert first is second is third
    assert backend.get_registered_state_names() == ["s"]


@pytest.mark.parametrize("other", KINDS, ids=[k.id for k in KINDS])
def test_reregistering_with_another_kind_fails(backend, kind, other):
    registered = kind.make("s")
    backend.get_or_create_keyed_state(registered)
    again = other.make("s")
    if again.state_type is registered.state_type:
        assert backend.get_or_create_keyed_state(again) is backend.get_or_create_keyed_state(registered)
        return
    with pytest.raises(ValueError) as info:
        backend.get_or_create_keyed_state(again)
    assert str(info.value) == (
        f"State 's' is registered as a {registered.state_type.name} state "
        f"({type(registered).__name__}); it cannot be accessed as a "
        f"{again.state_type.name} state ({type(again).__name__})"
    )


def test_access_without_key_fails(backend, kind):
    state = backend.get_or_create_keyed_state(kind.make("s"))
    with pytest.raises(RuntimeError, match="^No key set. This method should not be called outside of a keyed context.$"):
        kind.read(state)
    with pytest.raises(RuntimeError, match="^No key set"):
        kind.write(state, 1)
    with pytest.raises(RuntimeError, match="^No key set"):
        state.clear()


def test_unhashable_namespace_fails(backend, kind):
    with pytest.raises(TypeError, match=r"^Namespace \[1\] of type list is unhashable \(state 's'\)$"):
        backend.get_partitioned_state([1], kind.make("s"))
    state = backend.get_or_create_keyed_state(kind.make("s"))
    backend.set_current_key("k")
    state.set_current_namespace({"w": 1})
    with pytest.raises(TypeError, match=r"^State 's': namespace \{'w': 1\} of type dict is unhashable$"):
        kind.read(state)



def test_get_keys_and_apply_to_all_keys(backend, kind):
    descriptor = kind.make("s")
    state = backend.get_partitioned_state("w", descriptor)
    for i, key in enumerate(KEYS):
        backend.set_current_key(key)
        kind.write(state, i)
    backend.set_current_key("outside")
    assert sorted(map(repr, backend.get_keys("s", "w"))) == sorted(map(repr, KEYS))
    assert list(backend.get_keys("s", "other")) == []
    assert list(backend.get_keys("unknown", "w")) == []

    seen = {}

    def visit(key, st):
        assert backend.get_current_key() == key
        seen[repr(key)] = kind.read(st)
        if key in ("a", "b"):
            st.clear()

    state.set_current_namespace("elsewhere")
    backend.apply_to_all_keys("w", descriptor, visit)
    assert seen == {repr(k): kind.expected(i) for i, k in enumerate(KEYS)}
    assert backend.get_current_key() == "outside"
    assert state.get_current_namespace() == "elsewhere"
    assert backend.num_key_value_state_entries("w") == len(KEYS) - 2


# -- the key context -------------------------------------------------------------------------

@pytest.mark.parametrize("key", [[1, 2], {"a": 1}, {1}, ("ok", [1]), bytearray(b"x"), object()])
def test_unsupported_key_is_rejected_and_previous_key_kept(backend, key):
    backend.set_current_key("previous")
    with pytest.raises(UnsupportedKeyError):
        backend.set_current_key(key)
    assert backend.get_current_key() == "previous"
    assert backend.get_current_key_group_index() == assign_to_key_group("previous", MAX_PARALLELISM)


def test_list_key_error_message(backend):
    with pytest.raises(UnsupportedKeyError, match="^key of type list is unhashable$"):
        backend.set_current_key([1, 2])


def test_key_outside_range_is_rejected():
    backend = HeapKeyedStateBackend(KeyGroupRange(0, 63), MAX_PARALLELISM)
    assert assign_to_key_group("hello", MAX_PARALLELISM) == 114
    backend.set_current_key("a")
    with pytest.raises(ValueError) as info:
        backend.set_current_key("hello")
    assert str(info.value) == (
        "Key group 114 is not in KeyGroupRange{startKeyGroup=0, endKeyGroup=63}. Unless you're "
        "directly using low level state access APIs, this is most likely caused by "
        "non-deterministic shuffle key (hashCode and equals implementation)."
    )
    assert backend.get_current_key() == "a"


def test_equal_keys_share_state(backend):
    state = backend.get_or_create_keyed_state(ValueStateDescriptor("v"))
    backend.set_current_key(1)
    state.update("one")
    for key in (1.0, True):
        backend.set_current_key(key)
        assert state.value() == "one"
        assert backend.get_current_key_group_index() == 52


def test_key_group_cache_is_bounded():
    backend = HeapKeyedStateBackend(KeyGroupRange(0, 127), 128, key_group_cache_size=3)
    state = backend.get_or_create_keyed_state(ValueStateDescriptor("v"))
    keys = [f"k{i}" for i in range(20)]
    for round_ in range(2):
        for i, key in enumerate(keys):
            backend.set_current_key(key)
            assert backend.get_current_key_group_index() == assign_to_key_group(key, 128)
            assert len(backend._key_group_cache) <= 3
            if round_ == 0:
                state.update(i)
            else:
                assert state.value() == i
    assert backend.compute_key_group_offset("k3") == assign_to_key_group("k3", 128)


def test_offset_range_backend_indexes_from_start():
    key_group_range = KeyGroupRange(64, 127)
    backend = HeapKeyedStateBackend(key_group_range, 128)
    assert assign_to_key_group("hello", 128) == 114
    assert backend.compute_key_group_offset("hello") == 50
    backend.set_current_key("hello")
    assert backend.get_current_key_group_index() == 114
    backend.get_or_create_keyed_state(ValueStateDescriptor("v")).update(3)
    table = backend.get_state_table("v")
    assert table.key_group_maps[50] == {VOID_NAMESPACE: {"hello": 3}}
    assert table.get("hello", 114, VOID_NAMESPACE) == 3
    assert list(table.iter_key_group(114)) == [("hello", VOID_NAMESPACE, 3)]


def test_current_key_before_any_key(backend):
    assert backend.get_current_key() is None
    with pytest.raises(RuntimeError, match="^No key set"):
        backend.get_current_key_group_index()


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        (((0, 127), 128), TypeError, "^key_group_range must be a KeyGroupRange, got tuple$"),
        ((KeyGroupRange(0, 127), 0), ValueError, "^Maximum parallelism must be an int between 1 and 32768, got 0$"),
        ((KeyGroupRange(0, 127), 64), ValueError,
         r"^KeyGroupRange\{startKeyGroup=0, endKeyGroup=127\} does not fit into max parallelism 64 "
         r"\(key groups 0..63\)$"),
        ((KeyGroupRange.empty(), 128), ValueError, "^A keyed state backend needs key groups"),
    ],
)
def test_backend_arguments_are_validated(args, error, message):
    with pytest.raises(error, match=message):
        HeapKeyedStateBackend(*args)


def test_non_descriptor_is_rejected(backend):
    with pytest.raises(TypeError, match="^Expected a StateDescriptor, got 'v' of type str$"):
        backend.get_or_create_keyed_state("v")


def test_get_state_table_of_unknown_state(backend):
    backend.get_or_create_keyed_state(ValueStateDescriptor("v"))
    with pytest.raises(KeyError, match=r"No keyed state named 'x' is registered \(registered: \['v'\]\)"):
        backend.get_state_table("x")


def test_dispose_drops_everything(backend):
    state = backend.get_or_create_keyed_state(ValueStateDescriptor("v"))
    backend.set_current_key("a")
    state.update(1)
    backend.dispose()
    assert backend.num_key_value_state_entries() == 0
    assert backend.get_registered_state_names() == []
    assert backend.get_current_key() is None
    with pytest.raises(RuntimeError, match="^The keyed state backend has been disposed$"):
        backend.get_or_create_keyed_state(ValueStateDescriptor("v"))


# -- kind-specific semantics -----------------------------------------------------------------

def test_value_update_none_removes_entry(backend):
    state = backend.get_or_create_keyed_state(ValueStateDescriptor("v"))
    backend.set_current_key("a")
    state.update(0)
    assert state.value() == 0
    state.update(None)
    assert state.value() is None
    assert backend.num_key_value_state_entries() == 0
    state.update(None)
    assert backend.num_key_value_state_entries() == 0


def test_list_state_semantics(backend):
    state = backend.get_or_create_keyed_state(ListStateDescriptor("l"))
    backend.set_current_key("a")
    assert state.get() == []
    state.add(1)
    state.add_all([2, 3])
    state.add_all(iter([4]))
    assert state.get() == [1, 2, 3, 4]
    given = [9, 8]
    state.update(given)
    given.append(7)
    assert state.get() == [9, 8]
    state.add_all([])
    assert state.get() == [9, 8]
    state.update([])
    assert state.get() == []
    assert backend.num_key_value_state_entries() == 0
    state.add_all([])
    assert backend.num_key_value_state_entries() == 0


def test_list_state_refuses_none(backend):
    state = backend.get_or_create_keyed_state(ListStateDescriptor("l"))
    backend.set_current_key("a")
    state.add(1)
    with pytest.raises(ValueError, match=r"^You cannot add null to a ListState\. \(state 'l'\)$"):
        state.add(None)
    with pytest.raises(ValueError, match=r"^You cannot add null to a ListState\. \(state 'l', element 1\)$"):
        state.add_all([2, None, 3])
    with pytest.raises(ValueError, match=r"^You cannot add null to a ListState\. \(state 'l', element 0\)$"):
        state.update([None])
    with pytest.raises(ValueError, match=r"^List of values to add cannot be null\. \(state 'l'\)$"):
        state.update(None)
    with pytest.raises(ValueError, match=r"^List of values to add cannot be null\. \(state 'l'\)$"):
        state.add_all(None)
    assert state.get() == [1]


def test_map_state_semantics(backend):
    state = backend.get_or_create_keyed_state(MapStateDescriptor("m"))
    backend.set_current_key("a")
    assert state.get("x") is None
    assert state.is_empty() and not state.contains("x") and "x" not in state
    assert (state.keys(), state.values(), state.items(), list(state)) == ([], [], [], [])
    state.put("x", 1)
    state.put_all({"y": 2, "z": None})
    state["w"] = 4
    assert state.get("z") is None and state.contains("z")
    assert state["y"] == 2
    assert state.items() == [("x", 1), ("y", 2), ("z", None), ("w", 4)]
    assert state.keys() == ["x", "y", "z", "w"] == list(state)
    assert state.values() == [1, 2, None, 4]
    for key in state.keys():  # removing while iterating is safe
        if key != "y":
            state.remove(key)
    del state["nothing"]
    assert state.items() == [("y", 2)]
    state.put_all({})
    state.put_all([("q", 5)])
    assert state.items() == [("y", 2), ("q", 5)]
    state.remove("y")
    state.remove("q")
    assert state.is_empty()
    assert backend.num_key_value_state_entries() == 0
    with pytest.raises(ValueError, match=r"^State 'm': put_all\(\) needs a dict, got None$"):
        state.put_all(None)


def test_map_state_keys_are_per_key(backend):
    state = backend.get_or_create_keyed_state(MapStateDescriptor("m"))
    backend.set_current_key("a")
    state.put("x", "a-x")
    backend.set_current_key("b")
    assert state.get("x") is None
    state.put("x", "b-x")
    backend.set_current_key("a")
    assert state.get("x") == "a-x"


@pytest.mark.parametrize("reduce_function", [lambda a, b: a + b, SumReduce()], ids=["callable", "ReduceFunction"])
def test_reducing_state(backend, reduce_function):
    state = backend.get_or_create_keyed_state(ReducingStateDescriptor("r", reduce_function))
    backend.set_current_key("a")
    assert state.get() is None
    for value in (1, 2, 3, 4):
        state.add(value)
    assert state.get() == 10
    backend.set_current_key("b")
    state.add(100)
    assert state.get() == 100
    state.add(None)  # as Flink: adding null clears
    assert state.get() is None
    backend.set_current_key("a")
    assert state.get() == 10


def test_reducing_state_keeps_value_when_reduce_fails(backend):
    def fail_on_three(a, b):
        if b == 3:
            raise ArithmeticError("three")
        return a * b

    state = backend.get_or_create_keyed_state(ReducingStateDescriptor("r", fail_on_three))
    backend.set_current_key("a")
    state.add(2)
    state.add(5)
    with pytest.raises(ArithmeticError, match="three"):
        state.add(3)
    assert state.get() == 10


@pytest.mark.parametrize(
    ("agg_function", "expected"),
    [(AverageAggregate(), 2.5), (DuckTypedMaxAggregate(), ("max", 4))],
    ids=["AggregateFunction", "duck-typed"],
)
def test_aggregating_state(backend, agg_function, expected):
    state = backend.get_or_create_keyed_state(AggregatingStateDescriptor("g", agg_function))
    backend.set_current_key("a")
    assert state.get() is None
    assert state.get_accumulator() is None
    for value in (1, 2, 3, 4):
        state.add(value)
    assert state.get() == expected
    backend.set_current_key("b")
    assert state.get() is None
    state.add(7)
    state.add(None)  # as Flink: adding null clears
    assert state.get() is None
    backend.set_current_key("a")
    assert state.get() == expected


def test_aggregating_state_stores_the_accumulator(backend):
    state = backend.get_or_create_keyed_state(AggregatingStateDescriptor("g", AverageAggregate()))
    backend.set_current_key("a")
    state.add(4)
    state.add(6)
    assert state.get_accumulator() == (10, 2)
    assert backend.get_state_table("g").get("a", assign_to_key_group("a", 128), VOID_NAMESPACE) == (10, 2)
    assert state.get() == 5.0


@pytest.mark.parametrize(
    ("descriptor", "writes", "expected"),
    [
        (ListStateDescriptor("s"), {"w1": [1, 2], "w2": [3], "w3": []}, [9, 1, 2, 3]),
        (ReducingStateDescriptor("s", lambda a, b: a + b), {"w1": [1, 2], "w2": [3], "w3": []}, 15),
        (AggregatingStateDescriptor("s", AverageAggregate()), {"w1": [1, 2], "w2": [3], "w3": []}, 15 / 4),
    ],
    ids=["list", "reducing", "aggregating"],
)
def test_merge_namespaces(backend, descriptor, writes, expected):
    state = backend.get_partitioned_state("target", descriptor)
    backend.set_current_key("k")
    state.add(9)
    for namespace, values in writes.items():
        state.set_current_namespace(namespace)
        for value in values:
            state.add(value)
    backend.set_current_key("other")
    state.add(100)  # another key in namespace w3: must not be merged
    backend.set_current_key("k")
    state.merge_namespaces("target", ["w1", "w2", "w3", "absent"])
    state.set_current_namespace("target")
    assert state.get() == expected
    assert backend.num_key_value_state_entries("w1") == 0
    assert backend.num_key_value_state_entries("w2") == 0
    assert backend.num_key_value_state_entries("w3") == 1


def test_merge_into_empty_target(backend):
    state = backend.get_partitioned_state("w1", ReducingStateDescriptor("s", lambda a, b: a + b))
    backend.set_current_key("k")
    state.add(4)
    state.merge_namespaces("target", ["w1"])
    assert state.get() is None
    state.set_current_namespace("target")
    assert state.get() == 4
    state.merge_namespaces("nothing-here", ["absent"])
    assert backend.num_key_value_state_entries() == 1
