"""Failures of the transport: wrong secrets, corrupt or truncated frames, protocol violations,
peers that disconnect, servers that are not there (yet). Each error names the channel (gate,
index, partition, subpartition) and the address, and other connections carry on.

A scripted server (:class:`FakeServer`, a blocking socket driven by the test) produces the
byte-level faults a real server never would."""

from __future__ import annotations

import os
import socket
import struct

import pytest
from _remote_helpers import DEADLINE_S, GateReader, make_partition, wait_until

from rill.network import (
    END_OF_PARTITION_EVENT,
    NettyConfig,
    NettyConnectionManager,
    RemoteInputChannel,
    ResultPartitionID,
    ResultPartitionManager,
    SingleInputGate,
    SpanningRecordSerializer,
)
from rill.network.netty import AuthenticationError, LocalTransportError, RemoteTransportError, messages


@pytest.fixture
def partitions():
    manager = ResultPartitionManager()
    yield manager
    manager.shutdown()


def emit(partition, subpartition, values):
    buffer = partition.request_buffer_blocking()
    buffer.set_contents(list(values))
    partition.emit_buffer(buffer, subpartition)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def recv_exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError(f"peer closed after {len(data)} of {size} bytes")
        data += chunk
    return data


def read_frame(conn: socket.socket) -> bytes:
    (length,) = struct.unpack(">I", recv_exactly(conn, 4))
    return recv_exactly(conn, length)


class FakeServer:
    """Speaks the wire protocol from a plain blocking socket, as scripted by the test."""

    def __init__(self, secret: bytes) -> None:
        self.secret = secret
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(4)
        self.listener.settimeout(DEADLINE_S)
        self.address = self.listener.getsockname()
        self.conns: list[socket.socket] = []

    def accept(self) -> socket.socket:
        conn, _ = self.listener.accept()
        conn.settimeout(DEADLINE_S)
        self.conns.append(conn)
        return conn

    def handshake(self, conn: socket.socket, proof_secret: bytes | None = None) -> None:
        client_nonce, _ = messages.decode_hello(memoryview(read_frame(conn)))
        conn.sendall(messages.encode_challenge(proof_secret or self.secret, client_nonce, bytes(32)))
        auth = read_frame(conn)
        assert messages.check_auth(memoryview(auth), self.secret, bytes(32), client_nonce)

    def requests(self, conn: socket.socket, count: int) -> dict:
        """receiver id -> initial credit, for the next ``count`` PartitionRequests."""
        found = {}
        while len(found) < count:
            frame = memoryview(read_frame(conn))
            if frame[0] == messages.PARTITION_REQUEST:
                receiver, _, _, _, credit = messages.decode_partition_request(frame)
                found[receiver] = credit
        return found

    @staticmethod
    def buffer(receiver: bytes, sequence: int, values, backlog: int = 0, buffers: int = 1) -> bytes:
        """One BufferResponse of ``values``' payload that says it carries ``buffers`` segments."""
        payload, _ = SpanningRecordSerializer().serialize_buffer(values, None)
        return FakeServer.raw(receiver, sequence, messages.FLAG_LAST_SEGMENT, payload, backlog, buffers)

    @staticmethod
    def event(receiver: bytes, sequence: int, event) -> bytes:
        payload = SpanningRecordSerializer().serialize_event(event)
        return FakeServer.raw(receiver, sequence, messages.FLAG_EVENT | messages.FLAG_LAST_SEGMENT, payload)

    @staticmethod
    def raw(receiver: bytes, sequence: int, flags: int, payload: bytes, backlog: int = 0, buffers: int = 1) -> bytes:
        header = messages.encode_buffer_response_header(receiver, sequence, backlog, flags, len(payload), buffers)
        return header + payload

    def close(self) -> None:
        for conn in self.conns:
            conn.close()
        self.listener.close()


@pytest.fixture
def fake_server(secret):
    server = FakeServer(secret)
    yield server
    server.close()


def two_channels(client, address, name="sink"):
    pool = client.create_floating_buffer_pool()
    channels = [RemoteInputChannel(client, address, ResultPartitionID(f"p{i}", "a"), i, pool) for i in range(2)]
    gates = [SingleInputGate(i, [channels[i]], f"{name} ({i + 1}/2)") for i in range(2)]
    return channels, [GateReader(gate) for gate in gates]


