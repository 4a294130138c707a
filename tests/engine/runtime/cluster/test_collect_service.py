"""Collecting sinks in cluster mode: sink subtasks (here: a real second process, or threads)
write through ``RemoteCollectChannel`` sockets to the client's ``CollectServer``, which fills
the client's ``CollectChannel``.

Real sockets on 127.0.0.1; every server is closed at teardown and must leave no thread running.
Waits poll a condition with a generous deadline and fail loudly when it expires.
"""

from __future__ import annotations

import datetime
import decimal
import multiprocessing
import os
import pickle
import socket
import struct
import threading
import time
import traceback
from typing import Any, Callable, List

import pytest

from rill.common.row import Row, RowKind
from rill.network.api.serialization.value_codec import pack_records
from rill.network.netty import messages
from rill.operators.collect_sink import (
    CollectChannel,
    CollectSinkOperator,
    register_channel,
    register_remote_endpoint,
    release_channel,
    release_remote_endpoint,
)
from rill.operators.testing import OneInputStreamOperatorTestHarness
from rill.runtime.cluster.collect_service import (
    CollectAuthenticationError,
    CollectConnectionError,
    CollectServer,
    RemoteCollectChannel,
)

DEADLINE_S = 30.0
SECRET = b"collect-test-secret-0123456789ab"
CONTEXT = multiprocessing.get_context("spawn")

# The collect protocol's frame types (see rill.runtime.cluster.collect_service).
OPEN, ACCEPTED, BATCH, END, END_ACK, ERROR = 0x40, 0x41, 0x42, 0x43, 0x44, 0x45


