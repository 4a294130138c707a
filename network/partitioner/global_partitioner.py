"""GLOBAL: everything to the first consumer subtask (Flink's ``GlobalPartitioner``)."""

from __future__ import annotations

from typing import Any, Optional

from .stream_partitioner import Split, StreamPartitioner

__all__ = ["GlobalPartitioner"]


class GlobalPartitioner(StreamPartitioner):
    """Sends every record to channel 0 (all-to-all connection; only consumer subtask 0 gets
    data)."""

    def select_channel(self, value: Any) -> int:
        return 0

    def split(self, values: list, timestamps: Optional[list] = None) -> list[Split]:
        self._check_setup()
        return [(0, values, timestamps)] if values else []

    def __str__(self) -> str:
        return "GLOBAL"
