"""File source and sink (PyFlink's ``pyflink.datastream.connectors.file_system``).

``FileSource`` reads text lines; each file is cut into byte-range splits of at most
``split_size_bytes`` (a line belongs to the split in which it starts, as Hadoop's and Flink's
text input formats rule), so several subtasks share a large file and a fast subtask takes more
splits. A split's checkpointed position is the number of its lines emitted (Flink's
``CheckpointedPosition`` with ``recordsAfterOffset`` from the split's start); a restore reads
the split again and emits from the next line (the files must not change in between). ``FileSink`` writes part files under bucket directories, exactly once with checkpoints.
"""

from __future__ import annotations

import datetime as _dt
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, List, Optional, Sequence

from rill.common.serialization import Encoder
from rill.common.connector.source import Source, SourceReader, SourceSplit

__all__ = [
    "StreamFormat",
    "FileSource",
    "FileSourceBuilder",
    "FileSink",
    "OutputFileConfig",
    "BucketAssigner",
    "RollingPolicy",
]

class StreamFormat:
    """How a file's bytes become records (only text lines so far)."""

    def __init__(self, charset: str):
        self.charset = charset

    @staticmethod
    def text_line_format(charset_name: str = "UTF-8") -> "StreamFormat":
        return StreamFormat(charset_name.lower())


@dataclass(frozen=True)
class FileSourceSplit(SourceSplit):
    """Bytes ``[offset, offset + length)`` of ``path``."""

    path: str
    offset: int
    length: int

    def split_id(self) -> str:
        return f"{self.path}:{self.offset}+{self.length}"


class _TextLineReader(SourceReader):
    def __init__(self, charset: str):
        self.charset = charset

    def read(self, split: FileSourceSplit) -> Iterator[List[str]]:
        return self.read_from(split, 0)

    def read_from(self, split: FileSourceSplit, records_to_skip: int) -> Iterator[List[str]]:
        """The split's lines after the first ``records_to_skip`` (the split's bytes are read
        and cut into lines as :meth:`read` does; the skipped lines are only not emitted)."""
        if records_to_skip < 0:
            raise ValueError(f"FileSource reader: records_to_skip must be >= 0, got {records_to_skip}")
        return self._lines(split, records_to_skip)

    def _lines(self, split: FileSourceSplit, skip: int) -> Iterator[List[str]]:
        with open(split.path, "rb") as f:
            start, end = split.offset, split.offset + split.length
            if start > 0:
                # the line that straddles `start` belongs to the previous split
                f.seek(start - 1)
                skipped = f.readline()
                start += len(skipped) - 1
            if start >= end:
                self.progress_units += split.length
                return
            f.seek(start)
            data = f.read(end - start)
            if not data.endswith(b"\n"):
                data += f.readline()  # finish the last line that starts inside the split
        text = data.decode(self.charset)
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if "\r" in text:
            lines = [ln[:-1] if ln.endswith("\r") else ln for ln in lines]
        n = len(lines)
        if n == 0:
            self.progress_units += split.length
            return
        done, step = split.length * min(skip, n) // n, self.batch_size
        self.progress_units += done
        for i in range(min(skip, n), n, step):
            batch = lines[i:i + step]
            share = split.length * min(i + step, n) // n
            self.progress_units += share - done
            done = share
            yield batch


