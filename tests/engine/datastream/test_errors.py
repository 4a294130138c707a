"""Errors with exact message fragments: invalid settings (raised at the call), invalid graphs
(raised by execute before anything runs) and failures at runtime (JobExecutionException
naming the operator and subtask, with the user's exception as ``__cause__``)."""

from __future__ import annotations

import re
import threading
import traceback

import pytest

from _ds_helpers import EndlessSource, PerSubtaskSequence, assert_threads_gone, run, task_names
from rill.common import JobStatus
from rill.datastream import MapFunction, StreamExecutionEnvironment
from rill.datastream.connectors import Source, SourceReader, SourceSplit
from rill.runtime.errors import JobExecutionException


# -- settings ----------------------------------------------------------------------------------

def test_parallelism_0_on_an_operator_names_it(env):
    ds = env.from_collection([1]).map(lambda x: x).name("Doubler")
    with pytest.raises(ValueError, match=r"The parallelism of operator 'Doubler' must be at least 1, got 0\."):
        ds.set_parallelism(0)


def test_parallelism_0_on_the_environment(env):
    with pytest.raises(ValueError, match="must be at least 1, got 0"):
        env.set_parallelism(0)
    assert env.get_parallelism() == 1


def test_parallelism_0_on_a_sink_names_it(env):
    sink = env.from_collection([1]).add_sink(lambda v: None).name("Out")
    with pytest.raises(ValueError, match=r"operator 'Out' must be at least 1, got 0"):
        sink.set_parallelism(0)


def test_parallelism_0_in_the_configuration():
    from rill.common import Configuration
    with pytest.raises(ValueError, match="must be at least 1, got 0"):
        StreamExecutionEnvironment.get_execution_environment(Configuration().set_integer("parallelism.default", 0))


def test_max_parallelism_above_32768(env):
    with pytest.raises(ValueError, match=r"must be between 1 and 32768, got 40000"):
        env.set_max_parallelism(40000)
    ds = env.from_collection([1]).map(lambda x: x)
    with pytest.raises(ValueError, match=r"maximum parallelism of operator 'Map' must be between 1 and 32768, got 40000"):
        ds.set_max_parallelism(40000)
    with pytest.raises(ValueError, match=r"got 0"):
        ds.set_max_parallelism(0)


def test_from_collection_with_parallelism_2(env):
    with pytest.raises(ValueError, match=r"non parallel operator 'Collection Source' must be 1, got 2"):
        env.from_collection([1, 2]).set_parallelism(2)


def test_invalid_uid_hash(env):
    with pytest.raises(ValueError, match=r"operator 'Map' must be a 32 character hexadecimal string, got 'xyz'"):
        env.from_collection([1]).map(lambda x: x).set_uid_hash("xyz")


# -- graph errors: raised by execute, before anything runs -------------------------------------

def _assert_nothing_ran(env, capsys, match):
    threads_before = set(threading.enumerate())
    with pytest.raises(ValueError, match=match):
        env.execute("invalid")
    assert set(threading.enumerate()) - threads_before == set()
    assert capsys.readouterr().out == ""


def test_max_parallelism_below_parallelism_names_operator_and_numbers(env, capsys):
    env.from_collection([1, 2]).print()
    env.from_collection([1, 2]).map(lambda x: x).name("Wide").set_parallelism(4).set_max_parallelism(2).print()
    _assert_nothing_ran(env, capsys, r"Vertex Wide's parallelism \(4\) is higher than the max parallelism \(2\)")


def test_environment_max_parallelism_below_parallelism(env, capsys):
    env.set_max_parallelism(2)
    env.set_parallelism(3)
    env.from_sequence(1, 3).print()
    _assert_nothing_ran(env, capsys,
                        r"Vertex Source: Sequence Source's parallelism \(3\) is higher than the max parallelism \(2\)")


def test_forward_between_different_parallelisms_names_both_operators(env, capsys):
    env.from_collection([1]).print()
    (env.from_collection([1]).map(lambda x: x).name("Up").set_parallelism(2)
        .forward().map(lambda x: x).name("Down").set_parallelism(3).print())
    _assert_nothing_ran(env, capsys,
                        r"Forward partitioning does not allow change of parallelism\. Upstream operation: "
                        r"Up-\d+ parallelism: 2, downstream operation: Down-\d+ parallelism: 3")


def test_duplicate_uid(env, capsys):
    ds = env.from_collection([1])
    ds.map(lambda x: x).uid("twice").print()
    ds.filter(lambda x: True).uid("twice").print()
    _assert_nothing_ran(env, capsys, r'Hash collision on user-specified ID "twice"')


# -- runtime failures --------------------------------------------------------------------------

def divide(x):
    return 10 // (x - 3)


