"""The file system checkpoint storage and its Parquet layout (rill.state.checkpoint.filesystem,
parquet_layout): round trips of every part through local files and fsspec's memory file system,
key-group pruning, atomic finalize, dispose, resolving pointers, format versions, moved
directories, retention."""

import hashlib
import io
import json
import pickle
import re
import shutil

import fsspec
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from rill.common.type_conversion import TypeValueError
from rill.common.typeinfo import Types
from rill.operators.windowing.windows import CountWindow, GlobalWindow, TimeWindow
from rill.state.api import VOID_NAMESPACE
from rill.state.checkpoint.filesystem import (
    FileOperatorSubtaskStateHandle,
    FileSystemCheckpointStorage,
    keyed_state_directory,
    resolve_checkpoint_pointer,
    state_directory_name,
)
from rill.state.checkpoint.metadata import (
    CheckpointMetadata,
    InMemoryOperatorSubtaskStateHandle,
    OperatorState,
    SnapshotType,
)
from rill.state.checkpoint.operator_subtask_state import (
    KeyedStateSnapshot,
    OperatorSubtaskState,
    TimerServiceSnapshot,
    TimersOfKeyGroup,
)
from rill.state.checkpoint.storage import create_checkpoint_storage
from rill.state.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from rill.state.key_groups import KeyGroupRange
from rill.state.ttl import StateTtlConfig, Time

OID = "0123456789abcdef0123456789abcdef"
JOB = "fedcba9876543210fedcba9876543210"


class _Avg:
    def create_accumulator(self):
        return (0, 0)

    def add(self, value, acc):
        return (acc[0] + value, acc[1] + 1)

    def get_result(self, acc):
        return acc[0] / acc[1]


class Point:
    """A user object as a namespace and a value (pickled in msgpack's extension type 3)."""

    def __init__(self, x):
        self.x = x

    def __eq__(self, other):
        return isinstance(other, Point) and other.x == self.x

    def __hash__(self):
        return hash(self.x)


def _ttl(descriptor):
    descriptor.enable_time_to_live(StateTtlConfig.new_builder(Time.seconds(10)).build())
    return descriptor


def _descriptors():
    return {
        "count": ValueStateDescriptor("count", Types.LONG()),
        "untyped": ValueStateDescriptor("untyped"),
        "events": ListStateDescriptor("events", Types.STRING()),
        "by_kind": MapStateDescriptor("by_kind", Types.STRING(), Types.DOUBLE()),
        "sum": ReducingStateDescriptor("sum", lambda a, b: a + b, Types.INT()),
        "avg": AggregatingStateDescriptor("avg", _Avg(), Types.TUPLE([Types.LONG(), Types.LONG()])),
        "window-contents": ListStateDescriptor("window-contents"),
        "ttl-value": _ttl(ValueStateDescriptor("ttl-value", Types.STRING())),
        "ttl-list": _ttl(ListStateDescriptor("ttl-list", Types.INT())),
        "ttl-map": _ttl(MapStateDescriptor("ttl-map", Types.INT(), None)),
        "registered but empty": ValueStateDescriptor("registered but empty", Types.INT()),
    }


