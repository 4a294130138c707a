"""SlotManager bookkeeping: registration, all-or-nothing allocation, freeing, lost
TaskExecutors and heartbeat timeouts."""

import pytest

from rill.runtime.cluster.slot_manager import SlotManager
from rill.runtime.errors import NoResourceAvailableException


def manager():
    sm = SlotManager()
    sm.register("addr-a", "te-a", "127.0.0.1", 11, 2, now=0.0)
    sm.register("addr-b", "te-b", "127.0.0.1", 12, 2, now=0.0)
    return sm


def test_allocation_fills_task_executors_in_registration_order():
    sm = manager()
    chosen = sm.allocate("job-1", 3)
    assert [(te.resource_id, slot) for te, slot in chosen] == [("te-a", 0), ("te-a", 1), ("te-b", 0)]
    assert sm.overview() == [("te-a", 2, 0, 11, "127.0.0.1"), ("te-b", 2, 1, 12, "127.0.0.1")]


def test_allocation_is_all_or_nothing_and_names_the_numbers():
    sm = manager()
    sm.allocate("job-1", 3)
    with pytest.raises(NoResourceAvailableException, match=r"needs 2 slots, 1 of the cluster's 4 slots are free"):
        sm.allocate("job-2", 2)
    assert sm.overview()[1][2] == 1  # nothing taken by the failed request


def test_free_returns_only_that_jobs_slots():
    sm = manager()
    sm.allocate("job-1", 1)
    sm.allocate("job-2", 2)
    assert sm.free("job-2") == 2
    assert [te.allocated for te in sm.task_executors.values()] == [{0: "job-1"}, {}]


def test_removing_a_task_executor_names_the_jobs_it_hosted():
    sm = manager()
    sm.allocate("job-1", 3)
    te, jobs = sm.remove("te-b")
    assert te.pid == 12 and jobs == {"job-1"}
    assert sm.remove("te-b") == (None, set())


def test_heartbeat_timeouts():
    sm = manager()
    sm.heartbeat("te-a", now=8.0)
    assert sm.timed_out(now=10.5, timeout_s=5.0) == ["te-b"]
    assert sm.heartbeat("unknown", now=1.0) is False


def test_a_task_executor_needs_a_slot():
    with pytest.raises(ValueError, match="offers 0 slots"):
        SlotManager().register("addr", "te-x", "h", 1, 0, now=0.0)


def test_the_task_executors_of_a_job_are_those_holding_its_slots():
    sm = manager()
    sm.allocate("job-1", 1)
    sm.allocate("job-2", 2)
    assert [te.resource_id for te in sm.task_executors_of("job-1")] == ["te-a"]
    assert [te.resource_id for te in sm.task_executors_of("job-2")] == ["te-a", "te-b"]
    assert sm.task_executors_of("job-3") == []
