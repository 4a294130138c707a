"""Network throughput between two processes: Rill's remote data plane against a raw socket and
a hand-written msgpack-over-socket loop, measured in the same run.

    python -m bench.network                                    # the sweep in bench/README.md
    python -m bench.network --record-shape bytes16k --compression off --repeat 5
    python -m bench.network --records 200000 --record-shape tuple --json out/net.json

One producer process (``multiprocessing`` spawn; its output is not piped) serves every run; the
benchmark's own process is the consumer and does the timing. Per record shape and compression
setting, each repetition runs three sides, alternating their order:

``rill``
    Producer: ``RecordWriter`` -> ``ResultPartition`` (``PIPELINED_BOUNDED``, the engine's pool
    of 2 + 8 buffers) served by a ``NettyConnectionManager``. Consumer: one
    ``RemoteInputChannel`` in a ``SingleInputGate``, drained on the main thread as a task's
    input loop does (poll, wait for the availability listener when empty), every buffer decoded
    and every record checked, then recycled. Default ``NettyConfig`` (32 KiB segments, 2
    exclusive + 8 floating buffers, credit-based flow control) unless told otherwise.
``raw``
    A blocking TCP socket moving **exactly the number of bytes Rill put on the wire** in this
    repetition (the connection's ``bytes_received``: framing, credit and handshake included),
    ``sendall`` of 256 KiB chunks, ``recv_into`` a 256 KiB buffer, nothing decoded: the ceiling.
    It is run five times per repetition and the fastest counts (a transfer of a few hundred
    MB takes ~0.1 s: one disturbed by other load would lower the ceiling and flatter Rill).
``hand``
    The hand-written sender/receiver for the same records in the same batches: one
    ``pack`` of a reused ``msgpack.Packer`` per batch (and ``lz4.block`` when compression is on),
    length-prefixed on a blocking socket; ``unpackb(use_list=False)`` on the other side (records come back as the
    same tuples), then the same per-record check as Rill's consumer.

Correctness is checked on every run, warm-up included, so a broken data plane cannot print a
good ratio: the consumer compares every received record with the record expected at its
position in the stream (a C-level ``list ==``: each ``bytes`` field by ``memcmp``), counts the
records and sums their integer field; the producer reports what it sent. Count, checksum and
content must agree (:class:`NetworkResultMismatch` otherwise).

Figures: medians over the repetitions; a ratio is the median of the per-repetition ratios
(min-max given). ``ratio raw`` = Rill's wire bytes/s ÷ the raw socket's bytes/s (the same
bytes, so raw time ÷ Rill time); ``ratio hand`` = Rill records/s ÷ the hand-written loop's.
"""

from __future__ import annotations

import argparse
import functools
import gc
import itertools
import json
import multiprocessing
import operator
import os
import random
import socket
import statistics
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from bench.harness import ResultMismatch, machine_info
from rill.network.api.serialization.record_serializer import DEFAULT_SEGMENT_SIZE_BYTES

__all__ = [
    "SHAPES",
    "Shape",
    "RecordStream",
    "StreamCheck",
    "NetworkResultMismatch",
    "ProducerProcess",
    "RillRun",
    "run_rill",
    "run_raw",
    "run_hand",
    "NetworkMeasurement",
    "measure",
    "crossover",
    "format_table",
    "main",
]

#: The record pool is this many batches; the stream cycles through it.
_POOL_BATCHES = 8
#: The target the issue sets: Rill's bytes/s at least this fraction of the raw socket's.
TARGET_RAW_RATIO = 0.5
#: Raw-socket transfers per repetition; the fastest counts.
RAW_TRANSFERS = 5
_TIMEOUT_S = 120.0
_RAW_CHUNK = 256 * 1024


