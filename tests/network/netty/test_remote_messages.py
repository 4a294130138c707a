"""The wire format and handshake, frame by frame; the transport's configuration."""

from __future__ import annotations

import os
import struct

import pytest

from rill.network.netty import AuthenticationError, CorruptFrameError, NettyConfig, messages


def body(frame: bytes) -> memoryview:
    (length,) = struct.unpack_from(">I", frame)
    assert length == len(frame) - 4
    return memoryview(frame)[4:]


def test_the_handshake_proves_the_secret_both_ways():
    secret, client_nonce, server_nonce = os.urandom(32), os.urandom(32), os.urandom(32)
    nonce, flow_control = messages.decode_hello(body(messages.encode_hello(client_nonce, False)))
    assert nonce == client_nonce and flow_control is False
    challenge = body(messages.encode_challenge(secret, client_nonce, server_nonce))
    assert messages.decode_challenge(challenge, secret, client_nonce) == server_nonce
    with pytest.raises(AuthenticationError, match="failed to prove"):
        messages.decode_challenge(challenge, os.urandom(32), client_nonce)
    auth = body(messages.encode_auth(secret, server_nonce, client_nonce))
    assert messages.check_auth(auth, secret, server_nonce, client_nonce)
    assert not messages.check_auth(auth, os.urandom(32), server_nonce, client_nonce)
    assert not messages.check_auth(auth, secret, client_nonce, server_nonce)  # no replay the other way
    assert not messages.check_auth(memoryview(b"\x03short"), secret, server_nonce, client_nonce)


def test_a_hello_from_something_else_is_refused():
    hello = bytearray(messages.encode_hello(os.urandom(32), True))
    hello[5:9] = b"HTTP"
    with pytest.raises(CorruptFrameError, match="not a Rill client"):
        messages.decode_hello(body(bytes(hello)))
    with pytest.raises(CorruptFrameError, match="Hello frame of 3 bytes"):
        messages.decode_hello(memoryview(b"\x01ab"))


def test_requests_credit_and_responses_round_trip():
    receiver = os.urandom(16)
    frame = body(messages.encode_partition_request(receiver, "ds-é", "attempt-1", 7, 2))
    assert messages.decode_partition_request(frame) == (receiver, "ds-é", "attempt-1", 7, 2)
    assert messages.decode_add_credit(body(messages.encode_add_credit(receiver, 5))) == (receiver, 5)
    assert messages.decode_receiver(body(messages.encode_cancel(receiver))) == receiver
    header = messages.encode_buffer_response_header(receiver, 3, 2**40, messages.FLAG_EVENT, 4)
    assert messages.decode_buffer_response(body(header + b"data")) == (receiver, 3, 2**32 - 1, 1, 1, b"data")
    error = body(messages.encode_error_response(receiver, messages.ERROR_PROTOCOL, "bad ✗"))
    assert messages.decode_error_response(error) == (receiver, messages.ERROR_PROTOCOL, "bad ✗")


@pytest.mark.parametrize("cut", [10, 30, -1])
def test_a_malformed_partition_request_is_a_corrupt_frame(cut):
    frame = messages.encode_partition_request(os.urandom(16), "ds", "attempt", 0, 2)[4:]
    bad = frame[:cut] if cut > 0 else frame + b"extra"
    with pytest.raises(CorruptFrameError):
        messages.decode_partition_request(memoryview(bad))


def test_config_is_validated():
    with pytest.raises(ValueError, match="secret must be bytes of length >= 16"):
        NettyConfig(secret=b"short")
    with pytest.raises(ValueError, match="exclusive_buffers_per_channel must be >= 1 with flow control"):
        NettyConfig(secret=os.urandom(16), exclusive_buffers_per_channel=0)
    NettyConfig(secret=os.urandom(16), exclusive_buffers_per_channel=0, flow_control=False)
    with pytest.raises(ValueError, match="segment_size_bytes must be an int >= 64"):
        NettyConfig(secret=os.urandom(16), segment_size_bytes=8)
    with pytest.raises(ValueError, match="retry_max_backoff_s must be >= retry_initial_backoff_s"):
        NettyConfig(secret=os.urandom(16), retry_initial_backoff_s=2.0, retry_max_backoff_s=1.0)
    with pytest.raises(ValueError, match="port must be in"):
        NettyConfig(secret=os.urandom(16), port=70000)
    assert NettyConfig(secret=os.urandom(16)).host == "127.0.0.1"
