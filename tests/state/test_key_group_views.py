"""Keyed state written column-wise from pinned key-group dicts (rill.state.checkpoint
.key_group_views.PinnedKeyGroups): the same entries, the same Parquet rows and the same restore
as the record of entry tuples it replaces; TTL's snapshot transformer applied; pickled as a
plain dict; namespaces encoded once per distinct value give the per-value columns."""

import pickle

import pyarrow.parquet as pq
import pytest

from rill.operators.windowing.windows import CountWindow, GlobalWindow, TimeWindow
from rill.state.api import VOID_NAMESPACE
from rill.state.checkpoint.filesystem import FileSystemCheckpointStorage
from rill.state.checkpoint.key_group_views import PinnedKeyGroups, entry_chunks
from rill.state.checkpoint.namespaces import _each, decode_namespaces, encode_namespace_runs, encode_namespaces
from rill.state.checkpoint.operator_subtask_state import KeyedStateSnapshot, OperatorSubtaskState
from rill.state.descriptors import ListStateDescriptor, ValueStateDescriptor
from rill.state.heap import HeapKeyedStateBackend
from rill.state.key_groups import KeyGroupRange

OID = "0123456789abcdef0123456789abcdef"
JOB = "fedcba9876543210fedcba9876543210"

# key group -> state -> namespace -> {key: stored value}, over the range 10..19
PINNED = {
    "count": {10: {VOID_NAMESPACE: {"a": 1, "b": ("t", 2)}}, 17: {VOID_NAMESPACE: {"z": 26}}},
    "window": {10: {TimeWindow(0, 10): {"a": [1, 2]}, TimeWindow(10, 20): {"a": [3], "b": [4]}},
               12: {GlobalWindow(): {"g": ["x"]}, CountWindow(3): {"c": [None]}}},
}
DESCRIPTORS = {"count": ValueStateDescriptor("count"), "window": ListStateDescriptor("window")}
ENTRIES = {
    10: {"count": (("a", VOID_NAMESPACE, 1), ("b", VOID_NAMESPACE, ("t", 2))),
         "window": (("a", TimeWindow(0, 10), [1, 2]), ("a", TimeWindow(10, 20), [3]),
                    ("b", TimeWindow(10, 20), [4]))},
    12: {"window": (("g", GlobalWindow(), ["x"]), ("c", CountWindow(3), [None]))},
    17: {"count": (("z", VOID_NAMESPACE, 26),)},
}


def _pinned(transforms=None):
    return PinnedKeyGroups(10, {name: ([by_kg.get(10 + i) for i in range(10)], (transforms or {}).get(name))
                                for name, by_kg in PINNED.items()})


def test_the_mapping_gives_the_entries_of_every_key_group():
    view = _pinned()
    assert list(view) == [10, 12, 17] and len(view) == 3 and 12 in view and 11 not in view
    assert dict(view) == ENTRIES
    assert view.state_names() == ["count", "window"]
    assert [(kg, [(ns, list(k), list(v)) for ns, k, v in chunks]) for kg, chunks in view.chunks("window")] == [
        (10, [(TimeWindow(0, 10), ["a"], [[1, 2]]), (TimeWindow(10, 20), ["a", "b"], [[3], [4]])]),
        (12, [(GlobalWindow(), ["g"], [["x"]]), (CountWindow(3), ["c"], [[None]])])]
    with pytest.raises(KeyError):
        view[11]


def test_a_snapshot_transformer_leaves_expired_values_out():
    # as TTL's cleanup_full_snapshot: odd values expired; a key group left empty disappears
    view = _pinned({"count": lambda v: v if v == 26 or type(v) is tuple else None})
    assert view[10]["count"] == (("b", VOID_NAMESPACE, ("t", 2)),)
    assert view[17]["count"] == (("z", VOID_NAMESPACE, 26),)
    view = _pinned({"count": lambda v: None})
    assert list(view) == [10, 12] and "count" not in view[10]
    assert list(view.chunks("count")) == []


