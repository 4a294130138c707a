"""The exactly-once file sink: writer, committables, committer and the operator that runs them
(Flink's ``FileWriter`` / ``FileWriterBucket``, ``FileSinkCommittable``, ``FileCommitter`` and
the ``SinkWriterOperator`` + ``CommitterOperator`` pair, chained into one operator here).

Part files and their life cycle (Flink's names, on a local file system):

- in-progress: ``<bucket>/.<prefix>-<uid>-<n><suffix>.inprogress.<uuid>``, hidden by the
  leading dot, being written; ``uid`` is ``<sink run id>-<subtask index>``, ``n`` the subtask's
  part counter;
- pending: the same file, closed, waiting for its checkpoint to complete;
- finished: renamed to ``<bucket>/<prefix>-<uid>-<n><suffix>`` (visible).

Two-phase commit. At a checkpoint (``prepare_snapshot_pre_barrier``, before the barrier, as
Flink's ``SinkWriterOperator``; ``snapshot_state`` then stores the result) each bucket's
in-progress file is closed to pending if the rolling policy rolls on checkpoints (always for
bulk formats), otherwise it is flushed and its valid length recorded; the pending files since the previous checkpoint
become that checkpoint's committables. ``notify_checkpoint_complete(n)`` commits (renames) the
committables of every checkpoint up to ``n``; an abort leaves them pending for a later one.
A restore commits the pending files of its state (idempotent: a file already renamed is
skipped), truncates the in-progress files of its state to their recorded length and commits
them too, and deletes every other in-progress file the subtasks it takes over left behind (a
later attempt that restores nothing deletes them too).
At the end of input (``finish``) every open part is closed to pending. When the runtime
takes a final checkpoint (FLIP-147: ``context.final_checkpoint_expected()``, true with
checkpointing and ``checkpoints-after-tasks-finish`` on), those files become that checkpoint's
committables and its ``notify_checkpoint_complete`` commits them, so a failure anywhere in the
job before then restores from a checkpoint that does not cover them and nothing is committed
twice. Without a final checkpoint (no checkpointing, as Flink's ``CommitterOperator``; the
option off; a task stopping with a savepoint, whose savepoint came before the end of input) the
end of input commits everything.

State (operator union list state, so that a restore at another parallelism sees everything and
new subtask ``i`` takes over the files of old subtasks ``j`` with ``j % parallelism == i``):
``"writer_raw_states"``: ``(subtask, next part counter, ((bucket, in-progress path, final
path, valid length bytes), ...))`` per old subtask; ``"streaming_committer_raw_states"``:
``(subtask, checkpoint id, in-progress path, final path)`` per pending file. Paths are relative
to the sink's base path.
"""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Tuple

from rill.operators.base import AbstractStreamOperator
from rill.state.descriptors import ListStateDescriptor

__all__ = [
    "FileSinkCommittable",
    "FileCommitter",
    "FileWriter",
    "FileSinkOperator",
    "WRITER_STATE_NAME",
    "COMMITTER_STATE_NAME",
]

#: Flink's ``SinkWriterOperator`` state name
WRITER_STATE_NAME = "writer_raw_states"
#: Flink's ``CommitterOperator`` state name
COMMITTER_STATE_NAME = "streaming_committer_raw_states"


@dataclass(frozen=True)
class FileSinkCommittable:
    """A pending file (Flink's ``FileSinkCommittable``): ``in_progress_path`` (hidden) becomes
    ``final_path`` on commit. Both absolute."""

    in_progress_path: str
    final_path: str


class FileCommitter:
    """Commits pending files by renaming them (Flink's ``FileCommitter``); idempotent, so a
    restore may commit again what was committed before the failure."""

    def __init__(self, operator_name: str) -> None:
        self._operator_name = operator_name

    def commit(self, committables: Iterable[FileSinkCommittable]) -> List[str]:
        """Rename each committable to its final name; returns the final paths renamed now.

        :raises FileNotFoundError: if neither the pending file nor its final file exists
            (the pending file was lost: the output would miss records).
        """
        done = []
        for c in committables:
            if os.path.exists(c.in_progress_path):
                os.replace(c.in_progress_path, c.final_path)
                done.append(c.final_path)
            elif not os.path.exists(c.final_path):
                raise FileNotFoundError(
                    f"{self._operator_name}: cannot commit pending file '{c.in_progress_path}': it is gone "
                    f"and '{c.final_path}' does not exist"
                )
        return done


