"""Checkpoints and savepoints as directories of Parquet files on any fsspec file system (Flink's
``FsCheckpointStorageAccess`` / ``FsCheckpointStorageLocation`` with ``FileStateHandle`` s).

Layout (Flink's)::

    <execution.checkpointing.dir>/<job-id>/chk-<n>/          a checkpoint
    <savepoint dir>/savepoint-<job-id[:6]>-<12 random hex>/  a savepoint
        _metadata                                            JSON, see rill.state.checkpoint.metadata_json
        .in-progress                                         empty; until _metadata is written
        <operator-id>/keyed/<state>/part-<subtask>.parquet   keyed state, one directory per state
        <operator-id>/timers/part-<subtask>.parquet          timers of all timer services
        <operator-id>/operator_state/part-<subtask>.parquet  list, union and broadcast state
        <operator-id>/channel_state/part-<subtask>.parquet   in-flight data of an unaligned checkpoint

The columns are in :mod:`rill.state.checkpoint.parquet_layout`. ``spark.read.parquet(
"<chk>/<operator-id>/keyed/<state>")`` reads one state of one operator over all subtasks.
``<state>`` is the state's name when it is made of ``[A-Za-z0-9_.-]`` and starts with a letter
or digit (Spark skips names starting with ``_`` or ``.``), else the name with other characters
replaced by ``_`` and 8 hex digits of its SHA-1 appended (:func:`state_directory_name`).

Paths in ``_metadata`` are relative to the snapshot's directory, so a checkpoint or savepoint
can be moved or copied elsewhere (any file system) and restored from there.

The checkpoint directory is a path or URL: a bare path or ``file://`` is the local file system,
any other fsspec URL (``s3://``, ``memory://``...) its file system. ``_metadata`` is written to a
temporary name and renamed, so a crash never leaves a half-written one; a directory without
``_metadata`` is not a completed snapshot.

Discarding a checkpoint races its writers (an aborted checkpoint's subtasks may still be in their
asynchronous part, an acknowledgement may come late): ``dispose`` first deletes the
``.in-progress`` marker, then the directory, retrying while writers refill it; every writer of
a location the storage created (``marked``) checks the marker before and after each file, and
once it is gone deletes its own files and the directories they emptied, and raises
:class:`CheckpointLocationDisposedError`. Whichever side
finishes last removes the directory: none is left behind and no error reaches the job.
"""

from __future__ import annotations

import base64
import errno
import hashlib
import json
import logging
import re
import secrets
from typing import Any, Dict, List, Optional, Tuple

import cloudpickle
import fsspec

from rill.state.checkpoint.arrow_types import UNTYPED, ColumnCodec, column_codec
from rill.state.checkpoint.collector import collector_paused
from rill.state.checkpoint.key_group_views import PinnedKeyGroups, entry_chunks
from rill.state.checkpoint.metadata import (
    METADATA_FORMAT_VERSION,
    CheckpointMetadata,
    OperatorState,
    OperatorSubtaskStateHandle,
    SnapshotType,
)
from rill.state.checkpoint.operator_subtask_state import (
    ChannelStateSnapshot,
    KeyedStateSnapshot,
    OperatorSubtaskState,
    TimerServiceSnapshot,
)
from rill.state.checkpoint.parquet_layout import (
    ROW_GROUP_TARGET_ROWS,
    FileIdentity,
    plan_row_groups,
    read_keyed_state_file,
    read_channel_state_file,
    read_operator_state_file,
    read_timers_file,
    write_channel_state_file,
    write_keyed_state_file,
    write_operator_state_file,
    write_timers_file,
)
from rill.state.checkpoint.storage_api import (
    CheckpointLocationDisposedError,
    CheckpointStorage,
    CheckpointStorageLocation,
)
from rill.state.descriptors import MapStateDescriptor, StateDescriptor
from rill.state.key_groups import KeyGroupRange

