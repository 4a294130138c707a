"""``GET /metrics`` in Prometheus' text format with Flink's PrometheusReporter names, against a
finished embedded job (exact figures, equal to the REST API's) and a job on the session's real
cluster through the REST endpoint process."""

from __future__ import annotations

import re
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from rest_http import Http
from rill.common import Configuration
from rill.datastream import StreamExecutionEnvironment


def _scrape(base: str):
    with urllib.request.urlopen(base + "/metrics", timeout=30) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=")
        text = r.read().decode()
    return {f.name: f for f in text_string_to_metric_families(text)}, text


def _samples(families, name, **labels):
    return [s for s in families[name].samples
            if all(s.labels.get(k) == v for k, v in labels.items())]


def test_finished_embedded_job_is_exported_with_flinks_names(embedded_rest):
    conf = Configuration()
    conf.set_string("rest.port", "0")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    (env.from_collection(list(range(1000))).name("Numbers")
        .map(lambda x: x * 2).name("Double")
        .key_by(lambda x: x % 7).reduce(lambda a, b: a + b).name("Sum")
        .add_sink(lambda x: None).name("Drop"))
    client = env.execute_async("prometheus finished")
    job_id = client.get_job_id()
    client.get_job_execution_result().result(60)
    http = Http(client.get_web_interface_url())
    detail = http.poll(f"/jobs/{job_id}", lambda d: d["state"] == "FINISHED")
    families, text = _scrape(http.base)

    for name in ("flink_jobmanager_numRegisteredTaskManagers", "flink_jobmanager_taskSlotsTotal",
                 "flink_jobmanager_taskSlotsAvailable", "flink_jobmanager_numRunningJobs",
                 "flink_jobmanager_job_uptime", "flink_taskmanager_job_task_numRecordsIn",
                 "flink_taskmanager_job_task_numRecordsOut", "flink_taskmanager_job_task_busyTimeMsPerSecond",
                 "flink_taskmanager_job_task_backPressuredTimeMsPerSecond",
                 "flink_taskmanager_job_task_buffers_inPoolUsage"):
        assert families[name].type == "gauge", name  # counters too, as Flink exports them
    # names and label values keep only [a-zA-Z0-9:_] (Flink: "Sink: Drop" -> "Sink:_Drop")
    assert all(re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", f) for f in families)

    by_vertex = {}
    for v in detail["vertices"]:
        ins = _samples(families, "flink_taskmanager_job_task_numRecordsIn", job_id=job_id, task_id=v["id"])
        outs = _samples(families, "flink_taskmanager_job_task_numRecordsOut", job_id=job_id, task_id=v["id"])
        assert sorted(s.labels["subtask_index"] for s in ins) == [str(i) for i in range(v["parallelism"])]
        assert {s.labels["job_name"] for s in ins} == {"prometheus_finished"}  # Flink's label filter
        by_vertex[v["name"]] = (sum(s.value for s in ins), sum(s.value for s in outs))
        assert by_vertex[v["name"]] == (v["metrics"]["read-records"], v["metrics"]["write-records"])
    assert by_vertex == {"Source: Numbers": (0, 1000), "Double": (1000, 1000), "Sum -> Sink: Drop": (1000, 0)}
    uptime = _samples(families, "flink_jobmanager_job_uptime", job_id=job_id)
    assert [s.value for s in uptime] == [0.0]  # ended
    # a source task has no input watermark: the gauge is absent for it, not a made-up 0
    source_id = detail["vertices"][0]["id"]
    assert not _samples(families, "flink_taskmanager_job_task_currentInputWatermark", task_id=source_id)


def test_cluster_job_through_the_rest_endpoint_process(cluster, cluster_rest):
    http, _proc = cluster_rest
    env = cluster.environment(1)
    env.from_collection(list(range(500))).name("Numbers").map(lambda x: x + 1).name("Inc") \
        .disable_chaining().add_sink(lambda x: None).name("Drop")
    client = env.execute_async("prometheus cluster")
    job_id = client.get_job_id()
    client.get_job_execution_result().result(120)
    http.poll(f"/jobs/{job_id}", lambda d: d["state"] == "FINISHED", deadline_s=60)
    families, _ = _scrape(http.base)
    assert _samples(families, "flink_jobmanager_numRegisteredTaskManagers")[0].value == cluster.task_executors
    assert _samples(families, "flink_jobmanager_taskSlotsTotal")[0].value == cluster.task_executors * cluster.slots
    ins = {s.labels["task_name"]: s.value for s in
           _samples(families, "flink_taskmanager_job_task_numRecordsIn", job_id=job_id)}
    outs = {s.labels["task_name"]: s.value for s in
            _samples(families, "flink_taskmanager_job_task_numRecordsOut", job_id=job_id)}
    assert ins == {"Source:_Numbers": 0.0, "Inc": 500.0, "Sink:_Drop": 500.0}
    assert outs == {"Source:_Numbers": 500.0, "Inc": 500.0, "Sink:_Drop": 0.0}
    # records crossed processes: bytes were counted on both sides
    nbytes = {s.labels["task_name"]: s.value for s in
              _samples(families, "flink_taskmanager_job_task_numBytesIn", job_id=job_id)}
    assert nbytes["Inc"] > 0
