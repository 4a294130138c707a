"""The identity of one produced partition (Flink's ``ResultPartitionID``)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ResultPartitionID"]


@dataclass(frozen=True, slots=True)
class ResultPartitionID:
    """Identifies a partition: which IntermediateResultPartition, produced by which attempt.

    :ivar partition_id: the IntermediateResultPartition's id (Flink's
        ``IntermediateResultPartitionID``), e.g. ``"ds-3f2a#1"``.
    :ivar producer_id: the producing Execution attempt's id (Flink's ``ExecutionAttemptID``): a
        restarted producer registers a *new* ResultPartitionID, so consumers never read a stale
        attempt's data.
    :raises TypeError: if either field is not a ``str``.
    """

    partition_id: str
    producer_id: str

    def __post_init__(self) -> None:
        if not isinstance(self.partition_id, str) or not isinstance(self.producer_id, str):
            raise TypeError(
                "ResultPartitionID takes two str ids, got "
                f"partition_id={self.partition_id!r}, producer_id={self.producer_id!r}"
            )

    def __str__(self) -> str:
        return f"{self.partition_id}@{self.producer_id}"
