"""Runs a user-defined Sink V2 ``Sink`` (Flink's ``SinkWriterOperator``, without the
committer's checkpoint protocol): one ``SinkWriter`` per subtask, ``write_batch`` per batch,
``commit`` when the input ends, ``abort`` when the task fails or is cancelled."""

from __future__ import annotations

from typing import Any, Optional

from rill.operators.base import AbstractStreamOperator

__all__ = ["SinkWriterOperator"]


class SinkWriterOperator(AbstractStreamOperator):
    """:param sink: has ``create_writer()`` returning a writer with ``open(subtask_index)``,
    ``write_batch(values)``, ``commit()`` and ``abort()``."""

    def __init__(self, sink: Any) -> None:
        self.sink = sink
        self._writer: Optional[Any] = None
        self._committed = False

    def open(self) -> None:
        self._writer = self.sink.create_writer()
        self._writer.open(self.context.subtask_index)

    def process_batch(self, values, timestamps=None) -> None:
        self._writer.write_batch(values)

    def process_watermark(self, watermark) -> None:
        pass

    def finish(self) -> None:
        self._writer.commit()
        self._committed = True

    def close(self) -> None:
        if self._writer is not None and not self._committed:
            self._writer.abort()