__all__ = [
    "METADATA_FILE_NAME",
    "FileOperatorSubtaskStateHandle",
    "FileSystemCheckpointStorageLocation",
    "FileSystemCheckpointStorage",
    "savepoint_location",
    "create_location_directory",
    "IN_PROGRESS_MARKER",
    "resolve_checkpoint_pointer",
    "state_directory_name",
    "keyed_state_directory",
]

#: The name of the metadata file in a snapshot directory (Flink's ``_metadata``).
METADATA_FILE_NAME = "_metadata"
#: An empty file in a snapshot directory from its creation until ``finalize`` (hidden from Spark
#: by its leading dot). ``dispose`` deletes it first: a subtask still writing sees it gone and
#: removes what it wrote, so a discarded checkpoint leaves no directory behind.
IN_PROGRESS_MARKER = ".in-progress"
#: deletions of a directory that a late writer keeps refilling: each lost race costs one retry,
#: and the writers remove their own files in the end, so giving up leaves nothing for long
_DISPOSE_ATTEMPTS = 20
_FORMAT = "rill-snapshot"
_LOG = logging.getLogger(__name__)
_CHK = re.compile(r"chk-(\d+)")
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


def _join(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *parts])


def _fs(url: str) -> Tuple[Any, str]:
    return fsspec.core.url_to_fs(url)


def state_directory_name(state_name: str) -> str:
    """The directory of a keyed state's files (see the module docstring)."""
    if _PLAIN_NAME.fullmatch(state_name):
        return state_name
    cleaned = re.sub(r"[^A-Za-z0-9_.\-]", "_", state_name).lstrip("._") or "state"
    return f"{cleaned}-{hashlib.sha1(state_name.encode('utf-8')).hexdigest()[:8]}"


def _pickled(value: Any) -> Optional[str]:
    return None if value is None else base64.b64encode(cloudpickle.dumps(value)).decode("ascii")


def _unpickled(text: Optional[str]) -> Any:
    return None if text is None else cloudpickle.loads(base64.b64decode(text))


def _type_text(descriptor: Optional[StateDescriptor]) -> Optional[str]:
    """The declared type as Rill prints it, for readers of ``_metadata`` (a map: key and value)."""
    if descriptor is None:
        return None
    if isinstance(descriptor, MapStateDescriptor):
        return f"MAP<{descriptor.key_type_info!r}, {descriptor.value_type_info!r}>"
    return repr(descriptor.type_info)


def _key_codec(key_type: Any) -> ColumnCodec:
    return UNTYPED if key_type is None else column_codec(key_type)


