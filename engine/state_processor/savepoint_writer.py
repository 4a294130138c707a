"""``SavepointWriter``: write a new savepoint, or a changed copy of one, with Spark (Flink's
``org.apache.flink.state.api.SavepointWriter``, on PySpark)::

    writer = SavepointWriter.new_savepoint(spark, 128)                 # or from_existing_savepoint(spark, path)
    writer.with_operator("carrier-stats", transformation)               # see operator_transformation
    writer.remove_operator("old-uid").change_operator_identifier("a", "b")
    writer.write("/savepoints/bootstrapped")                            # rill run --from-savepoint it

The result is a savepoint directory exactly as a job writes one (``_metadata`` with relative
paths, the Parquet files of :mod:`rill.state.checkpoint.filesystem`): a job restores it with
``rill run --from-savepoint`` (``execution.state-recovery.path``), ``SavepointReader`` and
``spark.read.parquet`` read it. Each operator's files are written on the executors, one Spark
job per bootstrapped operator (one task per subtask); the driver writes ``_metadata`` last, so an
interrupted write leaves no savepoint.

Operators are named by uid (a ``str`` or ``OperatorIdentifier.for_uid``) or by their 32-hex id
(``OperatorIdentifier.for_uid_hash``); a uid's operator id is the hash a job gives it
(``murmur3_128(uid)``, Flink's ``StreamGraphHasherV2``), so the job's ``.uid(...)`` finds it.
From an existing savepoint, untouched operators' files are copied into the new directory
(Flink references them in place; copying keeps the savepoint movable); an operator whose
identifier changed is written again under its new id.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Tuple, Union

import fsspec

from rill.datastream.state_backend import HashMapStateBackend
from rill.graph.hashing import murmur3_128
from rill.state.checkpoint.filesystem import (
    METADATA_FILE_NAME,
    FileOperatorSubtaskStateHandle,
    FileSystemCheckpointStorageLocation,
)
from rill.state.checkpoint.metadata import CheckpointMetadata, OperatorState, SnapshotType
from rill.state_processor.bootstrap_tasks import BootstrapTask, rewrite_subtask
from rill.state_processor.operator_transformation import (
    StateBootstrapTransformation,
    check_max_parallelism,
    collect,
    operator_state_of,
)
from rill.state_processor.snapshots import OperatorIdentifier, resolve_snapshot

__all__ = ["SavepointWriter", "operator_id_of"]

#: The checkpoint id of a new savepoint (Flink's ``SnapshotUtils.CHECKPOINT_ID``); a job restored
#: from it numbers its checkpoints from 1.
NEW_SAVEPOINT_CHECKPOINT_ID = 0

Identifier = Union[str, OperatorIdentifier]


def operator_id_of(identifier: Identifier) -> str:
    """The operator id (32 hex digits) that ``identifier`` names: the hash of a uid as a job
    computes it, or the uid hash itself."""
    ident = OperatorIdentifier.of(identifier)
    if ident.uid_hash is not None:
        return ident.uid_hash
    return murmur3_128(ident.uid.encode("utf-8")).hex()  # type: ignore[union-attr]


class SavepointWriter:
    """Builds a savepoint from bootstrapped and existing operator state (Flink's
    ``SavepointWriter``); made by :meth:`new_savepoint` or :meth:`from_existing_savepoint`,
    changed with :meth:`with_operator`, :meth:`remove_operator` and
    :meth:`change_operator_identifier` (each returns the writer), written by :meth:`write`.

    :ivar max_parallelism: the savepoint's max parallelism (of its bootstrapped operators
        without their own ``set_max_parallelism``).
    """

    def __init__(self, spark: Any, max_parallelism: int, existing: Optional[CheckpointMetadata] = None) -> None:
        self.spark = spark
        self.max_parallelism = max_parallelism
        self._existing = existing
        #: operator id -> the existing operator kept (in the existing savepoint's order)
        self._kept: Dict[str, OperatorState] = dict(existing.operator_states) if existing is not None else {}
        self._bootstrapped: List[Tuple[OperatorIdentifier, StateBootstrapTransformation]] = []
        self._renames: List[Tuple[OperatorIdentifier, OperatorIdentifier]] = []

    # -- construction ----------------------------------------------------------------------
    @staticmethod
    def new_savepoint(spark: Any, state_backend_or_max_parallelism: Any, max_parallelism: Optional[int] = None
                      ) -> "SavepointWriter":
        """A writer of a new, empty savepoint: ``new_savepoint(spark, max_parallelism)`` or
        ``new_savepoint(spark, state_backend, max_parallelism)`` (Flink's ``newSavepoint``).

        :param max_parallelism: the savepoint's max parallelism: the job restoring it must have
            the same (Flink's default for parallelism up to 85 is 128).
        :raises ValueError: if ``max_parallelism`` is missing or not an int in ``[1, 32768]``.
        :raises NotImplementedError: for a state backend other than ``HashMapStateBackend``
            (Rill's savepoints are the heap backend's; no other is built).
        """
        if max_parallelism is None:
            backend, max_parallelism = None, state_backend_or_max_parallelism
        else:
            backend = state_backend_or_max_parallelism
        _check_backend(backend)
        return SavepointWriter(spark, check_max_parallelism(max_parallelism, "SavepointWriter.new_savepoint"))

    @staticmethod
    def from_existing_savepoint(spark: Any, path: str, state_backend: Any = None) -> "SavepointWriter":
        """A writer of a copy of the savepoint (or checkpoint) at ``path``, with its max
        parallelism (the largest of its operators', as Flink's ``fromExistingSavepoint``).

        :raises FileNotFoundError, ValueError: as :meth:`SavepointReader.read
            <rill.state_processor.SavepointReader.read>` (no snapshot there, not a Rill one).
        :raises NotImplementedError: for a state backend other than ``HashMapStateBackend``.
        """
        _check_backend(state_backend)
        metadata = resolve_snapshot(path)
        ops = metadata.operator_states.values()
        max_parallelism = max((op.max_parallelism for op in ops), default=None)
        if max_parallelism is None:
            raise ValueError(f"SavepointWriter.from_existing_savepoint: the snapshot at {path} has no operator "
                             f"state, so it has no max parallelism; use new_savepoint(spark, max_parallelism)")
        return SavepointWriter(spark, max_parallelism, metadata)

    # -- changes ---------------------------------------------------------------------------
    def with_operator(self, identifier: Identifier, transformation: StateBootstrapTransformation) -> "SavepointWriter":
        """Add an operator's state bootstrapped by ``transformation`` (Flink's
        ``withOperator(OperatorIdentifier, StateBootstrapTransformation)``).

        :raises TypeError: if ``transformation`` is not a ``StateBootstrapTransformation``
            (``OperatorTransformation.bootstrap_with(df)....transform(function)``).
        :raises ValueError: if the savepoint has state of that operator already (remove it
            first), or another bootstrapped operator has the same identifier.
        """
        ident = OperatorIdentifier.of(identifier)
        if not isinstance(transformation, StateBootstrapTransformation):
            raise TypeError(f"with_operator({ident}): expects a StateBootstrapTransformation (OperatorTransformation"
                            f".bootstrap_with(df)...transform(function)), got {transformation!r}")
        oid = operator_id_of(ident)
        if oid in self._kept:
            raise ValueError(f"with_operator({ident}): the savepoint already has state of this operator "
                             f"(id {oid}); remove_operator it first to replace it")
        if any(operator_id_of(other) == oid for other, _ in self._bootstrapped):
            raise ValueError(f"with_operator({ident}): an operator with this identifier was already added; "
                             f"identifiers must be unique")
        self._bootstrapped.append((ident, transformation))
        return self

    def remove_operator(self, identifier: Identifier) -> "SavepointWriter":
        """Drop an operator's state from the savepoint (Flink's ``removeOperator``).

        :raises KeyError: if the savepoint has no state of that operator (the message lists the
            operators it has).
        """
        ident = OperatorIdentifier.of(identifier)
        oid = self._find_kept(ident, "remove_operator")
        del self._kept[oid]
        return self

    def change_operator_identifier(self, from_identifier: Identifier, to_identifier: Identifier) -> "SavepointWriter":
        """Give an operator's state another identifier, so a job whose operator has the new uid
        restores it (Flink's ``changeOperatorIdentifier``); applies to existing and
        bootstrapped operators, when :meth:`write` runs.

        :raises ValueError: if both name the same operator id.
        """
        src, dst = OperatorIdentifier.of(from_identifier), OperatorIdentifier.of(to_identifier)
        if operator_id_of(src) == operator_id_of(dst):
            raise ValueError(f"change_operator_identifier({src}, {dst}): both name operator id {operator_id_of(dst)}")
        self._renames.append((src, dst))
        return self

    # -- writing ---------------------------------------------------------------------------
    def write(self, path: str) -> str:
        """Write the savepoint into the directory ``path`` (a path or fsspec URL; created) and
        return ``path`` (Flink's ``write``).

        :raises FileExistsError: if ``path`` holds a snapshot already (``_metadata``).
        :raises KeyError: if an identifier to change names no operator of the savepoint.
        :raises ValueError: if two operators end up with the same id.
        :raises BootstrapError: if writing an operator's state failed on Spark (the message names
            the operator and the executor's error).
        """
        renamed = self._renamed_ids()
        fs, root = fsspec.core.url_to_fs(path)
        if fs.exists(root.rstrip("/") + "/" + METADATA_FILE_NAME):
            raise FileExistsError(f"SavepointWriter.write: {path} holds a snapshot already; write to a new directory")
        fs.makedirs(root, exist_ok=True)
        directory = path.rstrip("/")
        checkpoint_id = (NEW_SAVEPOINT_CHECKPOINT_ID if self._existing is None else self._existing.checkpoint_id)
        timestamp = int(time.time() * 1000)
        operators: Dict[str, OperatorState] = {}

        def add(op: OperatorState) -> None:
            if op.operator_id in operators:
                raise ValueError(f"SavepointWriter.write: two operators would have the id {op.operator_id} "
                                 f"({operators[op.operator_id].uid!r} and {op.uid!r})")
            operators[op.operator_id] = op

        for oid, op in self._kept.items():
            if oid in renamed:
                add(self._rewrite(op, renamed[oid], directory, checkpoint_id, timestamp))
            else:
                add(_copied(op, self._existing.external_pointer, directory))  # type: ignore[union-attr]
        for ident, transformation in self._bootstrapped:
            target = renamed.get(operator_id_of(ident), ident)
            add(transformation.write_operator_state(self.spark, directory, operator_id_of(target), target.uid,
                                                    self.max_parallelism, checkpoint_id, timestamp))
        metadata = CheckpointMetadata(checkpoint_id, timestamp, operators, SnapshotType.SAVEPOINT,
                                      self._existing.job_id if self._existing is not None else "", directory)
        FileSystemCheckpointStorageLocation(directory, checkpoint_id).finalize(metadata)
        return path

    def _renamed_ids(self) -> Dict[str, OperatorIdentifier]:
        """Old operator id -> new identifier of every identifier change.

        :raises KeyError: for a change whose operator is neither kept nor bootstrapped."""
        known = set(self._kept) | {operator_id_of(ident) for ident, _ in self._bootstrapped}
        out: Dict[str, OperatorIdentifier] = {}
        for src, dst in self._renames:
            oid = operator_id_of(src)
            if oid not in known:
                raise KeyError(f"change_operator_identifier({src}, {dst}): the savepoint has no operator with "
                               f"{src} (operators: {self._names()})")
            out[oid] = dst
        return out

    def _rewrite(self, op: OperatorState, target: OperatorIdentifier, directory: str, checkpoint_id: int,
                 timestamp: int) -> OperatorState:
        """``op``'s state written again under ``target``'s id, one Spark task per subtask."""
        oid = operator_id_of(target)
        task = BootstrapTask(directory, oid, target.uid, op.parallelism, op.max_parallelism, None,
                             checkpoint_id, timestamp)
        handles = sorted(op.subtask_states.items())
        results = []
        if handles:
            job = self.spark.sparkContext.parallelize(handles, len(handles)).map(
                lambda item: rewrite_subtask(task, item[0], item[1]))
            results = collect(job, f"change_operator_identifier({op.uid or op.operator_id}, {target})")
        return operator_state_of(oid, target.uid, op.parallelism, op.max_parallelism, directory, results,
                                 op.name, op.coordinator_state)

    def _find_kept(self, ident: OperatorIdentifier, method: str) -> str:
        for oid, op in self._kept.items():
            if (ident.uid is not None and op.uid == ident.uid) or oid == operator_id_of(ident):
                return oid
        raise KeyError(f"{method}({ident}): the savepoint has no state of this operator (operators: {self._names()})")

    def _names(self) -> List[str]:
        return sorted([f"{op.uid or '-'} ({oid})" for oid, op in self._kept.items()]
                      + [f"{ident.uid or '-'} ({operator_id_of(ident)}, bootstrapped)" for ident, _ in self._bootstrapped])

    def __repr__(self) -> str:
        source = "new" if self._existing is None else f"from {self._existing.external_pointer}"
        return f"SavepointWriter({source}, max parallelism {self.max_parallelism})"


def _check_backend(backend: Any) -> None:
    if backend is not None and not isinstance(backend, HashMapStateBackend):
        raise NotImplementedError(f"SavepointWriter: state backend {backend!r} is not built; Rill's savepoints are "
                                  f"written as the heap backend's (HashMapStateBackend, the default)")


def _copied(op: OperatorState, source: str, directory: str) -> OperatorState:
    """``op`` with its files copied from the snapshot ``source`` into ``directory`` (same
    relative paths)."""
    src_fs, src_root = fsspec.core.url_to_fs(source)
    dst_fs, dst_root = fsspec.core.url_to_fs(directory)
    handles = {}
    for index, handle in op.subtask_states.items():
        if not isinstance(handle, FileOperatorSubtaskStateHandle):
            raise ValueError(f"Operator {op.uid or op.operator_id} subtask {index}: {handle!r} is not a file handle")
        for rel in handle.files():
            target = f"{dst_root.rstrip('/')}/{rel}"
            dst_fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
            with src_fs.open(f"{src_root.rstrip('/')}/{rel}", "rb") as f_in, dst_fs.open(target, "wb") as f_out:
                f_out.write(f_in.read())
        handles[index] = handle.relocated(directory)
    return OperatorState(op.operator_id, op.parallelism, op.max_parallelism, handles, op.uid, op.name,
                         op.coordinator_state)
