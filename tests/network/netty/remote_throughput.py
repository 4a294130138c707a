"""A quick throughput figure for the remote data plane (not a test; the benchmark harness in
bench/ comes later): records/s and MB/s of one remote channel between two processes, against two
baselines measured in the same run: a raw TCP socket moving the same number of bytes, and a
hand-written sender/receiver that does the minimum for the same records (one plain
``msgpack.packb`` per 1024-record batch, length-prefixed on a blocking socket, ``unpackb`` on the
other side; it loses tuple types, Rill does not).

    python tests/network/netty/remote_throughput.py [--records N] [--flow-control off]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _remote_helpers import GateReader, make_config, make_partition, wait_until  # noqa: E402

from rill.network import (  # noqa: E402
    ForwardPartitioner,
    NettyConnectionManager,
    RecordWriter,
    RemoteInputChannel,
    ResultPartitionManager,
    SingleInputGate,
)

BATCH = 1024


def make_batch(start: int) -> list:
    return [(f"key-{i % 1000}", i, i * 0.5) for i in range(start, start + BATCH)]


def rill_producer(secret, conn, num_records, flow_control, compression):
    manager = ResultPartitionManager()
    network = NettyConnectionManager(make_config(secret, flow_control=flow_control, compression=compression), manager)
    address = network.start()
    partition = make_partition(manager, "bench", 1, num_buffers=8)
    writer = RecordWriter(partition, ForwardPartitioner(), records_per_buffer=BATCH)
    batches = [make_batch(i) for i in range(0, 64 * BATCH, BATCH)]
    conn.send((address, partition.partition_id))
    conn.recv()
    for n in range(num_records // BATCH):
        writer.emit_batch(batches[n % len(batches)])
    writer.flush_all()
    partition.finish()
    wait_until(lambda: manager.get_number_of_registered_partitions() == 0, "consumed")
    conn.send(network.connection_statistics()[0].bytes_sent if network.connection_statistics() else 0)
    conn.recv()
    network.shutdown()


def raw_producer(conn, total_bytes, chunk):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    conn.send(listener.getsockname())
    sock, _ = listener.accept()
    data = os.urandom(chunk)
    sent = 0
    while sent < total_bytes:
        sock.sendall(data)
        sent += len(data)
    sock.close()
    listener.close()


def handwritten_producer(conn, num_records):
    import msgpack

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    conn.send(listener.getsockname())
    sock, _ = listener.accept()
    batches = [make_batch(i) for i in range(0, 64 * BATCH, BATCH)]
    for n in range(num_records // BATCH):
        payload = msgpack.packb(batches[n % len(batches)])
        sock.sendall(len(payload).to_bytes(4, "big") + payload)
    sock.close()
    listener.close()


def run_handwritten(num_records):
    import msgpack

    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    process = ctx.Process(target=handwritten_producer, args=(child, num_records))
    process.start()
    sock = socket.create_connection(parent.recv())
    stream = sock.makefile("rb", buffering=256 * 1024)
    records = 0
    started = time.perf_counter()
    while True:
        header = stream.read(4)
        if not header:
            break
        records += len(msgpack.unpackb(stream.read(int.from_bytes(header, "big"))))
    elapsed = time.perf_counter() - started
    sock.close()
    process.join()
    return records, elapsed


def run_rill(num_records, flow_control, compression, announce_batch=1):
    secret = os.urandom(32)
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    process = ctx.Process(target=rill_producer, args=(secret, child, num_records, flow_control, compression))
    process.start()
    address, partition_id = parent.recv()
    client = NettyConnectionManager(make_config(secret, flow_control=flow_control, credit_announce_batch=announce_batch))
    client.start()
    channel = RemoteInputChannel(client, address, partition_id, 0, client.create_floating_buffer_pool())
    gate = SingleInputGate(0, [channel], "bench")
    reader = GateReader(gate)
    records = 0
    parent.send("go")
    started = time.perf_counter()
    while not gate.is_finished():
        boe = reader.poll()
        if boe.is_buffer():
            records += len(boe.buffer.values)
            boe.buffer.recycle_buffer()
    elapsed = time.perf_counter() - started
    stats = channel.statistics()
    connection = client.connection_statistics()
    parent.recv()
    parent.send("exit")
    process.join()
    gate.close()
    client.shutdown()
    return records, stats.bytes_received, elapsed, connection


def run_raw(total_bytes, chunk=32 * 1024):
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    process = ctx.Process(target=raw_producer, args=(child, total_bytes, chunk))
    process.start()
    address = parent.recv()
    sock = socket.create_connection(address)
    buf = bytearray(256 * 1024)
    view = memoryview(buf)
    received = 0
    started = time.perf_counter()
    while True:
        n = sock.recv_into(view)
        if not n:
            break
        received += n
    elapsed = time.perf_counter() - started
    sock.close()
    process.join()
    return received, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--flow-control", choices=["on", "off"], default="on")
    parser.add_argument("--compression", action="store_true")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--announce-batch", type=int, default=1, help="credit_announce_batch of the receiver")
    args = parser.parse_args()
    for run in range(args.runs):
        records, payload_bytes, elapsed, _ = run_rill(args.records, args.flow_control == "on", args.compression,
                                                      args.announce_batch)
        raw_bytes, raw_elapsed = run_raw(payload_bytes)
        hand_records, hand_elapsed = run_handwritten(args.records)
        rill_mbps = payload_bytes / elapsed / 1e6
        raw_mbps = raw_bytes / raw_elapsed / 1e6
        rill_rps = records / elapsed
        hand_rps = hand_records / hand_elapsed
        print(f"run {run}: rill {rill_rps / 1e6:.2f} M records/s, {rill_mbps:.0f} MB/s payload "
              f"({payload_bytes / records:.1f} B/record, {elapsed:.2f}s) | raw socket, same bytes: "
              f"{raw_mbps:.0f} MB/s (rill/raw = {rill_mbps / raw_mbps:.3f}) | hand-written msgpack: "
              f"{hand_rps / 1e6:.2f} M records/s (rill/hand-written = {rill_rps / hand_rps:.2f})")


if __name__ == "__main__":
    main()
