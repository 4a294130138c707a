"""File source and sink (PyFlink's ``pyflink.datastream.connectors.file_system``).

``FileSource`` reads files through a ``StreamFormat`` or ``BulkFormat`` (text lines here; CSV,
Avro and others in :mod:`rill.datastream.formats`). Text files are cut into byte-range splits of at most
``split_size_bytes`` (a line belongs to the split in which it starts, as Hadoop's and Flink's
text input formats rule), so several subtasks share a large file and a fast subtask takes more
splits; other formats read a file per split. A split's checkpointed position is the number of its
records emitted (Flink's
``CheckpointedPosition`` with ``recordsAfterOffset`` from the split's start); a restore reads
the split again and emits from the next line (the files must not change in between). ``FileSink`` writes part files under bucket directories, exactly once with checkpoints.
"""

from __future__ import annotations

import datetime as _dt
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Iterator, List, Optional, Sequence, Tuple

from rill.common.serialization import BulkWriterFactory, Encoder
from rill.common.connector.source import Source, SourceReader, SourceSplit
from rill.common.typeinfo import TypeInformation, Types
from rill.datastream.connectors.base import Sink
from rill.datastream.connectors.file_compaction import FileCompactor, FileCompactStrategy

__all__ = [
    "StreamFormat",
    "BulkFormat",
    "FileEnumeratorProvider",
    "FileSplitAssignerProvider",
    "FileSource",
    "FileSourceBuilder",
    "FileSink",
    "OutputFileConfig",
    "BucketAssigner",
    "RollingPolicy",
    "FileCompactStrategy",
    "FileCompactor",
    "StreamingFileSink",
]

class StreamFormat:
    """How a file's bytes become records, read from a stream (Flink's ``StreamFormat``).

    Subclasses (the formats in :mod:`rill.datastream.formats`) implement :meth:`read_batches`;
    a format that is not splittable reads each file whole, in one split.
    ``StreamFormat.text_line_format`` is Flink's ``TextLineInputFormat``: splittable into byte
    ranges, one ``str`` per line.
    """

    def is_splittable(self) -> bool:
        return False

    def read_batches(self, stream: BinaryIO, batch_size: int) -> Iterator[List[Any]]:
        """Yield the records of one whole file, ``stream`` opened binary at its start, in lists of
        at most ``batch_size``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement StreamFormat.read_batches")

    def get_produced_type(self) -> TypeInformation:
        return Types.PICKLED_BYTE_ARRAY()

    @staticmethod
    def text_line_format(charset_name: str = "UTF-8") -> "StreamFormat":
        """Lines of text decoded with ``charset_name``, without their line breaks.

        :raises LookupError: for an unknown charset.
        """
        return _TextLineFormat(charset_name.lower())


class _TextLineFormat(StreamFormat):
    def __init__(self, charset: str):
        "".encode(charset)
        self.charset = charset

    def is_splittable(self) -> bool:
        return True

    def get_produced_type(self) -> TypeInformation:
        return Types.STRING()


class BulkFormat:
    """Reads a whole file in batches, by path (Flink's ``BulkFormat``, for formats that need
    random access such as ORC and Parquet). Subclasses implement :meth:`read_batches`."""

    def read_batches(self, path: str, batch_size: int) -> Iterator[List[Any]]:
        """Yield the records of the file at ``path`` in lists of at most ``batch_size``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement BulkFormat.read_batches")

    def split_points(self, path: str) -> Optional[List[int]]:
        """Byte offsets, ascending, at which the file at ``path`` can be cut into splits read
        on their own (a Parquet file's row groups), or ``None`` (default): the file is read whole."""
        return None

    def read_split(self, path: str, batch_size: int, offset: int, length: int) -> Iterator[List[Any]]:
        """The records of the units whose split point lies in ``[offset, offset + length)``
        (the whole file for a format without :meth:`split_points`)."""
        return self.read_batches(path, batch_size)

    def get_produced_type(self) -> TypeInformation:
        return Types.PICKLED_BYTE_ARRAY()


