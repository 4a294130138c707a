"""Smoke test of the network benchmark (bench/network.py): tiny runs of each side between two
real processes; both ends must agree on count, checksum and every record, and a broken data
plane (simulated on the consumer's side) must fail the check. Speed is never asserted here."""

import json
import sys
from pathlib import Path

import pytest

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:  # bench/ is a top-level folder of the repository, not installed
    sys.path.insert(0, _ROOT)

from bench import network as net  # noqa: E402
from bench.network import (  # noqa: E402
    SHAPES,
    NetworkMeasurement,
    NetworkResultMismatch,
    ProducerProcess,
    RecordStream,
    StreamCheck,
    crossover,
    measure,
    run_hand,
    run_raw,
    run_rill,
)


@pytest.fixture(scope="module")
def producer():
    with ProducerProcess() as process:
        yield process


@pytest.mark.parametrize("shape, compression", [("tuple", False), ("bytes1k", True), ("bytes64k", False)])
def test_every_side_moves_and_checks_the_same_records(producer, shape, compression):
    m = measure(producer, SHAPES[shape], 3000, compression, repeat=1, warmup=False)
    assert m.records == 3000 and len(m.samples) == 1
    sample = m.samples[0]
    assert sample.rill_s > 0 and sample.raw_s > 0 and sample.hand_s > 0
    # the wire carries the payload (compressed or not) plus framing and the handshake
    assert sample.channel_bytes < sample.wire_bytes
    if compression:
        assert sample.channel_bytes < m.payload_bytes  # lz4 shrank the text-like records
    else:
        assert sample.channel_bytes > m.payload_bytes  # + the end-of-partition event
    assert sample.buffers == -(-3000 // m.records_per_buffer)
    assert m.ratio_raw > 0 and m.ratio_hand > 0
    assert json.dumps(m.to_json())


def test_a_stream_spanning_several_segments_per_buffer_and_a_partial_last_buffer(producer):
    stream = RecordStream(SHAPES["bytes16k"], 200, 64)  # three 1 MiB buffers, then one of 8 records
    run = run_rill(producer, stream, compression=False, segment_size_bytes=32 * 1024)
    assert run.records == 200 and run.buffers == 4 and run.segments == 3 * 33 + 5  # 1 MiB + headers: 33 segments


def drop_second_buffer(index, values):
    return [] if index == 1 else values


def corrupt_one_byte(index, values):
    if index != 2:
        return values
    values = list(values)
    i, blob = values[5]
    values[5] = (i, blob[:-1] + bytes([blob[-1] ^ 1]))
    return values


def swap_two_records(index, values):
    if index != 0:
        return values
    values = list(values)
    values[0], values[1] = values[1], values[0]  # same count and checksum, wrong order
    return values


@pytest.mark.parametrize("tamper, expected", [
    (drop_second_buffer, r"received \(count, checksum\) \(\d+, \d+\), expected"),
    (corrupt_one_byte, r"records received at stream position 128 differ"),
    (swap_two_records, r"records received at stream position 0 differ"),
], ids=["dropped-buffer", "flipped-bit", "reordered-records"])
def test_a_broken_data_plane_fails_the_check(producer, tamper, expected):
    stream = RecordStream(SHAPES["bytes1k"], 300, 64)
    with pytest.raises(NetworkResultMismatch, match=expected):
        run_rill(producer, stream, compression=False, tamper=tamper)
    # the producer process serves the next run normally
    assert run_rill(producer, stream, compression=False).records == 300


def test_the_check_covers_count_checksum_and_content():
    stream = RecordStream(SHAPES["tuple"], 10, 4)
    count, checksum = stream.expected()
    assert (count, checksum) == (10, sum(r[1] for r in stream.pool[:10]))
    check = StreamCheck(stream)
    for batch in stream.batches():
        check.check(batch)
    net.check_result("test", check, stream.expected(), stream.expected())
    with pytest.raises(NetworkResultMismatch, match="the producer sent"):
        net.check_result("test", check, stream.expected(), (9, checksum))
    bad = StreamCheck(stream)
    for batch in stream.batches():
        bad.check([("key-x",) + r[1:] for r in batch])  # same count and checksum, other keys
    with pytest.raises(NetworkResultMismatch, match="position 0 differ"):
        net.check_result("test", bad, stream.expected(), stream.expected())


def test_the_raw_and_hand_written_baselines_check_what_they_receive(producer):
    assert run_raw(producer, 1_000_003) > 0
    assert run_hand(producer, RecordStream(SHAPES["tuple"], 5000, 1024), compression=True) > 0


def _measurement(record_bytes, ratio, compression=False):
    return NetworkMeasurement(
        shape=f"bytes{record_bytes}", record_bytes=record_bytes, compression=compression, flow_control=True,
        segment_size_bytes=32768, max_buffers_per_frame=4, records=1, records_per_buffer=1, payload_bytes=1, wire_bytes=1, repeat=1,
        rill_rps=1, rill_payload_mbps=1, rill_wire_mbps=1, raw_mbps=1, hand_rps=1, ratio_raw=ratio,
        ratio_raw_min=ratio, ratio_raw_max=ratio, ratio_hand=1, ratio_hand_min=1, ratio_hand_max=1)


def test_crossover_is_the_smallest_size_from_which_every_larger_one_meets_the_target():
    rows = [_measurement(100, 0.1), _measurement(1024, 0.55), _measurement(4096, 0.4), _measurement(16384, 0.6),
            _measurement(65536, 0.7), _measurement(65536, 0.9, compression=True)]
    assert crossover(rows).record_bytes == 16384
    assert crossover(rows, compression=True).record_bytes == 65536
    assert crossover([_measurement(100, 0.1)]) is None


def test_the_cli_prints_the_table_and_writes_json(tmp_path, capsys):
    out = tmp_path / "net.json"
    assert net.main(["--record-shape", "tuple", "--record-shape", "bytes4k", "--records", "2000", "--repeat", "1",
                     "--compression", "off", "--no-warmup", "--json", str(out), "-q"]) == 0
    printed = capsys.readouterr().out
    assert "| tuple (20 B) | off |" in printed and "| bytes4k (4 KiB) | off |" in printed
    assert "50% of the raw socket" in printed
    data = json.loads(out.read_text())
    assert [m["shape"] for m in data["measurements"]] == ["tuple", "bytes4k"]
    assert all(m["records"] == 2000 and len(m["samples"]) == 1 for m in data["measurements"])
