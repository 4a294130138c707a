"""Conformance suite of the state backend interfaces (``rill.state.backend``): every
implementation of ``KeyedStateBackend`` and ``OperatorStateBackend`` runs the same tests, the
snapshot/restore round trip included. A new backend adds its factory to ``KEYED_BACKENDS`` or
``OPERATOR_BACKENDS``."""

from __future__ import annotations

import cloudpickle
from typing import Callable

import pytest

from rill.common.functions import AggregateFunction
from rill.state import (
    VOID_NAMESPACE,
    AggregatingStateDescriptor,
    DefaultOperatorStateBackend,
    HeapKeyedStateBackend,
    KeyGroupRange,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    UnsupportedKeyError,
    ValueStateDescriptor,
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
)
from rill.state.backend import KeyedStateBackend, OperatorStateBackend
from rill.state.checkpoint import KeyedStateSnapshot
from rill.state.rocksdb import RocksDBKeyedStateBackend
from rill.state.rocksdb_options import RocksDBSettings

MAX_PARALLELISM = 128
FULL = KeyGroupRange(0, MAX_PARALLELISM - 1)


def _heap(key_groups: KeyGroupRange = FULL, max_parallelism: int = MAX_PARALLELISM) -> KeyedStateBackend:
    return HeapKeyedStateBackend(key_groups, max_parallelism)


def _heap_with_listener(key_groups: KeyGroupRange = FULL, max_parallelism: int = MAX_PARALLELISM) -> KeyedStateBackend:
    # A listener switches the heap backend to its listening variant (another set_current_key).
    backend = HeapKeyedStateBackend(key_groups, max_parallelism)
    backend.register_key_selection_listener(lambda key: None)
    return backend


def _rocksdb(key_groups: KeyGroupRange = FULL, max_parallelism: int = MAX_PARALLELISM,
             local_dir: str = "") -> KeyedStateBackend:
    return RocksDBKeyedStateBackend(key_groups, max_parallelism, RocksDBSettings((local_dir,)))


KEYED_BACKENDS = {"heap": _heap, "heap-with-key-selection-listener": _heap_with_listener, "rocksdb": _rocksdb}
OPERATOR_BACKENDS = {"default": lambda: DefaultOperatorStateBackend("op")}


@pytest.fixture(params=sorted(KEYED_BACKENDS))
def make_keyed(request, tmp_path) -> Callable[..., KeyedStateBackend]:
    """The backend factory; RocksDB backends go under ``tmp_path`` and are disposed after the
    test (their directories must be gone then)."""
    if request.param != "rocksdb":
        yield KEYED_BACKENDS[request.param]
        return
    made = []

    def make(key_groups: KeyGroupRange = FULL, max_parallelism: int = MAX_PARALLELISM) -> KeyedStateBackend:
        made.append(_rocksdb(key_groups, max_parallelism, str(tmp_path)))
        return made[-1]
    yield make
    for backend in made:
        backend.dispose()
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(params=sorted(OPERATOR_BACKENDS))
def make_operator(request) -> Callable[[], OperatorStateBackend]:
    return OPERATOR_BACKENDS[request.param]


class Count(AggregateFunction):
    def create_accumulator(self):
        return 0

    def add(self, value, accumulator):
        return accumulator + 1

    def get_result(self, accumulator):
        return accumulator

    def merge(self, a, b):
        return a + b


VALUE = ValueStateDescriptor("value")
LIST = ListStateDescriptor("list")
MAP = MapStateDescriptor("map")
REDUCING = ReducingStateDescriptor("reducing", lambda a, b: a + b)
AGGREGATING = AggregatingStateDescriptor("aggregating", Count())
KEYS = [f"key-{i}" for i in range(40)]


def _fill(backend: KeyedStateBackend) -> None:
    for i, key in enumerate(KEYS):
        backend.set_current_key(key)
        backend.get_or_create_keyed_state(VALUE).update(i)
        backend.get_or_create_keyed_state(LIST).add_all([i, i + 1])
        backend.get_or_create_keyed_state(MAP).put("m", [i])
        backend.get_or_create_keyed_state(REDUCING).add(i)
        backend.get_or_create_keyed_state(AGGREGATING).add(i)
        backend.get_partitioned_state("window-1", VALUE).update(-i)


def _read(backend: KeyedStateBackend, key) -> tuple:
    backend.set_current_key(key)
    return (backend.get_or_create_keyed_state(VALUE).value(),
            list(backend.get_or_create_keyed_state(LIST).get() or []),
            backend.get_or_create_keyed_state(MAP).get("m"),
            backend.get_or_create_keyed_state(REDUCING).get(),
            backend.get_or_create_keyed_state(AGGREGATING).get(),
            backend.get_partitioned_state("window-1", VALUE).value())


