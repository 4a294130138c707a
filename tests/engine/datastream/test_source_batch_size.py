"""``rill.source.batch-size`` (README's configuration table) reaches every source reader: the
readers Rill ships cut their batches at it, and a custom reader sees it."""

from __future__ import annotations

from dataclasses import dataclass

from _ds_helpers import collect
from rill.datastream.connectors.collection import CollectionSource, NumberSequenceSource
from rill.datastream.connectors.file_system import FileSource, StreamFormat
from rill.datastream.connectors.source import Source, SourceReader, SourceSplit


@dataclass(frozen=True)
class _One(SourceSplit):
    def split_id(self) -> str:
        return "one"


class _ReportsBatchSize(SourceReader):
    def read(self, split):
        yield [self.batch_size]


class BatchSizeSource(Source):
    """One record: the batch size its reader was given."""

    non_parallel = True

    def create_splits(self, parallelism):
        return [_One()]

    def create_reader(self):
        return _ReportsBatchSize()


def test_the_setting_reaches_a_running_source(env):
    env.get_configuration().set_integer("rill.source.batch-size", 7)
    assert collect(env.from_source(BatchSizeSource(), source_name="batch size")) == [7]


def test_the_default_is_1024(env):
    assert collect(env.from_source(BatchSizeSource(), source_name="batch size")) == [1024]


def _batches(source, batch_size):
    reader = source.create_reader()
    reader.batch_size = batch_size
    reader.open(0, 1)
    return [b for split in source.create_splits(1) for b in reader.read(split)]


def test_rills_readers_cut_their_batches_at_the_setting(tmp_path):
    assert _batches(CollectionSource(list("abcdefg")), 3) == [["a", "b", "c"], ["d", "e", "f"], ["g"]]
    assert _batches(NumberSequenceSource(1, 5), 2) == [[1, 2], [3, 4], [5]]
    (tmp_path / "f.txt").write_text("l1\nl2\nl3\nl4\nl5\n")
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path / "f.txt")).build()
    assert _batches(source, 2) == [["l1", "l2"], ["l3", "l4"], ["l5"]]
