"""The authenticated framing of Thespian messages (``auth_transport``) on real bytes, and the
cluster secret's files (``actor_system``): what is refused before anything is unpickled, and
with which message."""

from __future__ import annotations

import json
import os
import pickle
import stat

import pytest

from rill.common import Configuration
from rill.runtime.cluster import auth_transport
from rill.runtime.cluster.actor_system import (
    ClusterInfo,
    ClusterSecretError,
    max_message_bytes,
    read_secret_file,
    write_cluster_info,
)
from rill.runtime.cluster.auth_transport import MAC_BYTES, AuthenticatedReceiveBuffer, sign

SECRET = bytes(range(32))


@pytest.fixture(autouse=True)
def installed():
    """The test's secret in this process' keyring (the default size limit stays)."""
    auth_transport.install(SECRET)


class _Canary:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def signed(message, secret=SECRET) -> bytes:
    """A message as a cluster process frames it (the module docstring's wire format)."""
    body = pickle.dumps(("sender", message))
    return b"%d>" % (MAC_BYTES + len(body)) + sign(secret, body) + body


def feed(data: bytes, chunk: int = 1, max_message_bytes=None) -> AuthenticatedReceiveBuffer:
    buffer = AuthenticatedReceiveBuffer(pickle.loads, max_message_bytes=max_message_bytes)
    for i in range(0, len(data), chunk):
        buffer.addMore(data[i:i + chunk])
        if buffer.isDone():
            break
    return buffer


def test_a_signed_message_arriving_byte_by_byte_is_delivered_with_what_follows_it():
    data = signed({"job": "graph", "n": list(range(100))})
    buffer = feed(data, chunk=7)
    assert buffer.isDone() and buffer.refusal is None
    assert buffer.completed() == (("sender", {"job": "graph", "n": list(range(100))}), b"")
    buffer = AuthenticatedReceiveBuffer()
    buffer.addMore(data[:20])
    buffer.addMore(data[20:] + b"12>next")
    assert buffer.completed() == (("sender", {"job": "graph", "n": list(range(100))}), b"12>next")


def test_thespians_acknowledgements_are_recognised_without_unpickling():
    from thespian.system.transport.streamBuffer import ackDataErrMsg, ackMsg

    assert feed(ackMsg).completed() == ("ACK", b"")
    assert feed(ackDataErrMsg).completed() == ("ACK+DATAERR", b"")


def test_a_pickle_signed_with_another_secret_is_refused_and_never_loaded(tmp_path):
    canary = tmp_path / "canary"
    buffer = feed(signed(_Canary(canary), secret=os.urandom(32)), chunk=4096)
    assert buffer.isDone()
    assert buffer.refusal == "its signature does not verify with the cluster's secret"
    assert buffer.completed() is None
    assert not canary.exists()


def test_an_unsigned_pickle_in_thespians_own_framing_is_refused_and_never_loaded(tmp_path):
    canary = tmp_path / "canary"
    evil = pickle.dumps(("sender", _Canary(canary)))
    buffer = feed(b"%d>" % len(evil) + evil, chunk=4096)
    assert buffer.refusal == "its signature does not verify with the cluster's secret"
    assert buffer.completed() is None
    assert not canary.exists()


def test_a_signed_message_changed_on_the_way_is_refused():
    data = bytearray(signed("payload"))
    data[-3] ^= 1
    assert feed(bytes(data)).refusal == "its signature does not verify with the cluster's secret"


@pytest.mark.parametrize("header, reason", [
    (b"\x80\x04\x95", "its length header b'\\x80' is not a decimal length of at most 1024 bytes"),
    (b"+12>", "its length header b'+' is not a decimal length of at most 1024 bytes"),
    (b" 12>", "its length header b' ' is not a decimal length of at most 1024 bytes"),
    (b"1_000>", "its length header b'1_' is not a decimal length of at most 1024 bytes"),
    (b"-5>", "its length header b'-' is not a decimal length of at most 1024 bytes"),
    (b"99999", "its length header b'99999' is not a decimal length of at most 1024 bytes"),
    (b"1025>", "it announces 1025 bytes, more than cluster.rpc.max-message-size (1024 bytes)"),
    (b">", "its length header is empty"),
    (b"5>hello", "it announces 5 bytes, too short for a signed message"),
])
def test_impossible_or_oversized_length_headers_are_refused_as_soon_as_they_are_read(header, reason):
    buffer = feed(header, max_message_bytes=1024)
    assert buffer.refusal == reason
    assert buffer.isDone() and buffer.completed() is None
    assert buffer.remainingAmount() == 1  # nothing more is read for it