def _state(low=0, high=63):
    """A subtask's state over key groups [low, high] with every kind of entry."""
    kg = {}
    a, b, c = low + 3, low + 20, high
    kg[a] = {
        "count": (("a", VOID_NAMESPACE, 1), (("t", 1), VOID_NAMESPACE, -(2 ** 63))),
        "untyped": (("a", VOID_NAMESPACE, {"nested": [1, (2, 3)], (4, 5): b"\x00"}),
                    (7, VOID_NAMESPACE, Point(3)), (True, VOID_NAMESPACE, 2 ** 80)),
        "events": (("a", VOID_NAMESPACE, ["x", "y", None]),),
        "by_kind": (("a", VOID_NAMESPACE, {"k": 1.5, "j": -0.0}),),
        "window-contents": (("a", TimeWindow(0, 10), [1, (2, "x")]), ("a", TimeWindow(10, 20), [3]),
                            ("b", GlobalWindow(), ["g"]), ("c", CountWindow(4), [None])),
        "ttl-value": (("a", VOID_NAMESPACE, ("v", 1_000)),),
        "ttl-list": (("a", VOID_NAMESPACE, [(1, 5), (2, 6)]),),
        "ttl-map": (("a", VOID_NAMESPACE, {1: ([1], 7), 2: (None, 8)}),),
    }
    kg[b] = {
        "sum": (("b", Point(1), 12),),
        "avg": (("b", VOID_NAMESPACE, (10, 4)),),
        "count": (("b", VOID_NAMESPACE, 2),),
    }
    kg[c] = {"count": (("c", VOID_NAMESPACE, 3),)}
    keyed = KeyedStateSnapshot(128, KeyGroupRange(low, high), _descriptors(), kg)
    timers = {
        "window-timers": TimerServiceSnapshot({
            a: TimersOfKeyGroup(((9, "a", TimeWindow(0, 10)), (19, "a", TimeWindow(10, 20))),
                                ((5, "a", TimeWindow(0, 10)),)),
            c: TimersOfKeyGroup((), ((7, "c", GlobalWindow()),)),
        }),
        "user-timers": TimerServiceSnapshot({b: TimersOfKeyGroup(((100, "b", VOID_NAMESPACE),))}),
        "no-timers": TimerServiceSnapshot(),
    }
    operator_state = {
        "offsets": ("SPLIT_DISTRIBUTE", (("split-0", 17), ("split-1", 4))),
        "seen": ("UNION", ("x", 2, [3])),
        "rules": ("BROADCAST", (("r1", {"limit": 3}), (("composite", 1), None))),
        "empty": ("SPLIT_DISTRIBUTE", ()),
    }
    return OperatorSubtaskState(5, operator_state, (keyed,), timers)


@pytest.fixture(params=["local", "file-url", "memory"])
def checkpoint_dir(request, tmp_path):
    if request.param == "local":
        yield str(tmp_path / "checkpoints")
    elif request.param == "file-url":
        yield f"file://{tmp_path}/checkpoints"
    else:
        root = f"memory://rill-test-{request.node.name.replace('[', '-').rstrip(']')}"
        yield root
        fs = fsspec.filesystem("memory")
        if fs.exists(root):
            fs.rm(root, recursive=True)


def _complete(storage, checkpoint_id, states, snapshot_type=SnapshotType.CHECKPOINT, target=None):
    """Write every ``{subtask: state}`` as operator OID and finalize; returns the pointer."""
    location = (storage.initialize_location_for_checkpoint(checkpoint_id)
                if snapshot_type is SnapshotType.CHECKPOINT
                else storage.initialize_location_for_savepoint(checkpoint_id, target))
    handles = {i: location.write_operator_subtask_state(OID, i, s, "counter") for i, s in states.items()}
    metadata = CheckpointMetadata(checkpoint_id, 1_700_000_000_000, {
        OID: OperatorState(OID, 2, 128, handles, "counter", "Keyed Counter")}, snapshot_type, JOB)
    return location.finalize(metadata)


def test_every_part_round_trips(checkpoint_dir):
    storage = create_checkpoint_storage(checkpoint_dir, JOB)
    location = storage.initialize_location_for_checkpoint(5)
    handle = location.write_operator_subtask_state(OID, 0, _state(), "counter")
    assert handle.read() == _state()
    restored = pickle.loads(pickle.dumps(handle))
    assert restored == handle and restored.read() == _state()
    assert handle.state_size == sum(
        fsspec.core.url_to_fs(f"{location.directory}/{f}")[0].size(
            fsspec.core.url_to_fs(f"{location.directory}/{f}")[1]) for f in handle.files())