class FileSource(Source):
    """Text lines of files or of all files (non-hidden, recursively) under directories.

    :param paths: files or directories; missing paths raise ``FileNotFoundError`` when the
        job graph is built (on ``from_source``), naming the path. Relative paths are made
        absolute here, against the working directory of the program that builds the job, so
        they mean the same file on a cluster whose processes run elsewhere.
    :param split_size_bytes: maximum bytes per split (default 4 MiB).
    """

    progress_units_are_bytes = True

    def __init__(self, paths: Sequence[str], stream_format: StreamFormat, split_size_bytes: int = 4 << 20):
        if split_size_bytes < 1:
            raise ValueError(f"FileSource: split size must be >= 1 byte, got {split_size_bytes}")
        self._given = [str(p) for p in paths]
        self.paths = [os.path.abspath(p) for p in self._given]
        self.stream_format = stream_format
        self.split_size_bytes = split_size_bytes
        self._files = self._list_files()

    @staticmethod
    def for_record_stream_format(stream_format: StreamFormat, *paths: str) -> "FileSourceBuilder":
        return FileSourceBuilder(stream_format, list(paths))

    def _list_files(self) -> List[str]:
        files: List[str] = []
        for given, p in zip(self._given, self.paths):
            path = Path(p)
            if path.is_file():
                files.append(str(path))
            elif path.is_dir():
                for root, dirs, names in os.walk(path):
                    dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
                    files.extend(os.path.join(root, n) for n in sorted(names) if not n.startswith((".", "_")))
            else:
                where = "" if given == p else f" (resolved against {os.getcwd()})"
                raise FileNotFoundError(f"FileSource: input path '{given}'{where} does not exist")
        return files

    def create_splits(self, parallelism: int) -> List[SourceSplit]:
        splits: List[SourceSplit] = []
        for f in self._files:
            size = os.path.getsize(f)
            if size == 0:
                continue
            piece = max(1, min(self.split_size_bytes, -(-size // parallelism)))
            for off in range(0, size, piece):
                splits.append(FileSourceSplit(f, off, min(piece, size - off)))
        return splits

    def create_reader(self) -> SourceReader:
        return _TextLineReader(self.stream_format.charset)

    def estimated_total_units(self) -> Optional[int]:
        return sum(os.path.getsize(f) for f in self._files)


class FileSourceBuilder:
    """Builds a :class:`FileSource` (PyFlink's ``FileSource.for_record_stream_format(...)``)."""

    def __init__(self, stream_format: StreamFormat, paths: List[str]):
        self._format = stream_format
        self._paths = paths
        self._split_size = 4 << 20

    def set_split_size(self, split_size_bytes: int) -> "FileSourceBuilder":
        self._split_size = split_size_bytes
        return self

    def build(self) -> FileSource:
        return FileSource(self._paths, self._format, self._split_size)


@dataclass(frozen=True)
class OutputFileConfig:
    """Part-file name prefix and suffix (Flink's ``OutputFileConfig``)."""

    part_prefix: str = "part"
    part_suffix: str = ""

    @staticmethod
    def builder() -> "_OutputFileConfigBuilder":
        return _OutputFileConfigBuilder()


class _OutputFileConfigBuilder:
    def __init__(self):
        self._prefix, self._suffix = "part", ""

    def with_part_prefix(self, prefix: str) -> "_OutputFileConfigBuilder":
        self._prefix = prefix
        return self

    def with_part_suffix(self, suffix: str) -> "_OutputFileConfigBuilder":
        self._suffix = suffix
        return self

    def build(self) -> OutputFileConfig:
        return OutputFileConfig(self._prefix, self._suffix)


class BucketAssigner:
    """Chooses the bucket (sub-directory) of each record."""

    def __init__(self, kind: str, fmt: str = "%Y-%m-%d--%H"):
        self.kind = kind
        self.fmt = fmt

    @staticmethod
    def base_path_bucket_assigner() -> "BucketAssigner":
        """Every record in the base path itself."""
        return BucketAssigner("base")

    @staticmethod
    def date_time_bucket_assigner(format_str: str = "yyyy-MM-dd--HH", timezone_id: Optional[str] = None) -> "BucketAssigner":
        """Buckets named after the processing time (Flink's default ``DateTimeBucketAssigner``)."""
        fmt = (format_str.replace("yyyy", "%Y").replace("MM", "%m").replace("dd", "%d")
               .replace("HH", "%H").replace("mm", "%M"))
        return BucketAssigner("datetime", fmt)

    def bucket_id(self) -> str:
        if self.kind == "base":
            return ""
        return _dt.datetime.now().strftime(self.fmt)


class RollingPolicy:
    """When an in-progress part file is closed and the next one started (Flink's
    ``RollingPolicy``; PyFlink's ``RollingPolicy`` factories).

    :param part_size_bytes: roll before a record when the part is larger (``None``: never on
        a record).
    :param roll_on_checkpoint: roll at every checkpoint (``True``), or only when the part is
        larger than ``part_size_bytes`` (``False``, Flink's ``DefaultRollingPolicy``); a part
        not rolled stays in progress across the checkpoint with its valid length recorded.
    """

    def __init__(self, part_size_bytes: Optional[int] = 128 << 20, roll_on_checkpoint: bool = False):
        if part_size_bytes is not None and part_size_bytes < 0:
            raise ValueError(f"RollingPolicy: part size must be >= 0 bytes, got {part_size_bytes}")
        self.part_size_bytes = part_size_bytes
        self.roll_on_checkpoint = roll_on_checkpoint

    @staticmethod
    def default_rolling_policy(part_size: int = 128 << 20, rollover_interval: int = 60_000,
                               inactivity_interval: int = 60_000) -> "RollingPolicy":
        """Flink's ``DefaultRollingPolicy`` by part size (bytes). Rill does not roll by time
        yet: ``rollover_interval`` and ``inactivity_interval`` (ms) are accepted and unused."""
        return RollingPolicy(part_size)

    @staticmethod
    def on_checkpoint_rolling_policy() -> "RollingPolicy":
        """Flink's ``OnCheckpointRollingPolicy``: a part per checkpoint, never rolled by size
        (the only kind bulk formats take)."""
        return RollingPolicy(None, roll_on_checkpoint=True)

    def should_roll_on_checkpoint(self, part_size_bytes: int) -> bool:
        """Whether an in-progress part of ``part_size_bytes`` is closed at a checkpoint."""
        return self.roll_on_checkpoint or (self.part_size_bytes is not None and part_size_bytes > self.part_size_bytes)


class FileSink:
    """Exactly-once file sink (Flink's ``FileSink``; PyFlink's ``FileSink.for_row_format`` /
    ``for_bulk_format``): records go into part files under bucket directories of
    ``base_path``, hidden while in progress or pending and renamed visible when the checkpoint
    that covers them completes, or at the end of input without checkpointing. Names:
    ``<bucket>/<prefix>-<run id>-<subtask>-<n><suffix>``, in progress
    ``.<that name>.inprogress.<uuid>``; the protocol is in :mod:`rill.operators.file_sink`.

    Row formats write ``encoder.encode(record)`` per record; bulk formats (e.g.
    ``ParquetBulkWriters.for_row_type``) write through a ``BulkWriterFactory`` and roll on
    every checkpoint.

    A relative ``base_path`` is made absolute against the working directory of the program that
    builds the sink, so a job on a cluster writes where its program was run.

    :raises ValueError: for a bulk format with a rolling policy that does not roll on every
        checkpoint (a bulk file cannot be continued after a checkpoint).
    """

    def __init__(self, base_path: str, encoder: Optional[Encoder], output_file_config: OutputFileConfig,
                 bucket_assigner: BucketAssigner, rolling_policy: RollingPolicy,
                 bulk_writer_factory: Any = None):
        if bulk_writer_factory is not None and not rolling_policy.roll_on_checkpoint:
            raise ValueError("FileSink: a bulk format needs a rolling policy that rolls on every checkpoint "
                             "(RollingPolicy.on_checkpoint_rolling_policy())")
        self.base_path = os.path.abspath(str(base_path))
        self.encoder = encoder
        self.bulk_writer_factory = bulk_writer_factory
        self.output_file_config = output_file_config
        self.bucket_assigner = bucket_assigner
        self.rolling_policy = rolling_policy
        self.run_id = uuid.uuid4().hex

    @staticmethod
    def for_row_format(base_path: str, encoder: Encoder) -> "_RowFormatBuilder":
        return _RowFormatBuilder(base_path, encoder)

    @staticmethod
    def for_bulk_format(base_path: str, writer_factory: Any) -> "_BulkFormatBuilder":
        """A sink writing with a ``BulkWriterFactory`` (``factory.create(file)`` gives a writer
        with ``add_elements(values)`` and ``finish()``), rolling on every checkpoint."""
        return _BulkFormatBuilder(base_path, writer_factory)


class _FormatBuilder:
    """What both of Flink's ``FileSink.RowFormatBuilder`` and ``BulkFormatBuilder`` set."""

    def __init__(self, base_path: str, rolling: RollingPolicy):
        self._base = base_path
        self._ofc = OutputFileConfig()
        self._assigner = BucketAssigner.date_time_bucket_assigner()
        self._rolling = rolling

    def with_output_file_config(self, config: OutputFileConfig):
        self._ofc = config
        return self

    def with_bucket_assigner(self, assigner: BucketAssigner):
        self._assigner = assigner
        return self

    def with_rolling_policy(self, policy: RollingPolicy):
        """A bulk format's policy must roll on every checkpoint (``FileSink`` raises
        ``ValueError`` otherwise)."""
        self._rolling = policy
        return self


class _RowFormatBuilder(_FormatBuilder):
    def __init__(self, base_path: str, encoder: Encoder):
        super().__init__(base_path, RollingPolicy())
        self._encoder = encoder

    def build(self) -> FileSink:
        return FileSink(self._base, self._encoder, self._ofc, self._assigner, self._rolling)


class _BulkFormatBuilder(_FormatBuilder):
    def __init__(self, base_path: str, writer_factory: Any):
        super().__init__(base_path, RollingPolicy.on_checkpoint_rolling_policy())
        self._factory = writer_factory

    def build(self) -> FileSink:
        return FileSink(self._base, None, self._ofc, self._assigner, self._rolling, self._factory)
