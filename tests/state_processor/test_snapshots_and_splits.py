"""Finding snapshots and operators (savepoint, checkpoint, directory of checkpoints, root of
one job's checkpoints) and planning keyed-state splits (runs of row groups, key-group pruning),
on real snapshot files; no Spark."""

import pytest

from rill.common.typeinfo import Types
from rill.state import ValueStateDescriptor
from rill.state.api import VOID_NAMESPACE
from rill.state.checkpoint.filesystem import FileSystemCheckpointStorage
from rill.state.checkpoint.metadata import CheckpointMetadata, OperatorState
from rill.state.checkpoint.operator_subtask_state import KeyedStateSnapshot, OperatorSubtaskState
from rill.state.checkpoint.parquet_layout import plan_row_groups
from rill.state.key_groups import KeyGroupRange, assign_to_key_group
from rill.state_processor import OperatorIdentifier
from rill.state_processor import keyed_splits
from rill.state_processor.keyed_splits import plan_keyed_state_splits, read_keyed_state_split
from rill.state_processor.snapshots import completed_checkpoints, find_operator, resolve_snapshot

OID = "a1" * 16
JOB, OTHER_JOB = "b2" * 16, "c3" * 16
KEYS = [f"k{i}" for i in range(200)]


def _write(root, job, cid, rows_per_group=None):
    """Checkpoint ``cid`` of one operator (uid ``op``, one subtask over 128 key groups, STRING
    keys) with a LONG state ``n``: key ``k<i>`` -> i * cid."""
    per_kg = {}
    for i, key in enumerate(KEYS):
        per_kg.setdefault(assign_to_key_group(key, 128), []).append((key, VOID_NAMESPACE, i * cid))
    snap = KeyedStateSnapshot(128, KeyGroupRange(0, 127), {"n": ValueStateDescriptor("n", Types.LONG())},
                              {kg: {"n": tuple(e)} for kg, e in per_kg.items()}, key_type=Types.STRING())
    extra = {} if rows_per_group is None else {"row_group_target_rows": rows_per_group}
    location = FileSystemCheckpointStorage(str(root), job, **extra).initialize_location_for_checkpoint(cid)
    handle = location.write_operator_subtask_state(OID, 0, OperatorSubtaskState(cid, {}, (snap,)), "op")
    return location.finalize(CheckpointMetadata(cid, 0, {OID: OperatorState(OID, 1, 128, {0: handle}, "op")}))


def test_resolve_a_snapshot_a_directory_of_checkpoints_and_the_root_of_one_job(tmp_path):
    first, second = _write(tmp_path, JOB, 1), _write(tmp_path, JOB, 2)
    job_dir = str(tmp_path / JOB)
    assert [cid for cid, _ in completed_checkpoints(job_dir)] == [1, 2]
    assert resolve_snapshot(job_dir).checkpoint_id == 2
    assert resolve_snapshot(str(tmp_path)).checkpoint_id == 2
    assert resolve_snapshot(job_dir, 1).external_pointer == first
    assert resolve_snapshot(second + "/_metadata").checkpoint_id == 2
    with pytest.raises(ValueError, match="snapshot of checkpoint 2, not of the checkpointId 1"):
        resolve_snapshot(second, 1)
    with pytest.raises(FileNotFoundError, match=r"No completed checkpoint 9 under .* \(completed: \[1, 2\]\)"):
        resolve_snapshot(job_dir, 9)
    _write(tmp_path, OTHER_JOB, 1)
    with pytest.raises(ValueError, match="holds the checkpoints of 2 jobs"):
        resolve_snapshot(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="No completed checkpoint"):
        resolve_snapshot(str(tmp_path / "nothing"))


def test_find_operator_by_uid_or_id(tmp_path):
    metadata = resolve_snapshot(_write(tmp_path, JOB, 1))
    assert find_operator(metadata, "op").operator_id == OID
    assert find_operator(metadata, OperatorIdentifier.for_uid_hash(OID)).uid == "op"
    with pytest.raises(KeyError, match=r"no state of the operator with uid 'x' \(operators with state: \['op \("):
        find_operator(metadata, "x")
    with pytest.raises(ValueError, match="is not 32 lowercase hex digits"):
        OperatorIdentifier.for_uid_hash("XYZ")
    with pytest.raises(TypeError, match="uid \\(str\\) or an OperatorIdentifier"):
        OperatorIdentifier.of(7)


def test_splits_are_runs_of_row_groups_and_a_key_reads_one_key_group(tmp_path, monkeypatch):
    metadata = resolve_snapshot(_write(tmp_path, JOB, 1, rows_per_group=20))
    op = find_operator(metadata, "op")
    spans = op.subtask_states[0].description["keyed_state"][0]["states"][0]["row_groups"]
    assert len(spans) >= 10 and sum(n for _, _, n in spans) == len(KEYS)
    monkeypatch.setattr(keyed_splits, "SPLIT_TARGET_ROWS", 50)
    splits = plan_keyed_state_splits(op, metadata.external_pointer, "n")
    assert 1 < len(splits) < len(spans)
    for s in splits:  # at most 50 rows, or one row group that alone has more
        assert s.rows_planned <= 50 or len(plan_row_groups(s.row_groups, KeyGroupRange(*s.key_group_range))) == 1
    tables = [read_keyed_state_split(s) for s in splits]
    assert sorted(zip(*[sum((t.column(c).to_pylist() for t in tables), []) for c in ("key", "value")])) == sorted(
        (k, i) for i, k in enumerate(KEYS))
    kg = assign_to_key_group("k7", 128)
    pruned = plan_keyed_state_splits(op, metadata.external_pointer, "n", [kg], ["k7"])
    assert [s.key_group_range for s in pruned] == [(kg, kg)]
    assert pruned[0].rows_planned <= 40  # the one or two row groups holding that key group
    table = read_keyed_state_split(pruned[0])
    assert table.to_pydict()["key"] == ["k7"] and table.column("value").to_pylist() == [7]