def two_channels_on_the_fake_server(network, fake_server, **client_settings):
    """Two channels of a fresh client, connected to ``fake_server`` through the handshake with
    both PartitionRequests read: ``(channels, readers, conn, initial credit per receiver id)``."""
    channels, readers = two_channels(network(**client_settings), fake_server.address)
    conn = fake_server.accept()
    fake_server.handshake(conn)
    return channels, readers, conn, fake_server.requests(conn, 2)


def test_a_corrupt_payload_fails_only_its_channel(network, fake_server):
    (x, y), (rx, ry), conn, credits = two_channels_on_the_fake_server(network, fake_server)
    assert credits == {x.receiver_id: 2, y.receiver_id: 2}
    conn.sendall(FakeServer.buffer(x.receiver_id, 0, [1, 2])
                 + FakeServer.raw(x.receiver_id, 1, messages.FLAG_LAST_SEGMENT, b"\x09garbage")
                 + FakeServer.buffer(y.receiver_id, 0, ["a"]) + FakeServer.buffer(y.receiver_id, 1, ["b"])
                 + FakeServer.event(y.receiver_id, 2, END_OF_PARTITION_EVENT))
    rx.take(rx.poll())  # what arrived intact comes first
    with pytest.raises(RemoteTransportError) as info:
        rx.poll()
    message = str(info.value)
    assert "remote input channel 0 of gate 0 of 'sink (1/2)'" in message
    assert "partition p0@a" in message and f"{fake_server.address[0]}:{fake_server.address[1]}" in message
    assert "could not decode a buffer" in message and "unknown format byte 9" in message
    assert ry.read_to_end() == [[("record", "a", None), ("record", "b", None), ("event", END_OF_PARTITION_EVENT)]]
    assert rx.streams == [[("record", 1, None), ("record", 2, None)]]
    rx.gate.close()
    ry.gate.close()
    assert x.statistics().exclusive_buffers_in_use == x.statistics().floating_buffers_in_use == 0


@pytest.mark.parametrize(
    "frame, expected",
    [
        (struct.pack(">IB", 1, 0x7F), "unexpected message type 0x7f"),
        (struct.pack(">I", 2**31) + b"\x20" * 16, "frame length 2147483648 from 127.0.0.1:"),
        (struct.pack(">IB", 5, messages.BUFFER_RESPONSE) + b"1234", "shorter than its header"),
    ],
    ids=["unknown type", "oversized length", "short header"],
)
def test_a_corrupt_frame_fails_every_channel_of_the_connection(network, fake_server, frame, expected):
    (x, y), (rx, ry), conn, _ = two_channels_on_the_fake_server(network, fake_server)
    conn.sendall(FakeServer.buffer(y.receiver_id, 0, ["before"]) + frame)
    for index, reader in enumerate((rx, ry)):
        with pytest.raises(RemoteTransportError, match=expected) as info:
            while True:
                reader.take(reader.poll())
        assert f"remote input channel 0 of gate {index} of 'sink ({index + 1}/2)'" in str(info.value)
        assert f"subpartition {index} of partition p{index}@a" in str(info.value)
    assert ry.streams == [[("record", "before", None)]]
    wait_until(lambda: x.connection_manager.connection_statistics() == (), "the connection is gone")
    rx.gate.close()
    ry.gate.close()


def test_a_truncated_frame_then_disconnect_names_the_truncation(network, fake_server):
    (x, y), (rx, ry), conn, _ = two_channels_on_the_fake_server(network, fake_server)
    whole = FakeServer.buffer(x.receiver_id, 0, list(range(100)))
    conn.sendall(whole[:40])
    conn.close()
    for reader in (rx, ry):
        with pytest.raises(RemoteTransportError, match=rf"truncated frame: 40 of {len(whole)} bytes received"):
            reader.poll()
        reader.gate.close()


def test_a_sender_ignoring_credit_is_a_protocol_error(network, fake_server):
    (x, y), (rx, ry), conn, _ = two_channels_on_the_fake_server(network, fake_server)
    conn.sendall(b"".join(FakeServer.buffer(x.receiver_id, i, [i]) for i in range(3)))
    rx.read_until(lambda: len(rx.streams[0]) == 2, recycle=False)  # 2 credits: fine so far
    with pytest.raises(RemoteTransportError, match="a data frame arrived without credit") as info:
        rx.poll()
    assert "remote input channel 0 of gate 0" in str(info.value)
    rx.recycle_held()
    rx.gate.close()
    ry.gate.close()


