"""The REST API over real HTTP on localhost against jobs of the embedded MiniCluster: Flink's
field names, exact figures of a finished job, a back-pressured job's levels and root cause,
cancel with and without the token, errors, the OpenAPI description."""

from __future__ import annotations

import re
import time

import pytest

import flink_fields as F
from rest_http import Http
from rill.common import Configuration
from rill.cli import main
from rill.datastream import StreamExecutionEnvironment
from rill.runtime.reporting import format_summary


def _env(parallelism=2, **settings) -> StreamExecutionEnvironment:
    conf = Configuration()
    conf.set_string("rest.port", "0")
    for k, v in settings.items():
        conf.set_string(k, str(v))
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    return env


def _http(client):
    url = client.get_web_interface_url()
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url), url
    return Http(url)


def test_finished_job_has_flinks_fields_and_exact_figures(embedded_rest):
    env = _env()
    (env.from_collection(list(range(1000))).name("Numbers")
        .map(lambda x: x * 2).name("Double")
        .key_by(lambda x: x % 7).reduce(lambda a, b: a + b).name("Sum")
        .add_sink(lambda x: None).name("Drop"))
    client = env.execute_async("rest finished")
    http = _http(client)
    job_id = client.get_job_id()
    client.get_job_execution_result().result(60)
    detail = http.poll(f"/jobs/{job_id}", lambda d: d["state"] == "FINISHED")

    assert F.JOB_DETAILS <= detail.keys()
    assert detail["jid"] == job_id and detail["name"] == "rest finished"
    assert detail["end-time"] >= detail["start-time"] > 0
    assert [v["name"] for v in detail["vertices"]] == ["Source: Numbers", "Double", "Sum -> Sink: Drop"]
    assert [v["parallelism"] for v in detail["vertices"]] == [1, 2, 2]
    for v in detail["vertices"]:
        assert F.JOB_DETAILS_VERTEX <= v.keys() and F.IO_METRICS <= v["metrics"].keys()
        assert v["status"] == "FINISHED" and v["tasks"]["FINISHED"] == v["parallelism"]
    records = [(v["metrics"]["read-records"], v["metrics"]["write-records"]) for v in detail["vertices"]]
    assert records == [(0, 1000), (1000, 1000), (1000, 0)]
    assert detail["status-counts"]["FINISHED"] == 5
    assert detail["backpressure-root-cause"] is None

    plan = http.get(f"/jobs/{job_id}/plan")["plan"]
    assert F.PLAN <= plan.keys() and plan["jid"] == job_id
    assert sorted(n["id"] for n in plan["nodes"]) == sorted(v["id"] for v in detail["vertices"])
    for n in plan["nodes"]:
        assert F.PLAN_NODE <= n.keys()
        assert all(F.PLAN_INPUT <= i.keys() for i in n.get("inputs", []))

    sum_vertex = detail["vertices"][2]["id"]
    vd = http.get(f"/jobs/{job_id}/vertices/{sum_vertex}")
    assert F.VERTEX_DETAILS <= vd.keys() and [s["subtask"] for s in vd["subtasks"]] == [0, 1]
    for s in vd["subtasks"]:
        assert F.SUBTASK_ATTEMPT <= s.keys() and F.IO_METRICS <= s["metrics"].keys() and s["status"] == "FINISHED"
    assert sum(s["metrics"]["read-records"] for s in vd["subtasks"]) == 1000
    assert all(s["metrics"]["read-bytes"] == 0 for s in vd["subtasks"])  # local exchanges carry no bytes

    bp = http.get(f"/jobs/{job_id}/vertices/{sum_vertex}/backpressure")
    assert F.BACKPRESSURE <= bp.keys() and bp["status"] == "ok" and bp["backpressure-level"] in F.BACKPRESSURE_LEVELS
    for s in bp["subtasks"]:
        assert F.SUBTASK_BACKPRESSURE <= s.keys()
        assert 0.0 <= s["cpuRatio"] <= 1.0 and 0.0 <= s["ratio"] <= 1.0 and abs(s["ratio"] + s["idleRatio"] + s["busyRatio"] - 1.0) < 0.01

    wms = http.get(f"/jobs/{job_id}/vertices/{sum_vertex}/watermarks")
    # the bounded input ended: every subtask's input watermark is Long.MAX_VALUE, as in Flink
    assert wms == [{"id": f"{i}.currentInputWatermark", "value": str(2**63 - 1)} for i in (0, 1)]
    assert http.get(f"/jobs/{job_id}/vertices/{detail['vertices'][0]['id']}/watermarks") == []

    jobs = http.get("/jobs")["jobs"]
    assert {"id": job_id, "status": "FINISHED"} in jobs and all(F.JOB_ID_WITH_STATUS == j.keys() for j in jobs)
    overview = next(j for j in http.get("/jobs/overview")["jobs"] if j["jid"] == job_id)
    assert F.JOB_OVERVIEW <= overview.keys() and F.JOB_OVERVIEW_TASKS <= overview["tasks"].keys()
    assert overview["tasks"]["total"] == 5 and overview["tasks"]["finished"] == 5
    ov = http.get("/overview")
    assert F.OVERVIEW <= ov.keys() and ov["jobs-finished"] >= 1
    assert F.CONFIG <= http.get("/config").keys()
    exc = http.get(f"/jobs/{job_id}/exceptions")
    assert F.EXCEPTIONS <= exc.keys() and exc["root-exception"] is None and exc["exceptionHistory"]["entries"] == []


