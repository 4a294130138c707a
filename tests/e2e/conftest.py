"""Fixtures shared by the main-job tests: one data cache and one CLI run of the main job per
test session (the job reads all 336,776 flights; both test modules check its output)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rill.examples.data import flights_csv

RILL = str(Path(sys.executable).parent / "rill")


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    """flights.csv is extracted into a per-test-run cache, not the user's ~/.cache/rill."""
    path = tmp_path_factory.mktemp("rill_cache")
    old = os.environ.get("RILL_CACHE_DIR")
    os.environ["RILL_CACHE_DIR"] = str(path)
    yield path
    if old is None:
        del os.environ["RILL_CACHE_DIR"]
    else:
        os.environ["RILL_CACHE_DIR"] = old


@pytest.fixture(scope="session")
def flights_path(cache_dir) -> str:
    path = flights_csv()
    assert Path(path).is_relative_to(cache_dir)
    return path


@pytest.fixture(scope="session")
def main_job_cli(tmp_path_factory, flights_path, cache_dir):
    """``rill run -p 2 -m rill.examples.flight_stats -- --output <dir>`` as the README runs it:
    ``(completed process, output directory)``."""
    cwd = tmp_path_factory.mktemp("cli")
    out = cwd / "flight_stats"
    proc = subprocess.run(
        [RILL, "run", "-p", "2", "-m", "rill.examples.flight_stats", "--", "--output", str(out)],
        cwd=cwd, capture_output=True, text=True, timeout=120,
        env={**os.environ, "RILL_CACHE_DIR": str(cache_dir)},
    )
    return proc, out
