"""``AsyncDataStream`` jobs in the embedded mode: throughput against the serial time, order,
the multiset of unordered results, watermarks never overtaken, capacity, timeouts falling back
to ``timeout()``, retries by strategy and predicates, failures naming the operator and value,
cancellation of a job whose calls never finish, and a full queue that waits without spinning.

The functions count their calls in module-level dictionaries: in the embedded mode the job's
copy of a function still shares this module (cloudpickle pickles importable classes by
reference)."""

from __future__ import annotations

import asyncio
import functools
import threading
import time

import pytest

from _ds_helpers import wait_until
from rill.common import Duration, JobStatus, Time, WatermarkStrategy
from rill.datastream import AsyncDataStream, AsyncFunction, ProcessFunction
from rill.datastream.async_retry_predicates import (
    empty_result_predicate,
    exception_type_predicate,
    has_exception_predicate,
)
from rill.datastream.async_retry_strategies import (
    ExponentialBackoffDelayRetryStrategy,
    FixedDelayRetryStrategy,
)
from rill.operators.async_io import AsyncFunctionError
from rill.operators.watermark import WatermarkGenerator
from rill.runtime.errors import JobExecutionException

try:
    from rill.common.streamrecord import Watermark
except ImportError:  # before the layering move (wip/seams) it lived in the runtime
    from rill.runtime.streamrecord import Watermark

N = 3000
SLEEP_S = 0.01
STATS: dict = {}


@pytest.fixture(autouse=True)
def _fresh_stats():
    """Each test starts with empty STATS (an earlier test's figures must not pass for its own)."""
    STATS.clear()


class Sleep10ms(AsyncFunction):
    """Awaits 10 ms per call and counts the calls in flight at once."""

    def __init__(self, key: str):
        self.key = key

    async def async_invoke(self, value):
        stats = STATS.setdefault(self.key, {"in_flight": 0, "peak": 0, "calls": 0})
        stats["in_flight"] += 1
        stats["calls"] += 1
        stats["peak"] = max(stats["peak"], stats["in_flight"])
        try:
            await asyncio.sleep(SLEEP_S)
        finally:
            stats["in_flight"] -= 1
        return [value * 2]


class VariableDelay(AsyncFunction):
    """Awaits 0-9 ms depending on the value, so calls complete out of input order."""

    async def async_invoke(self, value):
        await asyncio.sleep((value * 7919 % 10) / 1000)
        return [value, -value] if value % 5 == 0 else [value]


@pytest.mark.embedded_only("reads the calls' peak from this process's STATS (the cluster run: test_cluster_async_io)")
def test_ordered_wait_over_3000_records_is_far_faster_than_serial_and_keeps_the_order(env):
    serial_s = N * SLEEP_S  # 30 s: one call after the other
    ds = env.from_collection(list(range(N)))
    out = AsyncDataStream.ordered_wait(ds, Sleep10ms("ordered"), Time.seconds(30), capacity=100)
    start = time.monotonic()
    result = list(out.execute_and_collect())
    elapsed = time.monotonic() - start
    assert result == [2 * i for i in range(N)]
    assert elapsed < serial_s / 10, f"{elapsed:.2f} s is not under a tenth of the serial {serial_s:.0f} s"
    assert STATS["ordered"]["calls"] == N
    assert STATS["ordered"]["peak"] == 100  # capacity bounds the calls in flight, and is reached


def test_unordered_wait_gives_the_same_multiset_in_another_order(env):
    ds = env.from_collection(list(range(N)))
    result = list(AsyncDataStream.unordered_wait(ds, VariableDelay(), Duration.of_seconds(30), 50)
                  .execute_and_collect())
    expected = [v for i in range(N) for v in ([i, -i] if i % 5 == 0 else [i])]
    assert sorted(result) == sorted(expected)
    assert result != expected  # completion order, not input order


def test_ordered_wait_with_parallelism_2_keeps_each_subtasks_order(env):
    env.set_parallelism(2)
    ds = env.from_collection(list(range(1000))).rebalance()
    result = list(AsyncDataStream.ordered_wait(ds, VariableDelay(), 30_000, 20).execute_and_collect())
    expected = [v for i in range(1000) for v in ([i, -i] if i % 5 == 0 else [i])]
    assert sorted(result) == sorted(expected)