def test_a_frame_of_several_buffers_takes_a_credit_and_a_sequence_number_per_buffer(network, fake_server):
    (x, y), (rx, ry), conn, credits = two_channels_on_the_fake_server(network, fake_server)
    assert credits == {x.receiver_id: 2, y.receiver_id: 2}
    # 2 buffers with 2 credits. The first is free at once (copied into the reassembly buffer)
    # and reported a backlog of 1 (the second), for which a floating buffer is requested: one
    # AddCredit of 2. The next frame is number 2 (1 would be a reordering).
    conn.sendall(FakeServer.buffer(x.receiver_id, 0, list(range(100)), buffers=2))
    frame = memoryview(read_frame(conn))
    assert messages.decode_add_credit(frame) == (x.receiver_id, 2)
    conn.sendall(FakeServer.buffer(x.receiver_id, 2, ["next"]))
    rx.read_until(lambda: len(rx.streams[0]) == 101)
    assert [value for _, value, _ in rx.streams[0]] == list(range(100)) + ["next"]
    stats = x.statistics()
    assert (stats.segments_received, stats.buffers_received) == (3, 2)
    # the other channel: 3 buffers announced in one frame, with 2 credits
    conn.sendall(FakeServer.buffer(y.receiver_id, 0, ["too many"], buffers=3))
    with pytest.raises(RemoteTransportError, match="a data frame arrived without credit") as info:
        ry.poll()
    assert "remote input channel 0 of gate 1 of 'sink (2/2)'" in str(info.value)
    assert y.statistics().segments_received == 0 and ry.streams == [[]]
    rx.gate.close()
    ry.gate.close()
    for channel in (x, y):
        stats = channel.statistics()
        assert stats.exclusive_buffers_in_use == stats.floating_buffers_in_use == 0


@pytest.mark.parametrize("buffers", [0, 10_000], ids=["no buffer", "more buffers than bytes"])
def test_a_frame_with_an_impossible_buffer_count_fails_its_channel(network, fake_server, buffers):
    (x, y), (rx, ry), conn, _ = two_channels_on_the_fake_server(network, fake_server)
    conn.sendall(FakeServer.buffer(x.receiver_id, 0, ["intact"])
                 + FakeServer.buffer(x.receiver_id, 1, ["bad"], buffers=buffers)
                 + FakeServer.buffer(y.receiver_id, 0, ["other"]))
    rx.take(rx.poll())
    with pytest.raises(RemoteTransportError, match=rf"a data frame of \d+ bytes announced {buffers} buffers"):
        rx.poll()
    assert rx.streams == [[("record", "intact", None)]]
    ry.take(ry.poll())
    assert ry.streams == [[("record", "other", None)]]
    rx.gate.close()
    ry.gate.close()


def test_several_buffers_in_one_frame_need_flow_control(network, fake_server):
    (x, y), (rx, ry), conn, _ = two_channels_on_the_fake_server(network, fake_server, flow_control=False)
    conn.sendall(FakeServer.buffer(x.receiver_id, 0, ["two"], buffers=2))
    with pytest.raises(RemoteTransportError, match="more than 1 only with credit-based flow control"):
        rx.poll()
    rx.gate.close()
    ry.gate.close()


def test_out_of_order_buffers_are_detected(network, fake_server):
    (x, y), (rx, ry), conn, _ = two_channels_on_the_fake_server(network, fake_server)
    conn.sendall(FakeServer.buffer(x.receiver_id, 1, ["skipped 0"]))
    with pytest.raises(RemoteTransportError, match="buffer reordering: expected sequence number 0, received 1"):
        rx.poll()
    rx.gate.close()
    ry.gate.close()


def test_a_server_that_cannot_prove_the_secret_is_dropped_before_anything_is_read(network, fake_server):
    client = network()
    (x, y), (rx, ry) = two_channels(client, fake_server.address)
    conn = fake_server.accept()
    client_nonce, _ = messages.decode_hello(memoryview(read_frame(conn)))
    conn.sendall(messages.encode_challenge(os.urandom(32), client_nonce, bytes(32))
                 + FakeServer.buffer(x.receiver_id, 0, ["never decoded"]))
    with pytest.raises(RemoteTransportError, match="the server failed to prove it knows the shared secret") as info:
        rx.poll()
    assert isinstance(info.value.cause, AuthenticationError)
    assert x.statistics().buffers_received == 0
    rx.gate.close()
    ry.gate.close()


