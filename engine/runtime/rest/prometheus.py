"""``GET /metrics``: the cluster's metrics in Prometheus' text format, with the names Flink's
``PrometheusReporter`` gives them (``flink-metrics-prometheus``'s ``AbstractPrometheusReporter``).

Flink's naming rule, kept here: ``flink_`` + the metric group's logical scope joined by ``_``
+ the metric name, characters outside ``[a-zA-Z0-9:_]`` replaced by ``_``; the scope variables
become labels (``<job_id>`` -> ``job_id``). Counters and meters are exported as Prometheus
*gauges*, as Flink does (a Flink counter may decrease).

What is exported, read from the gateway's snapshots at scrape time (nothing is kept between
scrapes; a scrape costs one snapshot per job):

===========================================================  ===================================
``flink_jobmanager_numRegisteredTaskManagers``               TaskExecutors
``flink_jobmanager_taskSlotsTotal``, ``..._taskSlotsAvailable``  slots
``flink_jobmanager_numRunningJobs``                          jobs not yet terminal
``flink_jobmanager_job_uptime``                              ms a running job has run (0 after)
``flink_taskmanager_job_task_numRecordsIn``, ``..._numRecordsOut``, ``..._numBytesIn``,
``..._numBytesOut``, ``..._busyTimeMsPerSecond``, ``..._idleTimeMsPerSecond``,
``..._backPressuredTimeMsPerSecond``, ``..._isBackPressured``,
``..._currentInputWatermark``, ``..._buffers_inPoolUsage``, ``..._buffers_outPoolUsage``
                                                             per subtask of every job
===========================================================  ===================================

Labels: ``host`` on every metric; ``job_id``, ``job_name`` from the job scope; ``tm_id``,
``task_id`` (the JobVertexID), ``task_name``, ``subtask_index`` on task metrics. Rill
difference: no ``task_attempt_id``/``task_attempt_num`` labels (the snapshot does not carry
attempts), and the ``*PerSecond`` gauges are the REST API's (over the last second of a running task).
"""

from __future__ import annotations

import re
from typing import Callable, Dict, Iterator, List, Tuple

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from rill.runtime.metrics import TaskMetricsSnapshot
from rill.runtime.rest.gateway import RestfulGateway

__all__ = ["FlinkMetricsCollector", "CONTENT_TYPE_LATEST", "render_metrics"]

_UNALLOWED = re.compile(r"[^a-zA-Z0-9:_]")

_TASK_LABELS = ["host", "tm_id", "job_id", "job_name", "task_id", "task_name", "subtask_index"]

#: Flink metric name (task scope, after the ``flink_taskmanager_job_task_`` prefix) -> reading.
_TASK_METRICS: List[Tuple[str, str, Callable[[TaskMetricsSnapshot], float]]] = [
    ("numRecordsIn", "Records the task received", lambda m: m.num_records_in),
    ("numRecordsOut", "Records the task emitted", lambda m: m.num_records_out),
    ("numBytesIn", "Payload bytes received over remote channels", lambda m: m.num_bytes_in),
    ("numBytesOut", "Payload bytes sent over remote channels", lambda m: m.num_bytes_out),
    ("busyTimeMsPerSecond", "ms per second the task was busy (average over its life)",
     lambda m: m.busy_time_ms_per_second),
    ("idleTimeMsPerSecond", "ms per second the task was idle (average over its life)",
     lambda m: m.idle_time_ms_per_second),
    ("backPressuredTimeMsPerSecond", "ms per second the task was back-pressured (average over its life)",
     lambda m: m.back_pressured_time_ms_per_second),
    ("isBackPressured", "1 if the task's back-pressure level is not OK",
     lambda m: float(m.backpressure_status != "OK")),
    ("currentInputWatermark", "The last watermark the task received, epoch ms (sources: absent)",
     lambda m: m.current_input_watermark),
    ("buffers_inPoolUsage", "Fraction of the input buffer pool in use",
     lambda m: m.input_pool_usage),
    ("buffers_outPoolUsage", "Fraction of the output buffer pool in use",
     lambda m: m.output_pool_usage),
]


def _label(value: object) -> str:
    # Flink filters label values with the same character rule as names (filterLabelValueCharacters)
    return _UNALLOWED.sub("_", str(value))


class FlinkMetricsCollector:
    """A prometheus-client collector over a :class:`RestfulGateway`.

    :param gateway: where jobs and TaskExecutors are read from, at every scrape.
    :param host: the ``host`` label (the JobManager's address).
    """

    def __init__(self, gateway: RestfulGateway, host: str = "127.0.0.1"):
        self._gateway = gateway
        self._host = _label(host)

    def describe(self) -> List:
        return []  # families depend on the jobs: nothing to check at registration

    def collect(self) -> Iterator[GaugeMetricFamily]:
        jobs = self._gateway.list_jobs()  # full snapshots: subtasks with their metrics
        tms = self._gateway.list_taskmanagers()
        host = [self._host]
        yield _gauge("flink_jobmanager_numRegisteredTaskManagers", "TaskExecutors registered", ["host"],
                     [(host, len(tms))])
        yield _gauge("flink_jobmanager_taskSlotsTotal", "Task slots of all TaskExecutors", ["host"],
                     [(host, sum(t["slotsNumber"] for t in tms))])
        yield _gauge("flink_jobmanager_taskSlotsAvailable", "Free task slots", ["host"],
                     [(host, sum(t["freeSlots"] for t in tms))])
        yield _gauge("flink_jobmanager_numRunningJobs", "Jobs not in a terminal state", ["host"],
                     [(host, sum(1 for j in jobs if not j.is_terminal))])
        yield _gauge("flink_jobmanager_job_uptime", "ms the job has been running (0 once it ended)",
                     ["host", "job_id", "job_name"],
                     [([self._host, j.job_id, _label(j.name)], 0 if j.is_terminal else j.duration_ms)
                      for j in jobs])
        rows: Dict[str, list] = {name: [] for name, _, _ in _TASK_METRICS}
        for job in jobs:
            for vertex in job.vertices:
                for s in vertex.subtasks:
                    labels = [_label(s.host), _label(s.taskmanager_id), job.job_id, _label(job.name),
                              vertex.id, _label(vertex.name), str(s.subtask)]
                    for name, _, read in _TASK_METRICS:
                        value = read(s.metrics)
                        if value is not None:
                            rows[name].append((labels, value))
        for name, doc, _ in _TASK_METRICS:
            yield _gauge("flink_taskmanager_job_task_" + name, doc, _TASK_LABELS, rows[name])


def _gauge(name: str, doc: str, labels: List[str], rows) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=labels)
    for values, value in rows:
        family.add_metric(values, float(value))
    return family


def render_metrics(registry: CollectorRegistry) -> bytes:
    """The text exposition (``CONTENT_TYPE_LATEST``) of everything in ``registry``."""
    return generate_latest(registry)