def _expected(i: int) -> tuple:
    return (i, [i, i + 1], [i], i, 1, -i)


# -- keyed: the key context --------------------------------------------------------------------

def test_keyed_backend_implements_the_interface(make_keyed):
    backend = make_keyed()
    assert isinstance(backend, KeyedStateBackend)
    assert backend.get_key_group_range() == FULL
    assert backend.get_number_of_key_groups() == MAX_PARALLELISM


def test_current_key_and_its_key_group(make_keyed):
    backend = make_keyed()
    assert backend.get_current_key() is None
    with pytest.raises(RuntimeError):
        backend.get_current_key_group_index()
    backend.set_current_key("a")
    assert backend.get_current_key() == "a"
    assert backend.get_current_key_group_index() == assign_to_key_group("a", MAX_PARALLELISM)


def test_a_key_of_another_subtask_or_without_stable_hash_is_refused_and_the_key_stays(make_keyed):
    own = compute_key_group_range_for_operator_index(MAX_PARALLELISM, 2, 0)
    backend = make_keyed(own)
    mine = next(k for k in KEYS if own.contains(assign_to_key_group(k, MAX_PARALLELISM)))
    other = next(k for k in KEYS if not own.contains(assign_to_key_group(k, MAX_PARALLELISM)))
    backend.set_current_key(mine)
    with pytest.raises(ValueError):
        backend.set_current_key(other)
    with pytest.raises(UnsupportedKeyError):
        backend.set_current_key(["unhashable"])
    assert backend.get_current_key() == mine


def test_key_selection_listeners_see_every_key(make_keyed):
    backend = make_keyed()
    seen = []
    backend.register_key_selection_listener(seen.append)
    backend.set_current_key("a")
    backend.set_current_key("b")
    assert seen == ["a", "b"]
    with pytest.raises(TypeError):
        backend.register_key_selection_listener("not callable")


# -- keyed: registration and whole-backend access ----------------------------------------------

def test_states_are_per_key_and_namespace(make_keyed):
    backend = make_keyed()
    _fill(backend)
    for i, key in enumerate(KEYS):
        assert _read(backend, key) == _expected(i)
    assert backend.get_registered_state_names() == ["value", "list", "map", "reducing", "aggregating"]
    assert sorted(backend.get_keys("value", "window-1")) == sorted(KEYS)
    assert backend.num_key_value_state_entries() == 6 * len(KEYS)


def test_a_name_keeps_its_kind_and_a_namespace_must_hash(make_keyed):
    backend = make_keyed()
    backend.get_or_create_keyed_state(VALUE)
    with pytest.raises(ValueError):
        backend.get_or_create_keyed_state(ListStateDescriptor("value"))
    with pytest.raises(TypeError):
        backend.get_partitioned_state(["unhashable"], VALUE)
    with pytest.raises(TypeError):
        backend.get_or_create_keyed_state("not a descriptor")


def test_apply_to_all_keys_visits_each_key_with_it_current(make_keyed):
    backend = make_keyed()
    _fill(backend)
    visited = []
    backend.apply_to_all_keys("window-1", VALUE, lambda key, state: visited.append((key, state.value())))
    assert sorted(visited) == sorted((key, -i) for i, key in enumerate(KEYS))


# -- keyed: snapshot and restore ---------------------------------------------------------------

def test_snapshot_restores_every_state_kind_into_a_new_backend(make_keyed):
    backend = make_keyed()
    _fill(backend)
    snapshot = backend.snapshot()
    assert isinstance(snapshot, KeyedStateSnapshot)
    assert snapshot.max_parallelism == MAX_PARALLELISM and snapshot.key_group_range == FULL
    assert set(snapshot.descriptors) == {"value", "list", "map", "reducing", "aggregating"}
    restored = make_keyed()
    restored.restore([snapshot])
    for i, key in enumerate(KEYS):
        assert _read(restored, key) == _expected(i)


def test_snapshot_is_indexed_by_key_group(make_keyed):
    backend = make_keyed()
    backend.set_current_key("a")
    backend.get_or_create_keyed_state(VALUE).update(1)
    snapshot = backend.snapshot()
    key_group = assign_to_key_group("a", MAX_PARALLELISM)
    assert list(snapshot.key_groups) == [key_group]
    assert [(k, v) for k, _, v in snapshot.entries("value", key_group)] == [("a", 1)]
    assert snapshot.entries("value", (key_group + 1) % MAX_PARALLELISM) == ()