def test_restricted_reads_equal_the_restricted_record(checkpoint_dir):
    handle = create_checkpoint_storage(checkpoint_dir, JOB).initialize_location_for_checkpoint(
        5).write_operator_subtask_state(OID, 0, _state(), None)
    for rng in (KeyGroupRange(0, 10), KeyGroupRange(20, 20), KeyGroupRange(21, 62),
                KeyGroupRange(32, 95), KeyGroupRange(64, 127), KeyGroupRange(0, 127)):
        assert handle.read(rng) == _state().restricted_to(rng), rng


def test_layout_paths_columns_and_relative_metadata(tmp_path):
    storage = FileSystemCheckpointStorage(str(tmp_path), JOB)
    pointer = _complete(storage, 5, {0: _state(0, 63), 1: _state(64, 127)})
    assert pointer == f"{tmp_path}/{JOB}/chk-5"
    files = sorted(str(p.relative_to(pointer)) for p in (tmp_path / JOB / "chk-5").rglob("*") if p.is_file())
    assert f"{OID}/keyed/count/part-00000.parquet" in files
    assert f"{OID}/keyed/count/part-00001.parquet" in files
    # a registered state without entries has no file (its descriptor is in _metadata)
    assert not (tmp_path / JOB / "chk-5" / OID / "keyed" / state_directory_name("registered but empty")).exists()
    assert f"{OID}/timers/part-00001.parquet" in files and f"{OID}/operator_state/part-00000.parquet" in files
    assert "_metadata" in files
    table = pq.read_table(f"{pointer}/{OID}/keyed/count")  # the directory: both subtasks
    assert table.column_names == ["checkpoint_id", "operator_uid", "operator_id", "state_name",
                                  "key_group", "key", "namespace", "value", "partition_id"]
    rows = sorted(zip(table.column("partition_id").to_pylist(), table.column("key_group").to_pylist(),
                      table.column("value").to_pylist()))
    assert rows == [(0, 3, -(2 ** 63)), (0, 3, 1), (0, 20, 2), (0, 63, 3),
                    (1, 67, -(2 ** 63)), (1, 67, 1), (1, 84, 2), (1, 127, 3)]
    assert set(table.column("checkpoint_id").to_pylist()) == {5}
    assert set(table.column("operator_uid").to_pylist()) == {"counter"}
    windows = pq.read_table(f"{pointer}/{OID}/keyed/window-contents/part-00000.parquet").column("namespace")
    assert windows.to_pylist() == [
        {"type": "TimeWindow", "start": 0, "end": 10, "id": None, "value": None},
        {"type": "TimeWindow", "start": 10, "end": 20, "id": None, "value": None},
        {"type": "GlobalWindow", "start": None, "end": None, "id": None, "value": None},
        {"type": "CountWindow", "start": None, "end": None, "id": 4, "value": None}]
    ttl = pq.read_table(f"{pointer}/{OID}/keyed/ttl-value/part-00000.parquet").column("value")
    assert ttl.to_pylist() == [{"user_value": "v", "last_access_timestamp_ms": 1000}]
    timers = pq.read_table(f"{pointer}/{OID}/timers/part-00000.parquet")
    assert timers.select(["timer_service", "time_domain", "key_group", "timestamp"]).to_pylist()[:3] == [
        {"timer_service": "window-timers", "time_domain": "EVENT_TIME", "key_group": 3, "timestamp": 9},
        {"timer_service": "window-timers", "time_domain": "EVENT_TIME", "key_group": 3, "timestamp": 19},
        {"timer_service": "window-timers", "time_domain": "PROCESSING_TIME", "key_group": 3, "timestamp": 5}]
    meta = json.loads((tmp_path / JOB / "chk-5" / "_metadata").read_text())
    assert meta["format"] == "rill-snapshot" and meta["format_version"] == 1
    op = meta["operators"][0]
    assert (op["operator_id"], op["uid"], op["name"], op["parallelism"], op["max_parallelism"]) == (
        OID, "counter", "Keyed Counter", 2, 128)
    sub = op["subtasks"][1]
    assert sub["subtask_index"] == 1 and sub["keyed_state"][0]["key_group_range"] == [64, 127]
    count = next(s for s in sub["keyed_state"][0]["states"] if s["name"] == "count")
    assert count == {**count, "kind": "VALUE", "type": "LONG", "ttl": False,
                     "file": f"{OID}/keyed/count/part-00001.parquet", "row_groups": [[67, 127, 4]]}
    listed = [s["file"] for sub in op["subtasks"] for k in sub["keyed_state"] for s in k["states"] if s["file"]]
    listed += [sub[part]["file"] for sub in op["subtasks"] for part in ("timers", "operator_state")]
    assert sorted(listed) == sorted(f for f in files if f != "_metadata")  # relative, complete


