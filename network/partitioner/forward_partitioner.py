"""FORWARD: each producer subtask sends to the consumer subtask with its own index (Flink's
``ForwardPartitioner``)."""

from __future__ import annotations

from typing import Any, Optional

from .stream_partitioner import Split, StreamPartitioner

__all__ = ["ForwardPartitioner"]


class ForwardPartitioner(StreamPartitioner):
    """Sends every record to channel 0, the single channel of a pointwise 1:1 connection.

    Requires equal parallelism of producer and consumer (the graph rejects forward otherwise),
    so each producer partition has exactly one subpartition.
    """

    def setup(self, number_of_channels: int) -> None:
        """:raises ValueError: unless ``number_of_channels == 1``."""
        super().setup(number_of_channels)
        if number_of_channels != 1:
            raise ValueError(
                f"FORWARD partitioning connects one producer subtask to one consumer subtask, but "
                f"the partition has {number_of_channels} channels: forward requires equal "
                "parallelism of producer and consumer"
            )

    def select_channel(self, value: Any) -> int:
        return 0

    def split(self, values: list, timestamps: Optional[list] = None) -> list[Split]:
        self._check_setup()
        return [(0, values, timestamps)] if values else []

    def is_pointwise(self) -> bool:
        return True

    def __str__(self) -> str:
        return "FORWARD"
