"""``WatermarkStrategy``, ``TimestampAssigner``, ``Duration`` and ``Time`` (PyFlink's
``pyflink.common``): factories, validation at build time, what the runtime creates from a
strategy, and the API entry points that take one."""

from __future__ import annotations

import pickle

import cloudpickle
import pytest

import rill.common
from rill.common import Duration, Time, TimestampAssigner, WatermarkStrategy
from rill.datastream import StreamExecutionEnvironment
from rill.operators.watermark import (
    AscendingTimestampsWatermarks,
    BoundedOutOfOrdernessWatermarks,
    GeneratorContext,
    NoWatermarksGenerator,
    WatermarkGenerator,
    WatermarksWithIdleness,
)


def ctx(clock=lambda: 0):
    return GeneratorContext(clock, "op")


# -- Duration and Time ----------------------------------------------------------------------------

def test_duration_factories():
    assert Duration.of_millis(5).to_milliseconds() == 5
    assert Duration.of_seconds(2).to_milliseconds() == 2_000
    assert Duration.of_minutes(3).to_milliseconds() == 180_000
    assert Duration.of_hours(1).to_milliseconds() == 3_600_000
    assert Duration.of_days(1).to_milliseconds() == 86_400_000
    assert Duration.of_seconds(0.5).to_milliseconds() == 500
    assert Duration.of_millis(-3).is_negative() and Duration.zero().is_zero()
    assert Duration.of_seconds(1) == Duration.of_millis(1000) and Duration.of_millis(1) < Duration.of_millis(2)
    assert hash(Duration.of_seconds(1)) == hash(Duration.of_millis(1000))
    assert repr(Duration.of_seconds(1)) == "Duration.of_millis(1000)"


def test_time_factories():
    assert Time.milliseconds(5).to_milliseconds() == 5
    assert Time.seconds(2).to_milliseconds() == 2_000
    assert Time.minutes(3).to_milliseconds() == 180_000
    assert Time.hours(1).to_milliseconds() == 3_600_000
    assert Time.days(2).to_milliseconds() == 172_800_000
    assert Time.seconds(1) == Time.milliseconds(1000)
    assert Time.seconds(1) != Duration.of_seconds(1)
    assert repr(Time.seconds(1)) == "Time.milliseconds(1000)"


def test_durations_are_immutable_and_pickle():
    d = Duration.of_seconds(3)
    with pytest.raises(AttributeError):
        d._ms = 5
    assert pickle.loads(pickle.dumps(d)) == d
    assert pickle.loads(pickle.dumps(Time.seconds(3))) == Time.seconds(3)


@pytest.mark.parametrize("factory,arg,error,match", [
    (Duration.of_millis, 1.5, ValueError, r"Duration.of_millis\(1.5\) is not a whole number of milliseconds"),
    (Duration.of_seconds, "5", TypeError, r"Duration.of_seconds of seconds needs an int, got '5' \(str\)"),
    (Duration.of_seconds, True, TypeError, "needs an int"),
    (Time.seconds, None, TypeError, "needs an int"),
    (Time.milliseconds, float("nan"), ValueError, "not a whole number"),
])
def test_bad_amounts(factory, arg, error, match):
    with pytest.raises(error, match=match):
        factory(arg)


# -- factories and what they create -------------------------------------------------------------

def test_for_monotonous_timestamps_creates_ascending_generators():
    s = WatermarkStrategy.for_monotonous_timestamps()
    g1, g2 = s.create_watermark_generator(ctx()), s.create_watermark_generator(ctx())
    assert isinstance(g1, AscendingTimestampsWatermarks) and g1 is not g2
    assert s.create_timestamp_assigner() is None
    assert not s.is_no_watermarks


def test_for_bounded_out_of_orderness_creates_bounded_generators():
    g = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(2)).create_watermark_generator(ctx())
    assert type(g) is BoundedOutOfOrdernessWatermarks and g.out_of_orderness_ms == 2000