def test_state_directory_names_are_safe_for_spark_and_distinct():
    assert state_directory_name("count") == "count"
    assert state_directory_name("window-contents.v2") == "window-contents.v2"
    odd = [state_directory_name(n) for n in ("_hidden", ".dot", "a/b", "a b", "k=v", "a_b")]
    assert odd[-1] == "a_b"
    assert all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", n) and "=" not in n for n in odd)
    assert len(set(odd)) == len(odd)
    assert re.fullmatch(r"a_b-[0-9a-f]{8}", state_directory_name("a/b"))


class CountingFileSystem(MemoryFileSystem):
    """fsspec's memory file system counting opened files and bytes read (to prove pruning)."""

    protocol = "countingmem"
    store = {}
    pseudo_dirs = [""]
    opened = []
    bytes_read = 0

    @classmethod
    def _strip_protocol(cls, path):
        if path.startswith("countingmem://"):
            path = path[len("countingmem://"):]
        return MemoryFileSystem._strip_protocol(path)

    def _open(self, path, mode="rb", **kwargs):
        f = super()._open(path, mode, **kwargs)
        if "r" not in mode:
            return f
        CountingFileSystem.opened.append(path)
        data = f.read()
        owner = CountingFileSystem

        class Counted(io.BytesIO):
            def read(self, n=-1):
                out = super().read(n)
                owner.bytes_read += len(out)
                return out

            def readinto(self, b):
                n = super().readinto(b)
                owner.bytes_read += n
                return n
        return Counted(data)


fsspec.register_implementation("countingmem", CountingFileSystem, clobber=True)


def _digest(text):
    return hashlib.sha256(text.encode()).hexdigest() * 2


def _big_state(rows_per_key_group=50):
    kg = {k: {"count": tuple((f"key-{k}-{i}", VOID_NAMESPACE, _digest(f"{k}-{i}"))
                             for i in range(rows_per_key_group)),
              "other": ((f"key-{k}", VOID_NAMESPACE, "x" * 20),)} for k in range(0, 128, 2)}
    kg[1] = {"only-in-1": (("one", VOID_NAMESPACE, 1),)}
    return OperatorSubtaskState(1, {}, (KeyedStateSnapshot(128, KeyGroupRange(0, 127), {
        "count": ValueStateDescriptor("count", Types.STRING()),
        "other": ValueStateDescriptor("other", Types.STRING()),
        "only-in-1": ValueStateDescriptor("only-in-1", Types.LONG())}, kg),), {})


def test_a_key_group_range_reads_only_its_row_groups_and_files():
    root = "countingmem://pruning"
    try:
        storage = FileSystemCheckpointStorage(root, JOB, row_group_target_rows=100)
        handle = storage.initialize_location_for_checkpoint(1).write_operator_subtask_state(OID, 0, _big_state())
        count = next(s for s in handle.description["keyed_state"][0]["states"] if s["name"] == "count")
        # 50 rows per key group, closed at >= 100 rows: two key groups (0, 2), (4, 6), ...
        assert count["row_groups"][:3] == [[0, 2, 100], [4, 6, 100], [8, 10, 100]]
        assert len(count["row_groups"]) == 32

        CountingFileSystem.opened, CountingFileSystem.bytes_read = [], 0
        whole = handle.read()
        all_bytes = CountingFileSystem.bytes_read
        assert len(CountingFileSystem.opened) == 3

        CountingFileSystem.opened, CountingFileSystem.bytes_read = [], 0
        part = handle.read(KeyGroupRange(4, 7))
        assert part == whole.restricted_to(KeyGroupRange(4, 7))
        assert sorted(dict(part.keyed_state[0].key_groups)) == [4, 6]
        # "only-in-1" has no entry in [4, 7]: its file is not even opened
        assert sorted(p.rsplit("/", 2)[-2] for p in CountingFileSystem.opened) == ["count", "other"]
        # one row group of 32 (and the files' footers) instead of everything
        assert CountingFileSystem.bytes_read < all_bytes / 4, (CountingFileSystem.bytes_read, all_bytes)
    finally:
        CountingFileSystem.store.clear()