class FileEnumeratorProvider:
    """Which files a ``FileSource`` reads and how it cuts them into splits (Flink's
    ``FileEnumerator.Provider``). Both of Flink's defaults list every non-hidden file under
    the paths, recursively; they differ in whether a file is cut into byte-range splits (only
    formats that can start reading mid-file, such as text lines, are)."""

    def __init__(self, splittable: bool):
        self.splittable = splittable

    @staticmethod
    def default_splittable_file_enumerator() -> "FileEnumeratorProvider":
        """Files cut into splits of at most the source's split size, where the format allows."""
        return FileEnumeratorProvider(True)

    @staticmethod
    def default_non_splittable_file_enumerator() -> "FileEnumeratorProvider":
        """One split per file."""
        return FileEnumeratorProvider(False)


class FileSplitAssignerProvider:
    """How a ``FileSource`` hands splits to the readers that ask (Flink's
    ``FileSplitAssigner.Provider``). Flink's default, ``LocalityAwareSplitAssigner``, prefers
    splits whose blocks are on the reader's host; Rill reads local or shared files, every host
    is equally near, so it assigns in order, first come first served."""

    @staticmethod
    def locality_aware_split_assigner() -> "FileSplitAssignerProvider":
        return FileSplitAssignerProvider()


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


class _FormatReader(SourceReader):
    """Reads whole files through a non-splittable :class:`StreamFormat` or a :class:`BulkFormat`;
    progress is counted in bytes, a file's bytes once it has been read."""

    def __init__(self, fmt):
        self.fmt = fmt

    def read(self, split: FileSourceSplit) -> Iterator[List[Any]]:
        if isinstance(self.fmt, BulkFormat):
            yield from self.fmt.read_split(split.path, self.batch_size, split.offset, split.length)
        else:
            with open(split.path, "rb") as stream:
                yield from self.fmt.read_batches(stream, self.batch_size)
        self.progress_units += split.length


class FileSource(Source):
    """Records of files, or of all files (non-hidden, recursively) under directories, read
    through a :class:`StreamFormat` or a :class:`BulkFormat` (Flink's ``FileSource``).

    :param paths: files or directories; missing paths raise ``FileNotFoundError`` when the
        job graph is built (on ``from_source``), naming the path. Relative paths are made
        absolute here, against the working directory of the program that builds the job, so
        they mean the same file on a cluster whose processes run elsewhere.
    :param stream_format: a :class:`StreamFormat` or a :class:`BulkFormat`.
    :param split_size_bytes: maximum bytes per split of a splittable format (default 4 MiB).
    :param file_enumerator: a non-splittable enumerator reads every file in one split.
    :raises TypeError: for a format that is neither a StreamFormat nor a BulkFormat.
    :raises ValueError: for a split size below 1 byte.
    """

    progress_units_are_bytes = True
    runs_on_spark = True

    def __init__(self, paths: Sequence[str], stream_format, split_size_bytes: int = 4 << 20,
                 file_enumerator: Optional[FileEnumeratorProvider] = None):
        if split_size_bytes < 1:
            raise ValueError(f"FileSource: split size must be >= 1 byte, got {split_size_bytes}")
        if not isinstance(stream_format, (StreamFormat, BulkFormat)):
            raise TypeError(f"FileSource: expected a StreamFormat or BulkFormat, got {type(stream_format).__name__}")
        self._given = [str(p) for p in paths]
        self.paths = [os.path.abspath(p) for p in self._given]
        self.stream_format = stream_format
        self.split_size_bytes = split_size_bytes
        enumerator = file_enumerator or FileEnumeratorProvider.default_splittable_file_enumerator()
        self._enumerator_splittable = enumerator.splittable
        self.splittable = (enumerator.splittable and isinstance(stream_format, StreamFormat)
                           and stream_format.is_splittable())
        self._files = self._list_files()

    @staticmethod
    def for_record_stream_format(stream_format: StreamFormat, *paths: str) -> "FileSourceBuilder":
        """A builder of a source reading ``paths`` through ``stream_format``."""
        return FileSourceBuilder(stream_format, list(paths))

    @staticmethod
    def for_bulk_file_format(bulk_format: BulkFormat, *paths: str) -> "FileSourceBuilder":
        """A builder of a source reading ``paths`` through ``bulk_format``."""
        return FileSourceBuilder(bulk_format, list(paths))

    def get_produced_type(self) -> TypeInformation:
        return self.stream_format.get_produced_type()

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
            points = self._bulk_split_points(f)
            if points:  # cut at the format's points (Parquet: row groups), about a piece each
                starts = [0]
                for point in points[1:]:
                    if point - starts[-1] >= piece:
                        starts.append(point)
                ends = starts[1:] + [size]
                splits.extend(FileSourceSplit(f, a, b - a) for a, b in zip(starts, ends))
                continue
            if not self.splittable:
                splits.append(FileSourceSplit(f, 0, size))
                continue
            for off in range(0, size, piece):
                splits.append(FileSourceSplit(f, off, min(piece, size - off)))
        return splits

    def _bulk_split_points(self, path: str) -> Optional[List[int]]:
        """The split points of a splittable bulk format's file (the first made 0: the file's
        header belongs to the first split), or ``None``."""
        if not (self._enumerator_splittable and isinstance(self.stream_format, BulkFormat)):
            return None
        points = self.stream_format.split_points(path)
        return None if not points else [0] + list(points[1:])

    def create_reader(self) -> SourceReader:
        if isinstance(self.stream_format, _TextLineFormat):
            return _TextLineReader(self.stream_format.charset)
        return _FormatReader(self.stream_format)

    def estimated_total_units(self) -> Optional[int]:
        return sum(os.path.getsize(f) for f in self._files)


