"""A producer process (multiprocessing, spawn) -> RemoteInputChannels in gates of this process,
over one TCP connection: the same exactly-once, in-order contract as in-process; and the
producer's process dying fails the channels with an error naming them."""

from __future__ import annotations

import multiprocessing
import os

import pytest
from _remote_helpers import (
    DEADLINE_S,
    GateReader,
    expected_streams,
    producer_process,
    producer_script,
    wait_until,
)

from rill.network import RebalancePartitioner, RemoteInputChannel, SingleInputGate
from rill.network.netty import RemoteTransportError

CONTEXT = multiprocessing.get_context("spawn")


@pytest.fixture
def producer(secret):
    """``producer(**kwargs)`` -> (process, connection, address, partition ids)."""
    started = []

    def start(**kwargs):
        parent, child = CONTEXT.Pipe()
        process = CONTEXT.Process(target=producer_process, args=(secret, child), kwargs=kwargs, daemon=True)
        process.start()
        child.close()
        assert parent.poll(DEADLINE_S * 2), "the producer process did not start"
        kind, address, partition_ids = parent.recv()
        assert kind == "address"
        started.append((process, parent))
        return process, parent, tuple(address), partition_ids

    yield start
    for process, conn in started:
        try:
            conn.send("exit")
        except (BrokenPipeError, OSError):
            pass
        process.join(DEADLINE_S)
        if process.is_alive():
            process.kill()
            process.join()
            pytest.fail("the producer process did not exit")
        conn.close()


def test_records_cross_processes_exactly_once_in_order(network, producer, threads):
    num_partitions, num_consumers, num_records = 2, 2, 5000
    process, conn, address, partition_ids = producer(
        num_partitions=num_partitions, num_subpartitions=num_consumers, num_records=num_records,
        records_per_buffer=50,
    )
    client = network(name="consumer")
    readers = []
    for c in range(num_consumers):
        pool = client.create_floating_buffer_pool(f"gate {c}")
        channels = [RemoteInputChannel(client, address, pid, c, pool) for pid in partition_ids]
        readers.append(GateReader(SingleInputGate(0, channels, f"consumer ({c + 1}/{num_consumers})")))
    wait_until(lambda: [s.channels for s in client.connection_statistics()] == [4],
               "the 4 channels share one connection to the producer process")
    conn.send("go")
    results = [None] * num_consumers
    for c in range(num_consumers):
        threads.start(lambda c=c: results.__setitem__(c, readers[c].read_to_end()), f"consumer-{c}")
    threads.join_all(DEADLINE_S * 2)
    assert conn.poll(DEADLINE_S), "the producer did not report"
    kind, _, _, producer_errors = conn.recv()
    assert kind == "done" and producer_errors == []
    for p in range(num_partitions):
        expected = expected_streams(producer_script(p, num_records), RebalancePartitioner(seed=p), num_consumers)
        for c in range(num_consumers):
            assert results[c][p] == expected[c], f"producer {p} -> consumer {c}"
    for reader in readers:
        reader.gate.close()
        for index in range(reader.gate.get_number_of_input_channels()):
            stats = reader.gate.get_channel(index).statistics()
            assert stats.exclusive_buffers_in_use == stats.floating_buffers_in_use == 0 and stats.error is None


def test_the_producer_process_dying_fails_the_channels_naming_them(network, producer):
    process, conn, address, partition_ids = producer(
        num_partitions=1, num_subpartitions=1, num_records=10**6, records_per_buffer=10,
    )
    client = network(name="consumer")
    channel = RemoteInputChannel(client, address, partition_ids[0], 0, client.create_floating_buffer_pool())
    reader = GateReader(SingleInputGate(0, [channel], "Sink (1/1)"))
    conn.send("go")
    reader.read_until(lambda: len(reader.streams[0]) >= 100)
    process.kill()  # no goodbye: the kernel closes its sockets
    process.join(DEADLINE_S)
    with pytest.raises(RemoteTransportError) as info:
        while True:
            reader.take(reader.poll())
    message = str(info.value)
    assert "remote input channel 0 of gate 0 of 'Sink (1/1)'" in message
    assert f"from {address[0]}:{address[1]}" in message and "connection" in message
    reader.gate.close()
    assert channel.statistics().exclusive_buffers_in_use == 0
    assert os.getpid() != process.pid
