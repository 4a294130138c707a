"""The REST endpoint's settings, with Flink's keys (Flink's ``RestOptions``).

``rest.port`` (Flink's default 8081) is the port clients use; the server binds
``rest.bind-port`` when set, else ``rest.port``; ``0`` binds an ephemeral port (the bound one
is what :meth:`RestServerEndpoint.url` and ``JobClient.get_web_interface_url()`` report).
``rest.bind-port`` may be a range ``"50100-50200"``: the first free port is taken.
``rest.bind-address`` defaults to ``rest.address``, which defaults to loopback (Flink binds
every interface by default; Rill does not, since the endpoint has no TLS).

The embedded mode serves the API only when asked: when the job's configuration sets
``rest.port`` or ``rest.bind-port`` (as Flink's local environment serves its web UI only
with ``createLocalEnvironmentWithWebUI``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List

from rill.common.configuration import ConfigOption, Configuration

__all__ = ["RestOptions", "RestEndpointConfig"]


class RestOptions:
    """The REST options (``ConfigOption`` each), Flink's keys."""

    ADDRESS = ConfigOption("rest.address", "127.0.0.1", "Address clients use to reach the REST endpoint.")
    PORT = ConfigOption("rest.port", 8081, "Port clients use to reach the REST endpoint (0: ephemeral).")
    BIND_ADDRESS = ConfigOption("rest.bind-address", None, "Address the REST server binds (default: rest.address).")
    BIND_PORT = ConfigOption("rest.bind-port", None, "Port or range 'a-b' the REST server binds (default: rest.port).")
    REFRESH_INTERVAL = ConfigOption("web.refresh-interval", 3000, "ms between the dashboard's refreshes.")


@dataclass(frozen=True)
class RestEndpointConfig:
    """Where the endpoint binds, built once from a Configuration.

    :ivar bind_address: the address to bind (a host name or IP).
    :ivar bind_ports: candidate ports in order (``[0]`` for an ephemeral port).
    :ivar refresh_interval_ms: the dashboard's polling interval (ms), ``web.refresh-interval``.
    """

    bind_address: str
    bind_ports: List[int]
    refresh_interval_ms: int = 3000

    @staticmethod
    def is_requested(conf: Configuration) -> bool:
        """Whether ``conf`` asks for a REST endpoint (sets ``rest.port`` or ``rest.bind-port``)."""
        return conf.contains_key(RestOptions.PORT.key) or conf.contains_key(RestOptions.BIND_PORT.key)

    @classmethod
    def from_configuration(cls, conf: Configuration) -> "RestEndpointConfig":
        """:raises ValueError: for a port or range that is not ``0..65535`` / ``a-b`` with a <= b."""
        address = str(conf.get_string(RestOptions.BIND_ADDRESS.key)
                      or conf.get_string(RestOptions.ADDRESS.key, RestOptions.ADDRESS.default))
        spec = conf.get_string(RestOptions.BIND_PORT.key) or conf.get_string(RestOptions.PORT.key, "8081")
        return cls(address, _parse_ports(str(spec)),
                   conf.get_integer(RestOptions.REFRESH_INTERVAL.key, RestOptions.REFRESH_INTERVAL.default))


def _parse_ports(spec: str) -> List[int]:
    s = spec.strip()
    try:
        if "-" in s:
            lo, hi = (int(x) for x in s.split("-", 1))
        else:
            lo = hi = int(s)
    except ValueError:
        raise ValueError(f"rest.bind-port / rest.port must be a port or a range 'a-b', got {spec!r}") from None
    if not (0 <= lo <= hi <= 65535):
        raise ValueError(f"rest.bind-port / rest.port must lie in 0..65535 with a <= b, got {spec!r}")
    return list(range(lo, hi + 1))
