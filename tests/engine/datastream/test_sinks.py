"""Sinks end to end: print, add_sink (SinkFunction and callable), sink_to(FileSink),
sink_to(CollectSink), execute_and_collect."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from _ds_helpers import EndlessSource, PerSubtaskSequence, assert_threads_gone, collect, run
from rill.common import Encoder, Row
from rill.datastream import SinkFunction
from rill.datastream.connectors import (
    BucketAssigner,
    CollectSink,
    DeliveryGuarantee,
    FileSink,
    OutputFileConfig,
    RollingPolicy,
    Sink,
    SinkWriter,
)
from rill.datastream.connectors.file_system import FileSink as FileSinkFromFileSystem
from rill.runtime.errors import JobExecutionException


# -- print -------------------------------------------------------------------------------------

def test_print_at_parallelism_1_has_no_prefix(env, printed):
    env.from_collection([1, "two", (3, "x"), None, Row(1, "a")]).print()
    run(env)
    assert printed() == "1\ntwo\n(3, 'x')\nNone\n+I[1, a]\n"


def test_print_at_parallelism_2_prefixes_the_subtask(env, printed):
    env.set_parallelism(2)
    env.from_source(PerSubtaskSequence(10), source_name="n").print()
    run(env)
    lines = printed().splitlines()
    assert sorted(lines) == sorted(f"{v % 2 + 1}> {v}" for v in range(10))
    # each subtask prints its records in order
    assert [ln for ln in lines if ln.startswith("1> ")] == [f"1> {v}" for v in range(0, 10, 2)]


def test_print_to_stdout_file_descriptor(env, printed):
    env.from_collection(["a", "b"]).print()
    run(env)
    assert printed() == "a\nb\n"


def test_print_with_sink_identifier_at_parallelism_1(env, printed):
    # Flink's PrintSinkOutputWriter: "<identifier>> <record>" when the sink has parallelism 1
    env.from_collection([1, 2]).print("out")
    run(env)
    assert printed() == "out> 1\nout> 2\n"


def test_print_with_sink_identifier_at_parallelism_2(env, printed):
    env.set_parallelism(2)
    env.from_source(PerSubtaskSequence(4), source_name="n").print("out")
    run(env)
    assert sorted(printed().splitlines()) == ["out:1> 0", "out:1> 2", "out:2> 1", "out:2> 3"]


# -- add_sink ----------------------------------------------------------------------------------

class FileWritingSink(SinkFunction):
    """Writes ``<subtask>:<value>`` lines into ``<directory>/<subtask>.txt``."""

    def __init__(self, directory: str):
        self.directory = directory

    def open(self, runtime_context):
        self.index = runtime_context.get_index_of_this_subtask()
        self.file = open(os.path.join(self.directory, f"{self.index}.txt"), "w")

    def invoke(self, value, context):
        assert context.timestamp() is None
        self.file.write(f"{self.index}:{value}\n")

    def close(self):
        self.file.close()


def test_add_sink_with_a_sink_function(env, tmp_path):
    env.set_parallelism(3)
    env.from_source(PerSubtaskSequence(30), source_name="n").map(lambda x: x * 2) \
        .add_sink(FileWritingSink(str(tmp_path)))
    run(env)
    assert sorted(os.listdir(tmp_path)) == ["0.txt", "1.txt", "2.txt"]
    for i in range(3):
        assert (tmp_path / f"{i}.txt").read_text() == "".join(f"{i}:{v * 2}\n" for v in range(i, 30, 3))


def test_add_sink_with_a_callable(env, tmp_path):
    path = str(tmp_path / "out.txt")

    def write(value):
        with open(path, "a") as f:
            f.write(f"{value}\n")

    env.from_collection(["x", "y", "z"]).add_sink(write)
    run(env)
    assert Path(path).read_text() == "x\ny\nz\n"


# -- FileSink ----------------------------------------------------------------------------------

_PART = re.compile(r"(?P<prefix>[a-z]+)-(?P<uid>[0-9a-f-]+)-(?P<subtask>\d+)-(?P<count>\d+)(?P<suffix>\.txt)?")


def _all_files(root: Path):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_sink_to_file_sink_writes_part_files(env, tmp_path):
    env.set_parallelism(2)
    sink = (FileSink.for_row_format(str(tmp_path), Encoder.simple_string_encoder())
            .with_output_file_config(OutputFileConfig.builder().with_part_prefix("out")
                                     .with_part_suffix(".txt").build())
            .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
            .build())
    env.from_source(PerSubtaskSequence(100), source_name="n").map(lambda x: f"line {x}").sink_to(sink)
    run(env)
    files = _all_files(tmp_path)
    assert not [f for f in files if "inprogress" in f or os.path.basename(f).startswith(".")]
    assert len(files) == 2
    by_subtask = {}
    for f in files:
        m = _PART.fullmatch(f)
        assert m, f
        assert (m["prefix"], m["count"], m["suffix"]) == ("out", "0", ".txt")
        by_subtask[int(m["subtask"])] = (tmp_path / f).read_text()
    assert by_subtask == {i: "".join(f"line {v}\n" for v in range(i, 100, 2)) for i in (0, 1)}


def test_file_sink_defaults_date_time_buckets(env, tmp_path):
    env.from_collection([Row(1, "a"), Row(2, "b")]).sink_to(
        FileSinkFromFileSystem.for_row_format(str(tmp_path), Encoder.simple_string_encoder()).build())
    run(env)
    [f] = _all_files(tmp_path)
    bucket, name = f.split(os.sep)
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}--\d{2}", bucket)
    m = _PART.fullmatch(name)
    assert m and (m["prefix"], m["subtask"], m["count"], m["suffix"]) == ("part", "0", "0", None)
    assert (tmp_path / f).read_text() == "+I[1, a]\n+I[2, b]\n"


def test_file_sink_rolls_parts_by_size(env, tmp_path):
    # Flink's DefaultRollingPolicy: a new part file starts before a record when the current
    # part is larger than the part size (checked per record)
    sink = (FileSink.for_row_format(str(tmp_path), Encoder.simple_string_encoder())
            .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
            .with_rolling_policy(RollingPolicy.default_rolling_policy(part_size=10))
            .build())
    env.from_collection([f"r{i:02d}" for i in range(9)]).sink_to(sink)  # 4 bytes per record
    run(env)
    files = sorted(_all_files(tmp_path), key=lambda f: int(_PART.fullmatch(f)["count"]))
    assert [int(_PART.fullmatch(f)["count"]) for f in files] == [0, 1, 2]
    assert [(tmp_path / f).read_text() for f in files] == ["r00\nr01\nr02\n", "r03\nr04\nr05\n", "r06\nr07\nr08\n"]


def test_file_sink_of_a_failed_job_leaves_no_finished_part(env, tmp_path):
    def fail_on_last(x):
        if x == 99:
            raise RuntimeError("stop")
        return x

    sink = (FileSink.for_row_format(str(tmp_path), Encoder.simple_string_encoder())
            .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner()).build())
    env.from_sequence(0, 99).map(fail_on_last).sink_to(sink)
    with pytest.raises(JobExecutionException, match="stop"):
        run(env)
    assert [f for f in _all_files(tmp_path) if not os.path.basename(f).startswith(".")] == []


# -- CollectSink -------------------------------------------------------------------------------

def test_sink_to_collect_sink(env):
    env.set_parallelism(2)
    sink = CollectSink()
    env.from_source(PerSubtaskSequence(1000), source_name="n").map(lambda x: -x).sink_to(sink)
    run(env)
    results = sink.get_results()
    sink.close()
    assert sorted(results) == sorted(-x for x in range(1000))
    # per subtask in order
    assert [v for v in results if v % 2 == 0] == [-x for x in range(0, 1000, 2)]


def test_regression_collect_sinks_and_execute_and_collect_in_one_job(env):
    """On a cluster only ``execute_and_collect``'s channel was served: a ``sink_to(CollectSink())``
    subtask in a task process found no channel and failed the job. Two collecting sinks of
    different parallelism and the job's own collect, all in one job."""
    env.set_parallelism(2)
    evens, odds = CollectSink(), CollectSink()
    numbers = env.from_source(PerSubtaskSequence(100), source_name="n")
    numbers.filter(lambda x: x % 2 == 0).sink_to(evens)
    numbers.filter(lambda x: x % 2 == 1).map(lambda x: -x).set_parallelism(1).sink_to(odds)
    try:
        squares = sorted(numbers.map(lambda x: x * x).execute_and_collect())
        assert squares == sorted(x * x for x in range(100))
        assert sorted(evens.get_results()) == list(range(0, 100, 2))
        assert sorted(odds.get_results()) == sorted(-x for x in range(1, 100, 2))
    finally:
        evens.close()
        odds.close()


