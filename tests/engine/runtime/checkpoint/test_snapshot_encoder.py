"""Large heap snapshots written by the snapshot encoder's helper process
(rill.runtime.checkpoint.snapshot_encoder): the same files as the task's own thread writes,
the same errors, a helper that dies replaced and its write done in process, and a job whose
state is large enough checkpointing through it and restoring from what it wrote, in both
execution modes."""

from __future__ import annotations

import os
import pickle
import signal

import pyarrow.parquet as pq
import pytest

from _fail_on_signal import counts_by_attempt, run_failing_once
from rill.common.type_conversion import TypeValueError
from rill.common.typeinfo import Types
from rill.runtime.checkpoint import snapshot_encoder
from rill.runtime.checkpoint.snapshot_encoder import (
    MIN_ENTRIES, EncoderUnavailable, SnapshotEncoder, default_encoder, write_operator_subtask_state)
from rill.state import ValueStateDescriptor
from rill.state.api import VOID_NAMESPACE
from rill.state.checkpoint.filesystem import FileSystemCheckpointStorage
from rill.state.checkpoint.key_group_views import PinnedKeyGroups
from rill.state.checkpoint.operator_subtask_state import KeyedStateSnapshot, OperatorSubtaskState
from rill.state.heap import HeapKeyedStateBackend
from rill.state.key_groups import KeyGroupRange

OID = "0123456789abcdef0123456789abcdef"
JOB = "fedcba9876543210fedcba9876543210"


def _state(n: int, value=lambda k: k, type_info=None) -> OperatorSubtaskState:
    backend = HeapKeyedStateBackend(KeyGroupRange(0, 127), 128)
    state = backend.get_or_create_keyed_state(ValueStateDescriptor("count", type_info))
    for k in range(n):
        backend.set_current_key(f"k{k}")
        state.update(value(k))
    snap = backend.sync_prepare_resources().async_snapshot()
    assert isinstance(snap.key_groups, PinnedKeyGroups) and snap.key_groups.entry_count() == n
    return OperatorSubtaskState(7, keyed_state=(snap,))


def _location(tmp_path, name):
    return FileSystemCheckpointStorage(str(tmp_path / name), JOB).initialize_location_for_checkpoint(7)


def _tables(handle):
    return {f: pq.read_table(f"{handle.directory}/{f}") for f in handle.files()}


def test_the_helper_writes_the_files_the_calling_thread_writes(tmp_path):
    state = _state(3000, type_info=Types.LONG())
    here = _location(tmp_path, "here").write_operator_subtask_state(OID, 1, state)
    encoder = SnapshotEncoder()
    try:
        there = encoder.write(_location(tmp_path, "there"), OID, 1, state)
        assert encoder.requests == 1 and encoder.pid is not None
    finally:
        encoder.close()
    assert encoder.pid is None
    ours, theirs = _tables(here), _tables(there)
    assert sorted(ours) == sorted(theirs) and ours
    for f, table in ours.items():
        assert table.equals(theirs[f]), f
    assert here.state_size == there.state_size
    assert here.read() == there.read()
    assert sorted(v for by in there.read().keyed_state[0].key_groups.values() for _k, _n, v in by["count"]) == list(
        range(3000))


def test_a_value_that_does_not_fit_its_type_fails_as_it_would_in_the_task(tmp_path):
    # the state's own update refuses such a value; a pinned view built by hand holds one
    pinned = PinnedKeyGroups(0, {"count": ([{VOID_NAMESPACE: {"a": 1, "b": 1.5}}] + [None] * 127, None)})
    state = OperatorSubtaskState(7, keyed_state=(KeyedStateSnapshot(
        128, KeyGroupRange(0, 127), {"count": ValueStateDescriptor("count", Types.LONG())}, pinned),))
    with pytest.raises(TypeValueError) as in_process:
        _location(tmp_path, "here").write_operator_subtask_state(OID, 0, state)
    encoder = SnapshotEncoder()
    try:
        with pytest.raises(TypeValueError) as in_helper:
            encoder.write(_location(tmp_path, "there"), OID, 0, state)
        assert encoder.pid is not None  # the helper goes on after a failed write
    finally:
        encoder.close()
    assert str(in_helper.value) == str(in_process.value) and "1.5" in str(in_process.value)