class FileSourceBuilder:
    """Builds a :class:`FileSource` (PyFlink's ``FileSource.for_record_stream_format(...)``)."""

    def __init__(self, stream_format, paths: List[str]):
        self._format = stream_format
        self._paths = paths
        self._split_size = 4 << 20
        self._enumerator: Optional[FileEnumeratorProvider] = None

    def set_split_size(self, split_size_bytes: int) -> "FileSourceBuilder":
        self._split_size = split_size_bytes
        return self

    def set_file_enumerator(self, file_enumerator: FileEnumeratorProvider) -> "FileSourceBuilder":
        """:raises TypeError: for anything but a :class:`FileEnumeratorProvider`."""
        if not isinstance(file_enumerator, FileEnumeratorProvider):
            raise TypeError(f"FileSource: set_file_enumerator expects a FileEnumeratorProvider, "
                            f"got {type(file_enumerator).__name__}")
        self._enumerator = file_enumerator
        return self

    def set_split_assigner(self, split_assigner: FileSplitAssignerProvider) -> "FileSourceBuilder":
        """:raises TypeError: for anything but a :class:`FileSplitAssignerProvider`."""
        if not isinstance(split_assigner, FileSplitAssignerProvider):
            raise TypeError(f"FileSource: set_split_assigner expects a FileSplitAssignerProvider, "
                            f"got {type(split_assigner).__name__}")
        return self

    def process_static_file_set(self) -> "FileSourceBuilder":
        """Read the files present when the job starts, then end (the default; bounded)."""
        return self

    def monitor_continuously(self, discovery_interval) -> "FileSourceBuilder":
        raise NotImplementedError("FileSource.monitor_continuously is not implemented: Rill's FileSource "
                                  "reads the files present at job start (process_static_file_set)")

    def build(self) -> FileSource:
        return FileSource(self._paths, self._format, self._split_size, self._enumerator)


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