def test_sink_to_rejects_other_objects(env):
    with pytest.raises(TypeError, match="expects a Sink \\(e.g. FileSink\\) or CollectSink, got object"):
        env.from_collection([1]).sink_to(object())


# -- execute_and_collect -----------------------------------------------------------------------

def test_execute_and_collect_iterates_everything(env):
    env.set_parallelism(2)
    it = env.from_sequence(1, 5000).map(lambda x: x * 3).execute_and_collect()
    out = list(it)
    assert sorted(out) == [x * 3 for x in range(1, 5001)]
    assert list(it) == []


def test_execute_and_collect_keeps_order_at_parallelism_1(env):
    assert list(env.from_collection(list("abcdef")).execute_and_collect("ordered")) == list("abcdef")


def test_execute_and_collect_with_limit_cancels_an_unbounded_job(env):
    started = time.monotonic()
    out = env.from_source(EndlessSource(), source_name="Endless").map(lambda x: x * 2) \
        .execute_and_collect(limit=7)
    assert out == [0, 2, 4, 6, 8, 10, 12]
    assert time.monotonic() - started < 10
    assert_threads_gone(["Source: Endless"])


def test_regression_collect_with_limit_returns_at_the_limit_without_waiting_for_one_more(env):
    """An unbounded job that has produced exactly ``limit`` records and then nothing: the list
    comes back (it used to wait for a record past the limit, forever). The records of a union
    with a silent unbounded source are the collection's only."""
    import threading  # noqa: PLC0415
    silent = env.from_source(EndlessSource(), source_name="Endless").filter(lambda x: False)
    job = env.from_collection([1, 2, 3]).union(silent)
    out = []
    worker = threading.Thread(target=lambda: out.append(job.execute_and_collect(limit=3)), daemon=True)
    worker.start()
    worker.join(30)
    assert out and sorted(out[0]) == [1, 2, 3], "execute_and_collect(limit=3) did not return at the limit"
    assert_threads_gone(["Source: Endless"])