def test_later_updates_and_in_place_mutation_do_not_leak_into_a_snapshot(make_keyed):
    backend = make_keyed()
    _fill(backend)
    snapshot = backend.snapshot()
    backend.set_current_key(KEYS[0])
    backend.get_or_create_keyed_state(LIST).add(99)               # appends to the stored list
    backend.get_or_create_keyed_state(MAP).get("m").append(99)    # mutates a stored user value
    backend.get_or_create_keyed_state(VALUE).clear()
    restored = make_keyed()
    restored.restore([snapshot])
    assert _read(restored, KEYS[0]) == _expected(0)


def _mutate_every_kind(backend: KeyedStateBackend) -> None:
    """Updates, in-place mutation of stored values and of values handed out, removals, new
    keys and namespaces, merges: everything that must not reach a snapshot taken before."""
    for i, key in enumerate(KEYS):
        backend.set_current_key(key)
        backend.get_or_create_keyed_state(VALUE).update(1000 + i)
        backend.get_or_create_keyed_state(LIST).add(99)                   # appends to the stored list
        backend.get_or_create_keyed_state(LIST).get().append(98)          # mutates the list handed out
        backend.get_or_create_keyed_state(MAP).get("m").append(99)        # mutates a stored user value
        backend.get_or_create_keyed_state(MAP).put("n", 1)
        backend.get_or_create_keyed_state(REDUCING).add(5)
        backend.get_or_create_keyed_state(AGGREGATING).add(5)
        backend.get_partitioned_state("window-1", VALUE).clear()
        backend.get_partitioned_state("window-2", LIST).add(i)
    backend.set_current_key("a-new-key")
    backend.get_or_create_keyed_state(VALUE).update(7)


def _mutated(i: int) -> tuple:
    return (1000 + i, [i, i + 1, 99, 98], [i, 99], i + 5, 2, None)


def test_prepared_resources_keep_the_state_as_it_was_prepared(make_keyed):
    backend = make_keyed()
    _fill(backend)
    resources = backend.sync_prepare_resources()
    _mutate_every_kind(backend)
    snapshot = resources.async_snapshot()
    resources.release()
    restored = make_keyed()
    restored.restore([snapshot])
    for i, key in enumerate(KEYS):
        assert _read(restored, key) == _expected(i)
        live = _mutated(i)
        if isinstance(backend, RocksDBKeyedStateBackend):  # values are copies there, as Flink's:
            live = (live[0], live[1][:-1], live[2][:-1]) + live[3:]  # in-place mutation is not stored
        assert _read(backend, key) == live  # the live state kept every update
    restored.set_current_key("a-new-key")
    assert restored.get_or_create_keyed_state(VALUE).value() is None
    assert restored.num_key_value_state_entries() == 6 * len(KEYS)
    assert backend.num_key_value_state_entries() == 6 * len(KEYS) + 1


def test_two_snapshots_in_a_row_and_updates_between_them(make_keyed):
    backend = make_keyed()
    _fill(backend)
    first = backend.sync_prepare_resources()
    second = backend.sync_prepare_resources()  # nothing touched in between: the same view
    backend.set_current_key(KEYS[1])
    backend.get_or_create_keyed_state(LIST).add(99)
    third = backend.sync_prepare_resources()
    _mutate_every_kind(backend)
    snapshots = [r.async_snapshot() for r in (first, second, third)]
    for i, snapshot in enumerate(snapshots):
        restored = make_keyed()
        restored.restore([snapshot])
        expected_1 = _expected(1)
        if i == 2:
            expected_1 = (1, [1, 2, 99]) + expected_1[2:]
        assert _read(restored, KEYS[1]) == expected_1
        assert _read(restored, KEYS[2]) == _expected(2)


def test_released_resources_refuse_a_snapshot(make_keyed):
    backend = make_keyed()
    _fill(backend)
    resources = backend.sync_prepare_resources()
    resources.release()
    resources.release()
    with pytest.raises(RuntimeError, match="released"):
        resources.async_snapshot()


def test_restoring_does_not_share_values_with_the_snapshot(make_keyed):
    backend = make_keyed()
    _fill(backend)
    snapshot = backend.snapshot()
    first, second = make_keyed(), make_keyed()
    first.restore([snapshot])
    first.set_current_key(KEYS[0])
    first.get_or_create_keyed_state(LIST).add(99)
    first.get_or_create_keyed_state(MAP).get("m").append(99)       # a user value inside a map
    first.set_current_key(KEYS[1])
    value = first.get_or_create_keyed_state(VALUE)
    value.update((1, [2]))                                         # a tuple holding a list...
    second.restore([snapshot])
    assert _read(second, KEYS[0]) == _expected(0)
    third = make_keyed()
    third.restore([first.snapshot()])
    value.value()[1].append(3)                                     # ...is copied, not shared
    third.set_current_key(KEYS[1])
    assert third.get_or_create_keyed_state(VALUE).value() == (1, [2])