def test_rill_info_prints_the_finished_jobs_table(embedded_rest, capsys):
    env = _env()
    env.from_collection(list(range(500))).name("Numbers").map(lambda x: x).name("Same").add_sink(lambda x: None)
    client = env.execute_async("rest info")
    client.wait(60)
    url = client.get_web_interface_url()
    assert main(["info", client.get_job_id(), "--url", url]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"Job 'rest info' ({client.get_job_id()}): FINISHED")
    rows = [line.split() for line in out[2:]]
    assert [(r[-7], r[-6], r[-5], r[-4], r[-1]) for r in rows] == [
        ("1", "FINISHED", "0", "500", "ok"), ("2", "FINISHED", "500", "0", "ok")]
    assert len(out) == 4  # no root cause line
    assert main(["info", "f" * 32, "--url", url]) == 1
    assert "HTTP 404: Job " + "f" * 32 + " not found" in capsys.readouterr().err


def _slow(x):
    time.sleep(0.001)


def test_back_pressured_job_names_the_slow_sink_subtask_and_cancels_with_the_token(embedded_rest, capsys):
    env = _env(1, **{"taskmanager.network.records-per-buffer": 32, "rill.source.batch-size": 32})
    (env.from_sequence(1, 10**9).name("Numbers")
        .map(lambda x: x).name("Identity").disable_chaining()
        .key_by(lambda x: 0)                      # every record to one sink subtask
        .add_sink(_slow).name("Slow").set_parallelism(2))
    client = env.execute_async("rest back-pressured")
    http = _http(client)
    job_id = client.get_job_id()
    try:
        def root_cause_named(d):
            levels = [v for v in d["vertices"]]
            return (d["backpressure-root-cause"] is not None and levels
                    and all(http.get(f"/jobs/{job_id}/vertices/{v['id']}/backpressure")["backpressure-level"] == "high"
                            for v in d["vertices"][:2]))
        detail = http.poll(f"/jobs/{job_id}", root_cause_named, what="source and map HIGH, root cause named")
        source, identity, sink = detail["vertices"]
        assert sink["name"] == "Sink: Slow" and sink["parallelism"] == 2
        cause = detail["backpressure-root-cause"]
        # the subtask holding key 0 is the one that reads records
        sd = http.get(f"/jobs/{job_id}/vertices/{sink['id']}")
        busy_subtask = next(s["subtask"] for s in sd["subtasks"] if s["metrics"]["read-records"] > 0)
        assert cause["vertex-id"] == sink["id"] and cause["vertex-name"] == "Sink: Slow"
        assert cause["subtask"] == busy_subtask, "%s" % http.get(f"/jobs/{job_id}/vertices/{sink['id']}/backpressure")
        assert cause["back-pressured-vertices"] == ["Source: Numbers", "Identity"]
        bp = http.get(f"/jobs/{job_id}/vertices/{source['id']}/backpressure")
        assert bp["subtasks"][0]["backpressure-level"] == "high" and bp["subtasks"][0]["ratio"] > 0.5
        assert http.get(f"/jobs/{job_id}/vertices/{sink['id']}/backpressure")["backpressure-level"] == "ok"

        summary = format_summary(client)
        assert f"Backpressure root cause: Sink: Slow (subtask {busy_subtask}) is busy" in summary
        assert summary.rstrip().splitlines()[-2].endswith("back-pressures: Source: Numbers, Identity")
        assert main(["info", job_id, "--url", http.base]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0].startswith(f"Job 'rest back-pressured' ({job_id}): RUNNING")
        assert [line.split()[-1] for line in out[2:5]] == ["high", "high", "ok"]
        assert out[5].startswith(f"Backpressure root cause: Sink: Slow (subtask {busy_subtask}), busy ")
        assert out[5].endswith("back-pressured: Source: Numbers, Identity")

        tms = http.get("/taskmanagers")["taskmanagers"]
        assert tms and all(F.TASKMANAGER <= t.keys() for t in tms)
        assert http.get("/overview")["jobs-running"] >= 1

        status, body = http.request("PATCH", f"/jobs/{job_id}")
        assert status == 401 and F.ERROR == body.keys() and "Bearer" in body["errors"][0]
        status, body = http.request("PATCH", f"/jobs/{job_id}", {"Authorization": "Bearer " + "0" * 64})
        assert status == 401
        token = embedded_rest.rest_bearer_token()
        status, body = http.request("PATCH", f"/jobs/{job_id}?mode=stop", {"Authorization": f"Bearer {token}"})
        assert status == 400 and "mode" in body["errors"][0]
        status, body = http.request("PATCH", f"/jobs/{job_id}?mode=cancel", {"Authorization": f"Bearer {token}"})
        assert (status, body) == (202, {})
        http.poll(f"/jobs/{job_id}", lambda d: d["state"] == "CANCELED", what="job CANCELED")
        assert client.wait(30).name == "CANCELED"
    finally:
        client.cancel()
        client.wait(30)


