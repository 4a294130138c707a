"""The dashboard page in headless Chromium (Debian's ``chromium``; ``.ci/run`` installs it)
for a running back-pressured job with checkpointing, the backpressure experiment's topology
(``bench/backpressure.py``: A p=4 -> key_by -> B p=4, B.4 slow; embedded here): what it shows
matches the REST figures, it names B.4 (subtask 3) as the root cause, and its checkpoint history
rows are the REST API's. Skipped when no chromium is installed."""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from rest_http import Http
from rill.common import Configuration
from rill.common.functions import MapFunction
from rill.datastream import StreamExecutionEnvironment

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/run installs it)")

#: where the screenshot bench/README.md shows is written when RILL_SAVE_DASHBOARD is set
BENCH_SCREENSHOT = Path(__file__).resolve().parents[4] / "bench" / "dashboard_backpressure.png"


def _chromium(tmp_path: Path, url: str, *action: str) -> subprocess.CompletedProcess:
    profile = tmp_path / "profile"
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--virtual-time-budget=8000",
         "--window-size=1300,900", *action, url],
        capture_output=True, text=True, timeout=120, cwd=tmp_path)


class SlowB4(MapFunction):
    """B: subtask 3 (B.4, Flink's ``B (4/4)``) sleeps 1 ms per record, the others pass records on."""

    def open(self, runtime_context) -> None:
        self.slow = runtime_context.get_index_of_this_subtask() == 3

    def map(self, value):
        if self.slow:
            time.sleep(0.001)
        return value


def test_dashboard_shows_the_back_pressured_job_and_its_root_cause(embedded_rest, tmp_path):
    conf = Configuration().set_string("rest.port", "0").set_string("taskmanager.network.records-per-buffer", "32")
    conf.set_string("rill.source.batch-size", "32")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(4)
    env.enable_checkpointing(500)
    (env.from_sequence(1, 10**9).name("A")
        .key_by(lambda x: x % 4096).map(SlowB4()).name("B")
        .add_sink(lambda x: None).name("discard"))
    client = env.execute_async("backpressure experiment: A -> key_by -> B, B.4 slow")
    try:
        http = Http(client.get_web_interface_url())
        job_id = client.get_job_id()
        http.poll(f"/jobs/{job_id}/checkpoints", lambda c: c["counts"]["completed"] >= 2, deadline_s=120,
                  what="two checkpoints completed")
        detail = http.poll(f"/jobs/{job_id}", lambda d: d["backpressure-root-cause"] is not None,
                           what="root cause named")
        cause = detail["backpressure-root-cause"]
        page = f"{http.base}/?refresh=500#/jobs/{job_id}"
        proc = _chromium(tmp_path, page, "--dump-dom")
        dom = proc.stdout
        assert 'id="job-state"' in dom, proc.stderr[-2000:]
        assert 'data-state="RUNNING"' in dom
        rc = re.search(r'<div id="root-cause" class="cause" data-vertex-id="(\w+)" data-subtask="(\d*)">([^<]*)<', dom)
        assert rc, dom[:3000]
        assert rc.group(1) == cause["vertex-id"] and rc.group(2) == str(cause["subtask"])
        assert (cause["vertex-name"], cause["subtask"]) == ("B -> Sink: discard", 3)
        # the busy ratio is read when the page polled, a moment after the REST figures above
        assert re.fullmatch(r"Backpressure root cause: B -> Sink: discard \(subtask 3, B \(4/4\)\), busy [01]\.\d\d; "
                            r"back-pressured: Source: A", html.unescape(rc.group(3))), rc.group(3)
        shown = {m.group(1): m.group(2) for m in re.finditer(r'data-vertex-id="(\w{32})" data-name="[^"]*" data-level="(\w+)"', dom)}
        assert set(shown) == {v["id"] for v in detail["vertices"]}
        rest_levels = [http.get(f"/jobs/{job_id}/vertices/{v['id']}/backpressure")["backpressure-level"]
                       for v in detail["vertices"]]
        assert [shown[v["id"]] for v in detail["vertices"]] == rest_levels == ["high", "ok"]
        assert re.search(rf'class="vertex ok root-cause" data-vertex-id="{cause["vertex-id"]}"', dom)
        # the records the page shows never exceed what the REST API reports a moment later
        after = {v["id"]: v["metrics"]["write-records"] for v in http.get(f"/jobs/{job_id}")["vertices"]}
        for vid, out in re.findall(r'data-vertex-id="(\w{32})"[^>]*data-records-out="(\d+)"', dom):
            assert 0 < int(out) <= after[vid] or after[vid] == 0
        _check_checkpoint_panel(dom, http.get(f"/jobs/{job_id}/checkpoints"))
        shot = tmp_path / "dashboard.png"
        proc = _chromium(tmp_path, page, f"--screenshot={shot}")
        assert shot.exists() and shot.stat().st_size > 10_000, proc.stderr[-2000:]
        if os.environ.get("RILL_SAVE_DASHBOARD"):
            shutil.copy(shot, BENCH_SCREENSHOT)
    finally:
        client.cancel()
        client.wait(30)


def _check_checkpoint_panel(dom: str, rest: dict) -> None:
    """The page's checkpoint rows against ``/checkpoints`` read after the page: a completed
    checkpoint never changes, so each completed row the page shows is the REST entry exactly."""
    counts = re.search(r'<div id="checkpoint-counts" data-total="(\d+)" data-in-progress="(\d+)" '
                       r'data-completed="(\d+)" data-failed="(\d+)" data-restored="(\d+)">', dom)
    assert counts, dom[-4000:]
    total, _in_progress, completed, failed, restored = map(int, counts.groups())
    assert 2 <= completed <= rest["counts"]["completed"] and total <= rest["counts"]["total"]
    assert (failed, restored) == (rest["counts"]["failed"], 0) == (0, 0)
    rows = re.findall(r'<tr class="checkpoint (\w+)" data-id="(\d+)" data-status="(\w+)" data-trigger-timestamp="(\d+)" '
                      r'data-end-to-end-duration="(\d+)" data-state-size="(\d+)" data-acknowledged="(\d+)" '
                      r'data-subtasks="(\d+)"><td>(\d+)</td><td class="status">(\w+)</td>', dom)
    assert rows, dom[-4000:]
    ids = [int(r[1]) for r in rows]
    assert ids == sorted(ids, reverse=True) and len(rows) == min(total, 10)  # newest first, Flink's 10
    by_id = {h["id"]: h for h in rest["history"]}
    shown_completed = [r for r in rows if r[2] == "COMPLETED"]
    assert len(shown_completed) >= 2
    for cls, cid, status, trigger, e2e, size, acked, subtasks, cell_id, cell_status in shown_completed:
        assert cls == status == cell_status and cid == cell_id
        h = by_id.get(int(cid))
        if h is None:  # rotated out of the REST history since the page read it
            assert int(cid) < min(by_id)
            continue
        assert (h["status"], h["trigger_timestamp"], h["end_to_end_duration"], h["state_size"],
                h["num_acknowledged_subtasks"], h["num_subtasks"]) == (
            status, int(trigger), int(e2e), int(size), int(acked), int(subtasks))
        assert int(acked) == int(subtasks) == 8  # four A and four B subtasks
    latest = re.search(r'<div id="checkpoint-latest" data-completed-id="(\d+)"', dom)
    assert latest and int(latest.group(1)) == int(shown_completed[0][1])
