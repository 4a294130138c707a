"""Finding the snapshot a reader reads: a savepoint or checkpoint directory, or a directory of
many checkpoints (Flink's ``SavepointLoader`` / ``Checkpoints.loadCheckpointMetadata``), and an
operator in it by uid or id (Flink's ``OperatorIdentifier``).

Accepted paths (a path or any fsspec URL):

- a snapshot: a directory with ``_metadata`` (``.../chk-<n>``, ``.../savepoint-...``), or its
  ``_metadata`` file;
- a job's checkpoint directory ``<execution.checkpointing.dir>/<job-id>`` holding
  ``chk-<n>`` directories: the newest completed one, or the one of a given checkpoint id;
- ``<execution.checkpointing.dir>`` itself when it holds the checkpoints of exactly one job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple, Union

import fsspec

from rill.state.checkpoint.filesystem import METADATA_FILE_NAME, resolve_checkpoint_pointer
from rill.state.checkpoint.metadata import CheckpointMetadata, OperatorState

__all__ = ["OperatorIdentifier", "completed_checkpoints", "resolve_snapshot", "find_operator",
           "keyed_state_descriptions", "is_snapshot"]

_CHK = re.compile(r"chk-(\d+)")
_HEX32 = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True)
class OperatorIdentifier:
    """Which operator to read (Flink's ``org.apache.flink.state.api.OperatorIdentifier``): by
    the uid set with ``.uid(...)`` (:meth:`for_uid`) or by the 32-hex operator id
    (:meth:`for_uid_hash`, Flink's ``forUidHash``; Rill's generated id, or what
    ``set_uid_hash`` set). A plain ``str`` given to a reader is a uid.
    """

    uid: Optional[str] = None
    uid_hash: Optional[str] = None

    @staticmethod
    def for_uid(uid: str) -> "OperatorIdentifier":
        """The operator whose uid is ``uid``.

        :raises ValueError: for an empty uid."""
        if not isinstance(uid, str) or not uid:
            raise ValueError(f"OperatorIdentifier.for_uid: the uid must be a non-empty str, got {uid!r}")
        return OperatorIdentifier(uid=uid)

    @staticmethod
    def for_uid_hash(uid_hash: str) -> "OperatorIdentifier":
        """The operator whose id is ``uid_hash`` (32 lowercase hex digits).

        :raises ValueError: if it is not 32 lowercase hex digits."""
        if not isinstance(uid_hash, str) or not _HEX32.fullmatch(uid_hash):
            raise ValueError(f"OperatorIdentifier.for_uid_hash: {uid_hash!r} is not 32 lowercase hex digits")
        return OperatorIdentifier(uid_hash=uid_hash)

    @staticmethod
    def of(identifier: Union[str, "OperatorIdentifier"]) -> "OperatorIdentifier":
        """``identifier`` itself, or a uid given as a ``str``.

        :raises TypeError: for anything else."""
        if isinstance(identifier, OperatorIdentifier):
            return identifier
        if isinstance(identifier, str):
            return OperatorIdentifier.for_uid(identifier)
        raise TypeError(f"An operator is named by its uid (str) or an OperatorIdentifier, got {identifier!r}")

    def __str__(self) -> str:
        return f"uid {self.uid!r}" if self.uid is not None else f"operator id {self.uid_hash}"


def _fs(url: str) -> Tuple[Any, str]:
    return fsspec.core.url_to_fs(url)


def _join(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name


def _chk_dirs(url: str) -> List[Tuple[int, str]]:
    fs, root = _fs(url)
    if not fs.isdir(root):
        return []
    found = []
    for entry in fs.ls(root, detail=False):
        name = entry.rstrip("/").rsplit("/", 1)[-1]
        match = _CHK.fullmatch(name)
        if match and fs.isfile(_join(root, f"{name}/{METADATA_FILE_NAME}")):
            found.append((int(match.group(1)), _join(url, name)))
    return sorted(found)


def completed_checkpoints(path: str) -> List[Tuple[int, str]]:
    """``(checkpoint id, directory)`` of the completed checkpoints under ``path`` (a job's
    checkpoint directory, or a checkpoint directory holding one job's), oldest first.

    :raises FileNotFoundError: if there are none.
    :raises ValueError: if ``path`` holds the checkpoints of several jobs (name one).
    """
    found = _chk_dirs(path)
    if found:
        return found
    fs, root = _fs(path)
    jobs = {}
    if fs.isdir(root):
        for entry in fs.ls(root, detail=False):
            name = entry.rstrip("/").rsplit("/", 1)[-1]
            if fs.isdir(entry):
                inner = _chk_dirs(_join(path, name))
                if inner:
                    jobs[name] = inner
    if len(jobs) > 1:
        raise ValueError(f"{path} holds the checkpoints of {len(jobs)} jobs ({sorted(jobs)}): "
                         f"give the directory of one, <path>/<job-id>")
    if not jobs:
        raise FileNotFoundError(f"No completed checkpoint (chk-<n>/{METADATA_FILE_NAME}) under {path}")
    return next(iter(jobs.values()))


def is_snapshot(path: str) -> bool:
    """Whether ``path`` is a snapshot directory (with ``_metadata``) or its ``_metadata`` file."""
    fs, root = _fs(path)
    return fs.isfile(root) or fs.isfile(_join(root, METADATA_FILE_NAME))


def resolve_snapshot(path: str, checkpoint_id: Optional[int] = None) -> CheckpointMetadata:
    """The metadata of the snapshot ``path`` names (see the module docstring); its
    ``external_pointer`` is the snapshot's directory.

    :param checkpoint_id: in a directory of checkpoints, the one to read (default: the newest
        completed); for a snapshot path, it must be that snapshot's id.
    :raises FileNotFoundError: if there is no completed snapshot there, or none of that id.
    :raises ValueError: if ``checkpoint_id`` contradicts the snapshot named, or as
        :func:`completed_checkpoints` and ``resolve_checkpoint_pointer``.
    """
    if is_snapshot(path):
        metadata = resolve_checkpoint_pointer(path)
        if checkpoint_id is not None and metadata.checkpoint_id != checkpoint_id:
            raise ValueError(f"{path} is the snapshot of checkpoint {metadata.checkpoint_id}, not of the "
                             f"checkpointId {checkpoint_id} asked for")
        return metadata
    done = completed_checkpoints(path)
    if checkpoint_id is None:
        return resolve_checkpoint_pointer(done[-1][1])
    for cid, directory in done:
        if cid == checkpoint_id:
            return resolve_checkpoint_pointer(directory)
    raise FileNotFoundError(f"No completed checkpoint {checkpoint_id} under {path} "
                            f"(completed: {[cid for cid, _ in done]})")


def find_operator(metadata: CheckpointMetadata, identifier: Union[str, OperatorIdentifier]) -> OperatorState:
    """The operator ``identifier`` names in ``metadata``.

    :raises KeyError: if the snapshot has no state of such an operator (the message lists the
        uids and ids it has).
    """
    ident = OperatorIdentifier.of(identifier)
    for op in metadata.operator_states.values():
        if (ident.uid is not None and op.uid == ident.uid) or (ident.uid_hash is not None and op.operator_id == ident.uid_hash):
            return op
    have = sorted(f"{op.uid or '-'} ({op.operator_id})" for op in metadata.operator_states.values())
    raise KeyError(f"The snapshot {metadata.external_pointer} has no state of the operator with {ident} "
                   f"(operators with state: {have})")


def keyed_state_descriptions(op: OperatorState) -> Dict[str, Dict[str, Any]]:
    """State name -> ``{"kind", "type", "ttl", "descriptor"}`` (the pickled descriptor text) of
    every keyed state of ``op``, over its subtasks, in the order first written."""
    out: Dict[str, Dict[str, Any]] = {}
    for _, handle in sorted(op.subtask_states.items()):
        for k in handle.description["keyed_state"]:  # type: ignore[attr-defined]
            for s in k["states"]:
                out.setdefault(s["name"], {"kind": s["kind"], "type": s["type"], "ttl": s["ttl"],
                                           "descriptor": s["descriptor"]})
    return out
