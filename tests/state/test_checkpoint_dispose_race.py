"""A discarded checkpoint's directory races its writers (issue 11): an aborted or subsumed
checkpoint is disposed of while a subtask's asynchronous part still writes into it, or after it,
by a late subtask. Driven deterministically with the real file system storage (local and fsspec
memory) and a controlled writer: a state value whose encoding (inside the open Parquet file)
waits until the test lets it go. Whatever the interleaving, ``dispose`` raises nothing, the writer
gets ``CheckpointLocationDisposedError`` and no directory is left behind.
"""

from __future__ import annotations

import os
import threading
import uuid

import fsspec
import pytest

from rill.state.api import VOID_NAMESPACE
from rill.state.checkpoint.filesystem import IN_PROGRESS_MARKER, FileSystemCheckpointStorage
from rill.state.checkpoint.metadata import CheckpointMetadata
from rill.state.checkpoint.operator_subtask_state import KeyedStateSnapshot, OperatorSubtaskState
from rill.state.checkpoint.storage_api import CheckpointLocationDisposedError
from rill.state.key_groups import KeyGroupRange

OID = "0123456789abcdef0123456789abcdef"
JOB = "fedcba9876543210fedcba9876543210"
WAIT_S = 30


class Gate:
    """A state value whose encoding (cloudpickle, in the open file) signals ``entered`` and waits
    for ``release``; it encodes as the int 7."""

    def __init__(self):
        self.entered, self.release = threading.Event(), threading.Event()

    def __reduce__(self):
        self.entered.set()
        assert self.release.wait(WAIT_S), "the test never released the writer"
        return int, (7,)


def _state(first_value) -> OperatorSubtaskState:
    """Two untyped keyed states, ``a-first`` (written first, holding ``first_value``) and
    ``b-second``: two files in two directories."""
    kg = {3: {"a-first": (("k", VOID_NAMESPACE, first_value),), "b-second": (("k", VOID_NAMESPACE, 2),)}}
    return OperatorSubtaskState(1, {}, (KeyedStateSnapshot(128, KeyGroupRange(0, 63), {}, kg),), {})


@pytest.fixture(params=["local", "memory"])
def checkpoint_dir(request, tmp_path):
    if request.param == "local":
        yield str(tmp_path / "checkpoints")
        return
    url = f"memory://dispose-race-{uuid.uuid4().hex}"
    yield url
    fs, path = fsspec.core.url_to_fs(url)
    if fs.exists(path):
        fs.rm(path, recursive=True)


def _left(checkpoint_dir: str) -> list:
    """What is under the job's directory (nothing once every checkpoint is discarded)."""
    fs, root = fsspec.core.url_to_fs(f"{checkpoint_dir}/{JOB}")
    found = fs.find(root, withdirs=True) if fs.exists(root) else []
    return sorted(p for p in found if p.rstrip("/") != root.rstrip("/"))


def _write_in_thread(location, state):
    outcome = {}

    def run():
        try:
            outcome["handle"] = location.write_operator_subtask_state(OID, 0, state)
        except BaseException as e:  # noqa: BLE001 - the test inspects it
            outcome["error"] = e

    thread = threading.Thread(target=run, name="controlled checkpoint writer")
    thread.start()
    return thread, outcome


def test_disposed_while_a_writer_is_inside_a_file(checkpoint_dir):
    """The writer is inside its first file (created, open) when the checkpoint is disposed of;
    released, it finds the location gone: it removes what it wrote, does not write its second
    file (which would have re-created the directory) and raises; nothing is left."""
    storage = FileSystemCheckpointStorage(checkpoint_dir, JOB)
    location = storage.initialize_location_for_checkpoint(1)
    gate = Gate()
    thread, outcome = _write_in_thread(location, _state(gate))
    assert gate.entered.wait(WAIT_S), "the writer never reached its first file"
    location.dispose()
    gate.release.set()
    thread.join(WAIT_S)
    assert not thread.is_alive()
    assert isinstance(outcome.get("error"), CheckpointLocationDisposedError), outcome
    assert f"Checkpoint 1 at {location.directory} was discarded while operator {OID} (subtask 0)" in str(
        outcome["error"])
    assert _left(checkpoint_dir) == []


def test_a_late_writer_after_the_dispose_writes_nothing(checkpoint_dir):
    """A subtask that starts writing after the checkpoint was disposed of (a late asynchronous
    part) raises at once and does not re-create the directory."""
    storage = FileSystemCheckpointStorage(checkpoint_dir, JOB)
    location = storage.initialize_location_for_checkpoint(2)
    location.dispose()
    with pytest.raises(CheckpointLocationDisposedError, match="Checkpoint 2 at .* was discarded"):
        location.write_operator_subtask_state(OID, 0, _state(1))
    assert _left(checkpoint_dir) == []


def test_a_file_landing_between_the_listing_and_the_removal_does_not_fail_the_dispose(tmp_path, monkeypatch):
    """The local file system's recursive delete lists a directory, deletes its entries, then
    removes it: a writer's file landing in between made that removal fail with "OSError:
    Directory not empty". A file created at exactly that moment (in the first directory
    removal) is now deleted by a retry; nothing escapes and nothing is left."""
    checkpoint_dir = str(tmp_path / "checkpoints")
    location = FileSystemCheckpointStorage(checkpoint_dir, JOB).initialize_location_for_checkpoint(3)
    location.write_operator_subtask_state(OID, 0, _state(1))
    real_rmdir = os.rmdir
    landed = []

    def rmdir_after_a_late_file(path, *args, **kwargs):
        if not landed:  # the first directory rmtree removes: a file lands in it first
            dir_fd = kwargs.get("dir_fd")
            directory = path if dir_fd is None else os.path.join(f"/proc/self/fd/{dir_fd}", path)
            late = os.path.join(directory, "late.parquet")
            with open(late, "wb") as f:
                f.write(b"late")
            landed.append(late)
        return real_rmdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "rmdir", rmdir_after_a_late_file)
    location.dispose()
    monkeypatch.undo()
    assert len(landed) == 1
    assert _left(checkpoint_dir) == []


def test_finalize_removes_the_marker_and_a_completed_checkpoint_discards_cleanly(tmp_path):
    """The marker lives from the directory's creation to ``finalize``: a completed checkpoint
    holds only its data and ``_metadata`` (what Spark and a restore read)."""
    storage = FileSystemCheckpointStorage(str(tmp_path), JOB)
    location = storage.initialize_location_for_checkpoint(4)
    assert os.path.exists(os.path.join(location.directory, IN_PROGRESS_MARKER))
    location.write_operator_subtask_state(OID, 0, _state(1))
    location.finalize(CheckpointMetadata(4, 0, {}))
    assert sorted(os.listdir(location.directory)) == [OID, "_metadata"]
    storage.discard_checkpoint(4)
    assert _left(str(tmp_path)) == []