class EveryTenth(WatermarkGenerator):
    """A watermark after every tenth event: its timestamp."""

    def on_event(self, event, event_timestamp, output):
        if event % 10 == 9:
            output.emit_watermark(Watermark(event_timestamp))


class SeenWatermark(ProcessFunction):
    def process_element(self, value, ctx):
        yield value, ctx.timestamp(), ctx.timer_service().current_watermark()


def test_unordered_wait_never_lets_a_record_overtake_a_watermark(env):
    ds = env.from_collection(list(range(500))).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_generator(EveryTenth).with_timestamp_assigner(lambda v, _: v * 10))
    seen = list(AsyncDataStream.unordered_wait(ds, VariableDelay(), 30_000, 30)
                .process(SeenWatermark()).execute_and_collect())
    assert sorted(v for v, _, _ in seen) == sorted(v for i in range(500) for v in ([i, -i] if i % 5 == 0 else [i]))
    for value, timestamp, watermark in seen:
        assert timestamp == abs(value) * 10  # the input record's timestamp
        assert timestamp > watermark, f"record {value} (t={timestamp}) came after watermark {watermark}"
    assert len({w for _, _, w in seen}) >= 40  # the watermarks did interleave with the records


class SlowMultiplesOfTen(AsyncFunction):
    """Values divisible by 10 take an hour; the rest answer at once."""

    async def async_invoke(self, value):
        if value % 10 == 0:
            await asyncio.sleep(3600)
        return [("ok", value)]

    def timeout(self, value):
        return [("timeout", value)]


def test_a_call_over_the_timeout_falls_back_to_timeout(env):
    ds = env.from_collection(list(range(50)))
    start = time.monotonic()
    result = list(AsyncDataStream.ordered_wait(ds, SlowMultiplesOfTen(), Time.milliseconds(200), 100)
                  .execute_and_collect())
    assert result == [("timeout", i) if i % 10 == 0 else ("ok", i) for i in range(50)]
    assert time.monotonic() - start < 30


class SlowWithDefaultTimeout(AsyncFunction):
    async def async_invoke(self, value):
        await asyncio.sleep(3600)
        return [value]


def test_the_default_timeout_fails_the_job_naming_the_operator_and_the_value(env):
    ds = env.from_collection(["k1"])
    AsyncDataStream.unordered_wait(ds, SlowWithDefaultTimeout(), 100).name("Lookup").print()
    with pytest.raises(JobExecutionException) as info:
        env.execute()
    cause = info.value.__cause__
    assert isinstance(cause, AsyncFunctionError)
    assert str(cause).startswith("Async function of operator 'Lookup' timed out for input 'k1' after 100 ms "
                                 "(1 attempt(s)), and its timeout() raised TimeoutError")


class EmptyTwiceThenValue(AsyncFunction):
    """Returns [] for the first two attempts of each value, then [(value, attempt)]."""

    def open(self, runtime_context):
        self.attempts = {}

    async def async_invoke(self, value):
        n = self.attempts[value] = self.attempts.get(value, 0) + 1
        return [] if n < 3 else [(value, n)]


def test_fixed_delay_retries_on_an_empty_result(env):
    strategy = FixedDelayRetryStrategy(3, 10, empty_result_predicate, None)
    ds = env.from_collection(list(range(200)))
    result = list(AsyncDataStream.ordered_wait_with_retry(ds, EmptyTwiceThenValue(), Time.seconds(30), strategy, 50)
                  .execute_and_collect())
    assert result == [(i, 3) for i in range(200)]


class FailTwiceThenValue(AsyncFunction):
    """Raises ConnectionError on the first two attempts of each value, recording when each
    attempt started (loop time, s)."""

    def __init__(self, key: str):
        self.key = key

    async def async_invoke(self, value):
        starts = STATS.setdefault(self.key, {}).setdefault(value, [])
        starts.append(asyncio.get_running_loop().time())
        if len(starts) < 3:
            raise ConnectionError(f"refused: {value}")
        return [(value, len(starts))]