def test_a_client_with_the_wrong_secret_is_refused_and_others_are_served(network, partitions):
    server = network(partitions)
    partition = make_partition(partitions, "guarded", 2)
    # A raw client that does not know the secret: wrong proof, then a partition request.
    with socket.create_connection(server.server_address, timeout=DEADLINE_S) as raw:
        client_nonce = os.urandom(32)
        raw.sendall(messages.encode_hello(client_nonce, True))
        challenge = read_frame(raw)
        assert challenge[0] == messages.CHALLENGE
        server_nonce = challenge[1:33]  # it cannot check the server's proof: it has no secret
        raw.sendall(messages.encode_auth(os.urandom(32), server_nonce, client_nonce)
                    + messages.encode_partition_request(os.urandom(16), "guarded", "attempt-0", 0, 2))
        assert read_frame(raw) == bytes([messages.AUTH_FAILED])
        assert raw.recv(1) == b""  # closed by the server
    # The request was never parsed: the subpartition is still unconsumed.
    view = partitions.create_subpartition_view(partition.partition_id, 0, lambda: None)
    view.release()

    # A client with another secret: the handshake fails on its side, naming the address.
    stranger = network(secret=os.urandom(32))
    channel = RemoteInputChannel(stranger, server.server_address, partition.partition_id, 1,
                                 stranger.create_floating_buffer_pool())
    reader = GateReader(SingleInputGate(0, [channel], "stranger"))
    with pytest.raises(RemoteTransportError, match="failed to prove it knows the shared secret"):
        reader.poll()
    reader.gate.close()

    # A client with the right secret is served on its own connection.
    friend = network()
    channel = RemoteInputChannel(friend, server.server_address, partition.partition_id, 1,
                                 friend.create_floating_buffer_pool())
    reader = GateReader(SingleInputGate(0, [channel], "friend"))
    emit(partition, 1, ["hello"])
    partition.finish()
    assert reader.read_to_end() == [[("record", "hello", None), ("event", END_OF_PARTITION_EVENT)]]
    reader.gate.close()


def test_garbage_from_an_unauthenticated_peer_closes_only_its_connection(network, partitions):
    server = network(partitions)
    client = network()
    partition = make_partition(partitions, "safe", 1)
    channel = RemoteInputChannel(client, server.server_address, partition.partition_id, 0,
                                 client.create_floating_buffer_pool())
    reader = GateReader(SingleInputGate(0, [channel], "sink"))
    emit(partition, 0, [1])
    reader.take(reader.poll())
    for garbage in (b"\xff" * 64, struct.pack(">I", 100) + b"\x01" * 100, b"GET / HTTP/1.1\r\n\r\n"):
        with socket.create_connection(server.server_address, timeout=DEADLINE_S) as raw:
            raw.sendall(garbage)
            assert raw.recv(64) == b""  # refused and closed
    emit(partition, 0, [2])
    partition.finish()
    assert reader.read_to_end()[0][1:] == [("record", 2, None), ("event", END_OF_PARTITION_EVENT)]
    reader.gate.close()


def test_a_peer_disconnect_fails_its_channels_and_leaves_other_connections_alone(network, secret):
    managers = [ResultPartitionManager(), ResultPartitionManager()]
    servers = [network(m, name=f"producer-{i}") for i, m in enumerate(managers)]
    client = network(name="consumer")
    parts = [make_partition(m, f"from-{i}", 1) for i, m in enumerate(managers)]
    channels = [RemoteInputChannel(client, s.server_address, p.partition_id, 0, client.create_floating_buffer_pool())
                for s, p in zip(servers, parts)]
    readers = [GateReader(SingleInputGate(0, [c], f"sink ({i + 1}/2)")) for i, c in enumerate(channels)]
    for part in parts:
        emit(part, 0, ["first"])
    for reader in readers:
        reader.take(reader.poll())
    wait_until(lambda: len(client.connection_statistics()) == 2, "one connection per producer process")

    servers[0].shutdown()  # the first producer's process goes away
    with pytest.raises(RemoteTransportError) as info:
        readers[0].poll()
    message = str(info.value)
    host, port = servers[0].server_address
    assert f"remote input channel 0 of gate 0 of 'sink (1/2)' reading subpartition 0 of partition " \
           f"from-0@attempt-0 from {host}:{port}" in message
    assert f"connection closed by {host}:{port}" in message or "reset" in message
    assert isinstance(info.value.cause, ConnectionError)

    emit(parts[1], 0, ["second"])
    parts[1].finish()
    assert readers[1].read_to_end() == [[("record", "first", None), ("record", "second", None),
                                         ("event", END_OF_PARTITION_EVENT)]]
    for reader in readers:
        reader.gate.close()
    for manager in managers:
        manager.shutdown()


