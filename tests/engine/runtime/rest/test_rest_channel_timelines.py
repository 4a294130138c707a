"""Channel timelines recorded on demand through the REST API: ``POST
/jobs/:jobid/channel-timelines`` starts every task's recording, ``DELETE`` stops it and answers
with the files written, the same Parquet files as ``rill.network.timeline.*`` writes. Embedded
(the MiniCluster's endpoint) and cluster (the endpoint process against the session's cluster)."""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq

from rill.common import Configuration
from rill.common.configuration import ConfigOptions
from rill.common.functions import MapFunction
from rill.datastream import StreamExecutionEnvironment
from rill.graph.states import JobStatus
from rill.runtime.rest.auth import derive_bearer_token
from rill.runtime.taskmanager.channel_timeline import TIMELINE_SCHEMA
from rest_http import Http

N = 200_000  # at the slow sink's ~2,000 records/s the job runs until the test cancels it
TIMEOUT_S = 120


def _slow(x):
    time.sleep(0.0005)


def _job(env) -> None:
    conf = env.get_configuration()
    conf.set_string("taskmanager.network.records-per-buffer", "16")
    conf.set_string("rill.source.batch-size", "16")
    (env.from_collection(list(range(N))).name("Numbers")
        .map(lambda x: x).name("Identity").disable_chaining()
        .add_sink(_slow).name("Slow"))


def _records_out(http: Http, job: str, name: str) -> int:
    detail = http.get(f"/jobs/{job}")
    return next(v["metrics"]["write-records"] for v in detail["vertices"] if v["name"] == name)


