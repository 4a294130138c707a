"""LocalBufferPool and Buffer: bounds, blocking (backpressure), destroy, statistics."""

from __future__ import annotations

import threading

import pytest

from rill.network.buffer import (
    Buffer,
    BufferPoolDestroyedError,
    BufferPoolStatistics,
    LocalBufferPool,
)


def test_request_and_recycle_track_usage_and_peak():
    pool = LocalBufferPool(3, "out")
    assert pool.get_number_of_available_buffers() == 3
    assert pool.usage() == 0.0
    b1 = pool.request_buffer_blocking()
    b2 = pool.request_buffer()
    assert (b1.values, b1.timestamps, b1.get_recycler()) == ([], None, pool)
    assert pool.get_number_of_available_buffers() == 1
    assert pool.usage() == pytest.approx(2 / 3)
    b1.recycle_buffer()
    b3 = pool.request_buffer()
    b4 = pool.request_buffer()
    assert pool.request_buffer() is None  # exhausted, non-blocking
    assert pool.usage() == 1.0
    for b in (b2, b3, b4):
        b.recycle_buffer()
    assert pool.statistics() == BufferPoolStatistics(
        name="out",
        total_buffers=3,
        used_buffers=0,
        peak_used_buffers=3,
        requesters_blocked=0,
        back_pressured_time_ns=0,
        destroyed=False,
    )


def test_statistics_are_frozen():
    stats = LocalBufferPool(1).statistics()
    with pytest.raises(AttributeError):
        stats.used_buffers = 5  # type: ignore[misc]


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, None])
def test_pool_size_must_be_a_positive_int(bad):
    with pytest.raises(ValueError, match="at least 1 buffer"):
        LocalBufferPool(bad)


def test_double_recycle_is_an_error_and_does_not_free_a_second_slot():
    pool = LocalBufferPool(1)
    buffer = pool.request_buffer()
    buffer.recycle_buffer()
    with pytest.raises(RuntimeError, match="already recycled"):
        buffer.recycle_buffer()
    assert pool.get_number_of_available_buffers() == 1


def test_recycling_more_than_requested_is_an_error():
    pool = LocalBufferPool(1)
    with pytest.raises(RuntimeError, match="no buffer is in flight"):
        pool.recycle(Buffer([1]))


def test_blocked_requester_waits_until_a_buffer_is_recycled(threads, wait_until):
    pool = LocalBufferPool(1, "bp")
    held = pool.request_buffer_blocking()
    got: list[Buffer] = []
    threads.start(lambda: got.append(pool.request_buffer_blocking()), "requester")

    wait_until(lambda: pool.statistics().requesters_blocked == 1, "the requester blocks")
    assert got == []
    # Back-pressured time includes the wait in progress, so it grows while blocked.
    first = pool.back_pressured_time_ns
    wait_until(lambda: pool.back_pressured_time_ns > first, "back-pressured time grows")

    held.recycle_buffer()
    threads.join_all()
    assert len(got) == 1 and got[0].get_recycler() is pool
    stats = pool.statistics()
    assert stats.requesters_blocked == 0
    assert stats.used_buffers == 1
    assert stats.back_pressured_time_ns > first
    # Frozen once nobody waits.
    assert pool.back_pressured_time_ns == stats.back_pressured_time_ns


def test_destroy_wakes_every_blocked_requester_with_an_error(threads, wait_until):
    pool = LocalBufferPool(1, "doomed")
    held = pool.request_buffer()
    errors: list[BaseException] = []

    def request() -> None:
        try:
            pool.request_buffer_blocking()
        except BufferPoolDestroyedError as error:
            errors.append(error)

    for i in range(3):
        threads.start(request, f"requester-{i}")
    wait_until(lambda: pool.statistics().requesters_blocked == 3, "three requesters block")
    pool.destroy()
    threads.join_all()
    assert len(errors) == 3
    assert all("'doomed' was destroyed while waiting" in str(e) for e in errors)
    with pytest.raises(BufferPoolDestroyedError, match="is destroyed"):
        pool.request_buffer_blocking()
    with pytest.raises(BufferPoolDestroyedError):
        pool.request_buffer()
    # A buffer in flight may still come back after destroy.
    held.recycle_buffer()
    assert pool.statistics().used_buffers == 0
    assert pool.statistics().destroyed
    pool.destroy()  # idempotent


def test_availability_listener_is_one_shot_and_only_for_an_exhausted_pool():
    pool = LocalBufferPool(2)
    calls: list[str] = []
    assert pool.add_availability_listener(lambda: calls.append("x")) is False  # available now
    a, b = pool.request_buffer(), pool.request_buffer()
    assert not pool.is_available()
    assert pool.add_availability_listener(lambda: calls.append("first")) is True
    a.recycle_buffer()
    assert calls == ["first"]
    assert pool.is_available()
    b.recycle_buffer()  # pool was not exhausted: nothing registered, nothing fires
    assert calls == ["first"]


def test_destroy_fires_pending_availability_listeners():
    pool = LocalBufferPool(1)
    pool.request_buffer()
    calls: list[int] = []
    pool.add_availability_listener(lambda: calls.append(1))
    pool.destroy()
    assert calls == [1]
    assert not pool.is_available()


def test_buffer_contents_and_validation():
    buffer = Buffer([1, 2, 3], [10, 20, 30])
    assert len(buffer) == 3 and buffer.get_size() == 3 and buffer.is_buffer()
    assert repr(buffer) == "Buffer(3 records, with timestamps)"
    buffer.recycle_buffer()  # unpooled: only marks it
    assert buffer.is_recycled() and buffer.values == [] and buffer.timestamps is None
    assert repr(buffer) == "Buffer(recycled)"
    with pytest.raises(RuntimeError, match="recycled and cannot be refilled"):
        buffer.set_contents([1])
    with pytest.raises(ValueError, match="2 entries for 1 values"):
        Buffer([]).set_contents([1], [1, 2])
    fresh = Buffer([]).set_contents(["a"], [5])
    assert (fresh.values, fresh.timestamps) == (["a"], [5])


def test_concurrent_requesters_never_exceed_the_bound(threads):
    pool = LocalBufferPool(3)
    barrier = threading.Barrier(4)

    def churn() -> None:
        barrier.wait()
        for _ in range(2000):
            buffer = pool.request_buffer_blocking()
            assert pool.get_number_of_used_buffers() <= 3
            buffer.recycle_buffer()

    for i in range(4):
        threads.start(churn, f"churn-{i}")
    threads.join_all()
    stats = pool.statistics()
    assert stats.used_buffers == 0 and stats.peak_used_buffers <= 3 and stats.requesters_blocked == 0