class FileSink(Sink):
    """Exactly-once file sink (Flink's ``FileSink``; PyFlink's ``FileSink.for_row_format`` /
    ``for_bulk_format``): records go into part files under bucket directories of
    ``base_path``, hidden while in progress or pending and renamed visible when the checkpoint
    that covers them completes, or at the end of input without checkpointing. Names:
    ``<bucket>/<prefix>-<run id>-<subtask>-<n><suffix>``, in progress
    ``.<that name>.inprogress.<uuid>``; the protocol is in :mod:`rill.operators.file_sink`.

    Row formats write ``encoder.encode(record)`` per record; bulk formats (CSV, Avro, ORC,
    Parquet in :mod:`rill.datastream.formats`) write through a ``BulkWriterFactory`` and roll on
    every checkpoint. ``enable_compact`` on the builder compacts committed parts
    (:mod:`rill.datastream.connectors.file_compaction`).

    A relative ``base_path`` is made absolute against the working directory of the program that
    builds the sink, so a job on a cluster writes where its program was run.

    :raises ValueError: for a bulk format with a rolling policy that does not roll on every
        checkpoint (a bulk file cannot be continued after a checkpoint).
    """

    #: ``(FileCompactStrategy, FileCompactor)`` when the builder enabled compaction
    compaction: Optional[Tuple[FileCompactStrategy, FileCompactor]] = None

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
    def for_bulk_format(base_path: str, writer_factory: BulkWriterFactory) -> "_BulkFormatBuilder":
        """A sink writing with a ``BulkWriterFactory`` (``factory.create(file)`` gives a writer
        with ``add_elements(values)`` and ``finish()``), rolling on every checkpoint."""
        return _BulkFormatBuilder(base_path, writer_factory)


class _FormatBuilder:
    """What both of Flink's ``FileSink.RowFormatBuilder`` and ``BulkFormatBuilder`` set
    (PyFlink's ``FileSink.BaseBuilder``)."""

    def __init__(self, base_path: str, rolling: RollingPolicy, sink_class: type):
        self._base = base_path
        self._ofc = OutputFileConfig()
        self._assigner = BucketAssigner.date_time_bucket_assigner()
        self._rolling = rolling
        self._sink_class = sink_class
        self._compaction: Optional[Tuple[FileCompactStrategy, FileCompactor]] = None

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

    def enable_compact(self, strategy: FileCompactStrategy, compactor: FileCompactor):
        """Compact the part files as they are committed (see
        :mod:`rill.datastream.connectors.file_compaction`).

        :raises TypeError: for anything but a ``FileCompactStrategy`` and a ``FileCompactor``.
        """
        if not isinstance(strategy, FileCompactStrategy) or not isinstance(compactor, FileCompactor):
            raise TypeError(f"FileSink.enable_compact expects a FileCompactStrategy and a FileCompactor, "
                            f"got {type(strategy).__name__} and {type(compactor).__name__}")
        self._compaction = (strategy, compactor)
        return self

    def disable_compact(self):
        self._compaction = None
        return self

    def _with_compaction(self, sink: FileSink) -> FileSink:
        sink.compaction = self._compaction
        return sink


class _RowFormatBuilder(_FormatBuilder):
    def __init__(self, base_path: str, encoder: Encoder, sink_class: type = FileSink):
        super().__init__(base_path, RollingPolicy(), sink_class)
        self._encoder = encoder

    def build(self) -> FileSink:
        return self._with_compaction(
            self._sink_class(self._base, self._encoder, self._ofc, self._assigner, self._rolling))


class _BulkFormatBuilder(_FormatBuilder):
    def __init__(self, base_path: str, writer_factory: BulkWriterFactory, sink_class: type = FileSink):
        super().__init__(base_path, RollingPolicy.on_checkpoint_rolling_policy(), sink_class)
        self._factory = writer_factory

    def build(self) -> FileSink:
        return self._with_compaction(
            self._sink_class(self._base, None, self._ofc, self._assigner, self._rolling, self._factory))


class StreamingFileSink(FileSink):
    """The legacy file sink for ``DataStream.add_sink`` (Flink's ``StreamingFileSink``, which
    ``FileSink`` replaces): the same part files, buckets, rolling and commit protocol as
    ``FileSink``, built with ``StreamingFileSink.for_row_format(path, encoder)`` or
    ``.for_bulk_format(path, writer_factory)``."""

    @staticmethod
    def for_row_format(base_path: str, encoder: Encoder) -> "_RowFormatBuilder":
        return _RowFormatBuilder(base_path, encoder, StreamingFileSink)

    @staticmethod
    def for_bulk_format(base_path: str, writer_factory: BulkWriterFactory) -> "_BulkFormatBuilder":
        return _BulkFormatBuilder(base_path, writer_factory, StreamingFileSink)
