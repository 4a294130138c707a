"""StreamGroupedReduce through the keyed harness: rolling reduce per key on every path, state
layout, rich functions, None results, errors."""

from operator import itemgetter

import pytest

from operator_harness_util import records, run_all_paths
from rill.datastream.functions import ReduceFunction, wrap
from rill.operators.aggregations import SumAggregator
from rill.operators.keyed_reduce import _PINNED_BATCHES, StreamGroupedReduce
from rill.operators.state_initializer import snapshot_operator_state_sync
from rill.operators.testing import KeyedOneInputStreamOperatorTestHarness, OneInputStreamOperatorTestHarness
from rill.common.streamrecord import Watermark
from rill.state import VOID_NAMESPACE, ValueStateDescriptor, assign_to_key_group
from rill.state.rocksdb import RocksDBKeyedStateBackend
from rill.state.rocksdb_options import RocksDBSettings


def reduce_harness(fn, key=lambda v: v[0], **kw):
    fn = wrap(fn, ReduceFunction, "KeyedStream.reduce")
    return lambda: KeyedOneInputStreamOperatorTestHarness(StreamGroupedReduce(fn), key, **kw)


def add(a, b):
    return a[0], a[1] + b[1]


WORDS = [("a", 1), ("b", 1), ("a", 1), ("c", 5), ("b", 2), ("a", 3)]


def test_rolling_sum_per_key_without_timestamps():
    out, _ = run_all_paths(reduce_harness(add), WORDS)
    assert out == records([("a", 1), ("b", 1), ("a", 2), ("c", 5), ("b", 3), ("a", 5)])


def test_rolling_reduce_keeps_timestamps_and_forwards_watermarks():
    def after(h):
        h.process_watermark(100)

    out, _ = run_all_paths(reduce_harness(add), WORDS, [6, 5, 4, 3, 2, 1], after=after)
    assert out == records([("a", 1), ("b", 1), ("a", 2), ("c", 5), ("b", 3), ("a", 5)],
                          [6, 5, 4, 3, 2, 1]) + [Watermark(100)]


def test_state_is_the_value_state_op_state_in_the_backend_layout():
    with reduce_harness(add)() as h:
        h.process_batch(WORDS)
        backend = h.keyed_state_backend
        table = backend.get_state_table("_op_state")
        start = backend.key_group_range.start_key_group
        for key, expected in (("a", ("a", 5)), ("b", ("b", 3)), ("c", ("c", 5))):
            kg = assign_to_key_group(key, 128)
            assert table.key_group_maps[kg - start][VOID_NAMESPACE][key] == expected
            backend.set_current_key(key)
            assert backend.get_or_create_keyed_state(ValueStateDescriptor("_op_state")).value() == expected
        assert h.num_keyed_state_entries() == 3
        # the per-record path reads the same state
        h.process_element(("c", 1))
    assert h.extract_output_values()[-1] == ("c", 6)


def test_reduce_result_none_clears_the_key():
    def odd(a, b):
        return None if b[1] == 0 else (a[0], a[1] + b[1])

    out, _ = run_all_paths(reduce_harness(odd), [("k", 1), ("k", 0), ("k", 7), ("k", 1)])
    assert [r.value for r in out] == [("k", 1), None, ("k", 7), ("k", 8)]
    with reduce_harness(odd)() as h:
        h.process_batch([("k", 1), ("k", 0)])
        assert h.num_keyed_state_entries() == 0


def test_rich_reduce_function_sees_the_records_key_and_keyed_state():
    class Rich(ReduceFunction):
        def open(self, runtime_context):
            self.calls = runtime_context.get_state(ValueStateDescriptor("calls"))

        def reduce(self, a, b):
            n = (self.calls.value() or 0) + 1
            self.calls.update(n)
            return a[0], a[1] + b[1], n

    out, _ = run_all_paths(
        lambda: KeyedOneInputStreamOperatorTestHarness(StreamGroupedReduce(Rich()), lambda v: v[0]),
        [("a", 1), ("b", 1), ("a", 1), ("a", 1), ("b", 1)])
    assert [r.value for r in out] == [("a", 1), ("b", 1), ("a", 2, 1), ("a", 3, 2), ("b", 2, 1)]


