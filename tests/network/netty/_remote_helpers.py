"""Helpers shared by the transport tests and the producer processes they spawn (importable by
name in a spawned child: the test directory is on ``sys.path``, which spawn passes on)."""

from __future__ import annotations

import threading
import time
from typing import Callable

from rill.network import (
    END_OF_PARTITION_EVENT,
    CheckpointBarrier,
    EndOfDataEvent,
    LocalBufferPool,
    NettyConfig,
    NettyConnectionManager,
    RebalancePartitioner,
    RecordWriter,
    ResultPartition,
    ResultPartitionID,
    ResultPartitionManager,
    ResultPartitionType,
    SingleInputGate,
)
from rill.common.streamrecord import Watermark

#: Retries fast enough for tests; timeouts generous enough for a loaded machine.
FAST = dict(
    retry_initial_backoff_s=0.002,
    retry_max_backoff_s=0.05,
    connect_timeout_s=10.0,
    partition_request_timeout_s=10.0,
)
DEADLINE_S = 30.0


def make_config(secret: bytes, **overrides) -> NettyConfig:
    return NettyConfig(secret=secret, **{**FAST, **overrides})


def wait_until(predicate: Callable[[], bool], what: str, timeout_s: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting until {what}")
        time.sleep(0.0005)


def producer_script(producer: int, num_records: int, record_size: int = 0):
    """Deterministic steps ("batch", values, timestamps) / ("event", e) with varied batch
    sizes, watermarks, one checkpoint barrier and EndOfData."""
    steps = []
    seq = 0
    size = 1
    pad = "x" * record_size
    while seq < num_records:
        n = min(size, num_records - seq)
        values = [(f"key-{(producer * 7 + i) % 23}", producer, seq + i, pad) for i in range(n)]
        steps.append(("batch", values, [1000 * producer + seq + i for i in range(n)]))
        seq += n
        size = size * 3 % 97 + 1
        if len(steps) % 5 == 0:
            steps.append(("event", Watermark(seq)))
        if len(steps) == 20:
            steps.append(("event", CheckpointBarrier(1, 42, {"kind": "CHECKPOINT"})))
    steps.append(("event", EndOfDataEvent()))
    return steps


def expected_streams(script, partitioner, num_consumers):
    partitioner.setup(num_consumers)
    out = [[] for _ in range(num_consumers)]
    for step in script:
        if step[0] == "batch":
            for value, ts in zip(step[1], step[2]):
                out[partitioner.select_channel(value)].append(("record", value, ts))
        else:
            for stream in out:
                stream.append(("event", step[1]))
    for stream in out:
        stream.append(("event", END_OF_PARTITION_EVENT))
    return out


def run_producer(writer: RecordWriter, script) -> None:
    for step in script:
        if step[0] == "batch":
            writer.emit_batch(step[1], step[2])
        else:
            writer.broadcast_event(step[1])
    writer.flush_all()
    writer.partition.finish()
    writer.close()


def make_partition(manager: ResultPartitionManager, name: str, num_subpartitions: int,
                   num_buffers: int = 4) -> ResultPartition:
    pool = LocalBufferPool(num_buffers, f"{name} pool")
    partition = ResultPartition(ResultPartitionID(name, "attempt-0"), ResultPartitionType.PIPELINED_BOUNDED,
                                num_subpartitions, pool, name)
    manager.register_result_partition(partition)
    return partition


class GateReader:
    """Reads a gate on the caller's thread like a task's input loop: poll; when nothing is
    there, wait for the availability listener. Collects, per channel, ("record", value, ts)
    and ("event", e)."""

    def __init__(self, gate: SingleInputGate) -> None:
        self.gate = gate
        self.wake = threading.Event()
        self.streams = [[] for _ in range(gate.get_number_of_input_channels())]
        self.held = []
        gate.set_availability_listener(self.wake.set)
        gate.setup()

    def poll(self, timeout_s: float = DEADLINE_S):
        """One entry, waiting for it (fails after the timeout)."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.wake.clear()
            boe = self.gate.poll_next()
            if boe is not None:
                return boe
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self.wake.wait(remaining):
                raise AssertionError(f"no input within {timeout_s}s from {self.gate!r}")

    def take(self, boe, recycle: bool = True) -> None:
        stream = self.streams[boe.channel_index]
        if boe.is_buffer():
            buffer = boe.buffer
            timestamps = buffer.timestamps or [None] * len(buffer.values)
            stream.extend(("record", v, t) for v, t in zip(buffer.values, timestamps))
            if recycle:
                buffer.recycle_buffer()
            else:
                self.held.append(buffer)
        else:
            stream.append(("event", boe.event))

    def read_to_end(self, recycle: bool = True, timeout_s: float = DEADLINE_S) -> list:
        while not self.gate.is_finished():
            self.take(self.poll(timeout_s), recycle)
        return self.streams

    def read_until(self, predicate: Callable[[], bool], recycle: bool = True, timeout_s: float = DEADLINE_S) -> None:
        while not predicate():
            self.take(self.poll(timeout_s), recycle)

    def recycle_held(self) -> None:
        for buffer in self.held:
            buffer.recycle_buffer()
        self.held = []


def producer_process(secret: bytes, conn, num_partitions: int, num_subpartitions: int, num_records: int,
                     records_per_buffer: int, flow_control: bool = True, record_size: int = 0,
                     compression: bool = False) -> None:
    """A producer process: serves ``num_partitions`` partitions, each written by its own
    thread from :func:`producer_script`; reports its address, waits for "go", then for its
    partitions to be consumed, reports statistics and shuts down."""
    manager = ResultPartitionManager()
    network = NettyConnectionManager(make_config(secret, flow_control=flow_control, compression=compression),
                                     manager, name="producer")
    try:
        address = network.start()
        writers = []
        for p in range(num_partitions):
            partition = make_partition(manager, f"ds-{p}", num_subpartitions, num_buffers=4)
            writers.append(RecordWriter(partition, RebalancePartitioner(seed=p), records_per_buffer))
        conn.send(("address", address, [w.partition.partition_id for w in writers]))
        command = conn.recv()
        if command == "go":
            threads = [threading.Thread(target=run_producer, args=(w, producer_script(p, num_records, record_size)))
                       for p, w in enumerate(writers)]
            started = time.perf_counter()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            produced = time.perf_counter() - started
            wait_until(lambda: manager.get_number_of_registered_partitions() == 0, "partitions consumed")
            conn.send(("done", produced, [s.bytes_sent for s in network.connection_statistics()],
                       network.network_thread_errors()))
        conn.recv()  # "exit"
    finally:
        network.shutdown()
        manager.shutdown()
