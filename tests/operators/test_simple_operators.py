"""StreamMap, StreamFlatMap, StreamFilter through the harness: every path, with and without
timestamps, errors and the prefix emitted before them."""

import pytest

from operator_harness_util import records, run_all_paths, run_batches, run_per_element
from rill.datastream.functions import FilterFunction, FlatMapFunction, MapFunction, wrap
from rill.operators.simple import StreamFilter, StreamFlatMap, StreamMap
from rill.operators.testing import OneInputStreamOperatorTestHarness
from rill.common.streamrecord import StreamRecord, Watermark

VALUES = [1, 2, 3, 4, 5, 6]
TIMESTAMPS = [10, 11, 12, 13, 14, 15]


def harness_of(operator_factory):
    return lambda: OneInputStreamOperatorTestHarness(operator_factory())


def m(fn):
    return lambda: StreamMap(wrap(fn, MapFunction, "DataStream.map"))


def fm(fn):
    return lambda: StreamFlatMap(wrap(fn, FlatMapFunction, "DataStream.flat_map"))


def flt(fn):
    return lambda: StreamFilter(wrap(fn, FilterFunction, "DataStream.filter"))


class Boom(Exception):
    pass


# -- map ---------------------------------------------------------------------------------

def test_map_without_timestamps():
    out, side = run_all_paths(harness_of(m(lambda x: x * 10)), VALUES)
    assert out == records([10, 20, 30, 40, 50, 60])
    assert side == {}


def test_map_keeps_timestamps():
    out, _ = run_all_paths(harness_of(m(lambda x: (x, "a"))), VALUES, TIMESTAMPS)
    assert out == records([(v, "a") for v in VALUES], TIMESTAMPS)


def test_map_function_object_with_open_and_close():
    events = []

    class Plus(MapFunction):
        def open(self, runtime_context):
            events.append(("open", runtime_context.get_index_of_this_subtask()))
            self.n = 100

        def map(self, value):
            return value + self.n

        def close(self):
            events.append("close")

    with OneInputStreamOperatorTestHarness(StreamMap(Plus())) as h:
        h.process_batch([1, 2])
        h.process_element(3, 7)
    assert h.get_output() == [StreamRecord(101), StreamRecord(102), StreamRecord(103, 7)]
    assert events == [("open", 0), "close"]


def test_map_error_propagates_unchanged_after_emitting_prefix():
    def f(x):
        if x == 4:
            raise Boom(f"bad {x}")
        return x * 2

    with pytest.raises(Boom, match="bad 4"):
        run_per_element(harness_of(m(f)), VALUES, TIMESTAMPS)
    h = OneInputStreamOperatorTestHarness(m(f)())
    h.open()
    with pytest.raises(Boom, match="bad 4"):
        h.process_batch(VALUES, TIMESTAMPS)
    assert h.get_output() == records([2, 4, 6], [10, 11, 12])
    h2 = OneInputStreamOperatorTestHarness(m(f)())
    h2.open()
    with pytest.raises(Boom):
        h2.process_batch(VALUES)
    assert h2.get_output() == records([2, 4, 6])


def test_map_forwards_watermarks_and_empty_batches_emit_nothing():
    with OneInputStreamOperatorTestHarness(m(lambda x: x)()) as h:
        h.process_batch([])
        h.process_watermark(5)
        h.process_batch([1], [6])
        h.process_watermark(Watermark(9))
    assert h.get_output() == [Watermark(5), StreamRecord(1, 6), Watermark(9)]


# -- flat map ------------------------------------------------------------------------------

def test_flat_map_generator_without_timestamps():
    def split(x):
        for i in range(x % 3):
            yield (x, i)

    out, _ = run_all_paths(harness_of(fm(split)), VALUES)
    assert [r.value for r in out] == [(1, 0), (2, 0), (2, 1), (4, 0), (5, 0), (5, 1)]
    assert all(r.timestamp is None for r in out)


def test_flat_map_list_returning_with_timestamps():
    out, _ = run_all_paths(harness_of(fm(lambda s: s.split())), ["a b", "", "c", "d e f"], [1, 2, 3, 4])
    assert out == records(["a", "b", "c", "d", "e", "f"], [1, 1, 3, 4, 4, 4])


