"""Who may act on a job through the REST API: a bearer token derived from the cluster's secret.

Reading (GET) needs nothing: like Flink's monitoring API it is open to whoever reaches the
port, which is why the endpoint binds loopback unless ``rest.bind-address`` says otherwise.
Actions (``PATCH /jobs/:jobid``: cancel) need ``Authorization: Bearer <token>`` where::

    token = hex(HMAC-SHA256(key=secret, msg=b"rill-rest-token-v1"))

``secret`` is the cluster's shared secret (cluster mode: ``secret_hex`` in the run directory's
``cluster-PORT.json``, readable by its owner only; embedded mode: a random secret per
MiniCluster, whose token ``MiniCluster.rest_bearer_token()`` returns). The token is derived,
not the secret itself, so handing it to a REST client does not let that client join the data
plane. Flink has no equivalent (its REST API relies on TLS client certificates).
"""

from __future__ import annotations

import hashlib
import hmac

__all__ = ["derive_bearer_token", "check_authorization"]

_TOKEN_CONTEXT = b"rill-rest-token-v1"


def derive_bearer_token(secret: bytes) -> str:
    """The REST bearer token for ``secret`` (64 hex characters).

    :raises ValueError: when ``secret`` is shorter than 16 bytes.
    """
    if len(secret) < 16:
        raise ValueError(f"the cluster secret must have at least 16 bytes, got {len(secret)}")
    return hmac.new(secret, _TOKEN_CONTEXT, hashlib.sha256).hexdigest()


def check_authorization(header_value: str | None, token: str) -> bool:
    """Whether an ``Authorization`` header carries ``Bearer <token>`` (constant-time compare)."""
    if not header_value:
        return False
    scheme, _, value = header_value.strip().partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), token.encode())
