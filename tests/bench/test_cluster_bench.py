"""Smoke test of the benchmark's cluster target (``--target cluster``, ``--cluster-speedup``):
tiny WordCount runs on a real local cluster that the benchmark starts itself. The result check
works across processes (the sinks run in task processes and publish through files) and fails on
wrong output; the cluster leaves nothing behind. Speed is never asserted."""

import json
import os
import sys
from pathlib import Path

import pytest

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:  # bench/ is a top-level folder of the repository, not installed
    sys.path.insert(0, _ROOT)

from bench import run as bench_run  # noqa: E402
from bench.cluster import BenchCluster  # noqa: E402
from bench.harness import ResultMismatch, run_cluster_speedup, run_workload  # noqa: E402
from bench.workloads.wordcount import ParallelLinesSource, WordCountWorkload, word_of  # noqa: E402
from rill.examples.word_count import count_one, split_words  # noqa: E402

LINES = 300


@pytest.fixture(scope="module")
def bench_cluster():
    cluster = BenchCluster(task_executors=1, slots=2)
    cluster.start()
    try:
        yield cluster
    finally:
        run_dir = cluster.run_dir
        cluster.stop()  # raises ClusterLeftovers if a process of it is still running
        assert not os.path.exists(run_dir)


@pytest.fixture(scope="module")
def lines():
    return WordCountWorkload().prepare(LINES)


class _NoRollingReduce(WordCountWorkload):
    """Emits (word, 1) instead of the running count: same number of records, wrong values."""

    def run_rill(self, env, data, sink):
        self.source(env, data).flat_map(split_words).map(count_one).key_by(word_of).add_sink(sink)


class _DropsALine(WordCountWorkload):
    """Loses the first line (it has words): fewer records."""

    def run_rill(self, env, data, sink):
        assert split_words(data[0])
        super().run_rill(env, data[1:], sink)


def test_parallel_source_splits_the_lines_in_order():
    data = [f"line {i}" for i in range(10)]
    source = ParallelLinesSource(data)
    for p in (1, 2, 3):
        enumerator = source.create_enumerator(p)
        read = []
        for subtask in range(p):
            split = enumerator.handle_split_request(subtask)
            for batch in source.create_reader().read(split):
                read.extend(batch)
            assert enumerator.handle_split_request(subtask) is None
        assert read == data


@pytest.mark.parametrize("source", WordCountWorkload.SOURCES)
def test_cluster_wordcount_passes_the_check(bench_cluster, lines, source):
    m = run_workload(WordCountWorkload(source=source), lines, repeat=1, parallelism=2,
                     warmup=False, cluster=bench_cluster)
    assert m.target == "cluster" and m.parallelism == 2 and m.target_ratio is None
    assert m.sink_records == sum(len(split_words(line)) for line in lines) > 0
    assert os.listdir(bench_cluster.results_dir) == []  # every sink's file was read and removed


@pytest.mark.parametrize("broken", [_NoRollingReduce, _DropsALine])
def test_wrong_cluster_output_fails_the_check(bench_cluster, lines, broken):
    with pytest.raises(ResultMismatch, match="'wordcount' at parallelism 2"):
        run_workload(broken(source="parallel"), lines, repeat=1, parallelism=2, warmup=False,
                     cluster=bench_cluster)


def test_a_sink_that_never_publishes_fails_the_check(bench_cluster, lines):
    class _Silent(WordCountWorkload):
        def run_rill(self, env, data, sink):
            sink.close = lambda: None  # the subtasks' copies never publish
            super().run_rill(env, data, sink)

    with pytest.raises(ResultMismatch, match="never finished"):
        run_workload(_Silent(source="parallel"), lines, repeat=1, parallelism=2, warmup=False,
                     cluster=bench_cluster)


def test_speedup_mode_checks_every_side_and_embedded_still_works_after(bench_cluster, lines):
    m = run_cluster_speedup(WordCountWorkload(source="parallel"), lines, bench_cluster, parallelism=2,
                            repeat=2, warmup=False)
    assert m.records == LINES and m.sink_records > 0 and len(m.samples) == 2
    assert [s.order[0] for s in m.samples] == ["loop", "embedded"]
    assert m.speedup_net[1] <= m.speedup_net[0] <= m.speedup_net[2]
    # shipping to the cluster pickles bench's modules by value, process-wide; the embedded
    # sinks must still reach this process' registry afterwards
    run_workload(WordCountWorkload(), lines, repeat=1, parallelism=1, warmup=False)
    with pytest.raises(ResultMismatch):
        run_cluster_speedup(WordCountWorkload(source="parallel"), lines, bench_cluster, repeat=1,
                            warmup=False, cluster_workload=_NoRollingReduce(source="parallel"))


def test_the_marginal_measurement_runs_every_side_on_the_small_input_too(bench_cluster, lines):
    m = run_cluster_speedup(WordCountWorkload(source="file"), lines, bench_cluster, parallelism=2,
                            repeat=1, warmup=False, marginal=0.5)
    assert m.small_records == LINES // 2 and m.judged_on == "marginal"
    sample = m.samples[0]
    assert 0 < sample.small_loop_s and 0 < sample.small_embedded_net_s and 0 < sample.small_cluster_net_s
    low, mid, high = m.speedup_marginal[1], m.speedup_marginal[0], m.speedup_marginal[2]
    assert low <= mid <= high and m.meets_target == (mid >= m.target_speedup)
    without = run_cluster_speedup(WordCountWorkload(source="file"), lines, bench_cluster, repeat=1, warmup=False)
    assert without.speedup_marginal is None and without.judged_on == "net" and without.small_records == 0
    with pytest.raises(ValueError, match="marginal must be a fraction"):
        run_cluster_speedup(WordCountWorkload(), lines, bench_cluster, marginal=1.0)


def test_cli_cluster_speedup_of_several_workloads(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    out = tmp_path / "speedups.json"
    code = bench_run.main(["--cluster-speedup", "--workload", "wordcount_sum", "--workload", "stateless",
                           "--size", "2000", "--repeat", "1", "--no-warmup", "--quiet", "--json", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert text.count("cluster p=2 ÷ embedded p=1: marginal (start-up excluded: 400 → 2,000") == 2
    assert text.count("target ≥ 1.7 on marginal") == 2 and "Source: file" in text
    reports = json.loads(out.read_text())["cluster_speedups"]
    assert [r["workload"] for r in reports] == ["wordcount_sum", "stateless"]
    assert all(r["records"] == 2000 and r["sink_records"] > 0 and r["small_records"] == 400
               and r["judged_on"] == "marginal" for r in reports)
    with pytest.raises(SystemExit):
        bench_run.main(["--cluster-speedup", "--workload", "sliding"])


def test_cli_cluster_speedup_starts_and_stops_its_cluster(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))  # where the cluster's run directory goes
    out = tmp_path / "speedup.json"
    code = bench_run.main(["--cluster-speedup", "--size", str(LINES), "--repeat", "1", "--no-warmup", "--quiet",
                           "--json", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert "| Rill cluster p=2 |" in text and "cluster p=2 ÷ embedded p=1: marginal" in text
    report = json.loads(out.read_text())["cluster_speedup"]
    assert report["records"] == LINES and report["parallelism"] == 2
    # stopped (BenchCluster.stop raises if any of its processes survived) and its run directory gone
    assert not [d for d in os.listdir(tmp_path) if d.startswith("rill-bench-cluster-")]
