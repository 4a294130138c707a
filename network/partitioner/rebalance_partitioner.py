"""REBALANCE: round robin over all consumer subtasks (Flink's ``RebalancePartitioner``)."""

from __future__ import annotations

import random
from typing import Optional

from .stream_partitioner import RoundRobinStreamPartitioner

__all__ = ["RebalancePartitioner"]


class RebalancePartitioner(RoundRobinStreamPartitioner):
    """Round robin over all channels, starting after a random channel (as Flink, so that the
    producer subtasks do not all start on channel 0) and continuing across batches.

    :param seed: seeds the choice of the starting channel (tests); ``None`` = unpredictable.

    ``split`` costs O(channels) slicing per batch: channel ``c`` receives
    ``values[(c - first) % n :: n]`` where ``first`` is the channel of the batch's first record.
    """

    def __init__(self, seed: Optional[int] = None) -> None:
        super().__init__()
        self._seed = seed

    def setup(self, number_of_channels: int) -> None:
        super().setup(number_of_channels)
        # Flink: nextChannelToSendTo = random.nextInt(n); each selection pre-increments it.
        self._next_channel = random.Random(self._seed).randrange(number_of_channels)

    def __str__(self) -> str:
        return "REBALANCE"
