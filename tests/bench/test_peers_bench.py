"""The bytewax side-by-side (bench/peers.py, bench/bytewax_flows.py): every flow gives the
loop's exact output on a small input, the comparison checks each side on every repetition, and
a bytewax flow that computes something else fails the check. bytewax is in the ``test`` extra
(a missing one fails, it never skips). Speed is never asserted."""

import sys
from pathlib import Path

import pytest

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:  # bench/ is a top-level folder of the repository, not installed
    sys.path.insert(0, _ROOT)

from bench import bytewax_flows, peers  # noqa: E402
from bench.harness import ResultMismatch, _run_baseline, check_same  # noqa: E402
from bench.workloads import WORKLOADS  # noqa: E402

SMALL = {"wordcount": 300, "wordcount_sum": 300, "tumbling": 20_000, "stateless": 5_000}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_each_bytewax_flow_gives_the_loops_output(name):
    workload = WORKLOADS[name]()
    data = workload.prepare(SMALL[name])
    _, expected = _run_baseline(workload, data)
    _, got = peers._run_peer(workload, data)
    check_same(name, got, expected, 1)
    assert got.count == expected.count > 0


def test_measure_checks_all_three_sides_and_the_cli_prints_the_table(capsys):
    workload = WORKLOADS["wordcount_sum"]()
    m = peers.measure(workload, workload.prepare(200), repeat=2, warmup=True)
    assert (m.workload, m.records, m.repeat) == ("wordcount_sum", 200, 2)
    assert m.sink_records > 0 and m.bytewax_rps > 0 and m.rill_net_rps > 0
    assert peers.main(["--workload", "stateless", "--size", "3000", "--repeat", "1", "-q"]) == 0
    out = capsys.readouterr().out
    assert "| stateless | 3,000 records |" in out and "Rill net ÷ bytewax" in out


def test_a_bytewax_flow_with_other_semantics_fails_the_check(monkeypatch):
    # a W1 that emits the final counts only (bytewax's count_final), not one update per word
    import bytewax.operators as op
    from bytewax.testing import TestingSource

    def final_counts(flow, data, sink):
        lines = op.input("lines", flow, TestingSource(data, 64))
        words = op.flat_map("split", lines, bytewax_flows.split_words)
        op.output("sink", op.count_final("count", words, str), bytewax_flows._InvokeSink(sink))

    monkeypatch.setitem(bytewax_flows.FLOWS, "wordcount", final_counts)
    workload = WORKLOADS["wordcount"]()
    with pytest.raises(ResultMismatch, match=r"wordcount \(bytewax\).*count \d+ != loop's"):
        peers.measure(workload, workload.prepare(200), repeat=1, warmup=False)


def test_unknown_workload_and_bad_arguments():
    with pytest.raises(KeyError, match="no bytewax flow for workload 'sliding'"):
        bytewax_flows.run_bytewax("sliding", [], None)
    with pytest.raises(ValueError, match="repeat must be at least 1"):
        peers.measure(WORKLOADS["stateless"](), [], repeat=0)
