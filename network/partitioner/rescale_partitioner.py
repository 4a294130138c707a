"""RESCALE: round robin over the consumer subtasks connected pointwise to this producer
(Flink's ``RescalePartitioner``)."""

from __future__ import annotations

from typing import Any, Optional

from .stream_partitioner import Split, StreamPartitioner, round_robin_split

__all__ = ["RescalePartitioner"]


class RescalePartitioner(StreamPartitioner):
    """Round robin starting at channel 0, continuing across batches. Pointwise: with producer
    parallelism 2 and consumer parallelism 4, each producer feeds its own 2 consumers (the
    job graph decides which; the partition has one subpartition per connected consumer)."""

    def __init__(self) -> None:
        super().__init__()
        self._next_channel = -1

    def setup(self, number_of_channels: int) -> None:
        super().setup(number_of_channels)
        self._next_channel = -1

    def select_channel(self, value: Any) -> int:
        channel = self._next_channel + 1
        if channel >= self.number_of_channels:
            channel = 0
        self._next_channel = channel
        return channel

    def split(self, values: list, timestamps: Optional[list] = None) -> list[Split]:
        n = self._check_setup()
        length = len(values)
        if not length:
            return []
        first = (self._next_channel + 1) % n
        self._next_channel = (self._next_channel + length) % n
        if n == 1:
            return [(0, values, timestamps)]
        return round_robin_split(values, timestamps, n, first)

    def is_pointwise(self) -> bool:
        return True

    def __str__(self) -> str:
        return "RESCALE"