def _exercise(http: Http, token: str, client, tmp_path: Path, cluster: bool) -> None:
    job = client.get_job_id()
    auth = {"Authorization": f"Bearer {token}"}
    path = f"/jobs/{job}/channel-timelines"
    target = str(tmp_path / "timelines")
    http.poll(f"/jobs/{job}", lambda b: b["vertices"] and all(v["status"] == "RUNNING" for v in b["vertices"]),
              deadline_s=TIMEOUT_S, what="every vertex RUNNING")

    status, body = http.request("POST", path, body={"interval": 5, "target-directory": target})
    assert status == 401 and body["errors"][0].startswith("Channel timelines need 'Authorization: Bearer <token>'")
    assert http.request("DELETE", path)[0] == 401
    assert http.request("POST", path, auth, {"interval": 0, "target-directory": target}) == (
        400, {"errors": ["interval must be a whole number of ms >= 1, got 0"]})
    assert http.request("POST", path, auth, {"interval": 5, "target-directory": "relative/dir"}) == (
        400, {"errors": ["target-directory must be an absolute path, got 'relative/dir'"]})
    assert http.request("POST", path, auth, {"interval": 5, "target-directory": target, "every": 1}) == (
        400, {"errors": ["Unknown field(s) every: a channel timeline request takes interval, target-directory "
                         "and duration"]})
    assert http.request("POST", f"/jobs/{'0' * 32}/channel-timelines", auth,
                        {"interval": 5, "target-directory": target})[0] == 404
    status, body = http.request("DELETE", path, auth)
    assert status == 409 and body["errors"][0].startswith("No channel timeline of job ")

    status, body = http.request("POST", path, auth, {"interval": 5, "target-directory": target})
    assert (status, body) == (202, {"interval": 5, "target-directory": target, "duration": None,
                                    "location": f"{target}/{job}"})
    status, body = http.request("POST", path, auth, {"interval": 5, "target-directory": target})
    assert status == 409 and "are recorded already (every 5 ms into" in body["errors"][0]
    start = _records_out(http, job, "Identity")
    http.poll(f"/jobs/{job}", lambda b: _records_out(http, job, "Identity") >= start + 200, deadline_s=TIMEOUT_S,
              what="200 more records through Identity while recording")
    status, body = http.request("DELETE", path, auth)
    names = ["Identity_1_1_-attempt0.parquet", "Source_Numbers_1_1_-attempt0.parquet"]
    if cluster:  # embedded, the sink has only local input channels and no output: no file
        names.insert(1, "Sink_Slow_1_1_-attempt0.parquet")
    assert (status, body) == (200, {"files": [f"{target}/{job}/{n}" for n in names]})
    assert sorted(p.name for p in (tmp_path / "timelines" / job).iterdir()) == names

    for name in names:
        table = pq.read_table(Path(target) / job / name)
        assert table.schema.equals(TIMELINE_SCHEMA, check_metadata=False)
        rows = table.to_pylist()
        task = {"Identity": "Identity (1/1)", "Source": "Source: Numbers (1/1)", "Sink": "Sink: Slow (1/1)"}[
            name.split("_")[0]]
        assert {(r["job_id"], r["task_name"], r["subtask_index"], r["attempt_number"]) for r in rows} == {
            (job, task, 0, 0)}
        # one row per channel and sample: every channel has as many rows as there were samples
        per_channel = Counter((r["side"], r["index"], r["channel"]) for r in rows)
        sides = {"Source": {"output"}, "Identity": {"output", "input"} if cluster else {"output"},
                 "Sink": {"input"}}[name.split("_")[0]]
        assert set(per_channel) == {(side, 0, 0) for side in sides}
        samples = len({r["ts"] for r in rows})
        assert set(per_channel.values()) == {samples} and samples >= 2
        for side in sides:
            side_rows = [r for r in rows if r["side"] == side]
            assert [r["ts"] for r in side_rows] == sorted({r["ts"] for r in side_rows})
            counts = [r["buffers"] for r in side_rows]
            assert counts == sorted(counts) and counts[-1] > counts[0]  # recorded while data flowed
            # embedded, every channel is local: no credit; in the cluster every one is remote
            assert all((r["credit_available"] is None) == (not cluster) for r in side_rows)
            if side == "output":
                records = [r["records"] for r in side_rows]
                assert records == sorted(records) and records[-1] > records[0]
                assert all(r["pool_total"] > 0 for r in side_rows)
            else:
                assert all(r["records"] is None and r["queued"] is not None for r in side_rows)
    # a second recording after the first stopped is accepted; the tasks write it as they end
    second = str(tmp_path / "second")
    status, body = http.request("POST", path, auth, {"interval": 50, "target-directory": second, "duration": 60_000})
    assert status == 202 and body["duration"] == 60_000
    assert http.request("PATCH", f"/jobs/{job}", auth)[0] == 202
    client.get_job_execution_result().exception(TIMEOUT_S)
    assert client.get_job_status() is JobStatus.CANCELED
    http.poll(f"/jobs/{job}", lambda b: b["state"] == "CANCELED", deadline_s=TIMEOUT_S)
    # each task wrote its file before it reported its end
    assert sorted(p.name for p in (tmp_path / "second" / job).iterdir()) == names
    for name in names:
        assert pq.read_table(Path(second) / job / name).schema.equals(TIMELINE_SCHEMA, check_metadata=False)
    status, body = http.request("DELETE", path, auth)
    assert status == 409 and "CANCELED, not RUNNING" in body["errors"][0], body


def test_channel_timelines_through_the_embedded_endpoint(embedded_rest, tmp_path):
    conf = Configuration()
    conf.set_string("rest.port", "0")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    _job(env)
    client = env.execute_async("rest channel timelines")
    try:
        _exercise(Http(client.get_web_interface_url()), embedded_rest.rest_bearer_token(), client, tmp_path, False)
    finally:
        client.cancel()


def test_channel_timelines_through_the_cluster_endpoint(cluster, cluster_rest, tmp_path):
    http, _proc = cluster_rest
    conf = Configuration()
    conf.set(ConfigOptions.EXECUTION_TARGET, cluster.address)
    conf.set(ConfigOptions.SECURITY_CLUSTER_SECRET_FILE, str(cluster.secret_file))
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    _job(env)
    client = env.execute_async("cluster rest channel timelines")
    try:
        _exercise(http, derive_bearer_token(bytes.fromhex(cluster.info()["secret_hex"])), client, tmp_path, True)
    finally:
        client.cancel()


class FailOnceWhenTold(MapFunction):
    """Passes records on; fails once, at the first record after ``<marker_dir>/go`` appears."""

    def __init__(self, marker_dir: str):
        self.marker_dir = marker_dir

    def map(self, value):
        if os.path.exists(os.path.join(self.marker_dir, "go")) and not os.path.exists(
                os.path.join(self.marker_dir, "failed")):
            Path(self.marker_dir, "failed").touch()
            raise RuntimeError(f"injected failure at record {value}")
        return value


