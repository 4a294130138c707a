"""The README's jobs on a real local cluster give exactly the embedded mode's outputs."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest


def lines_of(directory: Path) -> list:
    return sorted(line for f in sorted(directory.rglob("*")) if f.is_file() for line in f.read_text().splitlines())


def test_main_job_on_the_cluster_equals_embedded(cluster, main_job_cli, cache_dir, tmp_path):
    embedded_proc, embedded_out = main_job_cli
    assert embedded_proc.returncode == 0, embedded_proc.stderr
    out = tmp_path / "flight_stats"
    cluster.env["RILL_CACHE_DIR"] = str(cache_dir)
    proc = cluster.cli("run", "--target", cluster.address, "-p", "2", "-m", "rill.examples.flight_stats",
                       "--", "--output", str(out), timeout=300)
    assert "FINISHED" in proc.stderr
    assert "each task is a process of its own on the cluster" in proc.stderr
    assert "share the GIL" in embedded_proc.stderr
    for part in ("stats", "hourly", "late"):
        cluster_lines, embedded_lines = lines_of(out / part), lines_of(embedded_out / part)
        assert cluster_lines == embedded_lines, part
        assert cluster_lines
    assert len(lines_of(out / "hourly")) == 21_105  # one row per (origin, hour) with departures
    cluster.wait_no_task_processes()


@pytest.mark.parametrize("parallelism", ["1", "2"])
def test_word_count_example_on_the_cluster_equals_embedded(cluster, tmp_path, parallelism):
    text = Path(__file__).read_text() * 20
    (tmp_path / "in.txt").write_text(text)
    outs = {}
    for target in ("embedded", cluster.address):
        out = tmp_path / ("emb" if target == "embedded" else "cl")
        cluster.cli("run", "--target", target, "-p", parallelism, "-m", "rill.examples.word_count", "--",
                    "--input", str(tmp_path / "in.txt"), "--output", str(out))
        outs[target] = lines_of(out)
    assert outs["embedded"] == outs[cluster.address]
    assert len(outs["embedded"]) == len(__import__("re").findall(r"\w+", text))


def test_rill_execution_target_cluster_uses_the_cluster_started_here(cluster, tmp_path):
    """`RILL_EXECUTION_TARGET=cluster` with the cluster's port as jobmanager.rpc.port: any
    program goes to the cluster without changing it."""
    (tmp_path / "in.txt").write_text("a b a\n")
    env = {"RILL_EXECUTION_TARGET": "cluster", "RILL_JOBMANAGER_RPC_PORT": str(cluster.port)}
    saved = dict(cluster.env)
    cluster.env.update(env)
    try:
        proc = cluster.cli("run", "-m", "rill.examples.word_count", "--", "--input", str(tmp_path / "in.txt"),
                           "--output", str(tmp_path / "out"))
    finally:
        cluster.env.clear()
        cluster.env.update(saved)
    assert "FINISHED" in proc.stderr
    assert lines_of(tmp_path / "out") == ["('a', 1)", "('a', 2)", "('b', 1)"]
    listing = cluster.cli("list", "--port", str(cluster.port)).stdout
    assert re.search(r"FINISHED   started .* WordCount$", listing, re.M), listing
    assert os.environ.get("RILL_EXECUTION_TARGET") is None
