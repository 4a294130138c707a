"""Errors of the partition layer (Flink's ``PartitionException`` family)."""

from __future__ import annotations

from typing import Optional

from .result_partition_id import ResultPartitionID

__all__ = ["PartitionError", "PartitionNotFoundError", "PartitionReleasedError"]


class PartitionError(RuntimeError):
    """A problem with one partition (Flink's ``PartitionException``).

    :ivar partition_id: the :class:`ResultPartitionID` concerned.
    """

    def __init__(self, message: str, partition_id: ResultPartitionID) -> None:
        super().__init__(message)
        self.partition_id = partition_id

    def __reduce__(self):
        # BaseException pickles ``args`` only, which does not fit these constructors: without
        # this a partition error raised in a cluster task process could not be loaded by the
        # JobMaster and travelled as a RemoteTaskException (type and text only).
        return _rebuild, (type(self), self.args, self.__dict__)


def _rebuild(cls, args, state):
    """Unpickle a :class:`PartitionError` without calling its ``__init__``."""
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class PartitionNotFoundError(PartitionError):
    """No partition with this id is registered in the ResultPartitionManager (Flink's
    ``PartitionNotFoundException``): the producer is not deployed yet, already released its
    partition, or the consumer asked for the wrong attempt."""

    def __init__(self, partition_id: ResultPartitionID) -> None:
        super().__init__(f"Partition {partition_id} not found.", partition_id)


class PartitionReleasedError(PartitionError):
    """The producer side released a partition while a consumer was reading it (the producer
    failed or was cancelled). Flink cancels the consumer with a ``CancelTaskException`` here;
    ``cause`` (also set as ``__cause__`` by the raiser) is what the producer gave to
    ``release()``."""

    def __init__(
        self,
        partition_id: ResultPartitionID,
        subpartition_index: int,
        cause: Optional[BaseException] = None,
    ) -> None:
        reason = f": {cause!r}" if cause is not None else ""
        super().__init__(
            f"Consumed subpartition {subpartition_index} of partition {partition_id} "
            f"has been released{reason}",
            partition_id,
        )
        self.subpartition_index = subpartition_index
        self.cause = cause