def test_for_bounded_out_of_orderness_refuses_negative_durations_at_build_time():
    with pytest.raises(ValueError) as e:
        WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(-1))
    assert str(e.value) == ("WatermarkStrategy.for_bounded_out_of_orderness: the max out-of-orderness must not "
                            "be negative, got -1 ms")


@pytest.mark.parametrize("bad", [5, 1.5, "5s", None])
def test_durations_must_be_durations(bad):
    with pytest.raises(TypeError, match=r"expects a Duration \(e.g. Duration.of_seconds\(5\)\)"):
        WatermarkStrategy.for_bounded_out_of_orderness(bad)
    with pytest.raises(TypeError, match=r"with_idleness expects a Duration"):
        WatermarkStrategy.for_monotonous_timestamps().with_idleness(bad)


def test_time_is_accepted_where_a_duration_is_expected():
    g = WatermarkStrategy.for_bounded_out_of_orderness(Time.seconds(1)).create_watermark_generator(ctx())
    assert g.out_of_orderness_ms == 1000


def test_no_watermarks():
    s = WatermarkStrategy.no_watermarks()
    assert s.is_no_watermarks
    assert isinstance(s.create_watermark_generator(ctx()), NoWatermarksGenerator)
    assert s.with_timestamp_assigner(lambda v, t: 1).is_no_watermarks


def test_for_generator_with_a_class_a_context_function_and_a_zero_arg_function():
    class Gen(WatermarkGenerator):
        pass

    assert isinstance(WatermarkStrategy.for_generator(Gen).create_watermark_generator(ctx()), Gen)
    assert isinstance(WatermarkStrategy.for_generator(lambda: Gen()).create_watermark_generator(ctx()), Gen)
    seen = []
    s = WatermarkStrategy.for_generator(lambda context: seen.append(context) or Gen())
    c = ctx()
    assert isinstance(s.create_watermark_generator(c), Gen) and seen == [c]


def test_for_generator_refuses_non_callables_and_bad_signatures():
    with pytest.raises(TypeError, match="expects a callable that returns a WatermarkGenerator"):
        WatermarkStrategy.for_generator(WatermarkGenerator())
    with pytest.raises(TypeError, match="must be callable with no argument or with the generator context"):
        WatermarkStrategy.for_generator(lambda a, b: None)


def test_with_idleness_wraps_the_generator_with_the_context_clock():
    now = [0]
    s = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(3)).with_idleness(Duration.of_seconds(1))
    g = s.create_watermark_generator(ctx(lambda: now[0]))
    assert isinstance(g, WatermarksWithIdleness) and g.idle_timeout_ms == 1000
    assert isinstance(g.watermarks, BoundedOutOfOrdernessWatermarks) and g.watermarks.out_of_orderness_ms == 3
    assert s.get_idle_timeout_ms() == 1000


@pytest.mark.parametrize("ms", [0, -1])
def test_with_idleness_refuses_non_positive_timeouts(ms):
    with pytest.raises(ValueError) as e:
        WatermarkStrategy.for_monotonous_timestamps().with_idleness(Duration.of_millis(ms))
    assert str(e.value) == f"WatermarkStrategy.with_idleness: the idle timeout must be greater than zero, got {ms} ms"


# -- timestamp assigners --------------------------------------------------------------------------

def test_with_timestamp_assigner_takes_a_callable():
    s = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v, t: v + 1)
    assert s.create_timestamp_assigner()(4, None) == 5
    assert isinstance(s.get_timestamp_assigner(), TimestampAssigner)


def test_with_timestamp_assigner_takes_a_timestamp_assigner():
    class A(TimestampAssigner):
        def extract_timestamp(self, value, record_timestamp):
            return record_timestamp

    a = A()
    s = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(a)
    assert s.get_timestamp_assigner() is a and s.create_timestamp_assigner()(None, 7) == 7


def test_with_timestamp_assigner_refuses_one_argument_functions_and_non_callables():
    with pytest.raises(TypeError, match=r"must take two arguments \(value, record_timestamp\)"):
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v: v)
    with pytest.raises(TypeError, match="expects a TimestampAssigner or a callable"):
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(5)


