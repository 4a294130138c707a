"""BROADCAST: every record to every consumer subtask (Flink's ``BroadcastPartitioner``)."""

from __future__ import annotations

from typing import Any, Optional

from .stream_partitioner import Split, StreamPartitioner

__all__ = ["BroadcastPartitioner"]


class BroadcastPartitioner(StreamPartitioner):
    """Copies each batch to all channels. The record objects are shared by all consumers
    (in-process; see :mod:`rill.network.buffer.buffer`), so nobody may mutate them."""

    def select_channel(self, value: Any) -> int:
        """:raises TypeError: always, as Flink: a broadcast record has no single channel; the
        RecordWriter broadcasts instead of selecting."""
        raise TypeError("Broadcast partitioner does not support select channels.")

    def split(self, values: list, timestamps: Optional[list] = None) -> list[Split]:
        n = self._check_setup()
        if not values:
            return []
        return [(channel, values, timestamps) for channel in range(n)]

    def is_broadcast(self) -> bool:
        return True

    def __str__(self) -> str:
        return "BROADCAST"