class FileOperatorSubtaskStateHandle(OperatorSubtaskStateHandle):
    """One operator subtask's files in a snapshot directory (Flink's ``OperatorSubtaskState``
    of ``KeyGroupsStateHandle`` and ``OperatorStreamStateHandle`` over ``FileStateHandle`` s).

    :param directory: the snapshot directory (path or URL) the relative paths start from.
    :param description: the JSON-able description of the files, as stored in ``_metadata``
        (see :mod:`rill.state.checkpoint.metadata_json`): per keyed state its file, row groups
        (``[first key group, last key group, rows]``) and pickled descriptor, the timer file and
        service names, the operator state file and its states' modes, sizes in bytes.

    Picklable (plain strings and dicts). :meth:`read` with a key-group range opens only the
    files of states with entries in that range and reads only their overlapping row groups.
    """

    __slots__ = ("directory", "description")

    def __init__(self, directory: str, description: Dict[str, Any]) -> None:
        self.directory = directory
        self.description = description

    @property
    def state_size(self) -> int:
        return int(self.description["state_size_bytes"])

    def relocated(self, directory: str) -> "FileOperatorSubtaskStateHandle":
        """The same files under another snapshot directory (a moved checkpoint)."""
        return FileOperatorSubtaskStateHandle(directory, self.description)

    def files(self) -> List[str]:
        """The relative paths of this subtask's files."""
        d = self.description
        found = [s["file"] for k in d["keyed_state"] for s in k["states"] if s["file"]]
        for part in ("timers", "operator_state", "channel_state"):
            if d.get(part) and d[part]["file"]:
                found.append(d[part]["file"])
        return found

    def has_channel_state(self) -> bool:
        return bool(self.description.get("channel_state"))

    def read_channel_state(self) -> ChannelStateSnapshot:
        """The in-flight data in this subtask's channel-state file (absent in snapshots of
        earlier Rills and in aligned ones: empty)."""
        c = self.description.get("channel_state")
        if not c:
            return ChannelStateSnapshot()
        fs, root = _fs(self.directory)
        with fs.open(_join(root, c["file"]), "rb") as f:
            return read_channel_state_file(f)

    def read(self, key_group_range: Optional[KeyGroupRange] = None) -> OperatorSubtaskState:
        with collector_paused():  # see rill.state.checkpoint.collector: a decode makes no cycles
            return self._read(key_group_range)

    def _read(self, key_group_range: Optional[KeyGroupRange]) -> OperatorSubtaskState:
        fs, root = _fs(self.directory)
        d = self.description
        keyed = []
        for k in d["keyed_state"]:
            own = KeyGroupRange(*k["key_group_range"])
            rng = own if key_group_range is None else own.get_intersection(key_group_range)
            key_codec = _key_codec(_unpickled(k["key_type"]))
            descriptors: Dict[str, StateDescriptor] = {}
            key_groups: Dict[int, Dict[str, Any]] = {}
            for s in k["states"]:
                descriptor = _unpickled(s["descriptor"])
                if descriptor is not None:
                    descriptors[s["name"]] = descriptor
                if not s["file"] or not plan_row_groups(s["row_groups"], rng):
                    continue  # no entry in the range: the file is not opened
                with fs.open(_join(root, s["file"]), "rb") as f:
                    entries = read_keyed_state_file(
                        f, descriptor if descriptor is not None else _UntypedDescriptor(s["name"]),
                        key_codec, s["row_groups"], None if key_group_range is None else rng)
                for kg, found in entries.items():
                    key_groups.setdefault(kg, {})[s["name"]] = found
            keyed.append(KeyedStateSnapshot(k["max_parallelism"], rng, descriptors, key_groups,
                                            key_type=_unpickled(k["key_type"])))
        timers = {}
        t = d["timers"]
        if t is not None:
            if t["file"] and plan_row_groups(t["row_groups"], key_group_range):
                key_type = _unpickled(t["key_type"])
                with fs.open(_join(root, t["file"]), "rb") as f:
                    timers = read_timers_file(f, t["services"], _key_codec(key_type), t["row_groups"],
                                              key_group_range)
            else:
                timers = {name: TimerServiceSnapshot() for name in t["services"]}
        operator_state = {}
        o = d["operator_state"]
        if o is not None:
            modes = {name: mode for name, mode in o["states"]}
            with fs.open(_join(root, o["file"]), "rb") as f:
                operator_state = read_operator_state_file(f, modes)
        return OperatorSubtaskState(d["checkpoint_id"], operator_state, tuple(keyed), timers)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, FileOperatorSubtaskStateHandle) and other.directory == self.directory
                and other.description == self.description)

    def __hash__(self) -> int:
        return hash((self.directory, json.dumps(self.description, sort_keys=True)))

    def __repr__(self) -> str:
        return (f"FileOperatorSubtaskStateHandle({self.directory!r}, files={len(self.files())}, "
                f"{self.state_size} bytes)")


class _UntypedDescriptor(StateDescriptor):
    """Stands for a state whose descriptor the snapshot did not carry (a record built without
    one): no kind, so :func:`~rill.state.checkpoint.parquet_layout.value_codec` writes each
    stored value whole, untyped."""

    state_type = None  # type: ignore[assignment]