def test_user_exception_names_operator_and_subtask_with_the_cause(env, execution_mode):
    env.set_parallelism(2)
    # subtask 1 of the source (and its chain) reads 1, 3, 5: it fails on 3
    env.from_source(PerSubtaskSequence(6), source_name="n").map(divide).add_sink(lambda v: None)
    client = env.execute_async("failing")
    with pytest.raises(JobExecutionException) as info:
        client.get_job_execution_result().result(timeout=30)
    error = info.value
    message = str(error)
    assert "operator 'Map'" in message
    assert "task 'Source: n -> Map -> Sink: Unnamed (2/2)'" in message
    assert "ZeroDivisionError" in message
    assert error.job_id == client.get_job_id()
    cause = error.__cause__
    assert type(cause) is ZeroDivisionError
    if execution_mode == "embedded":
        frames = [f.name for f in traceback.extract_tb(cause.__traceback__)]
        assert frames[-1] == "divide"
    else:  # a traceback does not pickle: the task process's travels as a note, ending in divide
        note = "\n".join(cause.__notes__)
        assert note.startswith("Remote traceback (task 'Source: n -> Map -> Sink: Unnamed (2/2)'") or \
            note.startswith("Remote traceback (task Source: n -> Map -> Sink: Unnamed (2/2)"), note
        assert re.search(r", in divide\n.*ZeroDivisionError", note, re.S), note
    assert client.get_job_status() is JobStatus.FAILED
    assert_threads_gone(task_names(client))


def test_failure_in_a_downstream_task_cancels_the_others(env):
    class FailOn(MapFunction):
        def map(self, value):
            if value == 500:
                raise RuntimeError("boom at 500")
            return value

    env.set_parallelism(2)
    env.from_source(EndlessSource(), source_name="Endless").rebalance() \
        .map(FailOn()).name("Failer").add_sink(lambda v: None)
    client = env.execute_async("failing downstream")
    with pytest.raises(JobExecutionException, match=r"operator 'Failer' in task 'Failer -> Sink: Unnamed \(\d/2\)'"
                                                    r" raised RuntimeError: boom at 500") as info:
        client.get_job_execution_result().result(timeout=30)
    assert str(info.value.__cause__) == "boom at 500"
    assert client.get_job_status() is JobStatus.FAILED
    assert_threads_gone(task_names(client))


def test_key_selector_returning_a_list(env):
    env.set_parallelism(2)
    env.from_collection([("a", 1), ("b", 2)]).map(lambda t: t).name("Prep") \
        .key_by(lambda t: [t[0]]).reduce(lambda a, b: a).add_sink(lambda v: None)
    with pytest.raises(JobExecutionException) as info:
        run(env)
    message = str(info.value)
    assert "operator 'Reduce (key selector)'" in message
    assert "task 'Prep (" in message
    assert "record ('a', 1)" in message or "record ('b', 2)" in message
    assert "of type list" in message
    assert isinstance(info.value.__cause__, TypeError)


def test_key_selector_raising_names_the_operator(env):
    env.from_collection([{"k": 1}, {}]).key_by(lambda d: d["k"]).map(lambda d: d).add_sink(lambda v: None)
    with pytest.raises(JobExecutionException, match=r"operator 'Map \(key selector\)'.*KeyError") as info:
        run(env)
    assert type(info.value.__cause__) is KeyError


class _BadSplit(SourceSplit):
    def split_id(self):
        return "bad"


class _BadReader(SourceReader):
    def read(self, split):
        yield [1, 2]
        raise OSError("disk on fire")


class BadSource(Source):
    def create_splits(self, parallelism):
        return [_BadSplit()]

    def create_reader(self):
        return _BadReader()


def test_failing_source_names_the_source(env):
    env.from_source(BadSource(), source_name="Bad").map(lambda x: x).add_sink(lambda v: None)
    with pytest.raises(JobExecutionException,
                       match=r"operator 'Source: Bad' in task 'Source: Bad -> Map -> Sink: Unnamed \(1/1\)' "
                             r"raised OSError: disk on fire"):
        run(env)


def test_failure_in_open_fails_the_job(env):
    class BadOpen(MapFunction):
        def open(self, runtime_context):
            raise ValueError("cannot open")

        def map(self, value):
            return value

    env.from_collection([1]).map(BadOpen()).add_sink(lambda v: None)
    with pytest.raises(JobExecutionException, match="cannot open") as info:
        run(env)
    assert type(info.value.__cause__) is ValueError


def test_the_environment_runs_again_after_a_failure(env):
    env.from_collection([0]).map(lambda x: 1 // x).add_sink(lambda v: None)
    with pytest.raises(JobExecutionException):
        run(env)
    from _ds_helpers import collect
    assert collect(env.from_collection([1, 2])) == [1, 2]


def test_custom_partitioner_errors_name_the_operator(env):
    env.set_parallelism(3)
    env.from_collection([1, 2]).partition_custom(lambda key, n: 7, lambda x: x) \
        .map(lambda x: x).name("Target").add_sink(lambda v: None)
    with pytest.raises(JobExecutionException,
                       match=r"operator 'Target \(partitioner\)'.*returned 7 for record 1 \(key 1\): "
                             r"it must return an int in \[0, 3\)"):
        run(env)
