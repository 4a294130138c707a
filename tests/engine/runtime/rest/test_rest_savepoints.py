"""Savepoints through the REST API, with Flink's shapes: ``POST /jobs/:jobid/savepoints``
(``target-directory``, ``cancel-job``) and ``POST /jobs/:jobid/stop`` (``targetDirectory``,
``drain``) answer 202 ``{"request-id"}`` and need the bearer token; ``GET
/jobs/:jobid/savepoints/:triggerid`` gives ``{"status": {"id"}, "operation": {"location"} |
{"failure-cause"}}``. Embedded (the MiniCluster's endpoint) and cluster (the endpoint process
against the session's cluster)."""

from __future__ import annotations

import time
from pathlib import Path

from rill.common import Configuration
from rill.common.configuration import ConfigOptions
from rill.common.functions import MapFunction
from rill.datastream import StreamExecutionEnvironment
from rill.graph.states import JobStatus
from rill.runtime.checkpoint.checkpoint_stats import CheckpointStatsStatus, CheckpointStatsTracker
from rill.runtime.rest import messages
from rill.runtime.rest.auth import derive_bearer_token
from rill.state.checkpoint.filesystem import resolve_checkpoint_pointer
import flink_fields as F
from rest_http import Http

N = 3000
TIMEOUT_S = 120


class Slow(MapFunction):
    def map(self, value):
        time.sleep(0.003)
        return value


def _slow_job(env) -> None:
    env.enable_checkpointing(100)
    env.get_configuration().set_string("rill.source.batch-size", "10")
    # one source subtask: a parallel one without a split would finish at once
    env.set_parallelism(1)
    env.from_collection(list(range(N))).map(Slow()).key_by(lambda i: i % 3).reduce(lambda a, b: a + b) \
        .set_parallelism(2).add_sink(lambda v: None).set_parallelism(2)


def _wait_running(client) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        stats = client.get_checkpoint_stats()
        if stats is not None and any(c.status is CheckpointStatsStatus.COMPLETED for c in stats.history):
            return
        assert not client.is_done(), "the job ended before its first checkpoint"
        time.sleep(0.02)
    raise AssertionError("no checkpoint completed")