@pytest.mark.embedded_only("counts each call's attempts in this process's STATS (retries on a cluster: test_cluster_async_io)")
def test_exponential_backoff_retries_on_a_matching_exception(env):
    predicate = functools.partial(exception_type_predicate, expected_error_type=ConnectionError)
    strategy = ExponentialBackoffDelayRetryStrategy(5, 20, 1000, 2.0, None, predicate)
    ds = env.from_collection(list(range(100)))
    result = list(AsyncDataStream.unordered_wait_with_retry(ds, FailTwiceThenValue("backoff"), 30_000, strategy, 100)
                  .execute_and_collect())
    assert sorted(result) == [(i, 3) for i in range(100)]
    for starts in STATS["backoff"].values():
        assert len(starts) == 3
        assert starts[1] - starts[0] >= 0.020 * 0.99  # first retry after 20 ms
        assert starts[2] - starts[1] >= 0.040 * 0.99  # second after 20 ms x 2


@pytest.mark.embedded_only("counts each call's attempts in this process's STATS (retries on a cluster: test_cluster_async_io)")
def test_retries_run_out_and_the_error_names_the_attempts(env):
    strategy = FixedDelayRetryStrategy(1, 5, None, has_exception_predicate)
    ds = env.from_collection([7])
    AsyncDataStream.ordered_wait_with_retry(ds, FailTwiceThenValue("run-out"), 10_000, strategy).print()
    with pytest.raises(JobExecutionException) as info:
        env.execute()
    assert str(info.value.__cause__) == (
        "Async function of operator 'async wait operator' failed for input 7 after 2 attempt(s): "
        "ConnectionError: refused: 7")
    assert len(STATS["run-out"][7]) == 2


@pytest.mark.embedded_only("counts each call's attempts in this process's STATS")
def test_an_exception_the_predicate_rejects_is_not_retried(env):
    predicate = functools.partial(exception_type_predicate, expected_error_type=KeyError)
    strategy = FixedDelayRetryStrategy(3, 5, None, predicate)
    ds = env.from_collection([8])
    AsyncDataStream.ordered_wait_with_retry(ds, FailTwiceThenValue("rejected"), 10_000, strategy).print()
    with pytest.raises(JobExecutionException, match="failed for input 8 after 1 attempt"):
        env.execute()
    assert len(STATS["rejected"][8]) == 1


class ReturnsAString(AsyncFunction):
    async def async_invoke(self, value):
        return "not a list"


def test_a_result_that_is_not_a_list_fails_the_job_naming_the_rule(env):
    AsyncDataStream.ordered_wait(env.from_collection([1]), ReturnsAString(), 1000).print()
    with pytest.raises(JobExecutionException) as info:
        env.execute()
    assert str(info.value.__cause__) == (
        "Async function of operator 'async wait operator' must return a list of output records "
        "(from async_invoke or timeout), got 'not a list' of type str for input 1")


class NotAsync(AsyncFunction):
    def async_invoke(self, value):  # type: ignore[override]  # the mistake under test
        return [value]


def test_invalid_arguments_are_refused_at_the_call(env):
    ds = env.from_collection([1])
    with pytest.raises(TypeError, match=r"AsyncDataStream.ordered_wait: method 'async_invoke' of NotAsync "
                                        r"must be declared 'async def'"):
        AsyncDataStream.ordered_wait(ds, NotAsync(), 1000)
    with pytest.raises(ValueError, match=r"AsyncDataStream.unordered_wait: capacity must be a positive int, got 0"):
        AsyncDataStream.unordered_wait(ds, Sleep10ms("x"), 1000, capacity=0)
    with pytest.raises(ValueError, match=r"a positive timeout is required with a retry strategy, got 0 ms"):
        AsyncDataStream.unordered_wait_with_retry(ds, Sleep10ms("x"), 0, FixedDelayRetryStrategy(1, 1))
    with pytest.raises(TypeError, match=r"AsyncDataStream.ordered_wait timeout"):
        AsyncDataStream.ordered_wait(ds, Sleep10ms("x"), 1.5)


