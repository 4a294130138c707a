"""DataStream transformations end to end: map, flat_map, filter, process (with side outputs),
union; functions as plain callables and as Function classes."""

from __future__ import annotations

from _ds_helpers import collect
from rill.common import Row, Types
from rill.datastream import (
    FilterFunction,
    FlatMapFunction,
    MapFunction,
    OutputTag,
    ProcessFunction,
)


def test_map_with_a_callable(env):
    assert collect(env.from_collection([1, 2, 3]).map(lambda x: x * x)) == [1, 4, 9]


def test_map_with_a_map_function(env):
    class Add(MapFunction):
        def __init__(self, n):
            self.n = n

        def map(self, value):
            return value + self.n

    assert collect(env.from_collection([1, 2, 3]).map(Add(10), output_type=Types.INT())) == [11, 12, 13]


def test_map_to_rows(env):
    out = collect(env.from_collection([("a", 1), ("b", 2)])
                  .map(lambda t: Row(name=t[0], n=t[1]),
                       output_type=Types.ROW_NAMED(["name", "n"], [Types.STRING(), Types.INT()])))
    assert out == [Row(name="a", n=1), Row(name="b", n=2)]
    assert [r.name for r in out] == ["a", "b"]


def test_flat_map_with_a_generator(env):
    def split(line):
        for w in line.split():
            yield w

    assert collect(env.from_collection(["a b", "", "c d e"]).flat_map(split)) == ["a", "b", "c", "d", "e"]


def test_flat_map_returning_a_list(env):
    assert collect(env.from_collection([1, 2, 0, 3]).flat_map(lambda n: [n] * n)) == [1, 2, 2, 3, 3, 3]


def test_flat_map_with_a_flat_map_function(env):
    class Explode(FlatMapFunction):
        def flat_map(self, value):
            yield from value

    assert collect(env.from_collection(["ab", "c"]).flat_map(Explode())) == ["a", "b", "c"]


def test_filter_with_a_callable_and_a_filter_function(env):
    class Odd(FilterFunction):
        def filter(self, value):
            return value % 2 == 1

    ds = env.from_collection(list(range(20)))
    assert collect(ds.filter(Odd()).filter(lambda x: x > 10)) == [11, 13, 15, 17, 19]


def test_process_function_with_timestamp_and_side_output(env):
    small = OutputTag("small", Types.INT())
    odd = OutputTag("odd")

    class Route(ProcessFunction):
        def process_element(self, value, ctx):
            assert ctx.timestamp() is None  # no watermark strategy: records carry no timestamp
            assert isinstance(ctx.timer_service().current_processing_time(), int)
            if value < 3:
                yield small, value
            if value % 2:
                yield odd, f"odd {value}"
            yield value * 100

    main = env.from_collection(list(range(6))).process(Route(), output_type=Types.INT())
    small_out = main.get_side_output(small).map(lambda v: ("small", v))
    odd_out = main.get_side_output(odd).map(lambda v: ("odd", v))
    out = collect(main.map(lambda v: ("main", v)).union(small_out, odd_out))
    assert sorted(out) == sorted(
        [("main", v * 100) for v in range(6)]
        + [("small", v) for v in range(3)]
        + [("odd", f"odd {v}") for v in (1, 3, 5)])


def test_process_function_returning_a_list_or_none(env):
    class P(ProcessFunction):
        def process_element(self, value, ctx):
            if value:
                return [value, -value]
            return None

    assert collect(env.from_collection([1, 0, 2]).process(P())) == [1, -1, 2, -2]


def test_process_with_a_plain_callable(env):
    assert collect(env.from_collection([1, 2]).process(lambda v, ctx: [v + 1])) == [2, 3]


def test_side_output_without_main_output(env):
    tag = OutputTag("all")
    main = env.from_collection([1, 2, 3]).process(lambda v, ctx: [(tag, v)])
    assert collect(main.get_side_output(tag)) == [1, 2, 3]


def test_union_of_three_streams(env):
    env.set_parallelism(2)
    a = env.from_collection([1, 2, 3])
    b = env.from_sequence(10, 14)
    c = env.from_collection(["x"]).map(lambda s: s * 2)
    out = collect(a.union(b, c).map(str))
    assert sorted(out) == sorted(["1", "2", "3", "10", "11", "12", "13", "14", "xx"])


def test_union_with_itself_doubles_the_records(env):
    a = env.from_collection([1, 2])
    assert sorted(collect(a.union(a))) == [1, 1, 2, 2]


def test_chained_transformations_on_tuples(env):
    out = collect(env.from_collection([("a", 1), ("b", 2), ("a", 3)])
                  .filter(lambda t: t[0] == "a")
                  .map(lambda t: (t[0].upper(), t[1] * 2))
                  .flat_map(lambda t: [t, t]))
    assert out == [("A", 2), ("A", 2), ("A", 6), ("A", 6)]