class FileSystemCheckpointStorageLocation(CheckpointStorageLocation):
    """One checkpoint's or savepoint's directory (Flink's ``FsCheckpointStorageLocation``).

    :param directory: the snapshot directory, path or URL (created by the storage).
    :param checkpoint_id: the checkpoint's id, written in every row's ``checkpoint_id``.
    :param row_group_target_rows: rows after which a keyed-state or timer row group is closed
        at the next key-group boundary (:data:`~rill.state.checkpoint.parquet_layout.ROW_GROUP_TARGET_ROWS`).
    :param marked: the directory was created with its ``.in-progress`` marker
        (:func:`create_location_directory`, as the storage creates every checkpoint's and
        savepoint's): writes check the marker and see a disposal that races them. Without it
        (a directory nothing disposes of while it is written, as the state processor's) writes
        do not look for it.
    Picklable (plain values): it travels to the tasks with the trigger.
    """

    __slots__ = ("directory", "checkpoint_id", "row_group_target_rows", "marked")

    def __init__(self, directory: str, checkpoint_id: int,
                 row_group_target_rows: int = ROW_GROUP_TARGET_ROWS, marked: bool = False) -> None:
        self.directory = directory
        self.checkpoint_id = checkpoint_id
        self.row_group_target_rows = row_group_target_rows
        self.marked = marked

    @property
    def location_reference(self) -> Optional[str]:
        return self.directory

    def write_operator_subtask_state(self, operator_id: str, subtask_index: int,
                                     state: OperatorSubtaskState,
                                     operator_uid: Optional[str] = None) -> FileOperatorSubtaskStateHandle:
        """Write the subtask's Parquet files (see the module docstring) and describe them.

        :raises TypeValueError: if a value does not fit its state's declared type (the message
            names the operator, the state and the value).
        :raises ValueError: if a declared type has no Parquet column type.
        :raises CheckpointLocationDisposedError: if the location was disposed of before or while
            writing (its ``.in-progress`` marker is gone); what this call wrote is removed.
        :raises OSError: if the files cannot be written.
        """
        fs, root = _fs(self.directory)
        identity = FileIdentity(self.checkpoint_id, operator_id, operator_uid, subtask_index)
        who = f"operator {operator_uid or operator_id} (subtask {subtask_index})"
        size = 0
        written: List[str] = []
        marker = _join(root, IN_PROGRESS_MARKER)

        def gone() -> bool:
            return self.marked and not fs.exists(marker)

        def disposed() -> CheckpointLocationDisposedError:
            _remove_written(fs, root, written)
            return CheckpointLocationDisposedError(
                f"Checkpoint {self.checkpoint_id} at {self.directory} was discarded while {who} wrote its state; "
                f"its files were removed")

        def write(rel: str, writer: Any) -> Any:
            nonlocal size
            path = _join(root, rel)
            if gone():
                raise disposed()
            written.append(path)
            try:
                fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
                with fs.open(path, "wb") as f:
                    result = writer(f)
                size += fs.size(path)
            except OSError:
                if gone():  # the directory went away under the writer
                    raise disposed() from None
                raise
            if gone():
                raise disposed()
            return result

        keyed = []
        for i, snap in enumerate(state.keyed_state):
            suffix = f"{subtask_index:05d}" + (f"-{i}" if i else "")
            key_codec = _key_codec(snap.key_type)
            pinned = snap.key_groups if isinstance(snap.key_groups, PinnedKeyGroups) else None
            names = list(snap.descriptors)
            names += sorted(set(pinned.state_names() if pinned is not None else
                                {n for states in snap.key_groups.values() for n in states}) - set(names))
            states = []
            for name in names:
                descriptor = snap.descriptors.get(name)
                rel, spans = None, []
                # a heap snapshot's pinned dicts are read column-wise (no tuple per entry)
                per_kg = (list(pinned.chunks(name)) if pinned is not None else
                          [(kg, entry_chunks(snap.key_groups[kg][name])) for kg in sorted(snap.key_groups)
                           if snap.key_groups[kg].get(name)])
                if per_kg:
                    rel = f"{operator_id}/keyed/{state_directory_name(name)}/part-{suffix}.parquet"
                    spans = write(rel, lambda f: write_keyed_state_file(
                        f, identity, descriptor if descriptor is not None else _UntypedDescriptor(name),
                        key_codec, per_kg, f"{who}, state {name!r}", self.row_group_target_rows))
                states.append({
                    "name": name,
                    "kind": None if descriptor is None else descriptor.state_type.name,
                    "type": _type_text(descriptor),
                    "ttl": descriptor is not None and descriptor.is_ttl_enabled(),
                    "file": rel,
                    "row_groups": spans,
                    "descriptor": _pickled(descriptor),
                })
            keyed.append({
                "max_parallelism": snap.max_parallelism,
                "key_group_range": [snap.key_group_range.start_key_group, snap.key_group_range.end_key_group],
                "key_type": _pickled(snap.key_type),
                "states": states,
            })
        timers = None
        if state.timers:
            key_type = state.keyed_state[0].key_type if state.keyed_state else None
            rel, spans = None, []
            if any(s.key_groups for s in state.timers.values()):
                rel = f"{operator_id}/timers/part-{subtask_index:05d}.parquet"
                spans = write(rel, lambda f: write_timers_file(f, identity, _key_codec(key_type),
                                                               state.timers, who, self.row_group_target_rows))
            timers = {"file": rel, "services": list(state.timers), "row_groups": spans,
                      "key_type": _pickled(key_type)}
        operator_state = None
        if state.operator_state:
            rel = f"{operator_id}/operator_state/part-{subtask_index:05d}.parquet"
            write(rel, lambda f: write_operator_state_file(f, identity, state.operator_state, who))
            operator_state = {"file": rel,
                              "states": [[name, mode] for name, (mode, _) in state.operator_state.items()]}
        channel_state = None
        channels = state.channel_state
        if not channels.is_empty():
            rel = f"{operator_id}/channel_state/part-{subtask_index:05d}.parquet"
            write(rel, lambda f: write_channel_state_file(f, identity, channels))
            channel_state = {"file": rel, "input_buffers": len(channels.input_channels),
                             "output_buffers": len(channels.result_subpartitions),
                             "persisted_data_bytes": channels.persisted_data_bytes}
        return FileOperatorSubtaskStateHandle(self.directory, {
            "checkpoint_id": state.checkpoint_id,
            "state_size_bytes": size,
            "keyed_state": keyed,
            "timers": timers,
            "operator_state": operator_state,
            "channel_state": channel_state,
        })

    def finalize(self, metadata: CheckpointMetadata) -> str:
        """Write ``_metadata`` (to a temporary name, then renamed) and return the directory.

        :raises ValueError: if a handle is not a file handle of this storage.
        :raises OSError: if it cannot be written.
        """
        text = metadata_to_json(metadata, self.directory)
        fs, root = _fs(self.directory)
        final = _join(root, METADATA_FILE_NAME)
        temporary = _join(root, f".{METADATA_FILE_NAME}.inprogress-{secrets.token_hex(6)}")
        with fs.open(temporary, "w") as f:
            f.write(text)
        try:
            fs.mv(temporary, final)
        finally:
            if fs.exists(temporary):
                fs.rm(temporary)
        marker = _join(root, IN_PROGRESS_MARKER)
        if fs.exists(marker):
            fs.rm(marker)
        return self.directory

    def dispose(self) -> None:
        """Delete the directory (see the module docstring for the writers it races); idempotent.
        Never raises for a directory that writers refill: after ``_DISPOSE_ATTEMPTS`` lost races
        it logs and leaves the rest to them (they delete their files on seeing the marker gone).

        :raises OSError: only for a failure that is not a race (a permission denied, say).
        """
        fs, root = _fs(self.directory)
        marker = _join(root, IN_PROGRESS_MARKER)
        try:
            fs.rm(marker)  # first: from now on every writer cleans up after itself
        except FileNotFoundError:
            pass
        for _ in range(_DISPOSE_ATTEMPTS):
            try:
                if not fs.exists(root):
                    return
                fs.rm(root, recursive=True)
            except FileNotFoundError:  # a writer removed part of it meanwhile
                continue
            except OSError as e:
                if e.errno != errno.ENOTEMPTY:
                    raise
                continue  # a writer added a file between the listing and the removal
        if fs.exists(root):
            _LOG.info("Checkpoint directory %s is still being written; its writers remove what they write",
                      self.directory)

    def __repr__(self) -> str:
        return f"FileSystemCheckpointStorageLocation({self.directory!r}, checkpoint {self.checkpoint_id})"


