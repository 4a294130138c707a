"""Smoke test of the latency benchmark (``bench/latency.py``): tiny runs in both modes (the
cluster one started and stopped by the bench itself); the output has one row per (timeout,
load), every record reached the sinks, every sample is a positive latency and the summaries are
ordered. Latency and throughput are never compared with a threshold."""

import json
import os
import struct
import sys
from pathlib import Path

import pytest

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:  # bench/ is a top-level folder of the repository, not installed
    sys.path.insert(0, _ROOT)

from bench import latency  # noqa: E402
from bench.latency import RateLimitedSource, SeqSplit, read_samples  # noqa: E402

EVERY = 10


def _check_runs(runs, mode, loads, timeouts, seconds):
    throttled = [r for r in runs if r["load"] is not None]
    assert sorted((r["buffer_timeout_ms"], r["load"]) for r in throttled) == sorted(
        (t, load) for t in timeouts for load in loads)
    for r in throttled:
        assert r["mode"] == mode and r["records"] % (latency.PARALLELISM * EVERY) == 0
        # no warm-up dropped: one sample per EVERY records, each a positive latency
        assert r["dropped_warmup"] == 0 and r["samples"] == r["records"] // EVERY == len(r["latencies_ms"])
        lat = r["latencies_ms"]
        assert lat == sorted(lat) and lat[0] > 0
        assert 0 < r["p50_ms"] <= r["p99_ms"] <= r["max_ms"] == lat[-1]
        assert r["rate"] > 0 and r["emitted_rate"] > 0 and r["throughput"] > 0
        assert r["sleep_lag_p99_ms"] >= 0 and r["cores"] > 0
    return throttled


def test_embedded_measures_the_maximum_then_every_timeout_and_load(tmp_path, capsys):
    out, png = tmp_path / "lat.json", tmp_path / "lat.png"
    loads = [0.01, 0.02]  # of the measured maximum: tiny runs whatever the machine's speed
    assert latency.main(["--mode", "embedded", "--max-records", "20000", "--seconds", "0.5",
                         "--warmup-s", "0", "--sample-every", str(EVERY), "--loads", *map(str, loads),
                         "--plot", str(png), "--json", str(out)]) == 0
    runs = json.loads(out.read_text())
    top = [r for r in runs if r["load"] is None]
    assert len(top) == 1 and top[0]["rate"] == 0 and top[0]["records"] == 20000 and top[0]["throughput"] > 0
    throttled = _check_runs(runs, "embedded", loads, [0, 10, 100], 0.5)
    for r in throttled:
        assert r["rate"] == pytest.approx(r["load"] * top[0]["throughput"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = capsys.readouterr().out
    assert "embedded: maximum throughput" in text
    assert text.count("| embedded |") == 6 and "MET" not in text and "MISSED" not in text  # target: cluster only


def test_cluster_runs_every_timeout_and_stops_its_cluster(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))  # where the cluster's run directory goes
    out = tmp_path / "lat.json"
    assert latency.main(["--mode", "cluster", "--max-throughput", "40000", "--seconds", "0.5", "--warmup-s", "0",
                         "--sample-every", str(EVERY), "--loads", "0.5", "--json", str(out)]) == 0
    runs = json.loads(out.read_text())
    assert [r for r in runs if r["load"] is None] == []  # the given maximum is not measured
    for r in _check_runs(runs, "cluster", [0.5], [0, 10, 100], 0.5):
        assert r["rate"] == 20000 and r["records"] == 10000
    text = capsys.readouterr().out
    assert text.count("| cluster |") == 3 and text.count("MET") + text.count("MISSED") == 3
    # BenchCluster.stop raised if a process survived; its run directory and the samples are gone
    assert os.listdir(tmp_path) == ["lat.json"]


def test_the_rate_limited_reader_emits_contiguous_stamped_batches_no_faster_than_its_rate():
    source = RateLimitedSource(1000, rate=20000)
    assert source.create_splits(2) == [SeqSplit(0, 500), SeqSplit(500, 1000)]
    reader = source.create_reader()
    reader.batch_size = 64
    reader.open(1, 2)  # 10,000 records/s for this reader
    records, empties = [], 0
    for batch in reader.read(SeqSplit(500, 1000)):
        if not batch:
            empties += 1
        assert len(batch) <= 64 and len({t for _, t in batch}) <= 1  # one stamp per batch
        records.extend(batch)
    assert [s for s, _ in records] == list(range(500, 1000))
    stamps = [t for _, t in records]
    assert stamps == sorted(stamps)
    # 500 records at 10,000/s: the last one is due 49.9 ms after the first, not earlier
    assert stamps[-1] - stamps[0] >= 49_900_000 and empties > 0
    assert reader.progress_units == 500


def test_bad_source_arguments_and_missing_samples_are_named(tmp_path):
    with pytest.raises(ValueError, match=r"RateLimitedSource: records must be >= 1, got 0"):
        RateLimitedSource(0)
    with pytest.raises(ValueError, match=r"RateLimitedSource: rate must be >= 0 records/s, got -1"):
        RateLimitedSource(10, rate=-1)
    with pytest.raises(RuntimeError, match="no LatencySink of run abc wrote its samples"):
        read_samples("abc", str(tmp_path))
    # two sinks' files: counts add up, pairs come sorted by emission, the files are consumed
    (tmp_path / "abc.1.samples").write_bytes(struct.pack("=5q", 3, 20, 25, 40, 41))
    (tmp_path / "abc.2.samples").write_bytes(struct.pack("=3q", 2, 10, 12))
    assert read_samples("abc", str(tmp_path)) == (5, [(10, 12), (20, 25), (40, 41)], 2)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("argv, message", [
    (["--loads", "0"], "--loads must be fractions > 0 of the maximum"),
    (["--timeouts", "-1"], "--timeouts are buffer timeouts >= 0 ms"),
    (["--seconds", "1", "--warmup-s", "1"], "need --seconds > 0 and 0 <= --warmup-s < --seconds"),
    (["--sample-every", "0"], "--sample-every must be >= 1, got 0"),
])
def test_bad_arguments_are_refused_before_any_run(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        latency.main(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err