def test_many_keys_agree_with_a_plain_dict():
    data = [(f"k{i % 37}", i) for i in range(500)]
    expected, state = [], {}
    for k, v in data:
        state[k] = (k, state[k][1] + v) if k in state else (k, v)
        expected.append(state[k])
    out, _ = run_all_paths(reduce_harness(add), data, list(range(500)))
    assert [r.value for r in out] == expected
    assert [r.timestamp for r in out] == list(range(500))


def test_reduce_error_propagates_after_prefix():
    def bad(a, b):
        if b[1] == 3:
            raise ArithmeticError("no threes")
        return add(a, b)

    h = reduce_harness(bad)()
    h.open()
    with pytest.raises(ArithmeticError, match="no threes"):
        h.process_batch([("a", 1), ("a", 2), ("a", 3), ("a", 4)], [1, 2, 3, 4])
    assert h.get_output() == records([("a", 1), ("a", 3)], [1, 2])


def test_key_selector_error_and_unsupported_key():
    h = reduce_harness(add, key=lambda v: v["missing"])()
    h.open()
    with pytest.raises(TypeError):
        h.process_batch([("a", 1)])
    h2 = reduce_harness(add, key=lambda v: [v[0]])()
    h2.open()
    with pytest.raises(TypeError, match="unhashable"):
        h2.process_element(("a", 1))


def test_reduce_needs_a_keyed_stream():
    with pytest.raises(RuntimeError, match="needs a keyed stream"):
        OneInputStreamOperatorTestHarness(StreamGroupedReduce(wrap(add, ReduceFunction, "r"))).open()


@pytest.mark.parametrize("function", ["reduce", "sum"])
def test_a_snapshot_keeps_the_values_of_its_time_while_batches_go_on(function):
    # the sync part pins the key groups; the fast path copies each one it touches afterwards
    # (the built-in sum calls dict.get unbound, so it needs plain dicts), and after
    # _PINNED_BATCHES batches the untouched rest
    make = (reduce_harness(add) if function == "reduce" else
            lambda: KeyedOneInputStreamOperatorTestHarness(StreamGroupedReduce(SumAggregator(1)), itemgetter(0)))
    keys = [f"k{i}" for i in range(500)]
    with make() as h:
        h.process_batch([(k, 1) for k in keys])
        futures = snapshot_operator_state_sync(h.operator, 7, 0)
        table = h.keyed_state_backend.get_state_table("_op_state")
        assert table.has_pinned()
        for _ in range(_PINNED_BATCHES + 1):
            h.process_batch([(k, 1) for k in keys[:100]])
        assert not table.has_pinned()
        h.process_batch([(k, 1) for k in keys])
        snapshot = futures.finalize()
    assert snapshot.checkpoint_id == 7
    [keyed] = snapshot.keyed_state
    stored = {key: value for states in keyed.key_groups.values() for key, _, value in states["_op_state"]}
    assert stored == {k: (k, 1) for k in keys}
    last = h.extract_output_values()[-len(keys):]
    assert last == [(k, _PINNED_BATCHES + 3 if i < 100 else 2) for i, k in enumerate(keys)]
def test_reduce_on_rocksdb_gives_the_heap_output_and_keeps_the_prefix_on_error(tmp_path):
    # the RocksDB backend has no heap tables: the operator reads the batch's keys with one
    # multi-get and writes back what the records before an error left
    def bad(a, b):
        if b[1] == 3:
            raise ArithmeticError("no threes")
        return add(a, b)

    def on_rocksdb(kg, max_parallelism):
        return RocksDBKeyedStateBackend(kg, max_parallelism, RocksDBSettings((str(tmp_path),)))

    h = reduce_harness(bad, keyed_state_backend_factory=on_rocksdb)()
    h.open()
    try:
        h.process_batch([("a", 1), ("b", 5), ("a", 2), ("b", 1)], [1, 2, 3, 4])
        with pytest.raises(ArithmeticError, match="no threes"):
            h.process_batch([("a", 4), ("a", 3), ("b", 1)], [5, 6, 7])
        assert h.get_output() == records([("a", 1), ("b", 5), ("a", 3), ("b", 6), ("a", 7)], [1, 2, 3, 4, 5])
        backend = h.keyed_state_backend
        assert isinstance(backend, RocksDBKeyedStateBackend)
        state = backend.get_or_create_keyed_state(ValueStateDescriptor(StreamGroupedReduce.STATE_NAME))
        assert state.get_values(["a", "b", "c"]) == {"a": ("a", 7), "b": ("b", 6), "c": None}
    finally:
        h.close()
        h.keyed_state_backend.dispose()