def test_execute_and_collect_with_limit_on_a_bounded_job(env):
    assert env.from_collection([1, 2, 3]).execute_and_collect(limit=5) == [1, 2, 3]
    env2 = env
    assert env2.from_collection([1, 2, 3]).execute_and_collect(limit=2) == [1, 2]


def test_execute_and_collect_as_context_manager(env):
    with env.from_source(EndlessSource(), source_name="Endless").execute_and_collect() as it:
        first = [next(it) for _ in range(3)]
    assert first == [0, 1, 2]
    assert_threads_gone(["Source: Endless"])


def test_execute_and_collect_raises_the_job_failure(env):
    it = env.from_collection([1, 0, 2]).map(lambda x: 1 // x).execute_and_collect()
    with pytest.raises(JobExecutionException) as info:
        list(it)
    assert isinstance(info.value.__cause__, ZeroDivisionError)


def test_collect_helper_and_sink_results_are_exact(env):
    assert collect(env.from_collection([3, 1, 2])) == [3, 1, 2]


# -- Sink (Sink V2 base) -----------------------------------------------------------------------

class LinesSink(Sink):
    """A user-defined Sink: each subtask writes its records into a hidden file, renamed to
    ``part-<subtask>`` on commit."""

    def __init__(self, directory):
        self.directory = str(directory)

    def create_writer(self):
        return LinesSink.Writer(self.directory)

    class Writer(SinkWriter):
        def __init__(self, directory):
            self.directory = directory
            self.lines = []

        def open(self, subtask_index):
            self.final = os.path.join(self.directory, f"part-{subtask_index}")

        def write_batch(self, values):
            self.lines.extend(values)

        def commit(self):
            tmp = os.path.join(self.directory, ".pending")
            Path(tmp).write_text("".join(f"{v}\n" for v in self.lines))
            os.replace(tmp, self.final)
            return [self.final]


def test_sink_to_runs_a_user_defined_sink(env, tmp_path):
    env.from_collection(["a", "b", "c"]).sink_to(LinesSink(tmp_path))
    run(env)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["part-0"]
    assert (tmp_path / "part-0").read_text() == "a\nb\nc\n"
    assert DeliveryGuarantee.AT_LEAST_ONCE.name == "AT_LEAST_ONCE"
    assert isinstance(FileSink.for_row_format(str(tmp_path), Encoder.simple_string_encoder()).build(), Sink)