def _exercise(http: Http, token: str, client, tmp_path: Path) -> None:
    job = client.get_job_id()
    auth = {"Authorization": f"Bearer {token}"}
    status, body = http.request("POST", f"/jobs/{job}/savepoints", body={"target-directory": str(tmp_path / "sp")})
    assert status == 401 and body["errors"][0].startswith("Savepoints need 'Authorization: Bearer <token>'")
    status, body = http.request("POST", f"/jobs/{job}/savepoints", auth, {"target-directory": 7})
    assert (status, body) == (400, {"errors": ["target-directory must be a string, got 7"]})
    status, body = http.request("POST", f"/jobs/{job}/savepoints", auth, {"cancel-job": "yes"})
    assert (status, body) == (400, {"errors": ["cancel-job must be a boolean, got 'yes'"]})
    status, body = http.request("POST", f"/jobs/{'0' * 32}/savepoints", auth, {})
    assert status == 404
    status, body = http.request("POST", f"/jobs/{job}/savepoints", auth,
                                {"target-directory": str(tmp_path / "sp"), "cancel-job": False})
    assert status == 202 and list(body) == ["request-id"]
    done = http.poll(f"/jobs/{job}/savepoints/{body['request-id']}", lambda b: b["status"]["id"] == "COMPLETED",
                     deadline_s=TIMEOUT_S)
    location = done["operation"]["location"]
    assert Path(location).parent == tmp_path / "sp" and resolve_checkpoint_pointer(location).checkpoint_id > 0
    status, body = http.request("POST", f"/jobs/{job}/stop", auth, {"drain": False})  # no directory anywhere
    failed = http.poll(f"/jobs/{job}/savepoints/{body['request-id']}", lambda b: b["status"]["id"] == "COMPLETED",
                       deadline_s=TIMEOUT_S)
    assert "No savepoint directory" in failed["operation"]["failure-cause"]["stack-trace"]
    status, body = http.request("POST", f"/jobs/{job}/stop", auth,
                                {"targetDirectory": str(tmp_path / "stop"), "drain": True})
    assert status == 202
    stopped = http.poll(f"/jobs/{job}/savepoints/{body['request-id']}", lambda b: b["status"]["id"] == "COMPLETED",
                        deadline_s=TIMEOUT_S)
    assert Path(stopped["operation"]["location"]).parent == tmp_path / "stop"
    client.get_job_execution_result().result(TIMEOUT_S)
    assert client.get_job_status() is JobStatus.FINISHED
    assert http.request("GET", f"/jobs/{job}/savepoints/{'a' * 32}")[0] == 404
    # the final checkpoint statistics (Flink's CheckpointingStatistics), as the JobClient gives them
    stats = client.get_checkpoint_stats()
    body = http.poll(f"/jobs/{job}/checkpoints", lambda b: b["counts"]["total"] == stats.counts.number_of_total_checkpoints,
                     deadline_s=TIMEOUT_S)
    assert body.keys() == F.CHECKPOINTING_STATISTICS and body["counts"].keys() == F.CHECKPOINT_COUNTS
    assert body["summary"].keys() == F.CHECKPOINT_SUMMARY and body["latest"].keys() == F.LATEST_CHECKPOINTS
    assert all(v.keys() == F.STATS_SUMMARY for v in body["summary"].values())
    fields = {"COMPLETED": F.COMPLETED_CHECKPOINT_STATISTICS, "FAILED": F.FAILED_CHECKPOINT_STATISTICS}
    assert body["history"] and all(h.keys() == fields[h["status"]] for h in body["history"])
    assert body["latest"]["completed"].keys() == F.COMPLETED_CHECKPOINT_STATISTICS
    assert body["counts"] == {"restored": 0, "total": stats.counts.number_of_total_checkpoints,
                              "in_progress": 0, "completed": stats.counts.number_of_completed_checkpoints,
                              "failed": stats.counts.number_of_failed_checkpoints}
    assert [h["id"] for h in body["history"]] == [c.checkpoint_id for c in stats.history]
    # savepoints are told apart (Flink's is_savepoint, savepointFormat, RestAPICheckpointType) and
    # latest.savepoint is the stop's, latest.completed the newest checkpoint (not a savepoint)
    kinds = {resolve_checkpoint_pointer(location).checkpoint_id: "SAVEPOINT",
             resolve_checkpoint_pointer(stopped["operation"]["location"]).checkpoint_id: "SYNC_SAVEPOINT"}
    history = {h["id"]: (h["is_savepoint"], h["savepointFormat"], h["checkpoint_type"]) for h in body["history"]}
    assert history == {i: (True, "CANONICAL", kinds[i]) if i in kinds else (False, None, "CHECKPOINT")
                       for i in history}
    assert max(history) in kinds  # the stop's savepoint came last
    savepoint = body["latest"]["savepoint"]
    assert savepoint.keys() == F.COMPLETED_CHECKPOINT_STATISTICS
    assert (savepoint["external_path"], savepoint["is_savepoint"], savepoint["checkpoint_type"]) == (
        stopped["operation"]["location"], True, "SYNC_SAVEPOINT")
    assert body["latest"]["completed"]["id"] not in kinds and body["latest"]["completed"]["is_savepoint"] is False
    assert body["latest"]["completed"]["id"] == stats.latest_completed.checkpoint_id
    assert body["summary"]["end_to_end_duration"].keys() == {"min", "max", "avg", "p50", "p90", "p95", "p99", "p999"}


