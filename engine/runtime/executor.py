"""Where ``execute()`` sends a job (Flink's ``PipelineExecutor``): the embedded MiniCluster
(``execution.target: embedded``, the default), a running cluster (``cluster``: the one
``rill cluster start`` started on this machine; ``cluster://host:port``) or Spark (``spark``:
a bounded program in BATCH mode on the cluster of a SparkSession, see ``rill.runtime.spark``). The target comes from
the configuration, so ``RILL_EXECUTION_TARGET=cluster`` moves any program to the cluster
without changing it."""

from __future__ import annotations

from rill.common.configuration import ConfigOptions, Configuration
from rill.common.execution_options import SPARK_TARGET
from rill.runtime.job_client import JobClient
from rill.runtime.minicluster import MiniCluster

__all__ = ["submit_job", "embedded_cluster"]

_embedded = MiniCluster()


def submit_job(job_graph, configuration: Configuration, job_parameters=None, collect_channel=None) -> JobClient:
    """Submit ``job_graph`` to the configured execution target and return its JobClient.

    :raises ValueError: for an unknown target. :raises ClusterNotRunningError: when the target
        cluster does not answer.
    """
    target = str(configuration.get(ConfigOptions.EXECUTION_TARGET)).strip()
    if target == SPARK_TARGET:
        from rill.runtime.spark.runner import submit_to_spark  # noqa: PLC0415 - pyspark only for this target
        return submit_to_spark(job_graph, configuration, job_parameters, collect_channel)
    if target != "embedded":
        from rill.runtime.cluster.client import submit_to_cluster  # noqa: PLC0415 - only for cluster mode
        return submit_to_cluster(target, job_graph, configuration, job_parameters, collect_channel)
    return _embedded.submit_job(job_graph, configuration, job_parameters, collect_channel)


def embedded_cluster() -> MiniCluster:
    """The process's embedded MiniCluster (where ``execution.target: embedded`` jobs run): its
    ``rest_endpoint``, ``rest_bearer_token()`` and ``close_rest_endpoint()``."""
    return _embedded
