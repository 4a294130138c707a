"""``read_keyed_state`` on a real heap and a real RocksDB backend: each kind of state as the function sees it,
``None`` for a key without an entry, the current key put back, clear errors."""

from __future__ import annotations

import pytest

from rill.state.descriptors import (
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from rill.state.heap import HeapKeyedStateBackend
from rill.state.key_groups import KeyGroupRange, assign_to_key_group
from rill.state.queryable import UnknownStateNameError, read_keyed_state
from rill.state.rocksdb import RocksDBKeyedStateBackend
from rill.state.rocksdb_options import RocksDBSettings


@pytest.fixture(params=["heap", "rocksdb"])
def new_backend(request, tmp_path):
    """``(key_group_range) -> backend`` of the parameter's kind; RocksDB ones are disposed."""
    made = []

    def make(key_groups=KeyGroupRange(0, 127)):
        if request.param == "heap":
            return HeapKeyedStateBackend(key_groups, 128)
        made.append(RocksDBKeyedStateBackend(key_groups, 128, RocksDBSettings((str(tmp_path),))))
        return made[-1]
    yield make
    for backend in made:
        backend.dispose()


def _backend(new_backend):
    backend = new_backend()
    value = backend.get_or_create_keyed_state(ValueStateDescriptor("v"))
    items = backend.get_or_create_keyed_state(ListStateDescriptor("l"))
    mapping = backend.get_or_create_keyed_state(MapStateDescriptor("m"))
    total = backend.get_or_create_keyed_state(ReducingStateDescriptor("r", lambda a, b: a + b))
    backend.set_current_key("a")
    value.update(1)
    items.add("x")
    items.add("y")
    mapping.put("k", 2)
    total.add(3)
    total.add(4)
    return backend


def test_each_kind_reads_as_the_function_sees_it_and_a_missing_key_is_none(new_backend):
    backend = _backend(new_backend)
    assert read_keyed_state(backend, "v", "a") == 1
    assert read_keyed_state(backend, "l", "a") == ["x", "y"]
    assert read_keyed_state(backend, "m", "a") == {"k": 2}
    assert read_keyed_state(backend, "r", "a") == 7
    assert [read_keyed_state(backend, name, "b") for name in "vlmr"] == [None] * 4


def test_the_current_key_is_put_back(new_backend):
    backend = _backend(new_backend)
    backend.set_current_key("c")
    read_keyed_state(backend, "v", "a")
    assert backend.get_current_key() == "c"


def test_unknown_state_and_wrong_subtask_are_clear_errors(new_backend):
    backend = _backend(new_backend)
    with pytest.raises(UnknownStateNameError, match=r"Operator 'Op' has no keyed state named 'w' \(registered so far: "
                                                    r"\['l', 'm', 'r', 'v'\]\)"):
        read_keyed_state(backend, "w", "a", "Op")
    half = new_backend(KeyGroupRange(0, 63))
    half.get_or_create_keyed_state(ValueStateDescriptor("v"))
    key = next(k for k in map(str, range(100)) if assign_to_key_group(k, 128) >= 64)
    with pytest.raises(ValueError, match="is not in"):
        read_keyed_state(half, "v", key)
