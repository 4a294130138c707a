"""User functions end to end: open/close life cycle, RuntimeContext values, per-subtask copies,
callables vs Function classes."""

from __future__ import annotations

import os

import pytest

from _ds_helpers import PerSubtaskSequence, collect, run
from rill.datastream import (
    FilterFunction,
    FlatMapFunction,
    KeyedProcessFunction,
    KeySelector,
    MapFunction,
    ProcessFunction,
    ReduceFunction,
    RuntimeContext,
)
from rill.runtime.errors import JobExecutionException


class ContextReport(MapFunction):
    """Emits what its RuntimeContext says, once per subtask, with the first record."""

    def open(self, runtime_context: RuntimeContext):
        ctx = runtime_context
        self.report = {
            "task_name": ctx.get_task_name(),
            "index": ctx.get_index_of_this_subtask(),
            "parallelism": ctx.get_number_of_parallel_subtasks(),
            "max_parallelism": ctx.get_max_number_of_parallel_subtasks(),
            "attempt": ctx.get_attempt_number(),
            "with_subtasks": ctx.get_task_name_with_subtasks(),
            "param": ctx.get_job_parameter("answer", "none"),
            "missing": ctx.get_job_parameter("missing", "default"),
        }
        self.sent = False

    def map(self, value):
        if self.sent:
            return None
        self.sent = True
        return self.report


def test_runtime_context_values(env):
    env.set_parallelism(3)
    env.set_global_job_parameters({"answer": 42})
    ds = env.from_source(PerSubtaskSequence(30), source_name="n") \
        .map(ContextReport()).set_max_parallelism(10).disable_chaining() \
        .filter(lambda r: r is not None).disable_chaining()
    reports = sorted(collect(ds), key=lambda r: r["index"])
    assert reports == [
        {"task_name": "Map", "index": i, "parallelism": 3, "max_parallelism": 10, "attempt": 0,
         "with_subtasks": f"Map ({i + 1}/3)", "param": "42", "missing": "default"}
        for i in range(3)
    ]


def test_runtime_context_in_a_chain_reports_the_task(env):
    env.set_parallelism(2)
    ds = env.from_source(PerSubtaskSequence(10), source_name="Numbers").map(ContextReport()) \
        .filter(lambda r: r is not None)
    reports = sorted(collect(ds), key=lambda r: r["index"])
    name = "Source: Numbers -> Map -> Filter -> Sink: CollectSink"
    assert [(r["task_name"], r["with_subtasks"], r["max_parallelism"]) for r in reports] == [
        (name, f"{name} (1/2)", 128), (name, f"{name} (2/2)", 128)]


class Counting(MapFunction):
    """A stateful function: each subtask counts its own records."""

    def __init__(self):
        self.count = 0

    def open(self, runtime_context):
        self.index = runtime_context.get_index_of_this_subtask()

    def map(self, value):
        self.count += 1
        return self.index, self.count, value


def test_each_subtask_has_its_own_copy_of_the_function(env):
    env.set_parallelism(3)
    fn = Counting()
    out = collect(env.from_source(PerSubtaskSequence(30), source_name="n").map(fn))
    for i in range(3):
        assert [(c, v) for s, c, v in out if s == i] == [(c + 1, i + 3 * c) for c in range(10)]
    assert fn.count == 0  # the program's instance is never used by the tasks


class Lifecycle(MapFunction):
    """Logs open / records / close into ``<directory>/<subtask>.log``."""

    def __init__(self, directory, fail_on=None):
        self.directory = directory
        self.fail_on = fail_on

    def _log(self, line):
        with open(os.path.join(self.directory, f"{self.index}.log"), "a") as f:
            f.write(line + "\n")

    def open(self, runtime_context):
        self.index = runtime_context.get_index_of_this_subtask()
        self._log("open")

    def map(self, value):
        self._log(f"map {value}")
        if value == self.fail_on:
            raise ValueError(f"bad value {value}")
        return value

    def close(self):
        self._log("close")


def test_open_before_the_first_record_and_close_at_the_end(env, tmp_path):
    env.set_parallelism(2)
    env.from_source(PerSubtaskSequence(6), source_name="n").map(Lifecycle(str(tmp_path))).add_sink(lambda v: None)
    run(env)
    for i in range(2):
        assert (tmp_path / f"{i}.log").read_text().splitlines() == \
            ["open"] + [f"map {v}" for v in range(i, 6, 2)] + ["close"]


def test_close_is_called_after_a_failure(env, tmp_path):
    env.from_collection([1, 2, 3]).map(Lifecycle(str(tmp_path), fail_on=2)).add_sink(lambda v: None)
    with pytest.raises(JobExecutionException):
        run(env)
    assert (tmp_path / "0.log").read_text().splitlines() == ["open", "map 1", "map 2", "close"]


def test_every_function_class(env):
    class M(MapFunction):
        def map(self, value):
            return value * 2

    class FM(FlatMapFunction):
        def flat_map(self, value):
            return [value, value + 1]

    class F(FilterFunction):
        def filter(self, value):
            return value % 3 != 0

    class K(KeySelector):
        def get_key(self, value):
            return value % 2

    class R(ReduceFunction):
        def reduce(self, value1, value2):
            return value1 + value2

    class P(ProcessFunction):
        def process_element(self, value, ctx):
            yield ("p", value)

    class KP(KeyedProcessFunction):
        def process_element(self, value, ctx):
            yield ctx.get_current_key(), value[1]

    out = collect(env.from_collection([1, 2, 3, 4])
                  .map(M()).flat_map(FM()).filter(F())
                  .key_by(K()).reduce(R())
                  .process(P())
                  .key_by(lambda t: t[1] % 2).process(KP()))
    # map: 2 4 6 8; flat_map: 2 3 4 5 6 7 8 9; filter: 2 4 5 7 8; running sums by parity: 2 6 5 12 14; keyed by their parity
    assert out == [(0, 2), (0, 6), (1, 5), (0, 12), (0, 14)]


def test_a_function_of_the_wrong_kind_is_refused(env):
    class F(FilterFunction):
        def filter(self, value):
            return True

    ds = env.from_collection([1])
    with pytest.raises(TypeError, match="DataStream.map expects a MapFunction or a callable, got a F"):
        ds.map(F())
    with pytest.raises(TypeError, match="DataStream.flat_map expects a FlatMapFunction or a callable.*int"):
        ds.flat_map(42)
    with pytest.raises(TypeError, match="DataStream.key_by expects a KeySelector or a callable, got 3.5 of type float"):
        ds.key_by(3.5)  # a field position (int) or name (str) is a key, as Flink's keyBy(int|String)


def test_keyed_process_function_on_a_non_keyed_stream_is_refused(env):
    class KP(KeyedProcessFunction):
        def process_element(self, value, ctx):
            yield value

    with pytest.raises(TypeError, match="key the stream first with key_by"):
        env.from_collection([1]).process(KP())