def _cancel_with_savepoint(http: Http, token: str, client, tmp_path: Path) -> None:
    """``"cancel-job": true``: the savepoint completes, then the job is CANCELED (Flink's
    cancel-with-savepoint); no checkpoint follows the savepoint."""
    job = client.get_job_id()
    status, body = http.request("POST", f"/jobs/{job}/savepoints", {"Authorization": f"Bearer {token}"},
                                {"target-directory": str(tmp_path / "cancel"), "cancel-job": True})
    assert status == 202 and list(body) == ["request-id"]
    done = http.poll(f"/jobs/{job}/savepoints/{body['request-id']}", lambda b: b["status"]["id"] == "COMPLETED",
                     deadline_s=TIMEOUT_S)
    location = done["operation"]["location"]
    assert Path(location).parent == tmp_path / "cancel"
    savepoint_id = resolve_checkpoint_pointer(location).checkpoint_id
    client.wait(TIMEOUT_S)
    assert client.get_job_status() is JobStatus.CANCELED
    assert http.poll(f"/jobs/{job}", lambda b: b["state"] == "CANCELED", deadline_s=TIMEOUT_S)["state"] == "CANCELED"
    stats = client.get_checkpoint_stats()
    assert max(c.checkpoint_id for c in stats.history) == savepoint_id
    assert stats.latest_savepoint.external_path == location and stats.latest_savepoint.is_savepoint
    assert not stats.latest_completed.is_savepoint and stats.latest_completed.checkpoint_id < savepoint_id


def _with_a_finished_source(env) -> None:
    """A 3-record source ("Short", uid ``short``) that ends at once, unioned with the slow job's
    input that keeps the job running (FLIP-147: the job stays checkpointable)."""
    env.enable_checkpointing(100)
    env.get_configuration().set_string("rill.source.batch-size", "10")
    env.set_parallelism(1)
    short = env.from_collection([-1, -2, -3]).uid("short").name("Short")
    short.union(env.from_collection(list(range(N))).map(Slow())).key_by(lambda i: i % 3) \
        .reduce(lambda a, b: a + b).add_sink(lambda v: None)