def test_small_keyed_state_is_one_row_group(tmp_path):
    kg = {k: {"count": ((f"k{k}", VOID_NAMESPACE, k),)} for k in range(128)}
    state = OperatorSubtaskState(1, {}, (KeyedStateSnapshot(128, KeyGroupRange(0, 127), {
        "count": ValueStateDescriptor("count", Types.LONG())}, kg),), {})
    handle = FileSystemCheckpointStorage(str(tmp_path), JOB).initialize_location_for_checkpoint(
        1).write_operator_subtask_state(OID, 0, state)
    assert handle.description["keyed_state"][0]["states"][0]["row_groups"] == [[0, 127, 128]]
    assert handle.state_size < 8 * 1024


def test_finalize_is_atomic(tmp_path):
    storage = FileSystemCheckpointStorage(str(tmp_path), JOB)
    location = storage.initialize_location_for_checkpoint(3)
    handle = location.write_operator_subtask_state(OID, 0, _state())
    bad = CheckpointMetadata(3, 0, {OID: OperatorState(OID, 2, 128, {
        0: handle, 1: InMemoryOperatorSubtaskStateHandle(_state())})})
    with pytest.raises(ValueError, match="subtask 1: .* is not a file handle"):
        location.finalize(bad)
    elsewhere = storage.initialize_location_for_checkpoint(4).write_operator_subtask_state(OID, 1, _state())
    with pytest.raises(ValueError, match=f"subtask 1: .* is not a file handle of {location.directory}"):
        location.finalize(CheckpointMetadata(3, 0, {OID: OperatorState(OID, 2, 128, {0: handle, 1: elsewhere})}))
    chk = tmp_path / JOB / "chk-3"
    # no _metadata, no temporary file; the marker of a checkpoint being written is still there
    assert sorted(p.name for p in chk.iterdir()) == [".in-progress", OID]
    # What a crash between writing and renaming leaves is not a completed checkpoint.
    (chk / "._metadata.inprogress-0123456789ab").write_text('{"format": "rill-snapshot"')
    assert storage.completed_checkpoints() == []
    with pytest.raises(FileNotFoundError, match="_metadata is missing"):
        storage.resolve_checkpoint(str(chk))
    good = CheckpointMetadata(3, 0, {OID: OperatorState(OID, 1, 128, {0: handle})})
    assert location.finalize(good) == str(chk)
    assert storage.completed_checkpoints() == [(3, str(chk))]
    assert [p.name for p in chk.iterdir() if p.name.startswith(".")] == ["._metadata.inprogress-0123456789ab"]


def test_dispose_deletes_the_directory_and_is_idempotent(checkpoint_dir):
    storage = create_checkpoint_storage(checkpoint_dir, JOB)
    location = storage.initialize_location_for_checkpoint(9)
    location.write_operator_subtask_state(OID, 0, _state())
    fs, path = fsspec.core.url_to_fs(location.directory)
    assert fs.exists(path)
    location.dispose()
    assert not fs.exists(path)
    location.dispose()


