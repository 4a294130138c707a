"""Job status as a JobClient sees it: RUNNING -> FINISHED, -> CANCELED after cancel, -> FAILED
after a failure; and no task thread outlives its job."""

from __future__ import annotations

import time

import pytest

from _ds_helpers import EndlessSource, assert_threads_gone, task_names
from rill.common import JobStatus
from rill.runtime.errors import JobCancellationException, JobExecutionException


def _statuses_until_done(client, timeout_s=120.0, action=None):
    """Distinct statuses seen while polling (in order), running ``action`` once, as soon as
    the job is seen RUNNING (a condition: a loaded cluster client may still report CREATED
    for a while after ``execute_async`` returned)."""
    seen = [client.get_job_status()]
    started = time.monotonic()
    acted = False
    while not client.is_done():
        if time.monotonic() - started > timeout_s:
            client.cancel()
            pytest.fail("job did not end")
        if action is not None and not acted and seen[-1] is JobStatus.RUNNING:
            action()
            acted = True
        status = client.get_job_status()
        if status is not seen[-1]:
            seen.append(status)
        time.sleep(0.002)
    final = client.get_job_status()
    if final is not seen[-1]:
        seen.append(final)
    return seen


def _after_created(seen):
    """The statuses from RUNNING on: Flink's JobStatus starts at CREATED, which a cluster client
    reports until the job's first status report arrives (the embedded JobMaster is RUNNING
    when ``execute_async`` returns)."""
    return seen[1:] if seen and seen[0] is JobStatus.CREATED else seen


def _slow(x):
    time.sleep(0.001)
    return x


def test_running_then_finished(env):
    env.set_parallelism(2)
    env.from_sequence(1, 300).map(_slow).key_by(lambda x: x % 3).sum().add_sink(lambda v: None)
    client = env.execute_async("finishes")
    seen = _after_created(_statuses_until_done(client))
    assert seen == [JobStatus.RUNNING, JobStatus.FINISHED]
    assert client.get_job_execution_result().result(timeout=1).get_job_id() == client.get_job_id()
    assert_threads_gone(task_names(client))


def test_running_then_canceled(env):
    env.set_parallelism(2)
    env.from_source(EndlessSource(), source_name="Endless").rebalance().map(lambda x: x) \
        .add_sink(lambda v: None)
    client = env.execute_async("cancelled")
    seen = _after_created(_statuses_until_done(client, action=client.cancel))
    assert seen[0] is JobStatus.RUNNING and seen[-1] is JobStatus.CANCELED
    assert set(seen) <= {JobStatus.RUNNING, JobStatus.CANCELLING, JobStatus.CANCELED}
    with pytest.raises(JobCancellationException):
        client.get_job_execution_result().result(timeout=1)
    names = task_names(client)
    assert names == ["Map -> Sink: Unnamed", "Source: Endless"]
    assert_threads_gone(names)


def test_running_then_failed(env):
    def fail_late(x):
        if x == 250:
            raise ArithmeticError("late failure")
        return _slow(x)

    env.from_sequence(1, 300).map(fail_late).add_sink(lambda v: None)
    client = env.execute_async("fails")
    seen = _after_created(_statuses_until_done(client))
    assert seen[0] is JobStatus.RUNNING and seen[-1] is JobStatus.FAILED
    assert set(seen) <= {JobStatus.RUNNING, JobStatus.FAILING, JobStatus.FAILED}
    with pytest.raises(JobExecutionException, match="late failure"):
        client.get_job_execution_result().result(timeout=1)
    assert_threads_gone(task_names(client))


def test_cancel_after_the_end_changes_nothing(env):
    env.from_collection([1, 2]).add_sink(lambda v: None)
    client = env.execute_async("done")
    client.get_job_execution_result().result(timeout=30)
    client.cancel().result(timeout=5)
    assert client.get_job_status() is JobStatus.FINISHED


def test_many_jobs_in_a_row_leave_no_threads(env):
    for i in range(20):
        env.from_sequence(0, 99).map(lambda x: x + 1).key_by(lambda x: x % 5).sum() \
            .add_sink(lambda v: None)
        client = env.execute_async(f"job {i}")
        client.get_job_execution_result().result(timeout=30)
    assert_threads_gone(["Source: Sequence Source", "Sum"])