class _ExitsWhenUnpickled:
    """Unpickling it ends the process (a helper that dies while it reads a request)."""

    def __reduce__(self):
        return os._exit, (3,)


def test_a_helper_that_dies_mid_request_is_reported_and_replaced(tmp_path):
    encoder = SnapshotEncoder()
    try:
        with pytest.raises(EncoderUnavailable, match="exited with code 3"):
            encoder.write(_location(tmp_path, "dies"), OID, 0, _state(10, value=lambda k: _ExitsWhenUnpickled()))
        assert encoder.pid is None
        handle = encoder.write(_location(tmp_path, "next"), OID, 0, _state(10))
        assert encoder.requests == 1 and sorted(
            v for by in handle.read().keyed_state[0].key_groups.values() for _k, _n, v in by["count"]) == list(range(10))
    finally:
        encoder.close()


def test_large_local_snapshots_go_to_the_helper_and_the_rest_stay_in_the_task(tmp_path):
    encoder = default_encoder()
    before = encoder.requests
    write_operator_subtask_state(_location(tmp_path, "small"), OID, 0, _state(MIN_ENTRIES - 1))
    assert encoder.requests == before
    handle = write_operator_subtask_state(_location(tmp_path, "large"), OID, 0, _state(MIN_ENTRIES))
    assert encoder.requests == before + 1
    assert sum(len(by["count"]) for by in handle.read().keyed_state[0].key_groups.values()) == MIN_ENTRIES
    memory = FileSystemCheckpointStorage("memory://encoder-test", JOB).initialize_location_for_checkpoint(7)
    write_operator_subtask_state(memory, OID, 0, _state(MIN_ENTRIES))  # another process cannot see memory://
    assert encoder.requests == before + 1


def test_a_huge_snapshot_stays_in_the_task_so_that_its_memory_is_not_doubled(tmp_path, monkeypatch):
    encoder = default_encoder()
    monkeypatch.setattr(snapshot_encoder, "MAX_ENTRIES", MIN_ENTRIES)
    before = encoder.requests
    write_operator_subtask_state(_location(tmp_path, "huge"), OID, 0, _state(MIN_ENTRIES + 1))
    assert encoder.requests == before


def test_a_killed_helper_is_replaced_at_the_next_snapshot(tmp_path):
    encoder = default_encoder()
    write_operator_subtask_state(_location(tmp_path, "first"), OID, 0, _state(MIN_ENTRIES))
    pid = encoder.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    handle = write_operator_subtask_state(_location(tmp_path, "second"), OID, 0, _state(MIN_ENTRIES))
    assert sum(len(by["count"]) for by in handle.read().keyed_state[0].key_groups.values()) == MIN_ENTRIES
    assert encoder.pid not in (None, pid)


def test_a_pinned_view_pickles_its_dicts_for_the_helper():
    state = _state(40)
    view = state.keyed_state[0].key_groups
    back = pickle.loads(snapshot_encoder._dumps(view))
    assert type(back) is PinnedKeyGroups and dict(back) == dict(view)
    assert type(pickle.loads(pickle.dumps(view))) is dict  # what travels to the JobMaster is unchanged


# -- a job whose keyed state the helper writes, in both modes ----------------------------------
# test_restart_from_checkpoint's job with a key space large enough for the helper: the source
# emits 0..N-1 (one record per key) and waits; after a checkpoint taken once every record was
# counted, the test makes it fail; the restarted attempt, restored from that checkpoint (whose
# keyed state the helper wrote), reads N..2N-1 onto the restored counts: every key ends at 2.

N = MIN_ENTRIES + 500


def test_a_job_restores_the_large_state_the_helper_wrote(env, tmp_path, execution_mode):
    before = default_encoder().requests
    _client, out = run_failing_once(env, tmp_path, N, N, "large state through the snapshot encoder",
                                    **{"execution.checkpointing.dir": str(tmp_path / "checkpoints")})
    assert counts_by_attempt(out) == {0: {k: [1] for k in range(N)}, 1: {k: [2] for k in range(N)}}
    if execution_mode == "embedded":  # this process's helper wrote them
        assert default_encoder().requests >= before + 2
