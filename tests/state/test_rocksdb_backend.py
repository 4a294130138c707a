"""What the RocksDB keyed state backend adds to the conformance suite (issue 16): Flink's key
layout on disk, map state as one entry per user key, merging namespaces, BATCH's per-key
delete, the directory's life, and the settings and public classes (Flink's
``EmbeddedRocksDBStateBackend``, ``PredefinedOptions``, ``state.backend.rocksdb.*``)."""

from __future__ import annotations

import pytest

from rill.common import Configuration
from rill.datastream import EmbeddedRocksDBStateBackend, PredefinedOptions, StateBackend
from rill.state import (
    VOID_NAMESPACE,
    AggregatingStateDescriptor,
    KeyGroupRange,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
    assign_to_key_group,
)
from rill.state.checkpoint.object_codec import encode_object
from rill.state.rocksdb import RocksDBKeyedStateBackend, new_db_options
from rill.state.rocksdb_options import RocksDBSettings
from test_backend_conformance import Count

MAX_P = 128


@pytest.fixture
def backend(tmp_path):
    b = RocksDBKeyedStateBackend(KeyGroupRange(0, MAX_P - 1), MAX_P, RocksDBSettings((str(tmp_path),)))
    yield b
    b.dispose()


def test_keys_are_key_group_then_key_then_namespace_then_user_key(backend):
    value = backend.get_or_create_keyed_state(ValueStateDescriptor("v"))
    windowed = backend.get_partitioned_state(("w", 5), MapStateDescriptor("m"))
    backend.set_current_key("apple")
    value.update(3)
    windowed.put("u", 1.5)
    prefix = assign_to_key_group("apple", MAX_P).to_bytes(2, "big") + encode_object("apple")
    assert list(backend.get_column_family("v").items()) == [(prefix + encode_object(VOID_NAMESPACE), encode_object(3))]
    assert list(backend.get_column_family("m").items()) == [
        (prefix + encode_object(("w", 5)) + encode_object("u"), encode_object(1.5))]
    with pytest.raises(KeyError, match=r"No keyed state named 'x' is registered \(registered: \['m', 'v'\]\)"):
        backend.get_column_family("x")


def test_map_state_reads_by_prefix_and_clears_one_key_and_namespace(backend):
    m = backend.get_or_create_keyed_state(MapStateDescriptor("m"))
    backend.set_current_key("b")
    m.put_all({"y": None, "x": 2})
    backend.set_current_key("a")
    m.put("z", 1)
    assert (m.items(), m.is_empty(), m.contains("y")) == ([("z", 1)], False, False)
    m.remove("z")
    assert (m.items(), m.is_empty()) == ([], True)
    backend.set_current_key("b")
    assert (sorted(m.keys()), sorted(m.values(), key=str), m.get("y"), m.contains("y")) == (["x", "y"], [2, None],
                                                                                             None, True)
    m.clear()
    assert m.is_empty() and backend.num_key_value_state_entries() == 0


def test_merging_namespaces_of_list_reducing_and_aggregating_states(backend):
    backend.set_current_key("k")
    for descriptor, adds, merged in [(ListStateDescriptor("l"), [1, 2, 3], [3, 1, 2]),
                                     (ReducingStateDescriptor("r", lambda a, b: a + b), [1, 2, 3], 6),
                                     (AggregatingStateDescriptor("a", Count()), [1, 2, 3], 3)]:
        for namespace, value in zip(["n1", "n2", "target"], adds):
            backend.get_partitioned_state(namespace, descriptor).add(value)
        state = backend.get_partitioned_state("target", descriptor)
        state.merge_namespaces("target", ["n1", "n2", "absent"])
        assert state.get() == merged, descriptor.name
        assert backend.get_partitioned_state("n1", descriptor).get() in ([], None)
    # a reduce result of None clears the target
    nothing = ReducingStateDescriptor("none", lambda a, b: None)
    backend.get_partitioned_state("s", nothing).add(1)
    backend.get_partitioned_state("t", nothing).add(2)
    state = backend.get_partitioned_state("t", nothing)
    state.merge_namespaces("t", ["s"])
    assert state.get() is None and backend.num_key_value_state_entries("t") == 0


