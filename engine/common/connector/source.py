"""The Source API (FLIP-27: ``org.apache.flink.api.connector.source``), pull-based.

A :class:`Source` is a factory for a :class:`SplitEnumerator` (one per job, in the JobMaster's
``SourceCoordinator``, :mod:`rill.runtime.source_coordinator`) and for :class:`SourceReader` s
(one per source subtask). A reader asks the coordinator for a split when it has none (Flink's
``SourceReaderContext.sendSplitRequest``, as FileSource does), reads it to the end, and asks again; when the enumerator answers ``None``
a bounded source's subtask has reached the end of its input.

Rill difference, for speed: :meth:`SourceReader.read` yields *batches* (lists) of records, so
the per-record work of a source is only what producing the record costs. A reader of an
unbounded source that has nothing to hand over yields an empty list; the SourceOperator then
waits ~1 ms on the mailbox (no spinning) before polling again.

Checkpoints (Flink's ``SourceReader.snapshotState`` and ``SplitEnumerator.snapshotState``). A
split's position is the number of its records already emitted: the ``SourceOperator`` counts
them per batch and stores ``(serialized split, records emitted)`` in its list state
``"SourceReaderState"``; after a restore it resumes each split with
:meth:`SourceReader.read_from`. The enumerator's unassigned splits are checkpointed by the
coordinator through :meth:`SplitEnumerator.snapshot_state` and given back to
:meth:`Source.restore_enumerator`. Splits and enumerator checkpoints are encoded with the
source's :class:`SimpleVersionedSerializer` s in Flink's ``SimpleVersionedSerialization``
layout (:func:`write_version_and_serialize`). Replay needs deterministic readers (the same
split read again yields the same records in the same order); a source that cannot replay says
so with :attr:`Source.supports_replay`.
"""

from __future__ import annotations

import abc
import enum
import struct
from typing import Any, Iterator, List, Optional

import cloudpickle

__all__ = [
    "Boundedness",
    "SourceSplit",
    "SplitEnumerator",
    "SourceReader",
    "Source",
    "SimpleVersionedSerializer",
    "PickleSerializer",
    "write_version_and_serialize",
    "read_version_and_deserialize",
]


class SimpleVersionedSerializer(abc.ABC):
    """Turns an object into bytes and back, with a version so that old bytes stay readable
    (Flink's ``org.apache.flink.core.io.SimpleVersionedSerializer``)."""

    @abc.abstractmethod
    def get_version(self) -> int:
        """The version :meth:`serialize` writes (a non-negative int that fits in 32 bits)."""

    @abc.abstractmethod
    def serialize(self, obj: Any) -> bytes:
        """``obj`` as bytes."""

    @abc.abstractmethod
    def deserialize(self, version: int, serialized: bytes) -> Any:
        """The object of ``serialized``, written by version ``version``.

        :raises ValueError: for a version this serializer cannot read.
        """


class PickleSerializer(SimpleVersionedSerializer):
    """Version 1: the object pickled with cloudpickle (protocol 5). The default for splits and
    enumerator checkpoints: any split class works, and a Python reader decodes it with
    ``pickle.loads`` (the split's class must be importable)."""

    def get_version(self) -> int:
        return 1

    def serialize(self, obj: Any) -> bytes:
        return cloudpickle.dumps(obj, protocol=5)

    def deserialize(self, version: int, serialized: bytes) -> Any:
        if version != 1:
            raise ValueError(f"PickleSerializer reads version 1, got bytes of version {version}")
        return cloudpickle.loads(serialized)


_HEADER = struct.Struct(">ii")


def write_version_and_serialize(serializer: SimpleVersionedSerializer, obj: Any) -> bytes:
    """``obj`` serialized with its version in front (Flink's
    ``SimpleVersionedSerialization.writeVersionAndSerialize``): a big-endian int32 version, a
    big-endian int32 payload length, then the payload."""
    payload = serializer.serialize(obj)
    return _HEADER.pack(serializer.get_version(), len(payload)) + payload


def read_version_and_deserialize(serializer: SimpleVersionedSerializer, data: bytes) -> Any:
    """The object :func:`write_version_and_serialize` wrote.

    :raises ValueError: if ``data`` is shorter than its header says, or as the serializer's
        ``deserialize`` for an unknown version.
    """
    if len(data) < _HEADER.size:
        raise ValueError(f"Serialized data of {len(data)} bytes is shorter than its 8-byte header")
    version, length = _HEADER.unpack_from(data)
    if len(data) != _HEADER.size + length:
        raise ValueError(f"Serialized data has {len(data) - _HEADER.size} payload bytes, its header says {length}")
    return serializer.deserialize(version, bytes(data[_HEADER.size:]))


class Boundedness(enum.Enum):
    """Whether a source ends (``BOUNDED``) or runs forever (``CONTINUOUS_UNBOUNDED``)."""

    BOUNDED = "BOUNDED"
    CONTINUOUS_UNBOUNDED = "CONTINUOUS_UNBOUNDED"


class SourceSplit:
    """A piece of a source's input; ``split_id()`` must be unique within the source."""

    def split_id(self) -> str:
        raise NotImplementedError


class SplitEnumerator:
    """Hands out splits on request (runs in the JobMaster; thread-safe through the
    coordinator)."""

    def handle_split_request(self, subtask_index: int) -> Optional[SourceSplit]:
        """The next split for ``subtask_index``, or ``None`` when there are no more."""
        raise NotImplementedError

    def snapshot_state(self, checkpoint_id: int) -> Any:
        """The enumerator's state for checkpoint ``checkpoint_id``: what
        :meth:`Source.restore_enumerator` needs to go on as if the splits handed out so far had
        been read (Flink's ``SplitEnumerator.snapshotState``), e.g. the unassigned splits.

        :raises NotImplementedError: by default: an enumerator of its own must implement it
            (and its source :meth:`Source.restore_enumerator`) to take part in checkpoints.
        """
        raise NotImplementedError(
            f"{type(self).__name__} does not implement SplitEnumerator.snapshot_state (and its source "
            "restore_enumerator): its source cannot be checkpointed"
        )


