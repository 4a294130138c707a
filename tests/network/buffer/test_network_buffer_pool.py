"""NetworkBufferPool: the process's budget of segments, carved into LocalBufferPools and
gate leases, and given back by destroy and recycle -- accounting, Flink's error message,
thread-safety."""

from __future__ import annotations

import pickle
import threading

import pytest

from rill.network import (
    BufferPoolDestroyedError,
    InsufficientNetworkBuffersError,
    LocalBufferPool,
    NetworkBufferPool,
    NetworkBufferPoolStatistics,
)
from rill.network.buffer.network_buffer_pool import DEFAULT_MEMORY_SEGMENT_SIZE_BYTES, NETWORK_MEMORY_MAX_KEY


def test_carving_takes_the_maximum_when_available_and_the_rest_otherwise():
    nbp = NetworkBufferPool(20)
    first = nbp.create_buffer_pool(3, 12, "first")
    assert first.get_number_of_buffers() == 12
    assert (nbp.get_number_of_available_memory_segments(), nbp.get_number_of_used_memory_segments()) == (8, 12)
    second = nbp.create_buffer_pool(3, 12, "second")  # only 8 left: more than required, less than max
    assert second.get_number_of_buffers() == 8
    assert nbp.get_number_of_available_memory_segments() == 0
    stats = nbp.statistics()
    assert stats == NetworkBufferPoolStatistics(
        total_segments=20, available_segments=0, used_segments=20, peak_used_segments=20,
        segment_size_bytes=DEFAULT_MEMORY_SEGMENT_SIZE_BYTES, holders=(("first", 12), ("second", 8)))
    assert stats.usage == 1.0 and stats.total_bytes == 20 * 32768


def test_insufficient_buffers_raise_flinks_message_naming_the_option():
    nbp = NetworkBufferPool(5, segment_size_bytes=32768)
    nbp.create_buffer_pool(2, 3, "a")
    with pytest.raises(InsufficientNetworkBuffersError) as info:
        nbp.create_buffer_pool(3, 10, "b")
    assert str(info.value) == (
        "Insufficient number of network buffers: required 3, but only 2 available. The total number "
        "of network buffers is currently set to 5 of 32768 bytes each. You can increase this number "
        "by setting the configuration key 'taskmanager.memory.network.max'.")
    assert NETWORK_MEMORY_MAX_KEY == "taskmanager.memory.network.max"
    assert (info.value.required, info.value.available, info.value.total, info.value.segment_size_bytes) == (3, 2, 5, 32768)
    assert isinstance(info.value, IOError)  # Flink's IOException
    assert nbp.get_number_of_available_memory_segments() == 2  # a failed request takes nothing
    copy = pickle.loads(pickle.dumps(info.value))  # crosses process boundaries in cluster mode
    assert type(copy) is InsufficientNetworkBuffersError and str(copy) == str(info.value)
    assert copy.required == 3


def test_error_detail_is_appended():
    error = InsufficientNetworkBuffersError(4, 1, 2, 1024, "(Task 'Map (1/2)' needs 4.)")
    assert str(error).endswith("'taskmanager.memory.network.max'. (Task 'Map (1/2)' needs 4.)")


def test_destroy_returns_free_segments_at_once_and_in_flight_ones_when_recycled():
    nbp = NetworkBufferPool(10)
    pool = nbp.create_buffer_pool(1, 4, "p")
    held = [pool.request_buffer() for _ in range(3)]
    held[0].recycle_buffer()
    assert nbp.get_number_of_available_memory_segments() == 6
    pool.destroy()
    assert nbp.get_number_of_available_memory_segments() == 8  # 2 free slots back, 2 in flight
    assert nbp.statistics().holders == (("p", 2),)
    with pytest.raises(BufferPoolDestroyedError):
        pool.request_buffer()
    held[1].recycle_buffer()
    assert nbp.get_number_of_available_memory_segments() == 9
    held[2].recycle_buffer()
    assert nbp.get_number_of_available_memory_segments() == 10
    assert nbp.statistics().holders == ()
    pool.destroy()  # idempotent: nothing returned twice
    assert nbp.get_number_of_available_memory_segments() == 10
    assert nbp.statistics().peak_used_segments == 4


