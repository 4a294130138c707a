"""The JobMaster's side of a source: its split enumerator (Flink's runtime
``org.apache.flink.runtime.source.coordinator.SourceCoordinator``)."""

from __future__ import annotations

import threading
from typing import Optional

from rill.common.connector.source import Source, SourceSplit

__all__ = ["SourceCoordinator"]


class SourceCoordinator:
    """Holds a source's enumerator for a job and serves split requests (Flink's
    ``SourceCoordinator``). Thread-safe: subtasks call from their task threads."""

    def __init__(self, source: Source, parallelism: int):
        self.source = source
        self._enumerator = source.create_enumerator(parallelism)
        self._lock = threading.Lock()

    def request_split(self, subtask_index: int) -> Optional[SourceSplit]:
        """The enumerator's next split for ``subtask_index``, or ``None`` when it has no more."""
        with self._lock:
            return self._enumerator.handle_split_request(subtask_index)