def _restart_while_recording(http: Http, token: str, client, tmp_path: Path, markers: Path, cluster: bool) -> None:
    """The tasks of the failed attempt write their files as they end; those of the next attempt
    record from their start and write theirs when the recording stops."""
    job = client.get_job_id()
    auth = {"Authorization": f"Bearer {token}"}
    target = str(tmp_path / "timelines")
    all_running = lambda b: b["vertices"] and all(v["status"] == "RUNNING" for v in b["vertices"])  # noqa: E731
    http.poll(f"/jobs/{job}", all_running, deadline_s=TIMEOUT_S, what="every vertex RUNNING")
    assert http.request("POST", f"/jobs/{job}/channel-timelines", auth,
                        {"interval": 5, "target-directory": target})[0] == 202
    (markers / "go").touch()
    http.poll(f"/jobs/{job}/exceptions", lambda e: len(e["exceptionHistory"]["entries"]) == 1,
              deadline_s=TIMEOUT_S, what="the injected failure")
    http.poll(f"/jobs/{job}", lambda b: b["state"] == "RUNNING" and all_running(b)
              and _records_out(http, job, "Identity") >= 200, deadline_s=TIMEOUT_S,
              what="the restarted attempt running with 200 records through Identity")
    status, body = http.request("DELETE", f"/jobs/{job}/channel-timelines", auth)
    names = ["Identity_1_1_-attempt{}.parquet", "Source_Numbers_1_1_-attempt{}.parquet"]
    if cluster:
        names.insert(1, "Sink_Slow_1_1_-attempt{}.parquet")
    assert (status, body) == (200, {"files": [f"{target}/{job}/{n.format(1)}" for n in names]})
    assert sorted(p.name for p in Path(target, job).iterdir()) == sorted(n.format(a) for n in names for a in (0, 1))
    for name in names:
        for attempt in (0, 1):
            rows = pq.read_table(Path(target, job, name.format(attempt))).to_pylist()
            assert rows and {r["attempt_number"] for r in rows} == {attempt}


def _restarting_job(env, markers: Path) -> None:
    conf = env.get_configuration()
    conf.set_string("restart-strategy.type", "fixed-delay")
    conf.set_string("restart-strategy.fixed-delay.attempts", "1")
    conf.set_string("restart-strategy.fixed-delay.delay", "0")
    conf.set_string("taskmanager.network.records-per-buffer", "16")
    conf.set_string("rill.source.batch-size", "16")
    (env.from_collection(list(range(N))).name("Numbers")
        .map(FailOnceWhenTold(str(markers))).name("Identity").disable_chaining()
        .add_sink(_slow).name("Slow"))


def test_a_restart_while_recording_embedded(embedded_rest, tmp_path):
    markers = tmp_path / "markers"
    markers.mkdir()
    conf = Configuration()
    conf.set_string("rest.port", "0")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    _restarting_job(env, markers)
    client = env.execute_async("rest channel timelines restart")
    try:
        _restart_while_recording(Http(client.get_web_interface_url()), embedded_rest.rest_bearer_token(), client,
                                 tmp_path, markers, False)
    finally:
        client.cancel()
        client.wait(TIMEOUT_S)


def test_a_restart_while_recording_cluster(cluster, cluster_rest, tmp_path):
    markers = tmp_path / "markers"
    markers.mkdir()
    http, _proc = cluster_rest
    conf = Configuration()
    conf.set(ConfigOptions.EXECUTION_TARGET, cluster.address)
    conf.set(ConfigOptions.SECURITY_CLUSTER_SECRET_FILE, str(cluster.secret_file))
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    _restarting_job(env, markers)
    client = env.execute_async("cluster rest channel timelines restart")
    try:
        _restart_while_recording(http, derive_bearer_token(bytes.fromhex(cluster.info()["secret_hex"])), client,
                                 tmp_path, markers, True)
    finally:
        client.cancel()
        client.wait(TIMEOUT_S)