class _RowPart:
    """An in-progress row-format part: records encoded and appended."""

    def __init__(self, path: str, final: str, append: bool = False) -> None:
        self.path = path
        self.final = final
        self._file = open(path, "ab" if append else "wb")
        self.size = self._file.tell()

    def write(self, chunks: List[bytes]) -> None:
        data = b"".join(chunks)
        self._file.write(data)
        self.size += len(data)

    def persist(self) -> int:
        """Flush to the OS; the valid length (bytes) a restore truncates to."""
        self._file.flush()
        os.fsync(self._file.fileno())
        return self.size

    def close(self) -> None:
        self._file.close()

    def discard(self) -> None:
        self._file.close()


class _BulkPart:
    """An in-progress bulk-format part: a ``BulkWriter`` from the sink's factory on the file."""

    def __init__(self, path: str, final: str, factory: Any) -> None:
        self.path = path
        self.final = final
        self._file = open(path, "wb")
        self._writer = factory.create(self._file)

    @property
    def size(self) -> int:
        return self._file.tell()

    def write_values(self, values: List[Any]) -> None:
        self._writer.add_elements(values)

    def close(self) -> None:
        try:
            self._writer.finish()
        finally:
            self._file.close()

    def discard(self) -> None:
        """The part is garbage after a failure (a restore deletes it); finishing it still lets
        the format's writer release what it holds on the file."""
        self.close()


class FileWriter:
    """The part files of one sink subtask (Flink's ``FileWriter`` with its
    ``FileWriterBucket`` s): one in-progress part per bucket, rolled by the rolling policy;
    rolled parts are pending until :meth:`prepare_commit` hands them over.

    :param sink: the ``FileSink`` (base path, encoder or bulk writer factory, output file
        config, bucket assigner, rolling policy, run id).
    :param subtask_index: names the parts (``uid``).
    :param part_counter: the next part number (restored from a checkpoint).
    """

    def __init__(self, sink: Any, subtask_index: int, part_counter: int = 0) -> None:
        self.sink = sink
        self.subtask_index = subtask_index
        self.part_counter = part_counter
        self.uid = f"{sink.run_id}-{subtask_index}"
        self._bulk = getattr(sink, "bulk_writer_factory", None)
        self._open: Dict[str, Any] = {}
        self._pending: List[FileSinkCommittable] = []

    def _new_part(self, bucket: str) -> Any:
        cfg = self.sink.output_file_config
        directory = os.path.join(self.sink.base_path, bucket) if bucket else self.sink.base_path
        os.makedirs(directory, exist_ok=True)
        name = f"{cfg.part_prefix}-{self.uid}-{self.part_counter}{cfg.part_suffix}"
        self.part_counter += 1
        final = os.path.join(directory, name)
        in_progress = os.path.join(directory, f".{name}.inprogress.{uuid.uuid4()}")
        part = _BulkPart(in_progress, final, self._bulk) if self._bulk is not None else _RowPart(in_progress, final)
        self._open[bucket] = part
        return part

    def _roll(self, bucket: str) -> None:
        part = self._open.pop(bucket)
        part.close()
        self._pending.append(FileSinkCommittable(part.path, part.final))

    def write_batch(self, values: List[Any]) -> None:
        """Append ``values`` to the current bucket's part; a row part rolls before a record when
        it is larger than the part size (Flink's ``DefaultRollingPolicy.shouldRollOnEvent``),
        checked per batch unless the batch may cross the limit."""
        bucket = self.sink.bucket_assigner.bucket_id()
        part = self._open.get(bucket) or self._new_part(bucket)
        limit = self.sink.rolling_policy.part_size_bytes
        if self._bulk is not None:
            part.write_values(values)
            if limit is not None and part.size > limit:
                self._roll(bucket)
            return
        encode = self.sink.encoder.encode
        chunks = [encode(v) for v in values]
        if limit is None or part.size + sum(map(len, chunks)) <= limit:
            part.write(chunks)
            return
        start, size = 0, part.size
        for i, chunk in enumerate(chunks):
            if size > limit:
                part.write(chunks[start:i])
                self._roll(bucket)
                part = self._new_part(bucket)
                start, size = i, 0
            size += len(chunk)
        part.write(chunks[start:])

    def snapshot_in_progress(self) -> List[Tuple[str, str, str, int]]:
        """At a checkpoint: roll the parts the rolling policy rolls on checkpoint (bulk parts
        always), persist the others; returns ``(bucket, in-progress path, final path, valid
        length bytes)`` of the parts that stay open."""
        policy = self.sink.rolling_policy
        kept = []
        for bucket in list(self._open):
            part = self._open[bucket]
            if self._bulk is not None or policy.should_roll_on_checkpoint(part.size):
                self._roll(bucket)
            else:
                kept.append((bucket, part.path, part.final, part.persist()))
        return kept

    def close_all(self) -> None:
        """Close every open part to pending (the end of input)."""
        for bucket in list(self._open):
            self._roll(bucket)

    def prepare_commit(self) -> List[FileSinkCommittable]:
        """The pending files since the last call (Flink's ``SinkWriter.prepareCommit``)."""
        pending, self._pending = self._pending, []
        return pending

    def abort(self) -> None:
        """Close the open files without committing anything (after a failure); they stay hidden
        and a restore deletes them."""
        for part in self._open.values():
            part.discard()
        self._open.clear()