def test_failed_job_shows_its_exception(embedded_rest):
    env = _env(1)

    def boom(x):
        if x == 3:
            raise ValueError("record 3 is bad")
        return x

    env.from_collection([1, 2, 3, 4]).map(boom).name("Boom").add_sink(lambda x: None)
    client = env.execute_async("rest failing")
    http = _http(client)
    job_id = client.get_job_id()
    client.wait(60)
    exc = http.poll(f"/jobs/{job_id}/exceptions", lambda e: e["root-exception"] is not None)
    assert "record 3 is bad" in exc["root-exception"]
    [entry] = exc["exceptionHistory"]["entries"]
    assert F.EXCEPTION_ENTRY <= entry.keys() and entry["exceptionName"] == "ValueError"
    assert "(1/1)" in entry["taskName"]
    assert http.get(f"/jobs/{job_id}")["state"] == "FAILED"
    assert http.get("/overview")["jobs-failed"] >= 1


def test_errors_have_flinks_error_body(embedded_rest):
    env = _env(1)
    env.from_collection([1]).add_sink(lambda x: None)
    client = env.execute_async("rest errors")
    http = _http(client)
    client.wait(60)
    for path in ("/jobs/" + "f" * 32, "/jobs/" + client.get_job_id() + "/vertices/" + "a" * 32, "/nope"):
        status, body = http.request("GET", path)
        assert status == 404 and body.keys() == F.ERROR and body["errors"][0], path
    status, body = http.request("PATCH", "/jobs/" + "f" * 32,
                                {"Authorization": f"Bearer {embedded_rest.rest_bearer_token()}"})
    assert status == 404 and "not found" in body["errors"][0]
    status, body = http.request("POST", "/jobs")
    assert status == 405 and body.keys() == F.ERROR


def test_openapi_describes_every_route(embedded_rest):
    env = _env(1)
    env.from_collection([1]).add_sink(lambda x: None)
    client = env.execute_async("rest openapi")
    http = _http(client)
    client.wait(60)
    spec = http.get("/openapi.json")
    assert spec["openapi"].startswith("3.")
    assert set(spec["paths"]) == {
        "/overview", "/config", "/jobs", "/jobs/overview", "/jobs/{jobid}", "/jobs/{jobid}/plan",
        "/jobs/{jobid}/exceptions", "/jobs/{jobid}/vertices/{vertexid}",
        "/jobs/{jobid}/vertices/{vertexid}/backpressure", "/jobs/{jobid}/vertices/{vertexid}/watermarks",
        "/taskmanagers", "/metrics", "/jobs/{jobid}/savepoints", "/jobs/{jobid}/stop",
        "/jobs/{jobid}/savepoints/{triggerid}", "/jobs/{jobid}/checkpoints", "/jobs/{jobid}/channel-timelines",
    }
    assert "patch" in spec["paths"]["/jobs/{jobid}"] and "bearerAuth" in spec["components"]["securitySchemes"]
    assert set(spec["paths"]["/jobs/{jobid}/channel-timelines"]) == {"post", "delete"}


def test_the_endpoint_serves_one_address_and_jobs_reuse_it(embedded_rest):
    a = _env(1)
    a.from_collection([1]).add_sink(lambda x: None)
    b = _env(1)
    b.from_collection([2]).add_sink(lambda x: None)
    ca, cb = a.execute_async("first"), b.execute_async("second")
    assert ca.get_web_interface_url() == cb.get_web_interface_url() == embedded_rest.rest_endpoint.url
    ca.wait(60), cb.wait(60)
    ids = {j["id"] for j in _http(ca).get("/jobs")["jobs"]}
    assert {ca.get_job_id(), cb.get_job_id()} <= ids


def test_no_endpoint_unless_asked():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection([1]).add_sink(lambda x: None)
    from rill.runtime.executor import embedded_cluster  # noqa: PLC0415
    embedded_cluster().close_rest_endpoint()
    client = env.execute_async("no rest")
    client.wait(60)
    assert client.get_web_interface_url() is None and embedded_cluster().rest_endpoint is None