def _remove_written(fs: Any, root: str, written: List[str]) -> None:
    """A writer's clean-up in a disposed location: its files, then every directory between them
    and ``root`` (``root`` included) that is empty now; another writer's files stop it there
    (that writer removes them and the directories after)."""
    directories = set()
    for path in written:
        try:
            fs.rm(path)
        except FileNotFoundError:
            pass
        parent = path.rsplit("/", 1)[0]
        while len(parent) >= len(root):
            directories.add(parent)
            parent = parent.rsplit("/", 1)[0]
    for directory in sorted(directories, key=len, reverse=True):  # the deepest first
        try:
            if fs.isdir(directory) and not fs.ls(directory, detail=False):
                fs.rmdir(directory)
        except FileNotFoundError:
            pass
        except OSError as e:
            if e.errno != errno.ENOTEMPTY:
                raise


def create_location_directory(directory: str) -> None:
    """Create a snapshot directory with its ``.in-progress`` marker (a ``marked`` location
    writes only while the marker exists; ``finalize`` removes it).

    :raises OSError: if it cannot be created.
    """
    fs, root = _fs(directory)
    fs.makedirs(root, exist_ok=True)
    fs.touch(_join(root, IN_PROGRESS_MARKER))


def savepoint_location(job_id: str, target_directory: Optional[str], checkpoint_id: int,
                       row_group_target_rows: int = ROW_GROUP_TARGET_ROWS) -> FileSystemCheckpointStorageLocation:
    """A new savepoint directory ``<target>/savepoint-<job_id[:6]>-<12 random hex>`` (Flink's
    ``AbstractFsCheckpointStorageAccess.initializeLocationForSavepoint``), created.

    :raises ValueError: if ``target_directory`` is ``None`` (no savepoint directory given or
        configured).
    """
    if not target_directory:
        raise ValueError("No savepoint directory: give a target directory or configure "
                         "execution.checkpointing.savepoint-dir")
    directory = _join(target_directory, f"savepoint-{job_id[:6]}-{secrets.token_hex(6)}")
    create_location_directory(directory)
    return FileSystemCheckpointStorageLocation(directory, checkpoint_id, row_group_target_rows, marked=True)