FOREVER_STARTED = threading.Event()


class Forever(AsyncFunction):
    async def async_invoke(self, value):
        FOREVER_STARTED.set()
        await asyncio.sleep(3600)
        return [value]


@pytest.mark.embedded_only("waits on FOREVER_STARTED, an Event of this process")
def test_cancelling_a_job_whose_calls_never_finish(env):
    FOREVER_STARTED.clear()
    ds = env.from_collection(list(range(10)))
    AsyncDataStream.ordered_wait(ds, Forever(), 0, capacity=4).print()  # no timeout
    client = env.execute_async("forever")
    assert FOREVER_STARTED.wait(30)
    client.cancel().result(timeout=30)
    assert client.get_job_status() is JobStatus.CANCELED


@pytest.mark.embedded_only("measures this process's CPU time and STATS")
def test_a_full_queue_waits_in_the_mailbox_without_spinning(env):
    ds = env.from_collection(list(range(40)))
    out = AsyncDataStream.ordered_wait(ds, Sleep10ms("spin"), 30_000, capacity=1)  # 40 calls one by one
    cpu_start, wall_start = time.process_time(), time.monotonic()
    assert list(out.execute_and_collect()) == [2 * i for i in range(40)]
    cpu, wall = time.process_time() - cpu_start, time.monotonic() - wall_start
    assert STATS["spin"]["peak"] == 1
    assert wall >= 40 * SLEEP_S
    assert cpu < 0.5 * wall, f"the process used {cpu:.2f} s of CPU in {wall:.2f} s: a busy wait"


@pytest.mark.embedded_only("looks for the event-loop threads in this process")
def test_loop_threads_end_with_the_job(env):
    ds = env.from_collection(list(range(10)))
    assert sorted(AsyncDataStream.unordered_wait(ds, VariableDelay(), 1000).execute_and_collect()) == \
        sorted(v for i in range(10) for v in ([i, -i] if i % 5 == 0 else [i]))
    assert wait_until(lambda: not [t for t in threading.enumerate() if t.name.startswith("async-io ")])


class AwaitingSink:
    """Stores every value after awaiting 5 ms; counts the calls in flight at once."""

    async def invoke(self, value):
        stats = STATS.setdefault("sink", {"in_flight": 0, "peak": 0, "values": []})
        stats["in_flight"] += 1
        stats["peak"] = max(stats["peak"], stats["in_flight"])
        await asyncio.sleep(0.005)
        stats["in_flight"] -= 1
        stats["values"].append(value)


@pytest.mark.embedded_only("reads the sink's values from this process's STATS")
def test_an_async_sink_awaits_every_record_with_bounded_concurrency(env):
    AsyncDataStream.add_sink(env.from_collection(list(range(500))), AwaitingSink(), capacity=25)
    env.execute("async sink")  # returns once every call has finished
    assert sorted(STATS["sink"]["values"]) == list(range(500))
    assert STATS["sink"]["peak"] == 25
    with pytest.raises(TypeError, match=r"AsyncDataStream.add_sink: method 'invoke' of Sleep10ms must be declared"):
        AsyncDataStream.add_sink(env.from_collection([1]), Sleep10ms("x"))


def test_an_async_function_descriptor_builds_the_async_wait_operator_of_a_job(env):
    from rill.datastream.functions import AsyncFunctionDescriptor
    from rill.datastream.async_retry_strategies import NO_RETRY_STRATEGY

    d = AsyncFunctionDescriptor(VariableDelay(), Time.seconds(30), 7, NO_RETRY_STRATEGY,
                                AsyncFunctionDescriptor.OutputMode.ORDERED)
    assert (d.capacity, d.output_mode.value) == (7, 0)
    ds = env.from_collection(list(range(100)))
    result = list(ds._one_input("async wait operator", d.create_operator()).execute_and_collect())
    assert result == [v for i in range(100) for v in ([i, -i] if i % 5 == 0 else [i])]
    d.output_mode = "ORDERED"
    with pytest.raises(TypeError, match=r"output_mode must be an AsyncFunctionDescriptor.OutputMode, got 'ORDERED'"):
        d.create_operator()