def test_batch_drops_a_keys_state_in_every_state_and_namespace(backend):
    value = backend.get_or_create_keyed_state(ValueStateDescriptor("v"))
    listed = backend.get_partitioned_state("ns", ListStateDescriptor("l"))
    for key in ("a", "ab", "b"):
        backend.set_current_key(key)
        value.update(key)
        listed.add(key)
    backend.remove_key_state("a")  # "ab" shares the bytes of "a" but not its encoding
    assert sorted(backend.get_keys("v", VOID_NAMESPACE)) == ["ab", "b"]
    assert sorted(backend.get_keys("l", "ns")) == ["ab", "b"]
    assert backend.compute_key_group_offset("a") == assign_to_key_group("a", MAX_P)


def test_the_directory_lives_with_the_backend_under_the_local_dirs(tmp_path):
    dirs = (str(tmp_path / "one"), str(tmp_path / "two"))
    backends = [RocksDBKeyedStateBackend(KeyGroupRange(0, 3), 4, RocksDBSettings(dirs)) for _ in range(2)]
    assert sorted(b.instance_path.rsplit("/", 2)[1] for b in backends) == ["one", "two"]  # round robin
    for b in backends:
        b.dispose()
        b.dispose()  # idempotent
    assert [list((tmp_path / d).iterdir()) for d in ("one", "two")] == [[], []]
    with pytest.raises(RuntimeError, match="disposed"):
        backends[0].get_or_create_keyed_state(ValueStateDescriptor("v"))


def test_state_ttl_is_not_built_on_rocksdb(backend):
    descriptor = ValueStateDescriptor("ttl")
    descriptor.enable_time_to_live(StateTtlConfig.new_builder(1000).build())
    with pytest.raises(NotImplementedError, match=r"State 'ttl': state TTL is not built for the RocksDB state "
                                                  r"backend"):
        backend.get_or_create_keyed_state(descriptor)


def test_settings_from_flinks_keys():
    settings = RocksDBSettings.from_dict({"state.backend.rocksdb.localdir": "/a, /b",
                                          "state.backend.rocksdb.predefined-options": "flash_ssd_optimized",
                                          "state.backend.rocksdb.timer-service.factory": "heap"})
    assert settings == RocksDBSettings(("/a", "/b"), PredefinedOptions.FLASH_SSD_OPTIMIZED)
    with pytest.raises(ValueError, match=r"Invalid value 'FAST' for 'state.backend.rocksdb.predefined-options'; "
                                         r"accepted: DEFAULT, SPINNING_DISK_OPTIMIZED, "
                                         r"SPINNING_DISK_OPTIMIZED_HIGH_MEM, FLASH_SSD_OPTIMIZED"):
        RocksDBSettings.from_dict({"state.backend.rocksdb.predefined-options": "FAST"})
    with pytest.raises(NotImplementedError, match=r"timer-service.factory: ROCKSDB': timers in RocksDB are not built"):
        RocksDBSettings.from_dict({"state.backend.rocksdb.timer-service.factory": "ROCKSDB"})
    with pytest.raises(NotImplementedError, match=r"'state.backend.incremental: true': incremental RocksDB"):
        RocksDBSettings.from_dict({"state.backend.incremental": "true"})
    for predefined in PredefinedOptions:
        assert new_db_options(predefined) is not None


def test_embedded_rocksdb_state_backend_is_its_keys():
    backend = EmbeddedRocksDBStateBackend()
    assert backend.to_configuration().to_dict() == {"state.backend.type": "rocksdb"}
    backend.set_db_storage_paths("/x", "/y")
    backend.set_predefined_options(PredefinedOptions.SPINNING_DISK_OPTIMIZED)
    assert (backend.get_db_storage_paths(), backend.get_predefined_options(),
            backend.is_incremental_checkpoints_enabled()) == (["/x", "/y"], PredefinedOptions.SPINNING_DISK_OPTIMIZED,
                                                              False)
    assert StateBackend.from_configuration(backend.to_configuration()) == backend
    assert StateBackend.from_configuration(Configuration.from_dict({"state.backend.type": "RocksDB"})) \
        == EmbeddedRocksDBStateBackend()
    with pytest.raises(ValueError, match=r"'relative' is not an absolute local path"):
        backend.set_db_storage_paths("relative")
    with pytest.raises(TypeError, match="set_predefined_options needs a PredefinedOptions, got 'DEFAULT'"):
        backend.set_predefined_options("DEFAULT")
    with pytest.raises(NotImplementedError, match="incremental checkpoints are not built"):
        EmbeddedRocksDBStateBackend(True)
    with pytest.raises(NotImplementedError, match="options factories are not built"):
        backend.set_options("org.example.MyOptionsFactory")