def resolve_checkpoint_pointer(pointer: str) -> CheckpointMetadata:
    """The metadata of the completed checkpoint or savepoint at ``pointer``: its directory or
    its ``_metadata`` file (path or URL). Handles read from where the directory is now.

    :raises FileNotFoundError: if there is no ``_metadata`` there (no snapshot, or one that never
        completed).
    :raises ValueError: if the file is not a Rill snapshot's metadata or its format version is
        newer than this Rill reads.
    """
    fs, path = _fs(pointer)
    directory = pointer.rstrip("/")
    if path.rstrip("/").endswith("/" + METADATA_FILE_NAME) or path == METADATA_FILE_NAME:
        directory = directory[: -len(METADATA_FILE_NAME)].rstrip("/")
        meta = path
    else:
        meta = _join(path, METADATA_FILE_NAME)
    if not fs.isfile(meta):
        raise FileNotFoundError(f"No completed checkpoint or savepoint at {pointer!r}: "
                                f"{METADATA_FILE_NAME} is missing")
    with fs.open(meta, "r") as f:
        text = f.read()
    return metadata_from_json(text, directory, source=pointer)


def keyed_state_directory(pointer: str, operator: str, state_name: str) -> str:
    """The directory of one keyed state of one operator in the snapshot at ``pointer`` (what
    ``spark.read.parquet`` takes to read that state over all subtasks).

    :param operator: the operator's uid or its 32-hex id.
    :raises FileNotFoundError: if there is no completed snapshot at ``pointer``.
    :raises KeyError: if no operator has that uid or id, or it has no state of that name.
    """
    metadata = resolve_checkpoint_pointer(pointer)
    found = [op for op in metadata.operator_states.values() if operator in (op.uid, op.operator_id)]
    if not found:
        raise KeyError(f"No operator with uid or id {operator!r} in {pointer}")
    op = found[0]
    names = {s["name"] for h in op.subtask_states.values()
             for k in h.description["keyed_state"] for s in k["states"]}  # type: ignore[attr-defined]
    if state_name not in names:
        raise KeyError(f"Operator {operator!r} has no keyed state {state_name!r} in {pointer} "
                       f"(it has {sorted(names)})")
    return _join(metadata.external_pointer or pointer, op.operator_id, "keyed", state_directory_name(state_name))


