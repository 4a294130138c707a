"""REBALANCE: round robin over all consumer subtasks (Flink's ``RebalancePartitioner``)."""

from __future__ import annotations

import random
from typing import Any, Optional

from .stream_partitioner import Split, StreamPartitioner, round_robin_split

__all__ = ["RebalancePartitioner"]


class RebalancePartitioner(StreamPartitioner):
    """Round robin over all channels, starting after a random channel (as Flink, so that the
    producer subtasks do not all start on channel 0) and continuing across batches.

    :param seed: seeds the choice of the starting channel (tests); ``None`` = unpredictable.

    ``split`` costs O(channels) slicing per batch: channel ``c`` receives
    ``values[(c - first) % n :: n]`` where ``first`` is the channel of the batch's first record.
    """

    def __init__(self, seed: Optional[int] = None) -> None:
        super().__init__()
        self._seed = seed
        self._next_channel = -1

    def setup(self, number_of_channels: int) -> None:
        super().setup(number_of_channels)
        # Flink: nextChannelToSendTo = random.nextInt(n); each selection pre-increments it.
        self._next_channel = random.Random(self._seed).randrange(number_of_channels)

    def select_channel(self, value: Any) -> int:
        channel = (self._next_channel + 1) % self.number_of_channels
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

    def __str__(self) -> str:
        return "REBALANCE"
