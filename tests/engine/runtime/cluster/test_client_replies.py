"""The cluster client takes a reply only for the request it answers: Thespian's
``ActorSystem.ask`` returns whatever arrives next, so a reply that comes after its ask timed out
would otherwise be taken as the next ask's (seen under load: ``leaders()`` got a
``JobStatusReport`` and a ``with execute_and_collect()`` could not cancel its job)."""

from __future__ import annotations

import pytest

from rill.runtime.cluster import messages as m
from rill.runtime.cluster.client import ClusterClient, answers
from rill.runtime.cluster.actor_system import ClusterNotRunningError


def test_a_late_reply_is_not_taken_for_the_next_asks(cluster):
    client = ClusterClient("127.0.0.1", cluster.port, bytes.fromhex(cluster.info()["secret_hex"]))
    dispatcher = client.dispatcher
    # answered (UnknownJob) after the ask gave up: the reply arrives during the next asks
    with pytest.raises(ClusterNotRunningError, match="did not answer RequestJobStatus"):
        client.ask(dispatcher, m.RequestJobStatus("0" * 32), 1e-9)
    with pytest.raises(ClusterNotRunningError, match="did not answer RequestJobStatus"):
        client.ask(dispatcher, m.RequestJobStatus("1" * 32), 1e-9)
    leaders = client.leaders()
    assert isinstance(leaders, m.Leaders) and leaders.dispatcher is not None
    report = client.job_report("2" * 32)
    assert isinstance(report, m.UnknownJob) and report.job_id == "2" * 32
    ack = client.cancel("3" * 32)
    assert ack == m.CancelAck("3" * 32, False, None)


def test_what_answers_what():
    assert answers(m.RequestLeaders())(m.Leaders(None, None))
    assert not answers(m.RequestLeaders())(m.UnknownJob("a"))
    assert answers(m.RequestJobStatus("a"))(m.UnknownJob("a"))
    assert not answers(m.RequestJobStatus("a"))(m.UnknownJob("b"))
    assert not answers(m.CancelJob("a"))(m.CancelAck("b", False))
    assert answers(m.RequestSavepointStatus("a", "t"))(m.SavepointStatusReport("a", "t", "COMPLETED"))
    assert not answers(m.RequestSavepointStatus("a", "t"))(m.SavepointStatusReport("a", "u", "COMPLETED"))
    assert answers(m.TriggerSavepoint("a"))(m.SavepointTriggered("a", "t"))


def _sleepy(x):
    import time  # noqa: PLC0415 - shipped to the task process by value
    time.sleep(0.01)
    return x


def test_a_job_client_polls_the_dispatcher_without_looking_it_up_again(cluster):
    """The job's poller asks the supervisor for the Dispatcher once, then only the Dispatcher
    (a lookup per poll doubled the control messages while a job ran). Observed on the real
    client: its ``leaders`` and ``ask`` are wrapped to count the calls, which still go through."""
    import threading  # noqa: PLC0415

    from rill.runtime.errors import JobCancellationException  # noqa: PLC0415

    env = cluster.environment()
    env.from_collection(list(range(100_000))).map(_sleepy).print()
    job = env.execute_async("polled")
    client = job._client
    polls, lookups, seen = [], [], threading.Condition()
    leaders, ask = client.leaders, client.ask

    def counting_leaders(*args, **kwargs):
        lookups.append(threading.current_thread().name)
        return leaders(*args, **kwargs)

    def counting_ask(target, message, *args, **kwargs):
        reply = ask(target, message, *args, **kwargs)
        if isinstance(message, m.RequestJobStatus) and message.job_id == job.get_job_id():
            with seen:
                polls.append(reply)
                seen.notify_all()
        return reply

    client.leaders, client.ask = counting_leaders, counting_ask
    try:
        with seen:
            assert seen.wait_for(lambda: len(polls) >= 10, timeout=30), f"only {len(polls)} polls in 30 s"
        poller = f"rill-job-{job.get_job_id()[:8]}"
        assert poller not in lookups, f"the poller looked the Dispatcher up again: {lookups}"
        assert all(isinstance(r, m.JobStatusReport) for r in polls)
    finally:
        del client.leaders, client.ask
        job.cancel()
    with pytest.raises(JobCancellationException):
        job.get_job_execution_result().result(30)
    cluster.wait_no_task_processes()
