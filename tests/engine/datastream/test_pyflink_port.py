"""PyFlink programs ported by changing only their imports (``pyflink.X`` -> ``rill.X``).

Each program below is written as the PyFlink documentation and examples write it; the only
edits are the imports (and, for the test, the sink's path and where the program's data is
read back). ``test_names_a_port_finds`` imports the names such programs commonly use.
"""

from __future__ import annotations

import os
import re

import pytest

from _ds_helpers import JOB_TIMEOUT_S


# -- PyFlink's word_count.py (flink/flink-python/pyflink/examples/datastream/word_count.py) ----

def word_count_program(output_path):
    # the imports of the PyFlink example, with pyflink -> rill
    from rill.common import Encoder, Types
    from rill.datastream import StreamExecutionEnvironment
    from rill.datastream.connectors.file_system import FileSink, OutputFileConfig, RollingPolicy

    word_count_data = ["To be, or not to be,--that is the question:--",
                       "Whether 'tis nobler in the mind to suffer",
                       "The slings and arrows of outrageous fortune",
                       "Or to take arms against a sea of troubles,"]

    env = StreamExecutionEnvironment.get_execution_environment()
    # write all the data to one file
    env.set_parallelism(1)

    ds = env.from_collection(word_count_data)

    def split(line):
        yield from line.split()

    # compute word count
    ds = ds.flat_map(split) \
        .map(lambda i: (i, 1), output_type=Types.TUPLE([Types.STRING(), Types.INT()])) \
        .key_by(lambda i: i[0]) \
        .reduce(lambda i, j: (i[0], i[1] + j[1]))

    # define the sink
    if output_path is not None:
        ds.sink_to(
            sink=FileSink.for_row_format(
                base_path=output_path,
                encoder=Encoder.simple_string_encoder())
            .with_output_file_config(
                OutputFileConfig.builder()
                .with_part_prefix("prefix")
                .with_part_suffix(".ext")
                .build())
            .with_rolling_policy(RollingPolicy.default_rolling_policy())
            .build()
        )
    else:
        print("Printing result to stdout. Use --output to specify output path.")
        ds.print()

    # submit for execution
    return env.execute_async()


WORDS = " ".join(["To be, or not to be,--that is the question:--",
                  "Whether 'tis nobler in the mind to suffer",
                  "The slings and arrows of outrageous fortune",
                  "Or to take arms against a sea of troubles,"]).split()


def _running_counts():
    counts, out = {}, []
    for w in WORDS:
        counts[w] = counts.get(w, 0) + 1
        out.append(str((w, counts[w])))
    return out


def test_pyflink_word_count_to_stdout(printed):
    word_count_program(None).get_job_execution_result().result(timeout=JOB_TIMEOUT_S)
    lines = printed().splitlines()
    assert lines[0] == "Printing result to stdout. Use --output to specify output path."
    assert lines[1:] == _running_counts()
    assert "('to', 3)" in lines


def test_pyflink_word_count_to_files(execution_mode, tmp_path):
    word_count_program(str(tmp_path)).get_job_execution_result().result(timeout=JOB_TIMEOUT_S)
    files = [os.path.join(root, n) for root, _, names in os.walk(tmp_path) for n in names]
    [part] = files
    bucket, name = os.path.relpath(part, tmp_path).split(os.sep)
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}--\d{2}", bucket)
    assert re.fullmatch(r"prefix-[0-9a-f-]+-0-0\.ext", name)
    with open(part) as f:
        assert f.read().splitlines() == _running_counts()


# -- PyFlink's state documentation (CountWindowAverage) -----------------------------------------

def count_window_average_program():
    from rill.common.typeinfo import Types
    from rill.datastream import FlatMapFunction, RuntimeContext, StreamExecutionEnvironment
    from rill.datastream.state import ValueStateDescriptor

    class CountWindowAverage(FlatMapFunction):

        def __init__(self):
            self.sum = None

        def open(self, runtime_context: RuntimeContext):
            descriptor = ValueStateDescriptor(
                "average",  # the state name
                Types.PICKLED_BYTE_ARRAY()  # type information
            )
            self.sum = runtime_context.get_state(descriptor)

        def flat_map(self, value):
            # access the state value
            current_sum = self.sum.value()
            if current_sum is None:
                current_sum = (0, 0)

            # update the count
            current_sum = (current_sum[0] + 1, current_sum[1] + value[1])

            # update the state
            self.sum.update(current_sum)

            # if the count reaches 2, emit the average and clear the state
            if current_sum[0] >= 2:
                self.sum.clear()
                yield value[0], int(current_sum[1] / current_sum[0])

    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection([(1, 3), (1, 5), (1, 7), (1, 4), (1, 2)]) \
        .key_by(lambda row: row[0]) \
        .flat_map(CountWindowAverage()) \
        .print()

    return env.execute_async()


def test_pyflink_state_example(printed):
    count_window_average_program().get_job_execution_result().result(timeout=JOB_TIMEOUT_S)
    assert printed() == "(1, 4)\n(1, 5)\n"


# -- a typical tutorial program: Row, named types, KeyedProcessFunction, side output --------------

