"""The writer side of a bulk-format ``FileSink`` (Flink's ``BulkPartWriter`` under the
``FileWriter``): one in-progress part file per bucket, written by the sink's
``BulkWriterFactory``; parts roll only when the sink commits (``OnCheckpointRollingPolicy``).

It has the interface the ``FileSinkOperator`` drives (``open``, ``write_batch``, ``commit``,
``abort``), so the operator does not know which kind of part it writes.
"""

from __future__ import annotations

import os
from typing import Any, BinaryIO, Dict, List, Tuple

__all__ = ["BulkFileSinkWriter"]


class BulkFileSinkWriter:
    """Owns one subtask's in-progress bulk part files, one per bucket. A part is opened on the
    first record of its bucket (a subtask without records writes no file), and on
    :meth:`commit` its writer is finished (footers written), the file closed and renamed from
    ``.<name>.inprogress`` to ``<prefix>-<run>-<subtask>-<n><suffix>``."""

    def __init__(self, sink):
        self.sink = sink
        self._open: Dict[str, Tuple[BinaryIO, Any, str, str]] = {}
        self._counter = 0
        self._subtask = 0

    def open(self, subtask_index: int) -> None:
        self._subtask = subtask_index

    def _new_part(self, bucket: str):
        cfg = self.sink.output_file_config
        directory = os.path.join(self.sink.base_path, bucket) if bucket else self.sink.base_path
        os.makedirs(directory, exist_ok=True)
        name = f"{cfg.part_prefix}-{self.sink.run_id}-{self._subtask}-{self._counter}{cfg.part_suffix}"
        self._counter += 1
        in_progress = os.path.join(directory, f".{name}.inprogress")
        stream = open(in_progress, "wb")
        part = (stream, self.sink.writer_factory.create(stream), in_progress, os.path.join(directory, name))
        self._open[bucket] = part
        return part

    def write_batch(self, values: List[Any]) -> None:
        """Hand the batch to the bucket's part writer (one call per batch)."""
        bucket = self.sink.bucket_assigner.bucket_id()
        part = self._open.get(bucket) or self._new_part(bucket)
        part[1].add_elements(values)

    def commit(self) -> List[str]:
        """Finish every open part and rename it to its final name; returns the final paths."""
        done = []
        for stream, writer, in_progress, final in self._open.values():
            writer.finish()
            stream.close()
            os.replace(in_progress, final)
            done.append(final)
        self._open.clear()
        return done

    def abort(self) -> None:
        """Close the parts without finishing them: they stay hidden in-progress files."""
        for stream, _, _, _ in self._open.values():
            stream.close()
        self._open.clear()