def test_resolve_by_every_pointer_form(tmp_path):
    storage = FileSystemCheckpointStorage(str(tmp_path / "chk"), JOB, savepoint_dir=str(tmp_path / "sp"))
    chk = _complete(storage, 4, {0: _state()})
    savepoint = _complete(storage, 6, {0: _state()}, SnapshotType.SAVEPOINT, target=None)
    assert re.fullmatch(re.escape(str(tmp_path / "sp")) + r"/savepoint-fedcba-[0-9a-f]{12}", savepoint)
    other = _complete(storage, 7, {0: _state()}, SnapshotType.SAVEPOINT, target=str(tmp_path / "other"))
    assert other.startswith(str(tmp_path / "other") + "/savepoint-fedcba-")
    for pointer in (chk, chk + "/", chk + "/_metadata", "file://" + chk, savepoint, savepoint + "/_metadata"):
        meta = resolve_checkpoint_pointer(pointer)
        assert meta.operator_states[OID].subtask_states[0].read() == _state(), pointer
        assert meta.operator_states[OID].uid == "counter"
    meta = storage.resolve_checkpoint(savepoint)
    assert (meta.checkpoint_id, meta.snapshot_type, meta.job_id, meta.external_pointer) == (
        6, SnapshotType.SAVEPOINT, JOB, savepoint)
    assert meta.state_size == meta.operator_states[OID].subtask_states[0].state_size > 0
    with pytest.raises(FileNotFoundError):
        resolve_checkpoint_pointer(str(tmp_path / "nothing"))


def test_savepoints_need_a_directory(tmp_path):
    with pytest.raises(ValueError, match="No savepoint directory"):
        FileSystemCheckpointStorage(str(tmp_path), JOB).initialize_location_for_savepoint(1, None)
    memory = create_checkpoint_storage(None, JOB)
    with pytest.raises(ValueError, match="No savepoint directory"):
        memory.initialize_location_for_savepoint(1, None)
    pointer = _complete(memory, 2, {0: _state()}, SnapshotType.SAVEPOINT, target=str(tmp_path / "sp"))
    assert memory.resolve_checkpoint(pointer).operator_states[OID].subtask_states[0].read() == _state()


def test_a_newer_format_version_is_refused(tmp_path):
    storage = FileSystemCheckpointStorage(str(tmp_path), JOB)
    pointer = _complete(storage, 1, {0: _state()})
    meta_file = tmp_path / JOB / "chk-1" / "_metadata"
    doc = json.loads(meta_file.read_text())
    doc["format_version"] = 2
    meta_file.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="format version 2 is newer than the version 1 this Rill reads"):
        resolve_checkpoint_pointer(pointer)
    meta_file.write_text('{"something": "else"}')
    with pytest.raises(ValueError, match="not a Rill snapshot's _metadata"):
        resolve_checkpoint_pointer(pointer)


def test_a_moved_checkpoint_still_reads(tmp_path):
    storage = FileSystemCheckpointStorage(str(tmp_path / "a"), JOB)
    pointer = _complete(storage, 2, {0: _state(0, 63), 1: _state(64, 127)})
    moved = str(tmp_path / "elsewhere" / "kept")
    shutil.move(pointer, moved)
    meta = resolve_checkpoint_pointer(moved)
    assert meta.operator_states[OID].subtask_states[1].read() == _state(64, 127)
    # ... and copied to another file system
    memory = fsspec.filesystem("memory")
    memory.put(moved, "/copied-checkpoint", recursive=True)
    try:
        meta = resolve_checkpoint_pointer("memory://copied-checkpoint")
        handle = meta.operator_states[OID].subtask_states[0]
        assert isinstance(handle, FileOperatorSubtaskStateHandle)
        assert handle.read(KeyGroupRange(0, 10)) == _state(0, 63).restricted_to(KeyGroupRange(0, 10))
    finally:
        memory.rm("/copied-checkpoint", recursive=True)


