"""``CompletableFuture`` (wrapping a job client's futures), ``Instant`` and
``InputDependencyConstraint``, with PyFlink's names and Java's semantics."""

import concurrent.futures
import threading

import pytest

from rill.common import CompletableFuture, InputDependencyConstraint, Instant


def test_completable_future_wraps_a_future_and_converts_its_result():
    source = concurrent.futures.Future()
    wrapped = CompletableFuture(source, str)
    assert not wrapped.done()
    source.set_result(42)
    assert wrapped.done() and wrapped.result() == "42" and wrapped.exception() is None


def test_completable_future_carries_the_wrapped_failure():
    source = concurrent.futures.Future()
    wrapped = CompletableFuture(source)
    source.set_exception(RuntimeError("job failed"))
    assert isinstance(wrapped.exception(), RuntimeError)
    with pytest.raises(RuntimeError, match="job failed"):
        wrapped.result()


def test_cancelling_cancels_the_wrapped_future_and_wakes_waiters():
    source = concurrent.futures.Future()
    wrapped = CompletableFuture(source)
    waiting = concurrent.futures.ThreadPoolExecutor(1).submit(concurrent.futures.wait, [wrapped], 30)
    assert wrapped.cancel() and wrapped.cancelled() and source.cancelled()
    done, _ = waiting.result(timeout=30)
    assert done == {wrapped}
    finished = CompletableFuture()
    finished.set_result(1)
    assert finished.cancel() is False and not finished.cancelled()


def test_only_the_first_completion_wins():
    f = CompletableFuture()
    barrier = threading.Barrier(8)
    wins = []

    def complete(i):
        barrier.wait()
        try:
            f.set_result(i)
            wins.append(i)
        except concurrent.futures.InvalidStateError:
            pass
    threads = [threading.Thread(target=complete, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and f.result() == wins[0]
    with pytest.raises(TypeError, match="wraps a concurrent.futures.Future, got int"):
        CompletableFuture(5)


def test_a_job_clients_result_future_can_be_wrapped():
    from rill.datastream import StreamExecutionEnvironment  # noqa: PLC0415 - builds a job
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection([1, 2]).print()
    result = CompletableFuture(env.execute_async("wrapped").get_job_execution_result(), lambda r: r.get_job_name())
    assert result.result(timeout=60) == "wrapped"


def test_instant_follows_java():
    assert Instant.of_epoch_milli(1500) == Instant(1, 500_000_000)
    assert Instant.of_epoch_milli(-1) == Instant(-1, 999_000_000)
    assert Instant(-1, 999_000_000).to_epoch_milli() == -1
    assert Instant(0, 1).to_epoch_milli() == 0 and Instant(-1, 1).to_epoch_milli() == -1000
    assert Instant(1, 0) < Instant(1, 1) and repr(Instant(2, 3)) == "Instant<2, 3>"
    with pytest.raises(ValueError, match="nanos an int in 0..999999999, got 1, 1000000000"):
        Instant(1, 1_000_000_000)


def test_input_dependency_constraint_values():
    assert [c.name for c in InputDependencyConstraint] == ["ANY", "ALL"]
    assert InputDependencyConstraint.ALL.value == 1