def test_pickled_it_is_a_plain_dict_of_the_entries():
    view = _pinned({"count": lambda v: v})  # a lambda does not pickle: the entries do
    back = pickle.loads(pickle.dumps(view))
    assert type(back) is dict and back == ENTRIES
    snap = KeyedStateSnapshot(128, KeyGroupRange(10, 19), DESCRIPTORS, view)
    assert snap.key_groups is view
    assert pickle.loads(pickle.dumps(snap)) == KeyedStateSnapshot(128, KeyGroupRange(10, 19), DESCRIPTORS, ENTRIES)


def _files(tmp_path, name, key_groups):
    storage = FileSystemCheckpointStorage(str(tmp_path / name), JOB)
    handle = storage.initialize_location_for_checkpoint(3).write_operator_subtask_state(
        OID, 1, OperatorSubtaskState(3, keyed_state=(KeyedStateSnapshot(128, KeyGroupRange(10, 19), DESCRIPTORS,
                                                                        key_groups),)), "uid")
    return handle, {f.split("/")[-2]: pq.read_table(f"{handle.directory}/{f}") for f in handle.files()}


def test_files_written_from_pinned_dicts_equal_those_written_from_entries(tmp_path):
    from_view, view_tables = _files(tmp_path, "view", _pinned())
    from_entries, entry_tables = _files(tmp_path, "entries", ENTRIES)
    assert sorted(view_tables) == sorted(entry_tables) == ["count", "window"]
    for name, table in view_tables.items():
        assert table.equals(entry_tables[name]), name
        assert table.column("key_group").to_pylist() == [kg for kg, by in ENTRIES.items() for _ in by.get(name, ())]
    assert from_view.read() == from_entries.read() == OperatorSubtaskState(
        3, keyed_state=(KeyedStateSnapshot(128, KeyGroupRange(10, 19), DESCRIPTORS, ENTRIES),))


def test_a_heap_backend_snapshot_is_written_as_it_was_pinned(tmp_path):
    backend = HeapKeyedStateBackend(KeyGroupRange(0, 127), 128)
    state = backend.get_or_create_keyed_state(ValueStateDescriptor("v"))
    for k in range(300):
        backend.set_current_key(k)
        state.update((k, "x"))
    snap = backend.sync_prepare_resources().async_snapshot()
    assert isinstance(snap.key_groups, PinnedKeyGroups)
    expected = {kg: {n: tuple(e) for n, e in by.items()} for kg, by in snap.key_groups.items()}
    for k in range(300):  # later updates do not reach the snapshot
        backend.set_current_key(k)
        state.update(None if k % 2 else (k, "y"))
    handle = FileSystemCheckpointStorage(str(tmp_path), JOB).initialize_location_for_checkpoint(
        1).write_operator_subtask_state(OID, 0, OperatorSubtaskState(1, keyed_state=(snap,)))
    [read] = handle.read().keyed_state
    assert dict(read.key_groups) == expected
    assert sorted(e[2] for by in expected.values() for e in by["v"]) == [(k, "x") for k in range(300)]


def test_namespaces_encoded_per_distinct_value_equal_the_per_value_columns():
    windows = [TimeWindow(0, 10), TimeWindow(10, 20), TimeWindow(0, 10), TimeWindow(0, 10), TimeWindow(20, 30)]
    assert encode_namespaces(windows).equals(_each(windows))
    assert decode_namespaces(encode_namespaces(windows)) == windows
    mixed = [TimeWindow(0, 10), GlobalWindow(), TimeWindow(0, 10), VOID_NAMESPACE]
    assert encode_namespaces(mixed).equals(_each(mixed))
    runs = [(TimeWindow(0, 10), 2), (GlobalWindow(), 1), (TimeWindow(0, 10), 3)]
    expanded = [ns for ns, n in runs for _ in range(n)]
    assert encode_namespace_runs(runs).equals(_each(expanded))
    assert encode_namespace_runs([(VOID_NAMESPACE, 4)]).equals(_each([VOID_NAMESPACE] * 4))
    assert entry_chunks([("a", VOID_NAMESPACE, 1), ("b", VOID_NAMESPACE, 2), ("a", GlobalWindow(), 3)]) == [
        (VOID_NAMESPACE, ("a", "b"), (1, 2)), (GlobalWindow(), ("a",), (3,))]
