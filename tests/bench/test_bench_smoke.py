"""Smoke test of the benchmark harness: every workload runs at a tiny size on Rill and on the
hand-written loop, and the harness's result check passes. Speed is never asserted here (the
benchmark itself states the ratios); a broken job must fail the check."""

import json
import sys
from pathlib import Path

import pytest

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:  # bench/ is a top-level folder of the repository, not installed
    sys.path.insert(0, _ROOT)

from bench import run as bench_run  # noqa: E402
from bench.harness import ResultMismatch, run_workload  # noqa: E402
from bench.workloads import WORKLOADS, StatelessWorkload, WordCountWorkload  # noqa: E402
from bench.workloads.stateless import to_euros  # noqa: E402
from bench.workloads.wordcount import word_of  # noqa: E402
from rill.examples.word_count import count_one, split_words  # noqa: E402

TINY = {"stateless": 5_000, "wordcount": 400}


@pytest.mark.parametrize("name", sorted(WORKLOADS))
@pytest.mark.parametrize("parallelism", [1, 2])
def test_workload_results_match_the_loop(name, parallelism):
    workload = WORKLOADS[name]()
    data = workload.prepare(TINY[name])
    assert len(data) == TINY[name]
    m = run_workload(workload, data, repeat=1, parallelism=parallelism)
    assert m.records == TINY[name]
    assert m.sink_records > 0
    assert len(m.samples) == 1


class _DropsTheFilter(StatelessWorkload):
    """A "Rill job" that forgets the filter: the check must catch it."""

    def run_rill(self, env, data, sink):
        env.from_collection(data).map(to_euros).add_sink(sink)


class _NoRollingReduce(WordCountWorkload):
    """Emits (word, 1) instead of the running count: same number of records, wrong values."""

    def run_rill(self, env, data, sink):
        env.from_collection(data).flat_map(split_words).map(count_one).key_by(word_of).add_sink(sink)


@pytest.mark.parametrize("broken", [_DropsTheFilter, _NoRollingReduce])
def test_a_wrong_job_fails_the_check(broken):
    workload = broken()
    data = workload.prepare(TINY[workload.name])
    with pytest.raises(ResultMismatch, match=workload.name):
        run_workload(workload, data, repeat=1, warmup=False)


def test_cli_prints_the_table_and_json(tmp_path, capsys):
    out = tmp_path / "bench.json"
    code = bench_run.main(["--workload", "stateless", "--size", "3000", "--repeat", "1", "--no-warmup",
                           "--quiet", "--json", str(out)])
    assert code == 0
    assert "| stateless | 1 |" in capsys.readouterr().out
    report = json.loads(out.read_text())
    assert report["machine"]["nproc"] >= 1
    assert report["measurements"][0]["records"] == 3000