class FileSystemCheckpointStorage(CheckpointStorage):
    """The snapshots of one job under ``<checkpoint_dir>/<job_id>/`` (Flink's
    ``FsCheckpointStorageAccess``), with the retention helpers the coordinator calls.

    :param checkpoint_dir: ``execution.checkpointing.dir``: a path or URL.
    :param job_id: the job's id (32 hex digits in Rill's runtime).
    :param savepoint_dir: the default target of savepoints, or ``None``.
    :param row_group_target_rows: see :class:`FileSystemCheckpointStorageLocation`.
    :raises ValueError: if ``job_id`` is empty or ``row_group_target_rows < 1``.
    """

    def __init__(self, checkpoint_dir: str, job_id: str, savepoint_dir: Optional[str] = None,
                 row_group_target_rows: int = ROW_GROUP_TARGET_ROWS) -> None:
        if not job_id:
            raise ValueError("A file system checkpoint storage needs the job's id (its directory)")
        if row_group_target_rows < 1:
            raise ValueError(f"row_group_target_rows must be at least 1, got {row_group_target_rows}")
        self.row_group_target_rows = row_group_target_rows
        self.checkpoint_dir = checkpoint_dir
        self.job_id = job_id
        self.savepoint_dir = savepoint_dir
        self.job_directory = _join(checkpoint_dir, job_id)

    def initialize_location_for_checkpoint(self, checkpoint_id: int) -> FileSystemCheckpointStorageLocation:
        directory = _join(self.job_directory, f"chk-{checkpoint_id}")
        create_location_directory(directory)
        return FileSystemCheckpointStorageLocation(directory, checkpoint_id, self.row_group_target_rows, marked=True)

    def initialize_location_for_savepoint(self, checkpoint_id: int,
                                          target_directory: Optional[str]) -> FileSystemCheckpointStorageLocation:
        return savepoint_location(self.job_id, target_directory or self.savepoint_dir, checkpoint_id,
                                  self.row_group_target_rows)

    def resolve_checkpoint(self, pointer: str) -> CheckpointMetadata:
        return resolve_checkpoint_pointer(pointer)

    def completed_checkpoints(self) -> List[Tuple[int, str]]:
        """``(checkpoint id, directory)`` of every completed checkpoint of the job (one with
        ``_metadata``), oldest first."""
        fs, root = _fs(self.job_directory)
        if not fs.isdir(root):
            return []
        found = []
        for entry in fs.ls(root, detail=False):
            name = entry.rstrip("/").rsplit("/", 1)[-1]
            match = _CHK.fullmatch(name)
            if match and fs.isfile(_join(root, name, METADATA_FILE_NAME)):
                found.append((int(match.group(1)), _join(self.job_directory, name)))
        return sorted(found)

    def latest_completed_checkpoint(self) -> Optional[str]:
        """The directory of the newest completed checkpoint, or ``None``."""
        done = self.completed_checkpoints()
        return done[-1][1] if done else None

    def discard_checkpoint(self, checkpoint_id: int) -> None:
        """Delete checkpoint ``checkpoint_id``'s directory (completed or not); idempotent."""
        FileSystemCheckpointStorageLocation(_join(self.job_directory, f"chk-{checkpoint_id}"),
                                            checkpoint_id).dispose()

    def retain_latest(self, number_of_retained: int) -> List[int]:
        """Delete all completed checkpoints but the newest ``number_of_retained`` (Flink's
        ``execution.checkpointing.num-retained``); returns the ids deleted, oldest first.

        :raises ValueError: if ``number_of_retained < 1``.
        """
        if number_of_retained < 1:
            raise ValueError(f"Retained checkpoints must be at least 1, got {number_of_retained}")
        done = self.completed_checkpoints()
        old = [cid for cid, _ in done[:-number_of_retained]]
        for cid in old:
            self.discard_checkpoint(cid)
        return old

    def __repr__(self) -> str:
        return f"FileSystemCheckpointStorage({self.job_directory!r})"