def test_flat_map_function_object():
    class Dup(FlatMapFunction):
        def flat_map(self, value):
            return [value, value]

    out, _ = run_all_paths(lambda: OneInputStreamOperatorTestHarness(StreamFlatMap(Dup())), [1, 2], [5, 6])
    assert out == records([1, 1, 2, 2], [5, 5, 6, 6])


@pytest.mark.parametrize("timestamps", [None, TIMESTAMPS])
def test_flat_map_error_midway_through_a_generator(timestamps):
    def gen(x):
        yield x
        if x == 3:
            raise Boom("gen failed")
        yield -x

    expected = records([1, -1, 2, -2, 3], None if timestamps is None else [10, 10, 11, 11, 12])
    for size in (None, 1, 2):
        h = OneInputStreamOperatorTestHarness(fm(gen)())
        h.open()
        with pytest.raises(Boom, match="gen failed"):
            if size is None:
                h.process_batch(VALUES, timestamps)
            else:
                for i in range(0, len(VALUES), size):
                    h.process_batch(VALUES[i:i + size], None if timestamps is None else timestamps[i:i + size])
        assert h.get_output() == expected, size
    with pytest.raises(Boom):
        run_per_element(harness_of(fm(gen)), VALUES, timestamps)


def test_flat_map_returning_none_is_a_type_error():
    with pytest.raises(TypeError):
        run_batches(harness_of(fm(lambda x: None)), [1])
    with pytest.raises(TypeError):
        run_per_element(harness_of(fm(lambda x: None)), [1], [1])


# -- filter ---------------------------------------------------------------------------------

def test_filter_without_timestamps():
    out, _ = run_all_paths(harness_of(flt(lambda x: x % 2 == 0)), VALUES)
    assert out == records([2, 4, 6])


def test_filter_with_timestamps_and_truthiness():
    out, _ = run_all_paths(harness_of(flt(lambda x: x % 3)), VALUES, TIMESTAMPS)
    assert out == records([1, 2, 4, 5], [10, 11, 13, 14])


def test_filter_everything_out_emits_nothing():
    out, _ = run_all_paths(harness_of(flt(lambda x: False)), VALUES, TIMESTAMPS)
    assert out == []


@pytest.mark.parametrize("timestamps", [None, TIMESTAMPS])
def test_filter_error_propagates_after_prefix(timestamps):
    def f(x):
        if x == 5:
            raise KeyError("no five")
        return x % 2 == 0

    h = OneInputStreamOperatorTestHarness(flt(f)())
    h.open()
    with pytest.raises(KeyError, match="no five"):
        h.process_batch(VALUES, timestamps)
    assert h.get_output() == records([2, 4], None if timestamps is None else [11, 13])


def test_chained_map_filter_flat_map_agree_with_a_plain_loop():
    data = list(range(50))
    stamps = list(range(100, 150))
    _, _ = run_all_paths(harness_of(m(lambda x: x * 3)), data, stamps)
    out, _ = run_all_paths(harness_of(flt(lambda x: x % 7 < 3)), data, stamps)
    assert [r.value for r in out] == [x for x in data if x % 7 < 3]
    assert [r.timestamp for r in out] == [t for x, t in zip(data, stamps) if x % 7 < 3]


def test_default_names_follow_pyflink():
    assert StreamMap.default_name == "Map"
    assert StreamFlatMap.default_name == "FlatMap"
    assert StreamFilter.default_name == "Filter"


def test_rich_functions_on_a_keyed_stream_see_the_records_key():
    from rill.operators.testing import KeyedOneInputStreamOperatorTestHarness
    from rill.state import ValueStateDescriptor

    class Dedup(FilterFunction):
        def open(self, rc):
            self.seen = rc.get_state(ValueStateDescriptor("seen"))

        def filter(self, value):
            if self.seen.value():
                return False
            self.seen.update(True)
            return True

    out, _ = run_all_paths(lambda: KeyedOneInputStreamOperatorTestHarness(StreamFilter(Dedup()), lambda v: v[0]),
                           [("a", 1), ("b", 2), ("a", 3), ("c", 4), ("b", 5)], [1, 2, 3, 4, 5])
    assert out == records([("a", 1), ("b", 2), ("c", 4)], [1, 2, 4])
