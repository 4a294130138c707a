"""Where ``execute()`` sends a job (Flink's ``PipelineExecutor``): the embedded MiniCluster
(default). The cluster target (``RILL_EXECUTION_TARGET=cluster``) comes with cluster mode."""

from __future__ import annotations

from rill.common.configuration import ConfigOptions, Configuration
from rill.runtime.job_client import JobClient
from rill.runtime.minicluster import MiniCluster

__all__ = ["submit_job"]

_embedded = MiniCluster()


def submit_job(job_graph, configuration: Configuration, job_parameters=None, collect_channel=None) -> JobClient:
    """Submit ``job_graph`` to the configured execution target and return its JobClient.

    :raises NotImplementedError: for targets other than ``embedded``.
    """
    target = configuration.get(ConfigOptions.EXECUTION_TARGET)
    if target != "embedded":
        raise NotImplementedError(
            f"Execution target '{target}' is not implemented yet: only 'embedded' runs jobs today"
        )
    return _embedded.submit_job(job_graph, configuration, job_parameters, collect_channel)