def tutorial_program(sink):
    from rill.common import Row
    from rill.common.typeinfo import Types
    from rill.datastream import OutputTag, StreamExecutionEnvironment
    from rill.datastream.functions import KeyedProcessFunction, MapFunction, RuntimeContext
    from rill.datastream.state import ValueStateDescriptor

    class Parse(MapFunction):
        def map(self, value):
            name, amount = value.split(",")
            return Row(name=name, amount=int(amount))

    late_tag = OutputTag("big", Types.ROW_NAMED(["name", "amount"], [Types.STRING(), Types.INT()]))

    class MaxPerName(KeyedProcessFunction):
        def __init__(self):
            self.state = None

        def open(self, runtime_context: RuntimeContext):
            self.state = runtime_context.get_state(ValueStateDescriptor("max", Types.INT()))

        def process_element(self, value, ctx: 'KeyedProcessFunction.Context'):
            current = self.state.value()
            if value.amount >= 100:
                yield late_tag, value
            if current is None or value.amount > current:
                self.state.update(value.amount)
                yield Row(name=ctx.get_current_key(), max=value.amount)

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    ds = env.from_collection(["alice,10", "bob,5", "alice,7", "bob,150", "alice,30"], type_info=Types.STRING()) \
        .map(Parse(), output_type=Types.ROW_NAMED(["name", "amount"], [Types.STRING(), Types.INT()])) \
        .key_by(lambda r: r.name, key_type=Types.STRING()) \
        .process(MaxPerName(), output_type=Types.ROW_NAMED(["name", "max"], [Types.STRING(), Types.INT()]))
    ds.map(lambda r: ("max", r.name, r.max)).union(
        ds.get_side_output(late_tag).map(lambda r: ("big", r.name, r.amount))).sink_to(sink)
    return env.execute_async("tutorial")


def test_typical_tutorial_program(execution_mode):
    from rill.datastream.connectors import CollectSink
    sink = CollectSink()
    tutorial_program(sink).get_job_execution_result().result(timeout=JOB_TIMEOUT_S)
    assert sorted(sink.get_results()) == sorted([
        ("max", "alice", 10), ("max", "bob", 5), ("max", "bob", 150), ("max", "alice", 30),
        ("big", "bob", 150)])
    sink.close()


# -- PyFlink's test_from_collection_with_data_types -------------------------------------------

def test_from_collection_with_a_row_type_gives_rows(printed):
    # PyFlink turns the tuples into Rows of the declared type (its test expects
    # ['+I[1, Hi, Hello]', '+I[2, Hello, Hi]'])
    from rill.common.typeinfo import Types
    from rill.datastream import StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    ds = env.from_collection([(1, 'Hi', 'Hello'), (2, 'Hello', 'Hi')],
                             type_info=Types.ROW([Types.INT(), Types.STRING(), Types.STRING()]))
    ds.print()
    env.execute_async().get_job_execution_result().result(timeout=JOB_TIMEOUT_S)
    assert printed() == "+I[1, Hi, Hello]\n+I[2, Hello, Hi]\n"


# -- what a port finds -------------------------------------------------------------------------
#
# Names PyFlink DataStream programs commonly use that Rill still lacks:
# rill.datastream.TimeCharacteristic; rill.datastream.connectors.kafka;
# FileSource builder's process_static_file_set / monitor_continuously; checkpoints themselves
# (env.enable_checkpointing only records the configuration so far) and set_runtime_mode(BATCH).


def test_names_a_port_finds():
    from rill.common import Configuration, Encoder, Row, Types  # noqa: F401
    from rill.common.serialization import Encoder as E2, SimpleStringSchema  # noqa: F401
    from rill.common.typeinfo import Types as T2  # noqa: F401
    from rill.datastream import (  # noqa: F401
        DataStream, FlatMapFunction, KeyedStream, MapFunction, OutputTag, RuntimeContext,
        RuntimeExecutionMode, StreamExecutionEnvironment, TimeDomain,
    )
    from rill.datastream.connectors.file_system import (  # noqa: F401
        BucketAssigner, FileSink, FileSource, OutputFileConfig, RollingPolicy, StreamFormat,
    )
    from rill.datastream.connectors.number_seq import NumberSequenceSource  # noqa: F401
    from rill.datastream.functions import (  # noqa: F401
        AggregateFunction, FilterFunction, KeyedProcessFunction, KeySelector, ProcessFunction,
        ReduceFunction, SinkFunction,
    )
    from rill.datastream.state import (  # noqa: F401
        AggregatingStateDescriptor, ListStateDescriptor, MapStateDescriptor,
        ReducingStateDescriptor, ValueStateDescriptor,
    )
    names = {k: v for k, v in locals().items() if k not in ("E2", "T2")}
    # each name is the public class or object a PyFlink program expects under that name
    assert {k for k, v in names.items() if getattr(v, "__name__", k) != k} == set()
    assert all(isinstance(v, type) for k, v in names.items() if k != "Types"), names
    # the submodule paths PyFlink programs import from give the same objects
    assert E2 is Encoder and T2 is Types


def test_from_collection_with_a_row_type_refuses_elements_of_another_width():
    from rill.common.typeinfo import Types
    from rill.datastream import StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(ValueError, match=r"element \(1, 'a', 'extra'\) has 3 fields, the row type .* has 2"):
        env.from_collection([(1, "a"), (1, "a", "extra")], type_info=Types.ROW([Types.INT(), Types.STRING()]))


def test_from_collection_with_a_named_row_type(execution_mode):
    from rill.common import Row
    from rill.common.typeinfo import Types
    from rill.datastream import StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    ds = env.from_collection([("a", 1)], type_info=Types.ROW_NAMED(["name", "n"], [Types.STRING(), Types.INT()]))
    out = list(ds.map(lambda r: (r.name, r.n, r)).execute_and_collect())
    assert out == [("a", 1, Row(name="a", n=1))]