def metadata_to_json(metadata: CheckpointMetadata, directory: Optional[str] = None) -> str:
    """The ``_metadata`` text of ``metadata`` (format: see the README section "Checkpoint
    directories"): readable without Rill, paths relative to the snapshot directory.

    :param directory: the snapshot directory every handle must be in (``None``: not checked).
    :raises ValueError: if a handle is not a :class:`FileOperatorSubtaskStateHandle` (of
        ``directory``).
    """
    operators = []
    for op in metadata.operator_states.values():
        subtasks = []
        for index, handle in sorted(op.subtask_states.items()):
            if not isinstance(handle, FileOperatorSubtaskStateHandle) or (
                    directory is not None and handle.directory != directory):
                raise ValueError(f"Operator {op.uid or op.operator_id} subtask {index}: {handle!r} is "
                                 f"not a file handle of {directory or 'a directory'}; it cannot be "
                                 f"written to its {METADATA_FILE_NAME}")
            subtasks.append({"subtask_index": index, **handle.description})
        operators.append({"operator_id": op.operator_id, "uid": op.uid, "name": op.name,
                          "parallelism": op.parallelism, "max_parallelism": op.max_parallelism,
                          "fully_finished": op.fully_finished,
                          "coordinator_state": (None if op.coordinator_state is None
                                                else base64.b64encode(op.coordinator_state).decode("ascii")),
                          "subtasks": subtasks})
    return json.dumps({
        "format": _FORMAT,
        "format_version": metadata.format_version,
        "checkpoint_id": metadata.checkpoint_id,
        "timestamp_ms": metadata.timestamp,
        "snapshot_type": metadata.snapshot_type.value,
        "job_id": metadata.job_id,
        "state_size_bytes": metadata.state_size,
        "operators": operators,
    }, indent=1)


def metadata_from_json(text: str, directory: str, source: str = "") -> CheckpointMetadata:
    """The metadata in ``text`` with handles reading from ``directory``.

    :param source: where the text came from, for errors.
    :raises ValueError: if it is not a Rill snapshot's metadata, or its format version is newer
        than :data:`METADATA_FORMAT_VERSION`.
    """
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{source or 'metadata'}: not a Rill snapshot's {METADATA_FILE_NAME} "
                         f"(invalid JSON: {e})") from e
    if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
        raise ValueError(f"{source or 'metadata'}: not a Rill snapshot's {METADATA_FILE_NAME} "
                         f"(no \"format\": \"{_FORMAT}\")")
    version = doc.get("format_version")
    if not isinstance(version, int) or version > METADATA_FORMAT_VERSION:
        raise ValueError(f"{source or 'metadata'}: snapshot format version {version!r} is newer than "
                         f"the version {METADATA_FORMAT_VERSION} this Rill reads; restore it with "
                         f"the Rill that wrote it")
    operators = {}
    for op in doc["operators"]:
        handles = {}
        for sub in op["subtasks"]:
            description = {k: v for k, v in sub.items() if k != "subtask_index"}
            handles[sub["subtask_index"]] = FileOperatorSubtaskStateHandle(directory, description)
        coordinator_state = op.get("coordinator_state")  # absent in snapshots of earlier Rills
        operators[op["operator_id"]] = OperatorState(
            op["operator_id"], op["parallelism"], op["max_parallelism"], handles, op["uid"], op["name"],
            None if coordinator_state is None else base64.b64decode(coordinator_state),
            bool(op.get("fully_finished", False)))  # absent before FLIP-147
    return CheckpointMetadata(doc["checkpoint_id"], doc["timestamp_ms"], operators,
                              SnapshotType(doc["snapshot_type"]), doc["job_id"], directory, version)