class _ListEnumerator(SplitEnumerator):
    """Assigns a fixed list of splits first-come first-served; its checkpoint is the list of
    splits not assigned yet."""

    def __init__(self, splits: List[SourceSplit]):
        self._splits = list(splits)
        self._next = 0

    def handle_split_request(self, subtask_index: int) -> Optional[SourceSplit]:
        if self._next >= len(self._splits):
            return None
        split = self._splits[self._next]
        self._next += 1
        return split

    def snapshot_state(self, checkpoint_id: int) -> List[SourceSplit]:
        """The splits not assigned yet, in assignment order."""
        return self._splits[self._next:]


class SourceReader:
    """Reads splits inside one source subtask."""

    #: units of work done so far (records, or bytes for files); read for progress reporting
    progress_units: int = 0
    #: records per batch :meth:`read` should yield at most (``rill.source.batch-size``; set by
    #: the SourceOperator before :meth:`open`)
    batch_size: int = 1024

    def open(self, subtask_index: int, parallelism: int) -> None:
        pass

    def read(self, split: SourceSplit) -> Iterator[List[Any]]:
        """Yield the records of ``split`` in batches (lists), in order. An empty list means
        "nothing available right now" (unbounded sources only)."""
        raise NotImplementedError

    def read_from(self, split: SourceSplit, records_to_skip: int) -> Iterator[List[Any]]:
        """Like :meth:`read`, without the first ``records_to_skip`` records of ``split`` (they
        were emitted before the checkpoint restored from). The default reads and drops them,
        which is right for any deterministic reader; readers that can seek override it.

        :raises ValueError: if ``records_to_skip`` is negative.
        """
        if records_to_skip < 0:
            raise ValueError(f"{type(self).__name__}: records_to_skip must be >= 0, got {records_to_skip}")
        for batch in self.read(split):
            if records_to_skip and batch:  # an empty batch ("nothing available") skips nothing
                if records_to_skip >= len(batch):
                    records_to_skip -= len(batch)
                    continue
                batch, records_to_skip = batch[records_to_skip:], 0
            yield batch

    def close(self) -> None:
        pass


class Source:
    """Base of sources. Subclasses implement :meth:`create_splits` (or
    :meth:`create_enumerator`) and :meth:`create_reader`."""

    #: a non-parallel source (Flink: from_collection) only runs with parallelism 1
    non_parallel: bool = False
    #: whether its readers count ``progress_units`` in bytes (files) rather than records; the
    #: progress bar's unit
    progress_units_are_bytes: bool = False
    #: whether ``execution.target: spark`` may run it: its enumerator runs on the Spark driver
    #: and its readers in Spark tasks with the splits assigned to their subtask, reading
    #: nothing but the split (collections, sequences, files); others are refused, named
    runs_on_spark: bool = False
    #: sources are immutable factories: subtasks in one process share the object (see
    #: ``SimpleOperatorFactory``) and each creates its own reader
    _rill_shared_plan_object = True

    def get_boundedness(self) -> Boundedness:
        return Boundedness.BOUNDED

    @property
    def supports_replay(self) -> bool:
        """Whether a restore can read this source again from a checkpoint's split positions
        (its readers are deterministic and its input is still there). ``True`` by default;
        a source over a consumed stream (an async iterator, a socket) says ``False``, and the
        runtime refuses EXACTLY_ONCE checkpointing for a job with such a source, naming it."""
        return True

    def create_splits(self, parallelism: int) -> List[SourceSplit]:
        raise NotImplementedError

    def create_enumerator(self, parallelism: int) -> SplitEnumerator:
        return _ListEnumerator(self.create_splits(parallelism))

    def restore_enumerator(self, parallelism: int, checkpoint: Any) -> SplitEnumerator:
        """The enumerator of a restored job, from what its ``snapshot_state`` returned (Flink's
        ``Source.restoreEnumerator``). The default restores the list enumerator of
        :meth:`create_enumerator`'s default: ``checkpoint`` is its unassigned splits.

        :raises TypeError: if ``checkpoint`` is not a list of splits (the source has an
            enumerator of its own and must override this method).
        """
        if not isinstance(checkpoint, list) or not all(isinstance(s, SourceSplit) for s in checkpoint):
            raise TypeError(
                f"{type(self).__name__}.restore_enumerator: the default restores a list of unassigned "
                f"splits, got {type(checkpoint).__name__}; a source with its own enumerator overrides it"
            )
        return _ListEnumerator(checkpoint)

    def get_split_serializer(self) -> SimpleVersionedSerializer:
        """Encodes the source's splits in checkpoints (Flink's ``Source.getSplitSerializer``);
        :class:`PickleSerializer` by default."""
        return PickleSerializer()

    def get_enumerator_checkpoint_serializer(self) -> SimpleVersionedSerializer:
        """Encodes the enumerator's checkpoint (Flink's
        ``Source.getEnumeratorCheckpointSerializer``); :class:`PickleSerializer` by default."""
        return PickleSerializer()

    def create_reader(self) -> SourceReader:
        raise NotImplementedError

    def estimated_total_units(self) -> Optional[int]:
        """Total units of work (as counted by ``SourceReader.progress_units``) for progress
        bars, or ``None`` when unknown or unbounded."""
        return None