def test_a_snapshot_survives_pickling(make_keyed):
    # cloudpickle, as the runtime ships plans and will ship snapshots (the reduce function is
    # a lambda).
    backend = make_keyed()
    _fill(backend)
    restored = make_keyed()
    restored.restore([cloudpickle.loads(cloudpickle.dumps(backend.snapshot()))])
    assert _read(restored, KEYS[3]) == _expected(3)


def test_rescaling_restores_each_subtask_its_key_groups_from_all_old_snapshots(make_keyed):
    old = [make_keyed(compute_key_group_range_for_operator_index(MAX_PARALLELISM, 2, i)) for i in range(2)]
    for i, key in enumerate(KEYS):
        backend = next(b for b in old if b.get_key_group_range().contains(assign_to_key_group(key, MAX_PARALLELISM)))
        backend.set_current_key(key)
        backend.get_or_create_keyed_state(VALUE).update(i)
    snapshots = [b.snapshot() for b in old]
    found = {}
    for index in range(3):
        new = make_keyed(compute_key_group_range_for_operator_index(MAX_PARALLELISM, 3, index))
        new.restore(snapshots)
        for key in list(new.get_keys("value", VOID_NAMESPACE)):
            new.set_current_key(key)
            found[key] = new.get_or_create_keyed_state(VALUE).value()
    assert found == {key: i for i, key in enumerate(KEYS)}


def test_restore_refuses_another_max_parallelism_or_kind_and_loads_nothing(make_keyed):
    backend = make_keyed()
    _fill(backend)
    snapshot = backend.snapshot()
    with pytest.raises(ValueError, match="max parallelism"):
        make_keyed(KeyGroupRange(0, 255), 256).restore([snapshot])
    target = make_keyed()
    target.get_or_create_keyed_state(ValueStateDescriptor("list"))
    with pytest.raises(ValueError, match="'list'"):
        target.restore([snapshot])
    assert target.get_registered_state_names() == ["list"]
    assert target.num_key_value_state_entries() == 0


def test_a_disposed_backend_refuses_state_and_snapshots(make_keyed):
    backend = make_keyed()
    _fill(backend)
    snapshot = backend.snapshot()
    backend.dispose()
    with pytest.raises(RuntimeError):
        backend.get_or_create_keyed_state(VALUE)
    with pytest.raises(RuntimeError):
        backend.snapshot()
    with pytest.raises(RuntimeError):
        backend.sync_prepare_resources()
    with pytest.raises(RuntimeError):
        backend.restore([snapshot])


# -- operator state ----------------------------------------------------------------------------

def _fill_operator(backend: OperatorStateBackend) -> None:
    backend.get_list_state(ListStateDescriptor("split")).update([1, 2, 3])
    backend.get_union_list_state(ListStateDescriptor("union")).add("u")
    backend.get_broadcast_state(MapStateDescriptor("rules")).put("r", [1])


def test_operator_backend_implements_the_interface(make_operator):
    backend = make_operator()
    assert isinstance(backend, OperatorStateBackend)
    _fill_operator(backend)
    assert backend.get_registered_state_names() == ["split", "union"]
    assert backend.get_registered_broadcast_state_names() == ["rules"]


def test_operator_snapshot_round_trip_and_isolation(make_operator):
    backend = make_operator()
    _fill_operator(backend)
    snapshot = backend.snapshot()
    assert snapshot == {"split": ("SPLIT_DISTRIBUTE", [1, 2, 3]), "union": ("UNION", ["u"]),
                        "rules": ("BROADCAST", [("r", [1])])}
    backend.get_list_state(ListStateDescriptor("split")).add(4)
    restored = make_operator()
    restored.restore(snapshot)
    assert list(restored.get_list_state(ListStateDescriptor("split")).get()) == [1, 2, 3]
    assert list(restored.get_union_list_state(ListStateDescriptor("union")).get()) == ["u"]
    assert restored.get_broadcast_state(MapStateDescriptor("rules")).get("r") == [1]


def test_operator_restore_refuses_another_mode_and_loads_nothing(make_operator):
    backend = make_operator()
    backend.get_union_list_state(ListStateDescriptor("split"))
    with pytest.raises(ValueError):
        backend.restore({"split": ("SPLIT_DISTRIBUTE", [1]), "other": ("UNION", [2])})
    assert backend.get_registered_state_names() == ["split"]


def test_a_disposed_operator_backend_has_no_state(make_operator):
    backend = make_operator()
    _fill_operator(backend)
    backend.dispose()
    assert backend.snapshot() == {}
