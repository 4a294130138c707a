"""How a partition hands its data to consumers (Flink's ``ResultPartitionType``)."""

from __future__ import annotations

import enum

__all__ = ["ResultPartitionType"]


class ResultPartitionType(enum.Enum):
    """The kind of data exchange a ResultPartition implements.

    * ``PIPELINED``: streamed to consumers as produced; unbounded (no buffer pool needed).
    * ``PIPELINED_BOUNDED``: streamed, with a bounded buffer pool so a slow consumer back-pressures
      the producer. Streaming jobs use this.
    * ``BLOCKING``: fully produced before it is consumed (batch exchanges). Declared for the job
      graph; a ResultPartition of this type cannot be created yet.
    """

    PIPELINED = "PIPELINED"
    PIPELINED_BOUNDED = "PIPELINED_BOUNDED"
    BLOCKING = "BLOCKING"

    def is_pipelined(self) -> bool:
        """Whether consumers read while the producer writes."""
        return self is not ResultPartitionType.BLOCKING

    def is_blocking(self) -> bool:
        """Whether the partition is read only once complete."""
        return self is ResultPartitionType.BLOCKING

    def is_bounded(self) -> bool:
        """Whether the partition's buffers in flight are bounded by a pool."""
        return self is not ResultPartitionType.PIPELINED

    def is_released_on_consumption(self) -> bool:
        """Pipelined partitions are released once every subpartition has been consumed."""
        return self.is_pipelined()
