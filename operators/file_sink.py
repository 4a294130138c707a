"""The writer side of ``FileSink`` (Flink's ``FileWriter`` / ``SinkWriterOperator``)."""

from __future__ import annotations

import os
from typing import Any, BinaryIO, Dict, List, Optional, Tuple

from rill.operators.base import AbstractStreamOperator

__all__ = ["FileSinkWriter", "FileSinkOperator"]


class FileSinkWriter:
    """Owns the in-progress part files of one subtask: one per bucket, rolled when it exceeds
    the rolling policy's part size; committed (renamed to the final name) on :meth:`commit`."""

    def __init__(self, sink):
        self.sink = sink
        self._open: Dict[str, Tuple[BinaryIO, str, str, int]] = {}
        self._counter = 0
        self._subtask = 0
        self._pending: List[Tuple[str, str]] = []

    def open(self, subtask_index: int) -> None:
        self._subtask = subtask_index

    def _new_part(self, bucket: str):
        cfg = self.sink.output_file_config
        directory = os.path.join(self.sink.base_path, bucket) if bucket else self.sink.base_path
        os.makedirs(directory, exist_ok=True)
        name = f"{cfg.part_prefix}-{self.sink.run_id}-{self._subtask}-{self._counter}{cfg.part_suffix}"
        self._counter += 1
        final = os.path.join(directory, name)
        in_progress = os.path.join(directory, f".{name}.inprogress")
        f = open(in_progress, "wb")
        self._open[bucket] = (f, in_progress, final, 0)
        return self._open[bucket]

    def write_batch(self, values: List[Any]) -> None:
        """Append ``values``; before each record, roll to a new part if the current one is larger
        than the part size (Flink's ``DefaultRollingPolicy.shouldRollOnEvent``)."""
        bucket = self.sink.bucket_assigner.bucket_id()
        f, in_progress, final, size = self._open.get(bucket) or self._new_part(bucket)
        encode = self.sink.encoder.encode
        chunks = [encode(v) for v in values]
        limit = self.sink.rolling_policy.part_size_bytes
        start = 0
        total = sum(map(len, chunks))
        if size + total > limit:  # else no record of the batch finds the part too large
            for i, chunk in enumerate(chunks):
                if size > limit:
                    f.write(b"".join(chunks[start:i]))
                    f.close()
                    self._pending.append((in_progress, final))
                    f, in_progress, final, size = self._new_part(bucket)
                    start = i
                size += len(chunk)
        else:
            size += total
        f.write(b"".join(chunks[start:]))
        self._open[bucket] = (f, in_progress, final, size)

    def commit(self) -> List[str]:
        """Close every open part and rename all parts to their final names; returns them."""
        for f, in_progress, final, _ in self._open.values():
            f.close()
            self._pending.append((in_progress, final))
        self._open.clear()
        done = []
        for in_progress, final in self._pending:
            os.replace(in_progress, final)
            done.append(final)
        self._pending.clear()
        return done

    def abort(self) -> None:
        for f, in_progress, _, _ in self._open.values():
            f.close()
        self._open.clear()


class FileSinkOperator(AbstractStreamOperator):
    """Runs a :class:`FileSinkWriter`; commits the subtask's files when its input ends.
    On failure the in-progress files stay hidden (never visible as finished output)."""

    def __init__(self, sink):
        self.sink = sink
        self._writer: Optional[FileSinkWriter] = None
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
