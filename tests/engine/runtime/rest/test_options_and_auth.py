"""The rest.* settings and the bearer token."""

from __future__ import annotations

import hashlib
import hmac
import socket

import pytest

from rill.common import Configuration
from rill.runtime.rest.auth import check_authorization, derive_bearer_token
from rill.runtime.rest.gateway import EmbeddedGateway
from rill.runtime.rest.options import RestEndpointConfig
from rill.runtime.rest.server import RestServerEndpoint



def test_requested_only_with_a_port_and_defaults_to_loopback():
    assert not RestEndpointConfig.is_requested(Configuration())
    c = Configuration().set_string("rest.port", "0")
    assert RestEndpointConfig.is_requested(c)
    assert RestEndpointConfig.from_configuration(c) == RestEndpointConfig("127.0.0.1", [0], 3000)


def test_bind_port_range_and_bind_address_win():
    c = (Configuration().set_string("rest.port", "8081").set_string("rest.bind-port", "50100-50102")
         .set_string("rest.bind-address", "0.0.0.0"))
    assert RestEndpointConfig.from_configuration(c) == RestEndpointConfig("0.0.0.0", [50100, 50101, 50102], 3000)


@pytest.mark.parametrize("spec", ["x", "70000", "5-3", "-1"])
def test_bad_ports_are_refused_with_the_key(spec):
    with pytest.raises(ValueError, match="rest.bind-port"):
        RestEndpointConfig.from_configuration(Configuration().set_string("rest.port", spec))


def test_a_port_in_use_names_address_and_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(OSError, match=f"127.0.0.1:{port} .rest.bind-port.: every port is in use"):
            RestServerEndpoint(EmbeddedGateway(list), RestEndpointConfig("127.0.0.1", [port]), b"s" * 32)


def test_token_is_hmac_of_the_secret_and_checked():
    secret = bytes(range(32))
    token = derive_bearer_token(secret)
    assert token == hmac.new(secret, b"rill-rest-token-v1", hashlib.sha256).hexdigest()
    assert check_authorization(f"Bearer {token}", token) and check_authorization(f"bearer  {token}", token)
    assert not check_authorization(None, token) and not check_authorization(token, token)
    assert not check_authorization(f"Basic {token}", token)
    with pytest.raises(ValueError, match="at least 16 bytes"):
        derive_bearer_token(b"short")
