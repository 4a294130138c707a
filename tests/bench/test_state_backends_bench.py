"""bench/state_backends.py on a tiny input: both backends run in their child processes, their
sinks' checksums match the expected rolling counts, and the JSON holds one sample each with a
peak RSS. No timing is asserted."""

from __future__ import annotations

import json
import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:  # bench/ is a top-level folder of the repository, not installed
    sys.path.insert(0, _ROOT)

from bench import state_backends  # noqa: E402


def test_both_backends_count_every_key_exactly(tmp_path, capsys):
    out = tmp_path / "samples.json"
    assert state_backends.main(["--keys", "3000", "--passes", "3", "--local-dir", str(tmp_path / "db"),
                                "--json", str(out)]) == 0
    samples = json.loads(out.read_text())
    assert [(s["backend"], s["records"], s["checksum"]) for s in samples] == [("heap", 9000, 18000),
                                                                              ("rocksdb", 9000, 18000)]
    assert all(s["peak_rss_bytes"] > 0 for s in samples)
    assert "RocksDB / heap throughput:" in capsys.readouterr().out
    assert list((tmp_path / "db").iterdir()) == []  # the task removed its RocksDB directory


def test_a_wrong_count_fails_the_run(monkeypatch):
    monkeypatch.setattr(state_backends, "_child", lambda backend, args: {
        "backend": backend, "records": 2, "records_per_s": 1.0, "net_s": 2.0, "peak_rss_bytes": 1, "checksum": 0})
    assert state_backends.main(["--keys", "1", "--passes", "2"]) == 1
