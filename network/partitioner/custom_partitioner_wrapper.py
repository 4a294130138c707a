"""CUSTOM: a user :class:`~rill.common.functions.Partitioner` on a key (Flink's
``CustomPartitionerWrapper``), behind ``partition_custom``."""

from __future__ import annotations

import reprlib
from itertools import repeat
from typing import Any, Callable, Optional

from .stream_partitioner import Split, StreamPartitioner, bucket_by_channel, resolve_key_selector

__all__ = ["CustomPartitionerWrapper"]

_repr = reprlib.Repr()
_repr.maxstring = 80
_repr.maxother = 80


def _resolve_partitioner(partitioner: Any) -> Callable[[Any, int], int]:
    partition = getattr(partitioner, "partition", None)
    if callable(partition):
        return partition
    if callable(partitioner):
        return partitioner
    raise TypeError(f"A partitioner must be a Partitioner or a callable (key, n) -> int, got {partitioner!r}")


class CustomPartitionerWrapper(StreamPartitioner):
    """Channel of a record = ``partitioner.partition(key_selector(record), n)``.

    :param partitioner: a :class:`~rill.common.functions.Partitioner` or a callable
        ``(key, num_partitions) -> int``.
    :param key_selector: a :class:`~rill.common.functions.KeySelector` or a callable.

    :raises ValueError: (from ``select_channel``/``split``) if the partitioner returns something
        that is not an int in ``[0, n)``; the message names the record, the key, the result and
        ``n``. Nothing of the batch has been emitted then.
    """

    def __init__(self, partitioner: Any, key_selector: Any) -> None:
        super().__init__()
        self.partitioner = partitioner
        self.key_selector = key_selector
        self._partition = _resolve_partitioner(partitioner)
        self._get_key = resolve_key_selector(key_selector)

    def _bad_channel(self, value: Any, key: Any, channel: Any) -> ValueError:
        return ValueError(
            f"Custom partitioner {self.partitioner!r} returned {channel!r} for record "
            f"{_repr.repr(value)} (key {_repr.repr(key)}): it must return an int in "
            f"[0, {self.number_of_channels})"
        )

    def select_channel(self, value: Any) -> int:
        key = self._get_key(value)
        channel = self._partition(key, self.number_of_channels)
        if not isinstance(channel, int) or not 0 <= channel < self.number_of_channels:
            raise self._bad_channel(value, key, channel)
        return channel

    def split(self, values: list, timestamps: Optional[list] = None) -> list[Split]:
        n = self._check_setup()
        if not values:
            return []
        keys = list(map(self._get_key, values))
        channels = list(map(self._partition, keys, repeat(n)))
        # Validate per batch at C speed: only int types, all within range.
        types = set(map(type, channels))
        all_ints = types == {int} or all(issubclass(t, int) for t in types)
        if not all_ints or min(channels) < 0 or max(channels) >= n:
            for value, key, channel in zip(values, keys, channels):
                if not isinstance(channel, int) or not 0 <= channel < n:
                    raise self._bad_channel(value, key, channel)
        if n == 1:
            return [(0, values, timestamps)]
        return bucket_by_channel(values, timestamps, channels, n)

    def __str__(self) -> str:
        return "CUSTOM"