def _wait_short_finished(client) -> None:
    """A checkpoint completed without the short source: it finished, the rest runs."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        stats = client.get_checkpoint_stats()
        if stats is not None and any(c.status is CheckpointStatsStatus.COMPLETED
                                     and "Source: Short" not in {s.task_name for s in c.subtask_stats}
                                     for c in stats.history):
            return
        assert not client.is_done(), "the job ended before the short source finished"
        time.sleep(0.02)
    raise AssertionError("no checkpoint completed after the short source finished")


def _savepoint_after_a_source_finished(http: Http, token: str, client, tmp_path: Path) -> None:
    """``POST /jobs/:id/savepoints`` once a source finished completes (it was refused before
    FLIP-147's savepoints); the metadata holds that source fully finished; the job runs on."""
    _wait_short_finished(client)
    job = client.get_job_id()
    status, body = http.request("POST", f"/jobs/{job}/savepoints", {"Authorization": f"Bearer {token}"},
                                {"target-directory": str(tmp_path / "sp")})
    assert status == 202
    done = http.poll(f"/jobs/{job}/savepoints/{body['request-id']}", lambda b: b["status"]["id"] == "COMPLETED",
                     deadline_s=TIMEOUT_S)
    assert "operation" in done and "location" in done["operation"], done
    short = [op for op in resolve_checkpoint_pointer(done["operation"]["location"]).operator_states.values()
             if op.uid == "short"]
    assert [(op.fully_finished, op.subtask_states) for op in short] == [(True, {})]
    client.get_job_execution_result().result(TIMEOUT_S)
    assert client.get_job_status() is JobStatus.FINISHED


def test_a_savepoint_after_a_source_finished_through_the_embedded_endpoint(embedded_rest, tmp_path):
    conf = Configuration()
    conf.set_string("rest.port", "0")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    _with_a_finished_source(env)
    client = env.execute_async("rest savepoint after a source finished")
    _savepoint_after_a_source_finished(Http(client.get_web_interface_url()), embedded_rest.rest_bearer_token(),
                                       client, tmp_path)


def test_a_savepoint_after_a_source_finished_through_the_cluster_endpoint(cluster, cluster_rest, tmp_path):
    conf = Configuration()
    conf.set(ConfigOptions.EXECUTION_TARGET, cluster.address)
    conf.set(ConfigOptions.SECURITY_CLUSTER_SECRET_FILE, str(cluster.secret_file))
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    _with_a_finished_source(env)
    client = env.execute_async("cluster rest savepoint after a source finished")
    _savepoint_after_a_source_finished(cluster_rest[0], _cluster_token(cluster), client, tmp_path)


def _running_embedded(name: str):
    """The slow job, running on the embedded MiniCluster with its REST endpoint on."""
    conf = Configuration()
    conf.set_string("rest.port", "0")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    _slow_job(env)
    client = env.execute_async(name)
    _wait_running(client)
    return client


def _running_on(cluster, name: str):
    """The slow job, running on the shared cluster."""
    conf = Configuration()
    conf.set(ConfigOptions.EXECUTION_TARGET, cluster.address)
    conf.set(ConfigOptions.SECURITY_CLUSTER_SECRET_FILE, str(cluster.secret_file))
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    _slow_job(env)
    client = env.execute_async(name)
    _wait_running(client)
    return client


def _cluster_token(cluster) -> str:
    return derive_bearer_token(bytes.fromhex(cluster.info()["secret_hex"]))


def test_cancel_with_savepoint_through_the_embedded_endpoint(embedded_rest, tmp_path):
    client = _running_embedded("rest cancel with savepoint")
    _cancel_with_savepoint(Http(client.get_web_interface_url()), embedded_rest.rest_bearer_token(), client, tmp_path)


def test_cancel_with_savepoint_through_the_cluster_endpoint(cluster, cluster_rest, tmp_path):
    client = _running_on(cluster, "cluster rest cancel with savepoint")
    _cancel_with_savepoint(cluster_rest[0], _cluster_token(cluster), client, tmp_path)


def test_savepoints_through_the_embedded_endpoint(embedded_rest, tmp_path):
    client = _running_embedded("rest savepoints")
    _exercise(Http(client.get_web_interface_url()), embedded_rest.rest_bearer_token(), client, tmp_path)


def test_savepoints_through_the_cluster_endpoint(cluster, cluster_rest, tmp_path):
    client = _running_on(cluster, "cluster rest savepoints")
    _exercise(cluster_rest[0], _cluster_token(cluster), client, tmp_path)


def test_checkpoint_statistics_of_a_job_without_checkpointing_are_404(embedded_rest):
    conf = Configuration()
    conf.set_string("rest.port", "0")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.from_collection([1, 2]).add_sink(lambda v: None)
    client = env.execute_async("no checkpoints")
    client.get_job_execution_result().result(TIMEOUT_S)
    status, body = Http(client.get_web_interface_url()).request("GET", f"/jobs/{client.get_job_id()}/checkpoints")
    assert (status, body) == (404, {"errors": [f"Checkpointing is not enabled for job {client.get_job_id()}"]})


def test_a_failed_checkpoint_carries_flinks_failed_fields():
    """``FailedCheckpointStatistics``: ``failure_timestamp`` (the trigger plus the end-to-end
    duration the tracker ended at the failure) and ``failure_message``; no completed fields."""
    tracker = CheckpointStatsTracker()
    tracker.report_pending_checkpoint(7, 1_000, 3)
    tracker.report_failed_checkpoint(7, 1_250, "Checkpoint expired before completing.")
    body = messages.checkpointing_statistics(tracker.create_snapshot())
    [failed] = body["history"]
    assert failed.keys() == F.FAILED_CHECKPOINT_STATISTICS and body["latest"]["failed"] == failed
    assert (failed["className"], failed["id"], failed["status"], failed["trigger_timestamp"],
            failed["end_to_end_duration"], failed["failure_timestamp"], failed["failure_message"]) == (
        ".FailedCheckpointStatistics", 7, "FAILED", 1_000, 250, 1_250, "Checkpoint expired before completing.")
    assert body["counts"] == {"restored": 0, "total": 1, "in_progress": 0, "completed": 0, "failed": 1}
    assert body["latest"]["completed"] is None
    assert failed["checkpoint_type"] == "CHECKPOINT"  # Flink's RestAPICheckpointType (UNALIGNED_CHECKPOINT too)