def test_a_blocked_writer_woken_by_destroy_takes_no_segment():
    nbp = NetworkBufferPool(2)
    pool = nbp.create_buffer_pool(1, 1, "p")
    buffer = pool.request_buffer_blocking()
    errors = []

    def blocked():
        try:
            pool.request_buffer_blocking()
        except BufferPoolDestroyedError as error:
            errors.append(error)

    thread = threading.Thread(target=blocked)
    thread.start()
    while pool.statistics().requesters_blocked == 0:
        thread.join(0.001)
    pool.destroy()
    thread.join(10)
    assert len(errors) == 1
    buffer.recycle_buffer()
    assert nbp.get_number_of_available_memory_segments() == 2


def test_segment_leases_for_gates_are_recycled_in_parts():
    nbp = NetworkBufferPool(10)
    lease = nbp.request_segments(4, 12, "gate 0")
    assert (lease.granted, lease.segments) == (10, 10)
    assert nbp.get_number_of_available_memory_segments() == 0
    lease.recycle(2)
    assert (lease.segments, nbp.get_number_of_available_memory_segments()) == (8, 2)
    with pytest.raises(ValueError, match="cannot recycle 9"):
        lease.recycle(9)
    lease.recycle()
    assert (lease.segments, nbp.get_number_of_available_memory_segments()) == (0, 10)
    lease.recycle()  # nothing left: no-op
    exact = nbp.request_segments(3, name="exact")
    assert exact.granted == 3
    with pytest.raises(InsufficientNetworkBuffersError, match="required 8, but only 7 available"):
        nbp.request_segments(8, name="too many")
    empty = nbp.request_segments(0, 0, "nothing")
    assert empty.granted == 0 and nbp.statistics().holders == (("exact", 3),)


def test_a_pool_without_a_network_buffer_pool_is_unchanged():
    pool = LocalBufferPool(2, "standalone")
    buffer = pool.request_buffer()
    pool.destroy()
    buffer.recycle_buffer()
    assert pool.get_number_of_used_buffers() == 0


@pytest.mark.parametrize("args, message", [
    ((-1,), "total_segments must be an int >= 0"),
    ((1.5,), "total_segments must be an int >= 0"),
    ((10, 0), "segment_size_bytes must be an int >= 1"),
])
def test_bad_budgets_are_refused(args, message):
    with pytest.raises(ValueError, match=message):
        NetworkBufferPool(*args)


def test_bad_requests_are_refused():
    nbp = NetworkBufferPool(10)
    with pytest.raises(ValueError, match="num_required >= 1"):
        nbp.create_buffer_pool(0, 4)
    with pytest.raises(ValueError, match="max_segments must be an int >= num_required"):
        nbp.create_buffer_pool(5, 4)
    with pytest.raises(ValueError, match="num_required must be an int >= 0"):
        nbp.request_segments(-1)
    assert nbp.get_number_of_available_memory_segments() == 10


def test_from_memory_size_rounds_down_to_whole_segments():
    nbp = NetworkBufferPool.from_memory_size(64 * 1024 * 1024 + 100)
    assert nbp.get_total_number_of_memory_segments() == 2048
    assert nbp.get_memory_segment_size() == 32768
    assert NetworkBufferPool.from_memory_size(1000, 4096).get_total_number_of_memory_segments() == 0
    with pytest.raises(ValueError):
        NetworkBufferPool.from_memory_size(-1)
    assert "available=2048/2048" in repr(nbp)


def test_concurrent_carving_destroying_and_recycling_loses_no_segment():
    nbp = NetworkBufferPool(64)
    errors = []

    def worker(seed: int) -> None:
        try:
            for round_ in range(200):
                try:
                    pool = nbp.create_buffer_pool(1, 1 + (seed + round_) % 6, f"w{seed}")
                except InsufficientNetworkBuffersError:
                    continue
                held = [pool.request_buffer() for _ in range(pool.get_number_of_buffers())]
                for buffer in held[::2]:
                    buffer.recycle_buffer()
                pool.destroy()
                for buffer in held[1::2]:
                    buffer.recycle_buffer()
                lease = nbp.request_segments(0, 3, f"lease{seed}")
                lease.recycle(min(1, lease.segments))
                lease.recycle()
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    stats = nbp.statistics()
    assert (stats.available_segments, stats.used_segments, stats.holders) == (64, 0, ())
    assert 0 < stats.peak_used_segments <= 64