# -- records ---------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _corpus(seed: int = 7, size: int = 4 * 1024 * 1024) -> bytes:
    """4 MiB of text-like bytes: words of 2-9 letters from a 2,000-word vocabulary, drawn with
    Zipf-like weights (lz4 shrinks it about as much as log lines or JSON)."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocabulary = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(2000)]
    weights = [1.0 / (rank + 1) for rank in range(len(vocabulary))]
    text = " ".join(rng.choices(vocabulary, weights, k=size // 5)).encode("ascii")
    while len(text) < size:
        text += text
    return text[:size]


@dataclass(frozen=True)
class Shape:
    """A record shape: ``tuple`` is ``(f"key-{i % 1000}", i, i * 0.5)`` (≈20 bytes serialized);
    ``bytesN`` is ``(i, blob)``, ``blob`` ``N`` bytes cut from a text-like corpus at a random
    offset (every record of the pool has its own; lz4 finds no repeated records inside its
    window, only the text's own redundancy). ``checksum_field`` is the integer field both
    sides sum."""

    name: str
    blob_bytes: int            # 0 for the tuple shape
    default_records: int
    checksum_field: int

    def make_pool(self, size: int, seed: int = 7) -> List[tuple]:
        """The first ``size`` records of the stream's cycle (deterministic: both processes
        build the same pool)."""
        if self.blob_bytes == 0:
            return [(f"key-{i % 1000}", i, i * 0.5) for i in range(size)]
        corpus = _corpus()
        rng = random.Random(seed)
        n = self.blob_bytes
        return [(i, corpus[offset:offset + n]) for i, offset in
                enumerate(rng.randrange(len(corpus) - n) for _ in range(size))]

    @property
    def nominal_record_bytes(self) -> int:
        return self.blob_bytes or 20


def _shape(name: str, blob_bytes: int, records: int) -> Shape:
    return Shape(name, blob_bytes, records, 1 if blob_bytes == 0 else 0)


#: The sweep, smallest records first; default record counts give runs of ≈0.3-1 s on Rill.
SHAPES: Dict[str, Shape] = {s.name: s for s in [
    _shape("tuple", 0, 2_000_000),
    _shape("bytes100", 100, 1_000_000),
    _shape("bytes1k", 1024, 400_000),
    _shape("bytes4k", 4096, 150_000),
    _shape("bytes16k", 16 * 1024, 40_000),
    _shape("bytes64k", 64 * 1024, 10_000),
]}


def records_per_buffer_for(shape: Shape, requested: Optional[int]) -> int:
    """Records per buffer: ``requested``, else Rill's default (1024, the engine's
    ``taskmanager.network.records-per-buffer``) capped so that a buffer's payload stays near
    1 MiB (1024 records of 64 KiB would make a 64 MiB buffer, beyond the default maximum
    payload; the cap is measured in bench/README.md)."""
    if requested:
        return requested
    return max(1, min(1024, (1024 * 1024) // shape.nominal_record_bytes))


class RecordStream:
    """``num_records`` records: the shape's pool of ``records_per_buffer * 8`` records,
    cycled, emitted in batches of ``records_per_buffer``. Both processes build it from the same
    arguments."""

    def __init__(self, shape: Shape, num_records: int, records_per_buffer: int) -> None:
        if num_records < 1 or records_per_buffer < 1:
            raise ValueError("num_records and records_per_buffer must be >= 1")
        self.shape = shape
        self.num_records = num_records
        self.records_per_buffer = records_per_buffer
        self.pool = shape.make_pool(records_per_buffer * _POOL_BATCHES)
        self.pool_batches = [self.pool[k * records_per_buffer:(k + 1) * records_per_buffer]
                             for k in range(_POOL_BATCHES)]

    def batches(self):
        """The batches to emit, in order (lists of the pool: not to be mutated)."""
        full, rest = divmod(self.num_records, self.records_per_buffer)
        pool_batches = self.pool_batches
        for n in range(full):
            yield pool_batches[n % _POOL_BATCHES]
        if rest:
            yield pool_batches[full % _POOL_BATCHES][:rest]

    def expected(self) -> Tuple[int, int]:
        """``(count, checksum)`` of the whole stream."""
        field_index = self.shape.checksum_field
        per_batch = [sum(r[field_index] for r in b) for b in self.pool_batches]
        full, rest = divmod(self.num_records, self.records_per_buffer)
        checksum = sum(per_batch[n % _POOL_BATCHES] for n in range(full))
        if rest:
            checksum += sum(r[field_index] for r in self.pool_batches[full % _POOL_BATCHES][:rest])
        return self.num_records, checksum

    def serialized_bytes(self) -> int:
        """Bytes of the stream as Rill serializes it (``pack_records`` per buffer, before
        compression and framing): the "payload" of the MB/s column."""
        from rill.network.api.serialization.value_codec import pack_records

        sizes = [len(pack_records(b, None)) for b in self.pool_batches]
        full, rest = divmod(self.num_records, self.records_per_buffer)
        total = sum(sizes[n % _POOL_BATCHES] for n in range(full))
        if rest:
            total += len(pack_records(self.pool_batches[full % _POOL_BATCHES][:rest], None))
        return total


class StreamCheck:
    """The consumer's per-buffer work: compare the received records with the records expected
    at their position in the stream, count them, sum their integer field. C-level loops only
    (``list ==``, ``sum(map(itemgetter))``), the same for Rill and the hand-written loop."""

    __slots__ = ("_pool2", "_pool_size", "_field", "position", "count", "checksum", "mismatch")

    def __init__(self, stream: RecordStream) -> None:
        self._pool2 = stream.pool + stream.pool
        self._pool_size = len(stream.pool)
        self._field = operator.itemgetter(stream.shape.checksum_field)
        self.position = 0
        self.count = 0
        self.checksum = 0
        #: The stream position of the first buffer that differed from the expected records.
        self.mismatch: Optional[int] = None

    def check(self, values) -> None:
        n = len(values)
        offset = self.position % self._pool_size
        if n <= self._pool_size:
            expected = self._pool2[offset:offset + n]
        else:  # never with the benchmark's batches; kept exact anyway
            expected = list(itertools.islice(itertools.cycle(self._pool2[:self._pool_size]), offset, offset + n))
        if values != expected and self.mismatch is None:
            self.mismatch = self.position
        self.count += n
        self.checksum += sum(map(self._field, values))
        self.position += n


class NetworkResultMismatch(ResultMismatch):
    """What a consumer received differs from what the producer sent."""


def check_result(side: str, check: StreamCheck, expected: Tuple[int, int], produced: Tuple[int, int]) -> None:
    """:raises NetworkResultMismatch: unless the consumer counted and summed what the stream
    holds and what the producer reports it sent, and every record matched."""
    problems = []
    if produced != expected:
        problems.append(f"the producer sent (count, checksum) {produced}, the stream holds {expected}")
    if (check.count, check.checksum) != expected:
        problems.append(f"received (count, checksum) ({check.count}, {check.checksum}), expected {expected}")
    if check.mismatch is not None:
        problems.append(f"the records received at stream position {check.mismatch} differ from those sent")
    if problems:
        raise NetworkResultMismatch(f"{side}: " + "; ".join(problems))


# -- the producer process ------------------------------------------------------------------------

def _producer_main(conn, secret: bytes) -> None:
    """The producer process: serves commands from the benchmark until ``exit``."""
    while True:
        command = conn.recv()
        kind = command[0]
        if kind == "exit":
            return
        try:
            if kind == "rill":
                _produce_rill(conn, secret, *command[1:])
            elif kind == "raw":
                _produce_raw(conn, *command[1:])
            elif kind == "hand":
                _produce_hand(conn, *command[1:])
            else:
                raise ValueError(f"unknown command {kind!r}")
        except BaseException as error:  # noqa: BLE001 - reported to the benchmark, which fails
            conn.send(("error", f"{type(error).__name__}: {error}"))


def _expect(conn, word: str) -> None:
    message = conn.recv()
    if message != (word,):
        raise RuntimeError(f"expected {word!r} from the benchmark, got {message!r}")


def _wait_until(predicate: Callable[[], bool], what: str, timeout_s: float = _TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s}s waiting until {what}")
        time.sleep(0.0005)


def _netty_config(secret: bytes, flow_control: bool, compression: bool, segment_size_bytes: Optional[int] = None,
                  max_buffers_per_frame: Optional[int] = None):
    from rill.network import NettyConfig

    extra = {} if segment_size_bytes is None else {"segment_size_bytes": segment_size_bytes}
    if max_buffers_per_frame is not None:
        extra["max_buffers_per_frame"] = max_buffers_per_frame
    return NettyConfig(secret=secret, flow_control=flow_control, compression=compression, **extra)


def _default_max_buffers_per_frame() -> int:
    from rill.network import NettyConfig

    return NettyConfig.max_buffers_per_frame  # the dataclass field's default


def _produce_rill(conn, secret: bytes, shape_name: str, num_records: int, records_per_buffer: int,
                  compression: bool, flow_control: bool, segment_size_bytes: Optional[int],
                  max_buffers_per_frame: Optional[int] = None) -> None:
    from rill.network import (
        ForwardPartitioner,
        LocalBufferPool,
        NettyConnectionManager,
        RecordWriter,
        ResultPartition,
        ResultPartitionID,
        ResultPartitionManager,
        ResultPartitionType,
    )

    stream = RecordStream(SHAPES[shape_name], num_records, records_per_buffer)
    manager = ResultPartitionManager()
    network = NettyConnectionManager(_netty_config(secret, flow_control, compression, segment_size_bytes,
                                                   max_buffers_per_frame), manager,
                                     name="bench-producer")
    try:
        address = network.start()
        # the engine's budget for one subpartition: buffers-per-channel + floating-buffers-per-gate
        pool = LocalBufferPool(2 + 8, "bench producer pool")
        partition = ResultPartition(ResultPartitionID("bench", "attempt-0"), ResultPartitionType.PIPELINED_BOUNDED,
                                    1, pool, "bench producer")
        manager.register_result_partition(partition)
        writer = RecordWriter(partition, ForwardPartitioner(), records_per_buffer=records_per_buffer)
        batches = list(stream.batches())
        count, checksum = _sent_figures(stream, batches)
        conn.send(("address", address, partition.partition_id))
        _expect(conn, "await-consumer")
        _wait_until(lambda: len(network.reader_statistics()) == 1, "the consumer requested the partition")
        conn.send(("ready",))
        _expect(conn, "go")
        emit = writer.emit_batch
        for batch in batches:
            emit(batch)
        writer.flush_all()
        partition.finish()
        writer.close()
        _wait_until(lambda: manager.get_number_of_registered_partitions() == 0, "the partition was consumed")
        errors = network.network_thread_errors()
        conn.send(("done", count, checksum, [repr(e) for e in errors]))
        # The partition counts as consumed once EndOfPartition is *queued* on the connection:
        # the transport stays up until the consumer has read it all.
        _expect(conn, "release")
    finally:
        network.shutdown()
        manager.shutdown()
    conn.send(("released",))


def _sent_figures(stream: RecordStream, batches: List[list]) -> Tuple[int, int]:
    """What the producer sends, counted from the batches themselves (not from the stream's
    arithmetic), before timing starts."""
    getter = operator.itemgetter(stream.shape.checksum_field)
    return sum(map(len, batches)), sum(sum(map(getter, b)) for b in batches)


def _listen() -> socket.socket:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    return listener


def _produce_raw(conn, total_bytes: int) -> None:
    listener = _listen()
    conn.send(("address", listener.getsockname()))
    sock, _ = listener.accept()
    listener.close()
    chunk = memoryview(os.urandom(_RAW_CHUNK))
    _expect(conn, "go")
    remaining = total_bytes
    while remaining >= _RAW_CHUNK:
        sock.sendall(chunk)
        remaining -= _RAW_CHUNK
    if remaining:
        sock.sendall(chunk[:remaining])
    sock.close()
    conn.send(("done", total_bytes))


def _produce_hand(conn, shape_name: str, num_records: int, records_per_buffer: int, compression: bool) -> None:
    import lz4.block
    import msgpack

    stream = RecordStream(SHAPES[shape_name], num_records, records_per_buffer)
    batches = list(stream.batches())
    count, checksum = _sent_figures(stream, batches)
    listener = _listen()
    conn.send(("address", listener.getsockname()))
    sock, _ = listener.accept()
    listener.close()
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    pack = msgpack.Packer().pack  # reused: a fresh packb per ≈1 MiB batch costs more than packing
    compress = lz4.block.compress
    _expect(conn, "go")
    for batch in batches:
        payload = pack(batch)
        flag = 0
        if compression:
            packed = compress(payload, store_size=True)
            if len(packed) < len(payload):
                payload, flag = packed, 0x80000000
        header = (len(payload) | flag).to_bytes(4, "big")
        sent = sock.sendmsg([header, payload])  # header + payload, no copy
        if sent < 4 + len(payload):  # (a blocking socket sends it all, unless interrupted)
            sock.sendall((header + payload)[sent:])
    sock.close()
    conn.send(("done", count, checksum))


class ProducerProcess:
    """The producer process (spawned once; every run is a command to it). A context manager."""

    def __init__(self) -> None:
        self.secret = os.urandom(32)
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_producer_main, args=(child, self.secret), name="bench-network-producer",
                                   daemon=True)
        self.process.start()
        child.close()

    def call(self, *command) -> None:
        self.conn.send(command)

    def reply(self, timeout_s: float = _TIMEOUT_S) -> Any:
        if not self.conn.poll(timeout_s):
            raise TimeoutError(f"the producer process did not answer within {timeout_s}s")
        message = self.conn.recv()
        if isinstance(message, tuple) and message[0] == "error":
            raise RuntimeError(f"the producer process failed: {message[1]}")
        return message

    def close(self) -> None:
        try:
            self.conn.send(("exit",))
        except (BrokenPipeError, OSError):
            pass
        self.process.join(10)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(5)
        self.conn.close()

    def __enter__(self) -> "ProducerProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# -- the three sides (consumer = this process) ---------------------------------------------------

@dataclass
class RillRun:
    seconds: float
    records: int
    wire_bytes: int          # the connection's bytes_received (frames, credit, handshake)
    channel_bytes: int       # payload bytes of the frames (after lz4)
    segments: int
    buffers: int


def run_rill(producer: ProducerProcess, stream: RecordStream, compression: bool, flow_control: bool = True,
             segment_size_bytes: Optional[int] = None,
             tamper: Optional[Callable[[int, list], list]] = None,
             max_buffers_per_frame: Optional[int] = None) -> RillRun:
    """One Rill run; the records are checked (:raises NetworkResultMismatch:).

    :param tamper: test hook: ``tamper(buffer_index, values)`` returns the values the check
        sees (a broken data plane simulated on the consumer's side).
    """
    from rill.network import NettyConnectionManager, RemoteInputChannel, SingleInputGate

    producer.call("rill", stream.shape.name, stream.num_records, stream.records_per_buffer, compression,
                  flow_control, segment_size_bytes, max_buffers_per_frame)
    _, address, partition_id = producer.reply()
    state = "set up"  # -> "go" (the producer writes) -> "done" (it reported) -> "released"
    client = NettyConnectionManager(_netty_config(producer.secret, flow_control, False, segment_size_bytes),
                                    name="bench-consumer")
    client.start()
    channel = RemoteInputChannel(client, address, partition_id, 0, client.create_floating_buffer_pool())
    gate = SingleInputGate(0, [channel], "bench consumer")
    check = StreamCheck(stream)
    wake = threading.Event()
    try:
        gate.set_availability_listener(wake.set)
        gate.setup()
        producer.call("await-consumer")
        producer.reply()  # "ready": the producer's server serves the subpartition
        gc.collect()
        poll = gate.poll_next
        index = 0
        started = time.perf_counter()
        producer.call("go")
        state = "go"
        while not gate.is_finished():
            wake.clear()
            boe = poll()
            if boe is None:
                if not wake.wait(_TIMEOUT_S):
                    raise TimeoutError(f"no input within {_TIMEOUT_S}s from {gate!r}")
                continue
            buffer = boe.buffer
            if buffer is not None:
                values = buffer.values
                if tamper is not None:
                    values = tamper(index, values)
                index += 1
                check.check(values)
                buffer.recycle_buffer()
        seconds = time.perf_counter() - started
        state = "failed"  # unless the producer's report arrives
        reply = producer.reply()
        state = "done"
        if reply[3]:
            raise RuntimeError(f"the producer's network thread failed: {reply[3]}")
        check_result("rill", check, stream.expected(), (reply[1], reply[2]))
        connection = channel.connection_statistics()
        stats = channel.statistics()
        return RillRun(seconds, check.count, connection.bytes_received, stats.bytes_received,
                       stats.segments_received, stats.buffers_received)
    finally:
        gate.close()
        client.shutdown()
        _end_rill_run(producer, state)


def _end_rill_run(producer: ProducerProcess, state: str) -> None:
    """Bring the producer back to its command loop, whatever happened to the run."""
    try:
        if state == "set up":
            producer.call("abort")  # it waits for "await-consumer" or "go": it fails, reports, goes on
            producer.reply()
        elif state in ("go", "done"):
            if state == "go":
                producer.reply()  # its report (the closed gate released the partition)
            producer.call("release")
            producer.reply()
    except RuntimeError:
        pass  # the producer reported its failure and is back in its loop


def run_raw(producer: ProducerProcess, total_bytes: int) -> float:
    """Seconds the raw socket takes to move ``total_bytes``."""
    producer.call("raw", total_bytes)
    _, address = producer.reply()
    sock = socket.create_connection(address)
    buf = bytearray(_RAW_CHUNK)
    view = memoryview(buf)
    received = 0
    try:
        gc.collect()
        recv_into = sock.recv_into
        started = time.perf_counter()
        producer.call("go")
        while True:
            n = recv_into(view)
            if not n:
                break
            received += n
        seconds = time.perf_counter() - started
    finally:
        sock.close()
    producer.reply()
    if received != total_bytes:
        raise NetworkResultMismatch(f"raw socket: received {received} bytes of {total_bytes}")
    return seconds


def run_hand(producer: ProducerProcess, stream: RecordStream, compression: bool) -> float:
    """Seconds the hand-written loop takes; the records are checked as Rill's."""
    import lz4.block
    import msgpack

    producer.call("hand", stream.shape.name, stream.num_records, stream.records_per_buffer, compression)
    _, address = producer.reply()
    sock = socket.create_connection(address)
    reader = sock.makefile("rb", buffering=_RAW_CHUNK)
    check = StreamCheck(stream)
    unpackb = msgpack.unpackb
    decompress = lz4.block.decompress
    try:
        gc.collect()
        started = time.perf_counter()
        producer.call("go")
        while True:
            header = reader.read(4)
            if not header:
                break
            size = int.from_bytes(header, "big")
            payload = reader.read(size & 0x7FFFFFFF)
            if size & 0x80000000:
                payload = decompress(payload)
            check.check(list(unpackb(payload, use_list=False)))
        seconds = time.perf_counter() - started
    finally:
        reader.close()
        sock.close()
    _, count, checksum = producer.reply()
    check_result("hand-written loop", check, stream.expected(), (count, checksum))
    return seconds


# -- measuring ----------------------------------------------------------------------------------

@dataclass
class NetworkSample:
    rill_s: float
    raw_s: float
    hand_s: float
    wire_bytes: int
    channel_bytes: int
    segments: int
    buffers: int


@dataclass
class NetworkMeasurement:
    shape: str
    record_bytes: int            # nominal: the blob size, 20 for the tuple shape
    compression: bool
    flow_control: bool
    segment_size_bytes: int
    max_buffers_per_frame: int
    records: int
    records_per_buffer: int
    payload_bytes: int           # serialized records (pack_records per buffer), before lz4
    wire_bytes: int              # median over repetitions (they agree up to credit messages)
    repeat: int
    rill_rps: float              # medians over the repetitions
    rill_payload_mbps: float
    rill_wire_mbps: float
    raw_mbps: float
    hand_rps: float
    ratio_raw: float             # median of per-repetition raw_s / rill_s (same bytes)
    ratio_raw_min: float
    ratio_raw_max: float
    ratio_hand: float            # median of per-repetition hand_s / rill_s (same records)
    ratio_hand_min: float
    ratio_hand_max: float
    samples: List[NetworkSample] = field(default_factory=list)

    @property
    def meets_target(self) -> bool:
        return self.ratio_raw >= TARGET_RAW_RATIO

    def to_json(self) -> Dict[str, Any]:
        d = asdict(self)
        d["meets_target"] = self.meets_target
        return d


def measure(producer: ProducerProcess, shape: Shape, num_records: int, compression: bool, repeat: int = 3,
            flow_control: bool = True, records_per_buffer: Optional[int] = None, warmup: bool = True,
            log: Optional[Callable[[str], None]] = None, segment_size_bytes: Optional[int] = None,
            max_buffers_per_frame: Optional[int] = None) -> NetworkMeasurement:
    """Warm up (one run of each side on a tenth of the records), then ``repeat`` repetitions of
    Rill, the raw socket (Rill's wire bytes of that repetition) and the hand-written loop,
    rotating which goes first. :raises NetworkResultMismatch: on the first wrong result."""
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, got {repeat}")
    rpb = records_per_buffer_for(shape, records_per_buffer)
    stream = RecordStream(shape, num_records, rpb)
    if warmup:
        small = RecordStream(shape, max(1, num_records // 10), rpb)
        first = run_rill(producer, small, compression, flow_control, segment_size_bytes,
                         max_buffers_per_frame=max_buffers_per_frame)
        run_raw(producer, first.wire_bytes)
        run_hand(producer, small, compression)
    samples: List[NetworkSample] = []
    for i in range(repeat):
        rill: Optional[RillRun] = None
        raw_s = hand_s = 0.0
        order = ("rill", "hand", "raw") if i % 2 == 0 else ("hand", "rill", "raw")
        for side in order:
            if side == "rill":
                rill = run_rill(producer, stream, compression, flow_control, segment_size_bytes,
                                max_buffers_per_frame=max_buffers_per_frame)
            elif side == "hand":
                hand_s = run_hand(producer, stream, compression)
            else:
                # the fastest of a few transfers: a short transfer disturbed by other load must
                # not lower the ceiling (and so raise Rill's ratio)
                wire = rill.wire_bytes  # type: ignore[union-attr]
                raw_s = min(run_raw(producer, wire) for _ in range(RAW_TRANSFERS))
        assert rill is not None
        samples.append(NetworkSample(rill.seconds, raw_s, hand_s, rill.wire_bytes, rill.channel_bytes,
                                     rill.segments, rill.buffers))
        if log is not None:
            log(f"  {shape.name} lz4={'on' if compression else 'off'} rep {i + 1}/{repeat}: Rill "
                f"{num_records / rill.seconds:,.0f} rec/s {rill.wire_bytes / rill.seconds / 1e6:,.0f} MB/s wire, "
                f"raw {rill.wire_bytes / raw_s / 1e6:,.0f} MB/s, hand {num_records / hand_s:,.0f} rec/s "
                f"(checked: {num_records:,} records)")
    payload = stream.serialized_bytes()
    med = statistics.median
    raw_ratios = [s.raw_s / s.rill_s for s in samples]
    hand_ratios = [s.hand_s / s.rill_s for s in samples]
    return NetworkMeasurement(
        shape=shape.name, record_bytes=shape.nominal_record_bytes, compression=compression,
        flow_control=flow_control, segment_size_bytes=segment_size_bytes or DEFAULT_SEGMENT_SIZE_BYTES,
        max_buffers_per_frame=max_buffers_per_frame or _default_max_buffers_per_frame(),
        records=num_records, records_per_buffer=rpb, payload_bytes=payload,
        wire_bytes=int(med(s.wire_bytes for s in samples)), repeat=repeat,
        rill_rps=med(num_records / s.rill_s for s in samples),
        rill_payload_mbps=med(payload / s.rill_s / 1e6 for s in samples),
        rill_wire_mbps=med(s.wire_bytes / s.rill_s / 1e6 for s in samples),
        raw_mbps=med(s.wire_bytes / s.raw_s / 1e6 for s in samples),
        hand_rps=med(num_records / s.hand_s for s in samples),
        ratio_raw=med(raw_ratios), ratio_raw_min=min(raw_ratios), ratio_raw_max=max(raw_ratios),
        ratio_hand=med(hand_ratios), ratio_hand_min=min(hand_ratios), ratio_hand_max=max(hand_ratios),
        samples=samples,
    )


def crossover(measurements: Sequence[NetworkMeasurement], compression: bool = False) -> Optional[NetworkMeasurement]:
    """The smallest record size whose median ratio to the raw socket meets the target (and
    every larger size measured meets it too), or ``None``."""
    rows = sorted((m for m in measurements if m.compression == compression), key=lambda m: m.record_bytes)
    found = None
    for m in reversed(rows):
        if not m.meets_target:
            break
        found = m
    return found


def _rate(x: float) -> str:
    if x >= 1e6:
        return f"{x / 1e6:.2f} M"
    return f"{x / 1e3:.0f} k" if x >= 1e3 else f"{x:.0f}"


def _size(n: int) -> str:
    return f"{n // 1024} KiB" if n >= 1024 and n % 1024 == 0 else f"{n} B"


def format_table(measurements: Sequence[NetworkMeasurement]) -> str:
    """A Markdown table (paste-able into bench/README.md)."""
    head = ("| record | lz4 | records × per buffer | Rill rec/s | Rill MB/s payload | Rill MB/s wire | raw MB/s "
            "| ratio raw (min–max) | hand rec/s | ratio hand (min–max) | ≥ 0.50 raw |")
    rows = [head, "|" + "---|" * 11]
    for m in measurements:
        rows.append(
            f"| {m.shape} ({_size(m.record_bytes)}) | {'on' if m.compression else 'off'} | "
            f"{m.records:,} × {m.records_per_buffer} | {_rate(m.rill_rps)} | {m.rill_payload_mbps:,.0f} | "
            f"{m.rill_wire_mbps:,.0f} | {m.raw_mbps:,.0f} | {m.ratio_raw:.3f} ({m.ratio_raw_min:.3f}–"
            f"{m.ratio_raw_max:.3f}) | {_rate(m.hand_rps)} | {m.ratio_hand:.2f} ({m.ratio_hand_min:.2f}–"
            f"{m.ratio_hand_max:.2f}) | {'MET' if m.meets_target else 'missed'} |")
    return "\n".join(rows)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.network", description=__doc__.split("\n\n")[0])
    parser.add_argument("--record-shape", choices=list(SHAPES), action="append",
                        help="record shape (repeatable); default: the sweep of every shape")
    parser.add_argument("--records", type=int, help="records per run (default: the shape's)")
    parser.add_argument("--records-per-buffer", type=int,
                        help="records per buffer (default 1024, capped at ≈1 MiB of payload per buffer)")
    parser.add_argument("--compression", choices=["off", "on", "both"], default="both", help="lz4 (default both)")
    parser.add_argument("--flow-control", choices=["on", "off"], default="on", help="credit-based flow control")
    parser.add_argument("--segment-size-bytes", type=int,
                        help="NettyConfig.segment_size_bytes of both ends (default 32768, Flink's 32 KiB)")
    parser.add_argument("--max-buffers-per-frame", type=int,
                        help="NettyConfig.max_buffers_per_frame of the producer (default 4; 1: a frame per segment)")
    parser.add_argument("--repeat", type=int, default=3, help="timed repetitions (default 3)")
    parser.add_argument("--no-warmup", action="store_true", help="skip the warm-up runs")
    parser.add_argument("--json", metavar="PATH", help="also write the measurements as JSON")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the table")
    args = parser.parse_args(argv)

    shapes = [SHAPES[name] for name in (args.record_shape or list(SHAPES))]
    compressions = {"off": [False], "on": [True], "both": [False, True]}[args.compression]
    log = None if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    info = machine_info()
    if log:
        log(f"machine: nproc={info['nproc']} cpu={info['cpu']!r} python={info['python']}")
    measurements: List[NetworkMeasurement] = []
    started = time.perf_counter()
    try:
        with ProducerProcess() as producer:
            for compression in compressions:
                for shape in shapes:
                    measurements.append(measure(
                        producer, shape, args.records or shape.default_records, compression, args.repeat,
                        args.flow_control == "on", args.records_per_buffer, not args.no_warmup, log,
                        args.segment_size_bytes, args.max_buffers_per_frame))
    except NetworkResultMismatch as error:
        print(f"RESULT CHECK FAILED: {error}", file=sys.stderr)
        return 1
    total = time.perf_counter() - started

    print(format_table(measurements))
    segment = args.segment_size_bytes or DEFAULT_SEGMENT_SIZE_BYTES
    per_frame = args.max_buffers_per_frame or _default_max_buffers_per_frame()
    notes = [f"\nMB/s payload = serialized records (msgpack, before lz4) ÷ Rill's time; wire = bytes on "
             f"Rill's connection (frames, credit, handshake) ÷ Rill's time; raw = the same wire bytes through a "
             f"plain socket (fastest of {RAW_TRANSFERS}). Ratios: per repetition, median (min–max) over "
             f"{args.repeat}. Flow control {args.flow_control}, segments of {segment:,} bytes, up to "
             f"{per_frame} per frame. "
             f"nproc={info['nproc']}, {info['cpu']}, Python {info['python']}, {total:.0f} s."]
    for compression in compressions:
        hit = crossover(measurements, compression)
        label = f"lz4 {'on' if compression else 'off'}"
        if hit is None:
            notes.append(f"{label}: no record size measured reaches {TARGET_RAW_RATIO:.0%} of the raw socket's "
                         f"bytes/s.")
        else:
            notes.append(f"{label}: Rill reaches {TARGET_RAW_RATIO:.0%} of the raw socket's bytes/s from "
                         f"{hit.shape} ({_size(hit.record_bytes)} records) up (ratio {hit.ratio_raw:.2f}).")
    print("\n".join(notes))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": info, "argv": sys.argv[1:] if argv is None else argv,
                       "measurements": [m.to_json() for m in measurements]}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
