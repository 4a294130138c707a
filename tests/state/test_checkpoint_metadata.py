"""The checkpoint metadata records and the in-memory storage: validation and key-group
restriction (what a rescaled subtask reads through a handle)."""

import pickle

import pytest

from rill.state.checkpoint.filesystem import FileSystemCheckpointStorage
from rill.state.checkpoint.metadata import CheckpointMetadata, OperatorState
from rill.state.checkpoint.operator_subtask_state import (
    KeyedStateSnapshot, OperatorSubtaskState, TimerServiceSnapshot, TimersOfKeyGroup)
from rill.state.checkpoint.storage import MemoryCheckpointStorageLocation, create_checkpoint_storage
from rill.state.key_groups import KeyGroupRange

OID = "0123456789abcdef0123456789abcdef"


def _state():
    keyed = KeyedStateSnapshot(128, KeyGroupRange(0, 63), {}, {
        3: {"count": (("a", None, 1),)}, 40: {"count": (("b", None, 2),)}})
    timers = {"user-timers": TimerServiceSnapshot({3: TimersOfKeyGroup(((10, "a", None),)),
                                                   40: TimersOfKeyGroup(((20, "b", None),))})}
    return OperatorSubtaskState(7, {"offsets": ("SPLIT_DISTRIBUTE", (1, 2))}, (keyed,), timers)


def test_handle_reads_only_the_requested_key_groups_and_all_operator_state():
    location = create_checkpoint_storage(None, "job").initialize_location_for_checkpoint(7)
    handle = location.write_operator_subtask_state(OID, 0, _state())
    part = handle.read(KeyGroupRange(32, 95))
    assert part.keyed_state[0].key_group_range == KeyGroupRange(32, 63)
    assert dict(part.keyed_state[0].key_groups) == {40: {"count": (("b", None, 2),)}}
    assert dict(part.timers["user-timers"].key_groups) == {40: TimersOfKeyGroup(((20, "b", None),))}
    assert part.operator_state == {"offsets": ("SPLIT_DISTRIBUTE", (1, 2))}
    assert handle.read() == _state()
    assert isinstance(pickle.loads(pickle.dumps(location)), MemoryCheckpointStorageLocation)


def test_operator_state_validates_ids_and_subtasks():
    with pytest.raises(ValueError, match="32 lowercase hex"):
        OperatorState("xyz", 1, 128)
    with pytest.raises(ValueError, match=r"subtask indexes \[2\] are outside \[0, 2\)"):
        OperatorState(OID, 2, 128, {2: None})
    with pytest.raises(ValueError, match="parallelism 200"):
        OperatorState(OID, 200, 128)
    with pytest.raises(ValueError, match="filed under"):
        CheckpointMetadata(1, 0, {"f" * 32: OperatorState(OID, 1, 128)})


def test_a_directory_gives_the_file_system_storage(tmp_path):
    storage = create_checkpoint_storage(str(tmp_path), "ab" * 16)
    assert isinstance(storage, FileSystemCheckpointStorage)
    assert storage.job_directory == f"{tmp_path}/{'ab' * 16}"
