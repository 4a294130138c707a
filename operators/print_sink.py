"""``DataStream.print()``: one line per record on stdout (Flink's ``PrintSinkFunction``)."""

from __future__ import annotations

import sys
import threading
from typing import Any, List, Optional

from rill.operators.base import AbstractStreamOperator

__all__ = ["PrintSinkOperator"]

# Subtasks of one process share sys.stdout, whose TextIOWrapper is not thread-safe: without a
# lock, two subtasks' batches interleaved in the middle of lines. Flink's System.out is a
# synchronized PrintStream; this lock plays that part.
_WRITE_LOCK = threading.Lock()


class PrintSinkOperator(AbstractStreamOperator):
    """Writes ``str(record)``, prefixed with ``"<subtask index + 1>> "`` when the sink runs with
    parallelism > 1, as Flink's ``PrintSinkFunction``; with a sink identifier the prefix is
    ``"<identifier>:<subtask index + 1>> "``, or ``"<identifier>> "`` at parallelism 1. One write per batch.

    :param to_error: write to stderr instead of stdout.
    """

    def __init__(self, sink_identifier: Optional[str] = None, to_error: bool = False):
        self.sink_identifier = sink_identifier
        self.to_error = to_error

    def open(self) -> None:
        # Flink's PrintSinkOutputWriter.open: "id:2> ", "2> ", "id> " or nothing
        prefix = self.sink_identifier or ""
        if self.context.parallelism > 1:
            prefix = (prefix + ":" if prefix else "") + f"{self.context.subtask_index + 1}"
        self._prefix = prefix + "> " if prefix else ""

    def process_batch(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        stream = sys.stderr if self.to_error else sys.stdout
        p = self._prefix
        text = "".join(f"{p}{v}\n" for v in values)
        with _WRITE_LOCK:
            stream.write(text)

    def process_watermark(self, watermark) -> None:
        pass

    def finish(self) -> None:
        with _WRITE_LOCK:
            (sys.stderr if self.to_error else sys.stdout).flush()
