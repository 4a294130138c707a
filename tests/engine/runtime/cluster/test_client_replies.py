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
