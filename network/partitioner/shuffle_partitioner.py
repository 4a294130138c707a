"""SHUFFLE: a uniformly random channel per record (Flink's ``ShufflePartitioner``)."""

from __future__ import annotations

import random
from itertools import repeat
from typing import Any, Optional

from .stream_partitioner import Split, StreamPartitioner, bucket_by_channel

__all__ = ["ShufflePartitioner"]


class ShufflePartitioner(StreamPartitioner):
    """Each record independently to ``floor(random() * n)``.

    :param seed: seeds this partitioner's own ``random.Random`` (tests); ``None`` =
        unpredictable. :meth:`copy` duplicates the generator's state, so a copy draws the same
        channels.

    Cost: one random draw and one append per record (Python level).
    """

    def __init__(self, seed: Optional[int] = None) -> None:
        super().__init__()
        self._random = random.Random(seed)

    def select_channel(self, value: Any) -> int:
        return int(self._random.random() * self.number_of_channels)

    def split(self, values: list, timestamps: Optional[list] = None) -> list[Split]:
        n = self._check_setup()
        if not values:
            return []
        rand = self._random.random
        channels = [int(rand() * n) for _ in repeat(None, len(values))]
        if n == 1:
            return [(0, values, timestamps)]
        return bucket_by_channel(values, timestamps, channels, n)

    def copy(self) -> "ShufflePartitioner":
        duplicate = ShufflePartitioner()
        duplicate._random.setstate(self._random.getstate())
        duplicate.number_of_channels = self.number_of_channels
        return duplicate

    def __str__(self) -> str:
        return "SHUFFLE"
