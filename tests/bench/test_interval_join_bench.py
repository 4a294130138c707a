"""The flights-with-weather interval join benchmark checks Rill's pairs against its bisect loop:
it must pass on a cut of the real data (speed is never asserted; the benchmark prints it)."""

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:  # bench/ is a top-level folder of the repository, not installed
    sys.path.insert(0, _ROOT)

from bench import interval_join  # noqa: E402


def test_the_loop_join_finds_every_weather_hour_within_half_an_hour():
    flights = [(0, "EWR", 3_600_000), (1, "EWR", 3_600_000 + 1_800_001), (2, "JFK", 0), (3, "LGA", 5_400_000)]
    weather = [("EWR", 0), ("EWR", 3_600_000), ("EWR", 7_200_000), ("JFK", 1_800_000), ("LGA", 7_200_000)]
    assert interval_join.loop_join(flights, weather) == [(0, 3_600_000), (1, 7_200_000), (2, 1_800_000),
                                                         (3, 7_200_000)]


def test_rill_gives_the_loop_pairs_on_the_first_flights_of_the_year(capsys):
    assert interval_join.main(["--flights", "3000", "--repeat", "1", "-p", "2"]) == 0
    out = capsys.readouterr().out
    assert "3,000 departed flights x 26,115 weather observations" in out
    assert "run 1: 3,0" in out  # at least one weather hour per flight on the first days
