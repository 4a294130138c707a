"""Sources end to end: read_text_file / FileSource over real files, custom FLIP-27 sources
(bounded and splittable, unbounded and cancelled)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import List

import pytest

from _ds_helpers import EndlessSource, assert_threads_gone, collect, run, task_names, wait_until
from rill.common import JobStatus
from rill.datastream import RuntimeContext, MapFunction
from rill.datastream.connectors import FileSource, Source, SourceReader, SourceSplit, StreamFormat
from rill.runtime.errors import JobCancellationException


# -- files -------------------------------------------------------------------------------------

def test_read_text_file_of_a_directory(env, tmp_path):
    (tmp_path / "a.txt").write_text("alpha\nbeta\n")
    (tmp_path / "b.txt").write_bytes(b"gamma\r\ndelta\r\n\r\nepsilon")  # CRLF, empty line, no final newline
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.txt").write_text("zeta\n")
    (tmp_path / ".hidden").write_text("never\n")
    (tmp_path / "_SUCCESS").write_text("never\n")
    env.set_parallelism(3)
    out = collect(env.read_text_file(str(tmp_path)))
    assert sorted(out) == sorted(["alpha", "beta", "gamma", "delta", "", "epsilon", "zeta"])


def test_read_text_file_of_one_file_keeps_order_at_parallelism_1(env, tmp_path):
    lines = [f"line {i} ünïcödé" for i in range(500)]
    path = tmp_path / "in.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert collect(env.read_text_file(str(path))) == lines


@pytest.mark.parametrize("split_size", [1, 7, 64, 1000])
def test_file_larger_than_one_split_reads_every_line_exactly_once(env, tmp_path, split_size):
    lines = []
    # one split per byte: 80 lines (~2 KB) put a boundary at every position of every kind of line
    # already; a cluster's readers ask the JobMaster for each split (one RPC each, as in Flink)
    for i in range(80 if split_size == 1 else 400):
        # lines of varied length, CRLF and LF, multi-byte characters, some empty
        body = "" if i % 37 == 0 else ("é" * (i % 5)) + f"row-{i}-" + "x" * (i % 23)
        lines.append(body)
    data = b"".join((ln + ("\r\n" if i % 2 else "\n")).encode("utf-8") for i, ln in enumerate(lines))
    path = tmp_path / "big.txt"
    path.write_bytes(data)
    assert len(data) > split_size
    source = (FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(path))
              .set_split_size(split_size).build())
    assert len(source.create_splits(3)) > 3
    env.set_parallelism(3)

    class Tag(MapFunction):
        def open(self, runtime_context: RuntimeContext):
            self.index = runtime_context.get_index_of_this_subtask()

        def map(self, value):
            return self.index, value

    out = collect(env.from_source(source, source_name="file").map(Tag()))
    assert sorted(v for _, v in out) == sorted(lines)
    assert {i for i, _ in out} <= {0, 1, 2}


def test_read_text_file_of_a_missing_path_names_it(env, tmp_path):
    missing = str(tmp_path / "nope.txt")
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        env.read_text_file(missing)


# -- custom sources ----------------------------------------------------------------------------

@dataclass(frozen=True)
class RangeSplit(SourceSplit):
    start: int
    end: int

    def split_id(self) -> str:
        return f"range-{self.start}-{self.end}"


class RangeReader(SourceReader):
    def open(self, subtask_index: int, parallelism: int) -> None:
        self.subtask = subtask_index

    def read(self, split: RangeSplit):
        for i in range(split.start, split.end, 10):
            yield [(split.split_id(), self.subtask, x) for x in range(i, min(i + 10, split.end))]


class RangesSource(Source):
    """Bounded: ``n_splits`` ranges of ``per_split`` numbers."""

    def __init__(self, n_splits: int, per_split: int):
        self.n_splits = n_splits
        self.per_split = per_split

    def create_splits(self, parallelism: int) -> List[SourceSplit]:
        return [RangeSplit(i * self.per_split, (i + 1) * self.per_split) for i in range(self.n_splits)]

    def create_reader(self) -> SourceReader:
        return RangeReader()


def test_from_source_with_a_bounded_splittable_source(env):
    env.set_parallelism(3)
    out = collect(env.from_source(RangesSource(9, 25), source_name="Ranges"))
    assert sorted(x for _, _, x in out) == list(range(225))
    # each split is read by exactly one subtask, whole
    readers = {}
    for split_id, subtask, x in out:
        readers.setdefault(split_id, set()).add(subtask)
    assert sorted(readers) == sorted(f"range-{i * 25}-{(i + 1) * 25}" for i in range(9))
    assert all(len(s) == 1 for s in readers.values())
    assert {s for subtasks in readers.values() for s in subtasks} <= {0, 1, 2}


def test_add_source_names_the_source(env):
    ds = env.add_source(RangesSource(2, 3), "My Ranges")
    assert ds.get_name() == "My Ranges"
    out = collect(ds)
    assert sorted(x for _, _, x in out) == list(range(6))


def test_add_source_default_name(env):
    env.add_source(RangesSource(1, 1)).add_sink(lambda v: None)
    [source] = [v.get_name() for v in env.get_stream_graph().get_job_graph().get_vertices()]
    assert source == "Source: Custom Source -> Sink: Unnamed"


def test_unbounded_source_is_cancelled_by_the_job_client(env):
    env.set_parallelism(2)
    env.from_source(EndlessSource(), source_name="Endless").map(lambda x: x + 1).add_sink(lambda v: None)
    client = env.execute_async("endless")
    assert wait_until(lambda: client.get_job_status() is JobStatus.RUNNING, 30.0)
    assert not client.is_done()
    names = task_names(client)
    assert names == ["Source: Endless -> Map -> Sink: Unnamed"]
    started = time.monotonic()
    client.cancel().result(timeout=5)
    assert time.monotonic() - started < 5
    assert client.get_job_status() is JobStatus.CANCELED
    with pytest.raises(JobCancellationException):
        client.get_job_execution_result().result(timeout=5)
    assert_threads_gone(names)


def test_cancelled_job_stops_emitting(env):
    env.from_source(EndlessSource(), source_name="Endless2").map(lambda x: x).disable_chaining() \
        .add_sink(lambda v: None)
    client = env.execute_async("endless 2")
    assert wait_until(lambda: (ms := client.get_metrics()) and ms[0].num_records_out > 0, 30.0)
    client.cancel().result(timeout=5)
    assert client.get_job_status() is JobStatus.CANCELED
    counts = [(m.task_name, m.num_records_out, m.num_records_in) for m in client.get_metrics()]
    assert counts[0][1] > 0
    time.sleep(0.2)  # not synchronization: a window in which a task still emitting would show
    assert [(m.task_name, m.num_records_out, m.num_records_in) for m in client.get_metrics()] == counts


def test_run_helper_fails_a_job_that_does_not_end(env):
    env.from_source(EndlessSource(), source_name="Hang").add_sink(lambda v: None)
    with pytest.raises(pytest.fail.Exception, match="did not finish within 0.5 s"):
        run(env, "hangs", timeout_s=0.5)


def test_a_job_reading_files_counts_its_progress_in_bytes(env, tmp_path):
    # The progress bar's unit comes from the Source interface, not from the JobMaster knowing
    # the FileSource class (which would tie the runtime to the API layer).
    (tmp_path / "a.txt").write_text("alpha\nbeta\n")
    env.read_text_file(str(tmp_path)).add_sink(lambda v: None)
    client = env.execute_async("files")
    client.get_job_execution_result().result(timeout=10)
    assert client.source_units_are_bytes()


def test_a_job_reading_a_collection_counts_its_progress_in_records(env):
    env.from_collection([1, 2, 3]).add_sink(lambda v: None)
    client = env.execute_async("records")
    client.get_job_execution_result().result(timeout=10)
    assert not client.source_units_are_bytes()
