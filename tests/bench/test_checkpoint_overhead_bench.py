"""Smoke test of the checkpoint-overhead benchmark (``bench/checkpoint_overhead.py``): results
only, never rates. Both runs of a pair must give the same sink output, checkpoints are read from
the JobClient, and a pair whose outputs differ is refused."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:  # bench/ is a top-level folder of the repository, not installed
    sys.path.insert(0, _ROOT)

from bench.checkpoint_overhead import _same, measure, run_once  # noqa: E402
from bench.harness import ResultMismatch, SinkResult  # noqa: E402
from bench.workloads.windows import TumblingWindowsWorkload, TypedTumblingWindowsWorkload  # noqa: E402
from bench.workloads.wordcount import TypedWordCountWorkload, WordCountWorkload  # noqa: E402


def test_a_pair_of_runs_agrees_and_the_checkpointed_run_reports_its_checkpoints():
    workload = TumblingWindowsWorkload(keys=500)
    data = workload.prepare(20_000)
    m = measure(workload, data, repeat=1, interval_ms=20, warmup=False)
    without, with_ = m.runs
    assert (without.checkpointing, with_.checkpointing) == (False, True)
    assert without.completed == 0 and without.acks == []
    # every acknowledgement of a completed checkpoint names a task of the job
    assert all(name.startswith(("Source", "Window")) for name, *_ in with_.acks)
    assert m.records == 20_000 and m.rps_without > 0 and m.rps_with > 0


def test_outputs_that_differ_are_refused():
    same = SinkResult(3, [(("k", 1, 1), 9), (("k", 1, 2), 19)], 1)
    reordered = SinkResult(3, [(("k", 1, 2), 19), (("k", 1, 1), 9)], 1)
    _same("tumbling", same, reordered)  # window outputs compare as multisets
    with pytest.raises(ResultMismatch, match="'tumbling'"):
        _same("tumbling", same, SinkResult(3, [(("k", 1, 1), 9), (("k", 1, 3), 19)], 1))
    with pytest.raises(ResultMismatch):
        _same("wordcount", SinkResult(5, 15, 1), SinkResult(5, 14, 1))
    with pytest.raises(ResultMismatch):
        _same("wordcount", SinkResult(0, 0, 1), SinkResult(0, 0, 1))  # nothing to compare


def test_run_once_removes_its_checkpoint_directory(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    workload = TumblingWindowsWorkload(keys=10)
    run, result = run_once(workload, workload.prepare(2_000), 20)
    assert result.count > 0 and run.checkpointing
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("untyped, typed, size", [
    (TumblingWindowsWorkload(keys=300), TypedTumblingWindowsWorkload(keys=300), 10_000),
    (WordCountWorkload(), TypedWordCountWorkload(), 3_000),
], ids=["tumbling", "wordcount"])
def test_typed_variants_give_the_same_output_and_spans_lie_within_the_net_runtime(untyped, typed, size):
    """The *_typed workloads (declared types: typed state columns) give the untyped ones'
    output; the gated processing span (sink open to end of input) is positive and no longer
    than the job's net runtime, which adds the wait for the final checkpoint."""
    data = untyped.prepare(size)
    runs = []
    for workload in (untyped, typed):
        run, result = run_once(workload, data, 20)
        runs.append(result)
        assert 0 < run.processing_s <= run.net_s
    _same(untyped.name, *runs)