def test_retention_keeps_the_latest_completed_checkpoints(checkpoint_dir):
    storage = create_checkpoint_storage(checkpoint_dir, JOB)
    for cid in (1, 2, 3, 4):
        _complete(storage, cid, {0: _state()})
    aborted = storage.initialize_location_for_checkpoint(5)  # never finalized
    assert [cid for cid, _ in storage.completed_checkpoints()] == [1, 2, 3, 4]
    assert storage.latest_completed_checkpoint() == f"{checkpoint_dir}/{JOB}/chk-4"
    assert storage.retain_latest(2) == [1, 2]
    assert [cid for cid, _ in storage.completed_checkpoints()] == [3, 4]
    fs, path = fsspec.core.url_to_fs(f"{checkpoint_dir}/{JOB}")
    assert sorted(p.rsplit("/", 1)[-1] for p in fs.ls(path, detail=False)) == ["chk-3", "chk-4", "chk-5"]
    aborted.dispose()
    assert storage.retain_latest(5) == []
    with pytest.raises(ValueError, match="at least 1"):
        storage.retain_latest(0)


def test_a_value_that_does_not_fit_its_declared_type_names_operator_state_and_value(tmp_path):
    kg = {3: {"count": (("a", VOID_NAMESPACE, "not a number"),)}}
    state = OperatorSubtaskState(1, {}, (KeyedStateSnapshot(128, KeyGroupRange(0, 63), {
        "count": ValueStateDescriptor("count", Types.LONG())}, kg),), {})
    location = FileSystemCheckpointStorage(str(tmp_path), JOB).initialize_location_for_checkpoint(1)
    with pytest.raises(TypeValueError, match=r"operator counter \(subtask 0\), state 'count', value: .*int64"):
        location.write_operator_subtask_state(OID, 0, state, "counter")
    kg = {3: {"row": (("a", VOID_NAMESPACE, (1, 2)),)}}
    bad_row = ValueStateDescriptor("row", Types.ROW_NAMED(["id", "ID"], [Types.INT(), Types.INT()]))
    state = OperatorSubtaskState(1, {}, (KeyedStateSnapshot(128, KeyGroupRange(0, 63), {"row": bad_row}, kg),), {})
    with pytest.raises(ValueError, match="differ only in case"):
        location.write_operator_subtask_state(OID, 0, state, "counter")


def test_typed_keys_when_the_snapshot_declares_the_key_type(tmp_path):
    kg = {3: {"count": (("UA", VOID_NAMESPACE, 1),)}, 9: {"count": (("AA", VOID_NAMESPACE, 2),)}}
    state = OperatorSubtaskState(1, {}, (KeyedStateSnapshot(128, KeyGroupRange(0, 63), {
        "count": ValueStateDescriptor("count", Types.LONG())}, kg, key_type=Types.STRING()),),
        {"t": TimerServiceSnapshot({3: TimersOfKeyGroup(((5, "UA", VOID_NAMESPACE),))})})
    location = FileSystemCheckpointStorage(str(tmp_path), JOB).initialize_location_for_checkpoint(1)
    handle = location.write_operator_subtask_state(OID, 0, state)
    assert handle.read() == state
    table = pq.read_table(f"{location.directory}/{OID}/keyed/count")
    assert table.select(["key", "value"]).to_pylist() == [{"key": "UA", "value": 1}, {"key": "AA", "value": 2}]
    assert pq.read_table(f"{location.directory}/{OID}/timers").column("key").to_pylist() == ["UA"]


def test_keyed_state_directory_finds_a_state_by_operator_uid_or_id(tmp_path):
    pointer = _complete(FileSystemCheckpointStorage(str(tmp_path), JOB), 1, {0: _state(0, 63), 1: _state(64, 127)})
    path = keyed_state_directory(pointer + "/_metadata", "counter", "ttl-list")
    assert path == f"{pointer}/{OID}/keyed/ttl-list"
    assert keyed_state_directory(pointer, OID, "ttl-list") == path
    assert pq.read_table(path).num_rows == 2
    with pytest.raises(KeyError, match="No operator with uid or id 'nope'"):
        keyed_state_directory(pointer, "nope", "count")
    with pytest.raises(KeyError, match="has no keyed state 'nope'"):
        keyed_state_directory(pointer, "counter", "nope")
