"""The REST API of cluster mode: the endpoint process (``rill.runtime.rest.cluster_endpoint``)
against the session's real local cluster: every read endpoint with Flink's field names for a
back-pressured job, its root cause, cancel with the token derived from the cluster's secret, a
finished and a failed job's figures and exceptions, the OpenAPI description and the dashboard
page, and the process stopping on SIGTERM. (Savepoints, checkpoints and channel timelines:
``test_rest_savepoints.py`` and ``test_rest_channel_timelines.py``; ``/metrics``:
``test_prometheus.py``.)"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import flink_fields as F
from rest_http import Http
from rill.common import Configuration
from rill.common.configuration import ConfigOptions
from rill.datastream import StreamExecutionEnvironment
from rill.runtime.rest.auth import derive_bearer_token


def test_cluster_job_through_the_rest_endpoint_process(cluster, cluster_rest):
    http, proc = cluster_rest
    conf = Configuration()
    conf.set(ConfigOptions.EXECUTION_TARGET, cluster.address)
    conf.set(ConfigOptions.SECURITY_CLUSTER_SECRET_FILE, str(cluster.secret_file))
    conf.set_string("taskmanager.network.records-per-buffer", "32")
    conf.set_string("rill.source.batch-size", "32")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(1)
    (env.from_sequence(1, 10**9).name("Numbers")
        .map(lambda x: x).name("Identity").disable_chaining()
        .key_by(lambda x: 0)
        .add_sink(lambda x: time.sleep(0.001)).name("Slow").set_parallelism(2))
    client = env.execute_async("cluster rest")
    job_id = client.get_job_id()
    try:
        detail = http.poll(f"/jobs/{job_id}", lambda d: d["backpressure-root-cause"] is not None
                           and d["vertices"][0]["metrics"]["write-records"] > 0, deadline_s=120,
                           what="root cause named on the cluster")
        assert F.JOB_DETAILS <= detail.keys() and detail["state"] == "RUNNING"
        source, identity, sink = detail["vertices"]
        assert [v["name"] for v in detail["vertices"]] == ["Source: Numbers", "Identity", "Sink: Slow"]
        assert all(F.JOB_DETAILS_VERTEX <= v.keys() and F.IO_METRICS <= v["metrics"].keys()
                   and v["status"] == "RUNNING" for v in detail["vertices"])
        plan = http.get(f"/jobs/{job_id}/plan")["plan"]
        assert F.PLAN <= plan.keys() and plan["jid"] == job_id
        assert sorted(n["id"] for n in plan["nodes"]) == sorted(v["id"] for v in detail["vertices"])
        assert all(F.PLAN_NODE <= n.keys() and all(F.PLAN_INPUT <= i.keys() for i in n.get("inputs", []))
                   for n in plan["nodes"])
        exc = http.get(f"/jobs/{job_id}/exceptions")
        assert F.EXCEPTIONS <= exc.keys() and exc["root-exception"] is None and exc["exceptionHistory"]["entries"] == []
        sd = http.get(f"/jobs/{job_id}/vertices/{sink['id']}")
        assert F.VERTEX_DETAILS <= sd.keys() and [s["subtask"] for s in sd["subtasks"]] == [0, 1]
        assert all(F.SUBTASK_ATTEMPT <= s.keys() and F.IO_METRICS <= s["metrics"].keys() for s in sd["subtasks"])
        assert {s["taskmanager-id"] for s in sd["subtasks"]} <= {"taskexecutor-0", "taskexecutor-1"}
        busy = [s["subtask"] for s in sd["subtasks"] if s["metrics"]["read-records"] > 0]
        cause = detail["backpressure-root-cause"]
        assert (cause["vertex-name"], [cause["subtask"]]) == ("Sink: Slow", busy)
        # remote exchanges count bytes (Rill's local ones do not)
        assert http.get(f"/jobs/{job_id}/vertices/{identity['id']}")["subtasks"][0]["metrics"]["read-bytes"] > 0
        bp = http.get(f"/jobs/{job_id}/vertices/{source['id']}/backpressure")
        assert F.BACKPRESSURE <= bp.keys() and bp["subtasks"][0].keys() >= F.SUBTASK_BACKPRESSURE
        assert {"id": job_id, "status": "RUNNING"} in http.get("/jobs")["jobs"]
        assert F.JOB_OVERVIEW <= http.get("/jobs/overview")["jobs"][0].keys()
        tms = http.get("/taskmanagers")["taskmanagers"]
        assert sorted(t["id"] for t in tms) == ["taskexecutor-0", "taskexecutor-1"]
        assert all(F.TASKMANAGER <= t.keys() and t["slotsNumber"] == cluster.slots for t in tms)
        ov = http.get("/overview")
        assert (ov["taskmanagers"], ov["slots-total"], ov["jobs-running"]) == (2, 2 * cluster.slots, 1)
        wms = http.get(f"/jobs/{job_id}/vertices/{sink['id']}/watermarks")
        assert [w["id"] for w in wms] == ["0.currentInputWatermark", "1.currentInputWatermark"]
        assert all(w.keys() == F.WATERMARK for w in wms)
        assert F.CONFIG <= http.get("/config").keys() and F.OVERVIEW <= ov.keys()
        assert "/jobs/{jobid}/channel-timelines" in http.get("/openapi.json")["paths"]
        page = http.request("GET", "/")[1]
        assert page.startswith("<!DOCTYPE html>") and 'id="checkpoints"' in page
        assert client.get_backpressure_root_cause().vertex_name == "Sink: Slow"

        status, _ = http.request("PATCH", f"/jobs/{job_id}")
        assert status == 401
        token = derive_bearer_token(bytes.fromhex(cluster.info()["secret_hex"]))
        status, body = http.request("PATCH", f"/jobs/{job_id}", {"Authorization": f"Bearer {token}"})
        assert (status, body) == (202, {})
        http.poll(f"/jobs/{job_id}", lambda d: d["state"] == "CANCELED", deadline_s=60, what="CANCELED")
        assert client.wait(60).name == "CANCELED"
        status, body = http.request("GET", "/jobs/" + "e" * 32)
        assert status == 404 and body.keys() == F.ERROR
    finally:
        client.cancel()
        client.wait(60)
    cluster.wait_no_task_processes()


def test_rill_cluster_start_and_stop_run_the_endpoint_when_rest_port_is_set(local_cluster, tmp_path):
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "config.yaml").write_text("rest.port: 0\n")
    c = local_cluster(task_executors=1, slots=1, extra_env={"RILL_CONF_DIR": str(conf_dir)})
    info = json.loads((c.run_dir / f"rest-{c.port}.json").read_text())
    assert info["url"].startswith("http://127.0.0.1:")
    ov = Http(info["url"]).get("/overview")
    assert (ov["taskmanagers"], ov["slots-total"], ov["jobs-running"]) == (1, 1, 0)
    c.stop()
    assert not (c.run_dir / f"rest-{c.port}.json").exists()
    assert not _alive(info["pid"])


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_cancel_of_an_unknown_job_through_the_endpoint_is_404(cluster, cluster_rest):
    """Regression: the endpoint read ``ClusterClient.cancel``'s reply as a bool; it is a
    ``CancelAck`` whose ``known`` says whether the cluster knows the job."""
    http, _proc = cluster_rest
    token = derive_bearer_token(bytes.fromhex(cluster.info()["secret_hex"]))
    status, body = http.request("PATCH", f"/jobs/{'0' * 32}", {"Authorization": f"Bearer {token}"})
    assert (status, body) == (404, {"errors": [f"Job {'0' * 32} not found"]})


def test_finished_and_failed_cluster_jobs_through_the_endpoint(cluster, cluster_rest):
    """Exact records of a finished job, and a failed job's exception with Flink's fields."""
    http, _proc = cluster_rest
    conf = Configuration()
    conf.set(ConfigOptions.EXECUTION_TARGET, cluster.address)
    conf.set(ConfigOptions.SECURITY_CLUSTER_SECRET_FILE, str(cluster.secret_file))
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    (env.from_collection(list(range(1000))).name("Numbers")
        .map(lambda x: x * 2).name("Double")
        .key_by(lambda x: x % 7).reduce(lambda a, b: a + b).name("Sum")
        .add_sink(lambda x: None).name("Drop"))
    done = env.execute_async("cluster rest finished")
    done.get_job_execution_result().result(120)
    detail = http.poll(f"/jobs/{done.get_job_id()}", lambda d: d["state"] == "FINISHED", deadline_s=60)
    assert [(v["name"], v["parallelism"], v["status"], v["metrics"]["read-records"], v["metrics"]["write-records"])
            for v in detail["vertices"]] == [("Source: Numbers", 1, "FINISHED", 0, 1000),
                                             ("Double", 2, "FINISHED", 1000, 1000),
                                             ("Sum -> Sink: Drop", 2, "FINISHED", 1000, 0)]
    assert detail["status-counts"]["FINISHED"] == 5 and detail["backpressure-root-cause"] is None
    assert {"id": done.get_job_id(), "status": "FINISHED"} in http.get("/jobs")["jobs"]

    def boom(x):
        if x == 3:
            raise ValueError("record 3 is bad")
        return x

    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(1)
    env.from_collection([1, 2, 3, 4]).map(boom).name("Boom").add_sink(lambda x: None)
    failing = env.execute_async("cluster rest failing")
    failing.wait(120)
    job_id = failing.get_job_id()
    exc = http.poll(f"/jobs/{job_id}/exceptions", lambda e: e["root-exception"] is not None, deadline_s=60)
    assert F.EXCEPTIONS <= exc.keys() and "record 3 is bad" in exc["root-exception"]
    [entry] = exc["exceptionHistory"]["entries"]
    assert F.EXCEPTION_ENTRY <= entry.keys() and entry["exceptionName"] == "ValueError"
    assert "Boom" in entry["taskName"] and "(1/1)" in entry["taskName"]
    assert entry["taskManagerId"] in {"taskexecutor-0", "taskexecutor-1"}
    assert http.get(f"/jobs/{job_id}")["state"] == "FAILED" and http.get("/overview")["jobs-failed"] >= 1