class FileSinkOperator(AbstractStreamOperator):
    """Runs a :class:`FileWriter` and commits its files with a :class:`FileCommitter` (see the
    module docstring for the two-phase commit, the state and the restore).

    :param sink: the ``FileSink``.
    """

    def __init__(self, sink: Any) -> None:
        self.sink = sink
        self._writer: Optional[FileWriter] = None
        self._committer: Optional[FileCommitter] = None
        # checkpoint id -> its committables, not committed yet
        self._by_checkpoint: Dict[int, List[FileSinkCommittable]] = {}
        # (checkpoint id, parts kept open) of the last prepare_snapshot_pre_barrier
        self._prepared: Optional[Tuple[int, List[Tuple[str, str, str, int]]]] = None

    def initialize_state(self) -> None:
        """Register the state; on restore commit what the state holds and delete the rest of
        the in-progress files of the subtasks taken over; create the writer."""
        super().initialize_state()
        backend = self.operator_state_backend
        self._writer_state = backend.get_union_list_state(ListStateDescriptor(WRITER_STATE_NAME))
        self._committer_state = backend.get_union_list_state(ListStateDescriptor(COMMITTER_STATE_NAME))
        name = self.context.operator_name
        self._committer = FileCommitter(name)
        index, parallelism = self.context.subtask_index, self.context.parallelism
        counter = 0
        if self.is_restored():
            base = self.sink.base_path
            mine = []
            for owner, next_counter, in_progress in self._writer_state.get():
                if owner == index:
                    counter = max(counter, next_counter)
                if owner % parallelism == index:
                    for _bucket, path, final, length in in_progress:
                        mine.append(self._truncated(os.path.join(base, path), os.path.join(base, final), length))
            for owner, _checkpoint_id, path, final in self._committer_state.get():
                if owner % parallelism == index:
                    mine.append(FileSinkCommittable(os.path.join(base, path), os.path.join(base, final)))
            self._committer.commit(mine)
        if self.is_restored() or self.context.attempt_number > 0:  # a first attempt's run id is new
            self._delete_leftovers(index, parallelism)
        self._writer = FileWriter(self.sink, index, counter)

    def _truncated(self, path: str, final: str, length: int) -> FileSinkCommittable:
        """The in-progress file of a checkpoint cut back to what the checkpoint covered; it is
        committed with the pending files (a restore does not write on into an old part)."""
        if os.path.exists(path):
            if os.path.getsize(path) < length:
                raise ValueError(
                    f"{self.context.operator_name}: in-progress file '{path}' has {os.path.getsize(path)} bytes, "
                    f"fewer than the {length} bytes the checkpoint recorded"
                )
            os.truncate(path, length)
        return FileSinkCommittable(path, final)

    def _delete_leftovers(self, index: int, parallelism: int) -> None:
        """Delete the in-progress files that subtasks ``j`` (``j % parallelism == index``) of
        this sink left: after the restore's commits every such file belongs to a failed
        attempt."""
        cfg = self.sink.output_file_config
        pattern = re.compile(rf"\.{re.escape(cfg.part_prefix)}-{re.escape(self.sink.run_id)}-(\d+)-\d+"
                             rf"{re.escape(cfg.part_suffix)}\.inprogress\..+")
        if not os.path.isdir(self.sink.base_path):
            return
        for root, _dirs, names in os.walk(self.sink.base_path):
            for n in names:
                m = pattern.fullmatch(n)
                if m is not None and int(m.group(1)) % parallelism == index:
                    os.remove(os.path.join(root, n))

    def process_batch(self, values, timestamps=None) -> None:
        self._writer.write_batch(values)

    def process_watermark(self, watermark) -> None:
        pass

    def prepare_snapshot_pre_barrier(self, checkpoint_id: int) -> None:
        """Close (roll) or persist the in-progress files and assign the pending ones to
        ``checkpoint_id``, before the barrier leaves, as Flink's ``SinkWriterOperator`` calls
        ``prepareCommit`` in ``prepareSnapshotPreBarrier``: the blocking file I/O (closing
        parts, ``fsync``) stays out of the synchronous part of the snapshot, which only records
        the result (no record is processed in between: both run in the checkpoint's mail)."""
        super().prepare_snapshot_pre_barrier(checkpoint_id)
        self._prepare(checkpoint_id)

    def _prepare(self, checkpoint_id: int) -> None:
        in_progress = self._writer.snapshot_in_progress()
        committables = self._writer.prepare_commit()
        if committables:
            self._by_checkpoint.setdefault(checkpoint_id, []).extend(committables)
        self._prepared = (checkpoint_id, in_progress)

    def snapshot_state(self, checkpoint_id: int, timestamp: int):
        """Store the in-progress files (with their valid lengths) and the pending ones in the
        operator state; a snapshot taken without :meth:`prepare_snapshot_pre_barrier` (an
        operator test harness) prepares here first."""
        prepared, self._prepared = self._prepared, None
        if prepared is None or prepared[0] != checkpoint_id:
            self._prepare(checkpoint_id)
            prepared, self._prepared = self._prepared, None
        in_progress = prepared[1]
        base = self.sink.base_path
        index = self.context.subtask_index
        self._writer_state.update([(index, self._writer.part_counter, tuple(
            (bucket, os.path.relpath(path, base), os.path.relpath(final, base), length)
            for bucket, path, final, length in in_progress))])
        self._committer_state.update([
            (index, cid, os.path.relpath(c.in_progress_path, base), os.path.relpath(c.final_path, base))
            for cid, cs in sorted(self._by_checkpoint.items()) for c in cs])
        return super().snapshot_state(checkpoint_id, timestamp)

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Commit the files of every checkpoint up to ``checkpoint_id``."""
        super().notify_checkpoint_complete(checkpoint_id)
        due = sorted(cid for cid in self._by_checkpoint if cid <= checkpoint_id)
        for cid in due:
            self._committer.commit(self._by_checkpoint.pop(cid))

    def finish(self) -> None:
        """The input ended: close every part to pending; the final checkpoint commits them, or,
        when none comes, commit everything now (see the module)."""
        self._writer.close_all()
        expected = self.context.final_checkpoint_expected
        if expected is not None and expected():
            return
        pending = [c for cid in sorted(self._by_checkpoint) for c in self._by_checkpoint[cid]]
        self._by_checkpoint.clear()
        self._committer.commit(pending + self._writer.prepare_commit())

    def close(self) -> None:
        if self._writer is not None:
            self._writer.abort()