def test_strategies_are_immutable():
    base = WatermarkStrategy.for_monotonous_timestamps()
    with_assigner = base.with_timestamp_assigner(lambda v, t: 1)
    with_idleness = with_assigner.with_idleness(Duration.of_seconds(1))
    assert base.get_timestamp_assigner() is None and base.get_idle_timeout_ms() is None
    assert with_assigner.get_idle_timeout_ms() is None
    assert with_idleness.get_timestamp_assigner() is with_assigner.get_timestamp_assigner()


def test_strategies_pickle_with_lambdas():
    s = (WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(5))
         .with_timestamp_assigner(lambda v, t: v * 2).with_idleness(Duration.of_seconds(1)))
    copy = cloudpickle.loads(cloudpickle.dumps(s))
    assert copy.create_timestamp_assigner()(3, None) == 6
    g = copy.create_watermark_generator(ctx())
    assert g.idle_timeout_ms == 1000 and g.watermarks.out_of_orderness_ms == 5


def test_repr():
    s = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(5)).with_idleness(Duration.of_seconds(1))
    assert repr(s) == ("WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(5))"
                       ".with_idleness(Duration.of_millis(1000))")


def test_public_names():
    for name in ("WatermarkStrategy", "TimestampAssigner", "Duration", "Time"):
        assert name in rill.common.__all__ and hasattr(rill.common, name)
    from rill.common.time import Duration as D, Time as T  # noqa: F401
    from rill.common.watermark_strategy import WatermarkGenerator as G, WatermarkOutput  # noqa: F401
    assert G is WatermarkGenerator


# -- the API entry points ------------------------------------------------------------------------

def _vertex_names(env):
    return [v.get_name() for v in env.get_stream_graph().get_job_graph()
            .get_vertices_sorted_topologically_from_sources()]


def test_assign_timestamps_and_watermarks_chains_with_the_input_parallelism():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(4)
    s = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v, t: v)
    ds = env.from_collection([1, 2]).assign_timestamps_and_watermarks(s)
    assert ds.get_name() == "Timestamps/Watermarks" and ds.get_parallelism() == 1
    ds.map(lambda v: v).set_parallelism(1).print().set_parallelism(1)
    assert _vertex_names(env) == ["Source: Collection Source -> Timestamps/Watermarks -> Map -> Sink: Print to Std. Out"]


def test_assign_timestamps_and_watermarks_refuses_a_non_strategy():
    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(TypeError, match="assign_timestamps_and_watermarks expects a WatermarkStrategy, got 5"):
        env.from_collection([1]).assign_timestamps_and_watermarks(5)


def test_from_source_checks_the_strategy_at_build_time():
    from rill.datastream.connectors.collection import NumberSequenceSource
    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(ValueError) as e:
        env.from_source(NumberSequenceSource(1, 3), WatermarkStrategy.for_monotonous_timestamps(), "Numbers")
    assert str(e.value) == ("The watermark strategy of source 'Numbers' has no timestamp assigner, and records of a "
                            "Source carry no timestamps: add one with WatermarkStrategy.with_timestamp_assigner()")
    with pytest.raises(TypeError, match="from_source expects a WatermarkStrategy for source 'Numbers', got 'x'"):
        env.from_source(NumberSequenceSource(1, 3), "x", "Numbers")
    env.from_source(NumberSequenceSource(1, 3), WatermarkStrategy.no_watermarks(), "Numbers")
    env.from_source(NumberSequenceSource(1, 3), WatermarkStrategy.for_monotonous_timestamps()
                    .with_timestamp_assigner(lambda v, t: v), "Numbers2")


def test_assign_timestamps_and_watermarks_on_a_keyed_stream_gives_a_plain_stream():
    from rill.datastream import KeyedStream
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    s = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v, t: v)
    ds = env.from_sequence(1, 10).key_by(lambda v: v % 2).assign_timestamps_and_watermarks(s)
    assert not isinstance(ds, KeyedStream) and ds.get_parallelism() == 2
    ds.print()
    assert _vertex_names(env) == ["Source: Sequence Source", "Timestamps/Watermarks -> Sink: Print to Std. Out"]