def test_connecting_is_retried_then_fails_naming_the_address(network):
    client = network(connect_timeout_s=0.2)
    port = free_port()
    channel = RemoteInputChannel(client, ("127.0.0.1", port), ResultPartitionID("p", "a"), 0,
                                 client.create_floating_buffer_pool())
    reader = GateReader(SingleInputGate(0, [channel], "sink"))
    with pytest.raises(LocalTransportError) as info:
        reader.poll()
    message = str(info.value)
    assert f"connecting to 127.0.0.1:{port} failed after" in message and "attempts" in message
    assert "remote input channel 0 of gate 0 of 'sink' reading subpartition 0 of partition p@a" in message
    assert info.value.address == ("127.0.0.1", port)
    reader.gate.close()


def test_a_server_that_starts_late_is_reached_by_retrying(network, secret, partitions):
    client = network()
    port = free_port()
    channel = RemoteInputChannel(client, ("127.0.0.1", port), ResultPartitionID("later", "attempt-0"), 0,
                                 client.create_floating_buffer_pool())
    reader = GateReader(SingleInputGate(0, [channel], "sink"))
    wait_until(lambda: any(s.connect_attempts >= 2 for s in client.connection_statistics()), "refused twice")
    network(partitions, port=port)
    partition = make_partition(partitions, "later", 1)
    emit(partition, 0, ["finally"])
    partition.finish()
    assert reader.read_to_end() == [[("record", "finally", None), ("event", END_OF_PARTITION_EVENT)]]
    reader.gate.close()


def test_shutting_down_the_consumer_side_fails_its_channels_clearly(network, partitions):
    server = network(partitions)
    client = network(name="consumer")
    partition = make_partition(partitions, "cut", 1)
    channel = RemoteInputChannel(client, server.server_address, partition.partition_id, 0,
                                 client.create_floating_buffer_pool())
    reader = GateReader(SingleInputGate(0, [channel], "sink"))
    emit(partition, 0, [1])
    reader.take(reader.poll())
    client.shutdown()
    with pytest.raises(LocalTransportError, match="the network stack 'consumer' of this process shut down"):
        reader.poll()
    reader.gate.close()
    wait_until(lambda: partition.is_released(), "the producer sees its consumer gone")


def test_a_channel_of_a_stack_that_was_never_started_fails_when_polled(secret):
    manager = NettyConnectionManager(NettyConfig(secret=secret), name="idle")
    channel = RemoteInputChannel(manager, ("127.0.0.1", 1), ResultPartitionID("p", "a"), 0,
                                 manager.create_floating_buffer_pool())
    gate = SingleInputGate(0, [channel], "sink")
    gate.setup()
    with pytest.raises(LocalTransportError, match="start\\(\\) was not called"):
        gate.poll_next()
    gate.close()
    manager.shutdown()


def test_a_silent_peer_is_disconnected_after_the_handshake_timeout(network, partitions, fake_server):
    server = network(partitions, handshake_timeout_s=0.2)
    with socket.create_connection(server.server_address, timeout=DEADLINE_S) as silent:
        assert silent.recv(1) == b""  # the server hung up on a client that never said hello
    client = network(handshake_timeout_s=0.2)
    channel = RemoteInputChannel(client, fake_server.address, ResultPartitionID("p", "a"), 0,
                                 client.create_floating_buffer_pool())
    reader = GateReader(SingleInputGate(0, [channel], "sink"))
    fake_server.accept()  # ...and never answers the Hello
    with pytest.raises(RemoteTransportError, match=r"handshake with 127.0.0.1:\d+ did not complete within 0.2s"):
        reader.poll()
    reader.gate.close()
