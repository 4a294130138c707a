"""Flink's REST API and a dashboard page for Rill's jobs (Flink's ``flink-runtime-web`` and
``runtime.rest``): the embedded MiniCluster serves it when ``rest.port`` is set.

Modules: ``options`` (the ``rest.*`` keys), ``snapshot`` (what handlers read), ``messages``
(Flink's JSON bodies), ``backpressure`` (levels and the root cause), ``channel_timelines`` (the
channel timeline action's bodies), ``gateway`` (what the server asks), ``auth`` (the bearer
token for actions), ``server`` (HTTP), ``static/`` (the dashboard page and ``openapi.json``).
"""

from rill.runtime.rest.auth import derive_bearer_token
from rill.runtime.rest.backpressure import RootCause, find_root_cause
from rill.runtime.rest.gateway import EmbeddedGateway, JobNotFoundError, RestfulGateway
from rill.runtime.rest.options import RestEndpointConfig, RestOptions
from rill.runtime.rest.server import RestServerEndpoint
from rill.runtime.rest.snapshot import JobSnapshot, snapshot_job_master

__all__ = [
    "derive_bearer_token", "RootCause", "find_root_cause", "EmbeddedGateway", "JobNotFoundError",
    "RestfulGateway", "RestEndpointConfig", "RestOptions", "RestServerEndpoint", "JobSnapshot",
    "snapshot_job_master",
]
