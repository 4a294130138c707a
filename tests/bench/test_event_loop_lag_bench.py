"""The event-loop lag benchmark runs and reports both sides (lag is never asserted)."""

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:  # bench/ is a top-level folder of the repository, not installed
    sys.path.insert(0, _ROOT)

from bench import event_loop_lag  # noqa: E402


def test_the_lag_bench_collects_every_record_and_reports_both_sides(capsys):
    assert event_loop_lag.main(["--records", "20000", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "job: 20,000 records, p=2, target embedded" in out
    assert "with the job: p50" in out and "loop alone: p50" in out
