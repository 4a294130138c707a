"""RESCALE: round robin over the consumer subtasks connected pointwise to this producer
(Flink's ``RescalePartitioner``)."""

from __future__ import annotations

from .stream_partitioner import RoundRobinStreamPartitioner

__all__ = ["RescalePartitioner"]


class RescalePartitioner(RoundRobinStreamPartitioner):
    """Round robin starting at channel 0, continuing across batches. Pointwise: with producer
    parallelism 2 and consumer parallelism 4, each producer feeds its own 2 consumers (the
    job graph decides which; the partition has one subpartition per connected consumer)."""

    def setup(self, number_of_channels: int) -> None:
        super().setup(number_of_channels)
        self._next_channel = -1

    def is_pointwise(self) -> bool:
        return True

    def __str__(self) -> str:
        return "RESCALE"