def wait_until(predicate: Callable[[], bool], what: str, timeout_s: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting until {what}")
        time.sleep(0.002)


def collect_threads() -> List[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("rill-collect")]


def open_sockets() -> int:
    """The number of sockets this process has open (Linux: /proc; elsewhere 0)."""
    fd_dir = "/proc/self/fd"
    if not os.path.isdir(fd_dir):
        return 0
    count = 0
    for fd in os.listdir(fd_dir):
        try:
            count += os.readlink(os.path.join(fd_dir, fd)).startswith("socket:")
        except OSError:
            pass
    return count


@pytest.fixture
def server():
    """``server(**kwargs)`` -> a started CollectServer; all closed at teardown, with every thread
    joined."""
    servers: List[CollectServer] = []

    def make(**kwargs) -> CollectServer:
        s = CollectServer(kwargs.pop("secret", SECRET), **kwargs)
        s.start()
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.close()
    assert not [s for s in servers if s.is_running()], "a CollectServer thread is still running"
    assert collect_threads() == []


class Reader:
    """The client: takes batches from a channel until it ends (what CloseableIterator does)."""

    def __init__(self, channel: CollectChannel) -> None:
        self.channel = channel
        self.batches: List[list] = []
        self.error: Any = None
        self.thread = threading.Thread(target=self._run, name="test-reader", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while True:
                batch = self.channel.get_batch()
                if batch is None:
                    return
                self.batches.append(batch)
        except BaseException as error:  # noqa: BLE001
            self.error = error

    def join(self) -> List[list]:
        self.thread.join(DEADLINE_S)
        assert not self.thread.is_alive(), "the reader did not see the end of the channel"
        return self.batches


# ---------------------------------------------------------------------- the sink process

def script(subtask: int) -> List[list]:
    """The batches sink subtask ``subtask`` writes: tuples (columnar path), Rows (named, with a
    row kind, nested), datetimes, dates, Decimals, big ints, nested lists and dicts. Every
    record's first field is the subtask index and its second the batch number."""
    tz = datetime.timezone(datetime.timedelta(hours=5, minutes=30))
    batches = []
    for b in range(40):
        kind = b % 4
        if kind == 0:
            batch = [(subtask, b, i, f"s{i}", i * 0.5, datetime.datetime(2024, 1, 1, 12, 0, i % 60, tzinfo=tz))
                     for i in range(50)]
        elif kind == 1:
            batch = []
            for i in range(30):
                row = Row(subtask, b, i, [i, [i, (i, "x")]], datetime.date(2024, 2, i % 28 + 1))
                if i % 2:
                    row.set_field_names(["sub", "batch", "i", "nested", "day"])
                    row.set_row_kind(RowKind.UPDATE_AFTER)
                batch.append(row)
        elif kind == 2:
            batch = [[subtask, b, i, [datetime.datetime(2023, 12, 31, 23, 59, 59, i), [decimal.Decimal("1.25"), []]]]
                     for i in range(20)]
        else:
            batch = [(subtask, b, 2 ** 70 + i, None, {"k": (i, [i])}, b"\x00\xff") if i % 2 else (subtask, b)
                     for i in range(25)]
        batches.append(batch)
    return batches


def sink_process(address, secret: bytes, channel_id: str, result_path: str) -> None:
    """A task process running sink subtasks 0 and 1 (two threads) of a collecting sink, each an
    operator driven by the test harness; writes "ok" or the tracebacks to ``result_path``."""
    errors: List[str] = []
    try:
        register_remote_endpoint(channel_id, tuple(address), secret)

        def run(subtask: int) -> None:
            try:
                operator = CollectSinkOperator(channel_id)
                with OneInputStreamOperatorTestHarness(operator, parallelism=2, subtask_index=subtask) as harness:
                    for batch in script(subtask):
                        harness.process_batch(batch)
                    assert harness.extract_output_values() == []
            except BaseException:  # noqa: BLE001
                errors.append(traceback.format_exc())

        threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    except BaseException:  # noqa: BLE001
        errors.append(traceback.format_exc())
    with open(result_path + ".tmp", "w") as f:
        f.write("\n".join(errors) if errors else "ok")
    os.replace(result_path + ".tmp", result_path)


def test_two_sink_subtasks_in_another_process_deliver_exactly_and_in_order(server, tmp_path):
    s = server()
    channel = CollectChannel("job-results", max_batches=4)  # bounded: the writers are paced by the reader
    s.attach(channel, expected_writers=2)
    reader = Reader(channel)
    result_path = str(tmp_path / "sink-process.txt")
    process = CONTEXT.Process(target=sink_process, args=(s.address, SECRET, channel.channel_id, result_path),
                              daemon=True)
    process.start()
    try:
        assert s.wait_writers_done(channel.channel_id, timeout_s=DEADLINE_S * 2) == []
        channel.end()
        batches = reader.join()
        process.join(DEADLINE_S)
        assert process.exitcode == 0
    finally:
        if process.is_alive():
            process.kill()
            process.join()
    with open(result_path) as f:
        assert f.read() == "ok"
    assert reader.error is None
    for subtask in range(2):
        expected = script(subtask)
        got = [batch for batch in batches if batch[0][0] == subtask]
        assert got == expected  # every record, each batch whole, in the writer's order
        assert repr(got) == repr(expected)  # exact types too: tuples, Rows, tz-aware datetimes
    assert len(batches) == 80
    stats = s.writer_statistics(channel.channel_id)
    assert {i: (w["ended"], w["connected"], w["batches"], w["error"]) for i, w in stats.items()} == {
        0: (True, False, 40, None), 1: (True, False, 40, None)}
    assert s.handshake_errors() == []


# ---------------------------------------------------------------------- raw peers

def raw_connect(address) -> socket.socket:
    sock = socket.create_connection(address, timeout=DEADLINE_S)
    return sock


def read_frame(sock: socket.socket):
    """(type, body) of the next frame, or None at the end of the stream."""
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            return None
        head += chunk
    (length,) = struct.unpack(">I", head)
    body = b""
    while len(body) < length:
        chunk = sock.recv(length - len(body))
        assert chunk, "truncated frame"
        body += chunk
    return body[0], body[1:]


def read_until_closed(sock: socket.socket) -> list:
    """The frames read until the peer closed or reset the connection."""
    frames = []
    try:
        while (frame := read_frame(sock)) is not None:
            frames.append(frame)
    except ConnectionResetError:
        pass
    return frames


def open_frame(channel_id: str, subtask: int) -> bytes:
    cid = channel_id.encode()
    return struct.pack(">IBI", 5 + len(cid), OPEN, subtask) + cid


def batch_frame(payload: bytes) -> bytes:
    return struct.pack(">IB", len(payload) + 1, BATCH) + payload


def handshake(sock: socket.socket, proof_secret: bytes) -> bytes:
    """Hello, Challenge; returns the Auth frame proving ``proof_secret`` (not sent)."""
    client_nonce = messages.new_nonce()
    sock.sendall(messages.encode_hello(client_nonce, False))
    kind, body = read_frame(sock)
    assert kind == messages.CHALLENGE
    server_nonce = body[:32]
    return messages.encode_auth(proof_secret, server_nonce, client_nonce)


class Mkdir:
    """Unpickling it creates a directory: proof that a payload was deserialized."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return os.mkdir, (self.path,)


def evil_payload(path: str) -> bytes:
    # value_codec's whole-batch pickle format: unpack_records would unpickle it
    return b"\x03" + pickle.dumps(([Mkdir(path)], None), protocol=5)


def test_wrong_secret_is_refused_before_anything_is_deserialized(server, tmp_path):
    s = server()
    channel = CollectChannel("c", max_batches=0)
    s.attach(channel, expected_writers=1)

    # 1. a wrong proof, followed at once by Open and a batch whose unpickling has a side effect
    marker = str(tmp_path / "unpickled-wrong-secret")
    with raw_connect(s.address) as sock:
        auth = handshake(sock, b"not-the-secret")
        sock.sendall(auth + open_frame("c", 0) + batch_frame(evil_payload(marker)) + bytes([0, 0, 0, 1, END]))
        # AuthFailed, then the server closes (a reset: it leaves the unread frames unread)
        assert read_until_closed(sock) in ([(messages.AUTH_FAILED, b"")], [])
    # 2. the same batch as the very first frame, without any handshake
    marker2 = str(tmp_path / "unpickled-no-handshake")
    with raw_connect(s.address) as sock:
        sock.sendall(batch_frame(evil_payload(marker2)))
        assert read_until_closed(sock) == []
    wait_until(lambda: len(s.handshake_errors()) == 2, "both connections are refused")
    assert not os.path.exists(marker) and not os.path.exists(marker2)
    assert isinstance(s.handshake_errors()[0], CollectAuthenticationError)
    assert channel.drain() == []
    assert s.writer_statistics("c") == {}

    # control: with the right secret the very same frames are deserialized (the marker appears),
    # so the absence above proves the refusal came before deserialization
    control = str(tmp_path / "unpickled-right-secret")
    with raw_connect(s.address) as sock:
        auth = handshake(sock, SECRET)
        sock.sendall(auth + open_frame("c", 0) + batch_frame(evil_payload(control)) + bytes([0, 0, 0, 1, END]))
        assert read_frame(sock)[0] == ACCEPTED
        assert read_frame(sock) == (END_ACK, b"")
    assert s.wait_writers_done("c", DEADLINE_S) == []
    assert os.path.isdir(control)
    assert channel.drain() == [None]  # os.mkdir's result


def test_remote_channel_errors_name_the_channel_and_the_address(server):
    s = server()
    s.attach(CollectChannel("known"), expected_writers=1)
    where = f"{s.address[0]}:{s.address[1]}"
    with pytest.raises(CollectAuthenticationError) as info:
        RemoteCollectChannel("known", 0, s.address, b"wrong secret")
    assert "known" in str(info.value) and where in str(info.value)
    assert info.value.channel_id == "known" and info.value.address == s.address
    with pytest.raises(CollectConnectionError, match=r"not attached") as info:
        RemoteCollectChannel("unknown", 0, s.address, SECRET)
    assert "unknown" in str(info.value) and where in str(info.value)
    with pytest.raises(CollectConnectionError, match=r"expects sink subtasks 0\.\.0, got subtask 3"):
        RemoteCollectChannel("known", 3, s.address, SECRET)
    first = RemoteCollectChannel("known", 0, s.address, SECRET)
    with pytest.raises(CollectConnectionError, match=r"connected already"):
        RemoteCollectChannel("known", 0, s.address, SECRET)
    first.close()
    assert s.wait_writers_done("known", DEADLINE_S) == []

    # nothing listens: retried, then refused
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()
    started = time.monotonic()
    with pytest.raises(CollectConnectionError, match=r"cannot connect after \d+ attempts") as info:
        RemoteCollectChannel("known", 0, free, SECRET, connect_timeout_s=0.5)
    assert time.monotonic() - started >= 0.3
    assert f"{free[0]}:{free[1]}" in str(info.value) and "known" in str(info.value)
    assert isinstance(info.value.__cause__, ConnectionRefusedError)


def test_peer_disconnecting_mid_frame_counts_as_done_with_an_error(server):
    s = server()
    channel = CollectChannel("c")
    s.attach(channel, expected_writers=3)
    # subtask 0: one good batch, then half a frame, then gone
    with raw_connect(s.address) as sock:
        sock.sendall(handshake(sock, SECRET) + open_frame("c", 0))
        assert read_frame(sock)[0] == ACCEPTED
        good = pack_records([(0, "kept")], None)
        sock.sendall(batch_frame(good) + struct.pack(">IB", 1000, BATCH) + b"partial")
    # subtask 1: gone between frames, without an end frame
    writer = RemoteCollectChannel("c", 1, s.address, SECRET)
    writer.put_batch([(1, "kept")])
    writer.abort()
    writer.close()  # after abort: nothing to do
    # subtask 2 ends cleanly
    clean = RemoteCollectChannel("c", 2, s.address, SECRET)
    clean.put_batch([(2, "kept")])
    clean.close()

    errors = s.wait_writers_done("c", DEADLINE_S)
    assert [e.subtask_index for e in errors] == [0, 1]
    assert all(isinstance(e, CollectConnectionError) and e.channel_id == "c" for e in errors)
    assert "middle of a frame" in str(errors[0]) and "subtask 0" in str(errors[0])
    assert "without an end frame" in str(errors[1])
    assert sorted(channel.drain()) == [(0, "kept"), (1, "kept"), (2, "kept")]
    stats = s.writer_statistics("c")
    assert [stats[i]["ended"] for i in range(3)] == [False, False, True]


def test_server_error_reaches_the_writer(server):
    s = server()
    s.attach(CollectChannel("c"), expected_writers=1)
    writer = RemoteCollectChannel("c", 0, s.address, SECRET)
    writer._send(batch_frame(b"\x09garbage"))  # an undecodable payload (unknown format)
    wait_until(lambda: s.writer_statistics("c")[0]["error"] is not None, "the server fails the writer")
    with pytest.raises(CollectConnectionError, match=r"Corrupt records payload") as info:
        writer.put_batch([1])  # the server's error frame is waiting: reported, nothing sent
    assert info.value.subtask_index == 0
    writer.close()  # the failure was reported: close only releases the socket
    [error] = s.wait_writers_done("c", DEADLINE_S)
    assert "Corrupt records payload" in str(error)


def test_a_full_channel_backpressures_the_writer(server):
    s = server()
    channel = CollectChannel("c", max_batches=1)
    s.attach(channel, expected_writers=1)
    total, size = 48, 1 << 20  # 48 MiB: more than the channel, the server and both socket buffers hold
    sent = [0]
    failure: List[BaseException] = []

    def write() -> None:
        try:
            writer = RemoteCollectChannel("c", 0, s.address, SECRET)
            for i in range(total):
                writer.put_batch([bytes([i]) * size])
                sent[0] += 1
            writer.close()
        except BaseException as error:  # noqa: BLE001
            failure.append(error)

    thread = threading.Thread(target=write, name="test-writer", daemon=True)
    thread.start()
    # the writer stalls: the channel is full and the writer makes no progress while nobody reads
    deadline = time.monotonic() + DEADLINE_S
    while True:
        before = sent[0]
        time.sleep(0.5)
        if sent[0] == before and before > 0 and channel._queue.full():
            break
        assert time.monotonic() < deadline and not failure, f"the writer never stalled ({sent[0]} sent)"
    assert sent[0] < total and thread.is_alive() and not failure, sent[0]
    # the reader takes: the writer resumes and everything arrives, in order
    got = []
    while len(got) < total:
        batch = channel.get_batch(timeout_s=DEADLINE_S)
        got.append(batch[0])
    thread.join(DEADLINE_S)
    assert not thread.is_alive() and not failure
    assert sent[0] == total
    assert [v[0] for v in got] == list(range(total)) and all(len(v) == size for v in got)
    assert s.wait_writers_done("c", DEADLINE_S) == []


def test_close_leaves_nothing_running(server):
    sockets_before = open_sockets()
    s = CollectServer(SECRET)
    s.start()
    channel = CollectChannel("c", max_batches=1)
    s.attach(channel, expected_writers=3)
    # subtask 0 is blocked on the full channel, subtask 1 idles, subtask 2 never connects,
    # and one peer stops in the middle of the handshake
    blocked = RemoteCollectChannel("c", 0, s.address, SECRET)
    blocked.put_batch([1])
    blocked.put_batch([2])
    idle = RemoteCollectChannel("c", 1, s.address, SECRET)
    half = raw_connect(s.address)
    wait_until(lambda: channel._queue.full() and s.writer_statistics("c")[0]["batches"] == 1,
               "subtask 0's second batch waits for room")
    s.close()
    s.close()  # idempotent
    assert not s.is_running() and collect_threads() == []
    for writer in (blocked, idle):
        with pytest.raises(CollectConnectionError):
            writer.close()  # the server is gone: the end is not acknowledged
    half.close()
    assert open_sockets() == sockets_before
    stats = s.writer_statistics("c")
    assert [stats[i]["ended"] for i in (0, 1)] == [False, False]
    assert all("closed" in str(stats[i]["error"]) for i in (0, 1))
    with pytest.raises(RuntimeError, match=r"sink subtasks \[2\] of 3 have not ended"):
        s.wait_writers_done("c", 1.0)
    assert channel.drain() == [1]  # what was delivered stays in the channel


def test_wait_writers_done_times_out_naming_the_pending_subtasks(server):
    s = server()
    s.attach(CollectChannel("c"), expected_writers=2)
    writer = RemoteCollectChannel("c", 1, s.address, SECRET)
    with pytest.raises(TimeoutError, match=r"sink subtasks \[0, 1\] of 2"):
        s.wait_writers_done("c", timeout_s=0.2)
    writer.close()
    with pytest.raises(TimeoutError, match=r"sink subtasks \[0\] of 2"):
        s.wait_writers_done("c", timeout_s=0.2)
    with pytest.raises(KeyError):
        s.wait_writers_done("other", timeout_s=0.2)


# ---------------------------------------------------------------------- through the operator

def test_collect_sink_operator_writes_to_a_registered_remote_endpoint(server):
    s = server()
    channel = CollectChannel("remote-op")  # not registered in this process: the operator goes remote
    s.attach(channel, expected_writers=2)
    register_remote_endpoint("remote-op", s.address, SECRET)
    try:
        harnesses = [OneInputStreamOperatorTestHarness(CollectSinkOperator("remote-op"), parallelism=2,
                                                       subtask_index=i) for i in range(2)]
        for h in harnesses:
            h.open()
        harnesses[1].process_batch([(1, "a"), (1, "b")], [10, 20])
        harnesses[0].process_element(Row(0, datetime.datetime(2024, 5, 1)), 5)
        harnesses[1].process_watermark(100)
        harnesses[0].process_batch([[0, [1, 2]]])
        for h in harnesses:
            h.close()
            assert h.get_output() == []
        assert s.wait_writers_done("remote-op", DEADLINE_S) == []
        channel.end()
        batches = Reader(channel).join()
    finally:
        release_remote_endpoint("remote-op")
    assert [b for b in batches if b[0][0] == 1] == [[(1, "a"), (1, "b")]]
    assert [b for b in batches if b[0][0] == 0] == [[Row(0, datetime.datetime(2024, 5, 1))], [[0, [1, 2]]]]
    assert s.writer_statistics("remote-op")[0]["records"] == 2


def test_a_local_channel_takes_precedence_and_unknown_channels_still_fail(server):
    s = server()
    local = register_channel()
    register_remote_endpoint(local.channel_id, s.address, SECRET)
    try:
        with OneInputStreamOperatorTestHarness(CollectSinkOperator(local.channel_id)) as h:
            h.process_batch([1, 2])
        assert local.drain() == [1, 2]
    finally:
        release_remote_endpoint(local.channel_id)
        release_channel(local.channel_id)
    with pytest.raises(RuntimeError, match=r"is not registered in this process"):
        OneInputStreamOperatorTestHarness(CollectSinkOperator("nowhere")).open()


def test_collect_sink_operator_fails_clearly_when_the_server_is_unreachable():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()
    register_remote_endpoint("gone", free, SECRET, connect_timeout_s=0.2)
    try:
        harness = OneInputStreamOperatorTestHarness(CollectSinkOperator("gone"), parallelism=3, subtask_index=2)
        with pytest.raises(CollectConnectionError, match=r"collect channel gone \(sink subtask 2\)"):
            harness.open()
        harness.close()  # close after a failed open is fine
    finally:
        release_remote_endpoint("gone")