def test_a_huge_length_header_buffers_nothing():
    buffer = feed(b"%d>" % (1 << 40) + b"x" * 100, chunk=200)
    assert buffer.refusal == (f"its length header b'1099511627776>xxxxxxxxxx' is not a decimal length of at most "
                              f"{auth_transport.DEFAULT_MAX_MESSAGE_BYTES} bytes")
    buffer.addMore(b"x" * 10_000)
    assert buffer.remainingAmount() == 1 and str(buffer).endswith("bytes)")


def test_a_message_of_exactly_the_limit_is_accepted():
    body_len = 1024 - MAC_BYTES
    message = "x" * 10
    body = pickle.dumps(("sender", message))
    body += b"." * (body_len - len(body))  # pickle stops at its first STOP opcode
    data = b"1024>" + sign(SECRET, body) + body
    assert feed(data, chunk=100, max_message_bytes=1024).completed() == (("sender", message), b"")


def test_install_refuses_short_secrets_and_tiny_limits():
    with pytest.raises(ValueError, match="The cluster secret must be at least 16 bytes, got 8 bytes"):
        auth_transport.install(b"12345678")
    with pytest.raises(ValueError, match="The cluster secret must be at least 16 bytes, got str"):
        auth_transport.install("a" * 32)
    with pytest.raises(ValueError, match="cluster.rpc.max-message-size must be at least 1024 bytes, got 100"):
        auth_transport.install(SECRET, 100)


def test_the_cluster_info_file_is_private_even_when_it_existed_before(tmp_path, monkeypatch):
    monkeypatch.setenv("RILL_RUN_DIR", str(tmp_path))
    path = tmp_path / "cluster-7000.json"
    path.write_text("{}")
    path.chmod(0o644)
    write_cluster_info(ClusterInfo("127.0.0.1", 7000, SECRET.hex(), 1, "log", 1, 1))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_secret_file(path) == SECRET


def test_secret_files_hex_json_and_what_is_refused(tmp_path):
    hex_file = tmp_path / "secret"
    hex_file.write_text(SECRET.hex() + "\n")
    hex_file.chmod(0o600)
    assert read_secret_file(hex_file) == SECRET
    hex_file.chmod(0o640)
    with pytest.raises(ClusterSecretError, match=f"The cluster secret file {hex_file} has mode 640: it must not be "
                                                 "readable by group or others"):
        read_secret_file(hex_file)
    with pytest.raises(ClusterSecretError, match=f"Cannot read the cluster secret file {tmp_path / 'none'}"):
        read_secret_file(tmp_path / "none")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"host": "h"}))
    bad.chmod(0o600)
    with pytest.raises(ClusterSecretError, match="holds neither a cluster-<port>.json with 'secret_hex' nor a hex"):
        read_secret_file(bad)
    short = tmp_path / "short"
    short.write_text("abcd")
    short.chmod(0o600)
    with pytest.raises(ClusterSecretError, match=f"The cluster secret in {short} is 2 bytes; at least 16 are needed"):
        read_secret_file(short)


def test_max_message_size_takes_flink_memory_sizes():
    conf = Configuration()
    assert max_message_bytes(conf) == 256 * 1024 * 1024
    conf.set_string("cluster.rpc.max-message-size", "64mb")
    assert max_message_bytes(conf) == 64 * 1024 * 1024
    conf.set_string("cluster.rpc.max-message-size", "100")
    with pytest.raises(ValueError, match="'cluster.rpc.max-message-size' must be at least 1024 bytes, got '100'"):
        max_message_bytes(conf)
