"""Smoke test of the backpressure experiment (``bench/backpressure.py``).

Connection level: the stall scenario, asserted by counts and states only (never by rates):
channel 2 of a connection stops reading; with credit-based flow control channel 1 then receives
all of its records while channel 2 stays stalled; without it the connection is paused and
channel 1 receives nothing although the producer sent its records; after channel 2 is released
both receive everything, in order.

Job level: ``python -m bench.backpressure --quick --part job`` starts its own cluster of
2 TaskExecutors x 2 slots, runs the baseline, credit and no-credit jobs, stops the cluster
(exit 3 if a process is left), and prints the table of the 8 subtasks.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:  # bench/ is a top-level folder of the repository, not installed
    sys.path.insert(0, _ROOT)

from bench.backpressure import (  # noqa: E402
    BUFFERS_PER_CHANNEL,
    FLOATING_BUFFERS,
    LABELS,
    RECORDS_PER_BUFFER,
    stall_scenario,
)

NUM_FAST = 60 * RECORDS_PER_BUFFER
NUM_SLOW = 30 * RECORDS_PER_BUFFER


def test_with_credit_the_fast_channel_gets_all_its_records_while_the_slow_one_is_stalled():
    r = stall_scenario(True, num_fast=NUM_FAST, num_slow=NUM_SLOW)
    assert r.errors == []
    # the slow channel used its whole credit (2 exclusive + 8 floating buffers); its sender waits
    assert r.slow_buffers_held == BUFFERS_PER_CHANNEL + FLOATING_BUFFERS
    assert r.slow_sender_back_pressured and not r.connection_paused
    # meanwhile the fast channel, on the same connection, received everything
    assert r.fast_received_while_stalled == NUM_FAST
    assert r.slow_records_after_fast == 0  # the slow consumer had not read anything
    assert (r.fast_total, r.slow_total) == (NUM_FAST, NUM_SLOW)


def test_without_credit_the_stalled_channel_blocks_the_fast_one_on_the_shared_connection():
    r = stall_scenario(False, num_fast=NUM_FAST, num_slow=NUM_SLOW)
    assert r.errors == []
    assert r.slow_buffers_held == BUFFERS_PER_CHANNEL + FLOATING_BUFFERS
    assert r.connection_paused and not r.slow_sender_back_pressured
    # the producer sent records of the fast channel, none arrived: the connection was paused
    # before the first of them was written and stays paused while the slow channel holds on
    assert r.fast_sent_by_producer > 0
    assert r.fast_received_while_stalled == 0 < NUM_FAST
    # released, the slow channel unblocks the connection and both complete, in order
    assert (r.fast_total, r.slow_total) == (NUM_FAST, NUM_SLOW)


def test_the_job_level_part_runs_end_to_end_on_a_cluster(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "bench.backpressure", "--quick", "--part", "job", "--out", str(tmp_path)],
        cwd=_ROOT, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
    )
    out = proc.stdout
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out}\n{proc.stderr}"
    assert "none of its" in out and "processes is left" in out

    table = out[out.index("| subtask |"):].split("\n\n", 1)[0].splitlines()
    rows = [line for line in table if re.match(r"\| [AB]\.\d \|", line)]
    assert [row.split("|")[1].strip() for row in rows] == LABELS  # 8 subtask rows
    assert "baseline rec/s" in table[0] and "no-credit rec/s" in table[0] and "credit rec/s" in table[0]

    report = json.loads((tmp_path / "backpressure.json").read_text())
    runs = {r["run"]["name"]: r for r in report["job"]}
    assert set(runs) == {"baseline", "credit", "no-credit"}
    for name, r in runs.items():
        subtasks = r["summary"]["subtasks"]
        assert all(subtasks[label] is not None for label in LABELS), name
        assert r["summary"]["total_B_per_s"] > 0, name
        # cancelled at the window's end: a cancelled job ends CANCELED, even when a consumer
        # fails on its cancelled producer's partition meanwhile (the JobMaster's rule)
        assert r["run"]["final_status"] == "CANCELED", (name, r["run"].get("end_error"))
    assert runs["baseline"]["run"]["slow_rate"] is None
    assert runs["credit"]["run"]["slow_rate"] == runs["no-credit"]["run"]["slow_rate"] > 0
    assert (tmp_path / "backpressure.png").stat().st_size > 10_000
    # the REST API's root cause names the slow subtask B.4 (index 3) of B's vertex
    cause = runs["credit"]["summary"]["root_cause"]
    assert cause["vertex-name"].startswith("B") and cause["subtask"] == 3, cause
    assert cause["back-pressured-vertices"] == ["Source: A"]
