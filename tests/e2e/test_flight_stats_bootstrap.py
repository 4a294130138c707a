"""Issue 12's acceptance: a savepoint bootstrapped from a Spark DataFrame of per-carrier figures
restores into the main job, which continues from those figures.

The DataFrame holds (flights, sum of departure delays, delayed flights, worst delay) per carrier,
as the main job's ``carrier-stats`` operator keeps them (its ValueState ``stats``, keys the
carrier codes, an event-time timer at the end of time that emits the statistics). SavepointWriter
writes it under that uid with the job's max parallelism (128) from one Spark partition; the main
job then runs from the savepoint at parallelism 2 (rescaled) on the first flights of the real
data, in both execution modes through ``execution.state-recovery.path`` and once through ``rill
run --from-savepoint``. Every carrier line equals the bootstrapped figures plus the job's own
input, computed here from the CSV; a bootstrapped carrier absent from the input is emitted with
its figures alone (its bootstrapped timer fires), and routes (not bootstrapped) are the input's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import cloudpickle
import pytest
from pyspark import cloudpickle as spark_cloudpickle

from rill.common.streamrecord import MAX_TIMESTAMP
from rill.examples import flight_stats
from rill.runtime.errors import JobExecutionException
from rill.state import ValueStateDescriptor
from rill.state_processor import KeyedStateBootstrapFunction, OperatorTransformation, SavepointWriter

pytestmark = pytest.mark.spark
spark_cloudpickle.register_pickle_by_value(sys.modules[__name__])
cloudpickle.register_pickle_by_value(sys.modules[__name__])

RILL = str(Path(sys.executable).parent / "rill")
SUBSET = 2_000
#: carrier -> (flights, sum of delays, delayed flights, worst delay): what an earlier history left
FIGURES: Dict[str, Tuple[int, int, int, Optional[int]]] = {
    "UA": (1_000, 12_000, 990, 300), "AA": (500, -250, 480, 44), "B6": (7, 0, 0, None), "ZZ": (3, 30, 3, 20)}

Stats = Tuple[int, int, int, Optional[int]]


class CarrierFigures(KeyedStateBootstrapFunction):
    """Writes the main job's per-carrier state from one row of figures."""

    def open(self, runtime_context):
        self.stats = runtime_context.get_state(ValueStateDescriptor("stats", None))  # FlightStats' descriptor

    def process_element(self, value, ctx):
        self.stats.update((value.flights, value.delay_sum, value.delayed, value.worst))
        # FlightStats registers its end-of-input timer on a key's first flight: a bootstrapped key has it
        ctx.timer_service().register_event_time_timer(MAX_TIMESTAMP)


@pytest.fixture(scope="module")
def flights_subset(tmp_path_factory, flights_path) -> str:
    path = tmp_path_factory.mktemp("flights") / "flights.csv"
    with open(flights_path) as src, open(path, "w") as dst:
        for _, line in zip(range(SUBSET + 1), src):  # the header and SUBSET flights
            dst.write(line)
    return str(path)


def _bootstrap(spark, path: Path, figures, uid: str = "carrier-stats", max_parallelism: int = 128) -> str:
    df = spark.createDataFrame([(c, *f) for c, f in figures.items()],
                               "carrier string, flights long, delay_sum long, delayed long, worst int")
    transformation = OperatorTransformation.bootstrap_with(df.coalesce(1)).key_by("carrier").transform(
        CarrierFigures())
    return SavepointWriter.new_savepoint(spark, max_parallelism).with_operator(uid, transformation).write(str(path))


@pytest.fixture(scope="module")
def savepoint(spark, tmp_path_factory) -> str:
    return _bootstrap(spark, tmp_path_factory.mktemp("bootstrap") / "savepoint-carriers", FIGURES)


@pytest.fixture(scope="module")
def mismatched(spark, tmp_path_factory) -> Dict[str, str]:
    """Savepoints the main job cannot restore: another max parallelism, a uid it does not have."""
    base = tmp_path_factory.mktemp("mismatched")
    return {"max parallelism": _bootstrap(spark, base / "max-p", {"UA": (1, 0, 0, None)}, max_parallelism=256),
            "unknown uid": _bootstrap(spark, base / "uid", {"UA": (1, 0, 0, None)}, uid="carrier-statistics")}


def _add(s: Stats, delay: Optional[int]) -> Stats:
    flights, total, n, worst = s
    if delay is None:
        return flights + 1, total, n, worst
    return flights + 1, total + delay, n + 1, delay if worst is None or delay > worst else worst


def _line(kind: str, key: str, s: Stats) -> str:
    flights, total, n, worst = s
    return flight_stats.to_csv((kind, key, flights, total / n if n else None, worst))


@pytest.fixture(scope="module")
def expected(flights_subset) -> List[str]:
    carriers: Dict[str, Stats] = dict(FIGURES)
    routes: Dict[str, Stats] = {}
    with open(flights_subset) as f:
        next(f)
        for line in f:
            carrier, origin, dest, delay = flight_stats.parse_flight(line.rstrip("\n"))
            carriers[carrier] = _add(carriers.get(carrier, (0, 0, 0, None)), delay)
            routes[f"{origin}-{dest}"] = _add(routes.get(f"{origin}-{dest}", (0, 0, 0, None)), delay)
    assert {"UA", "AA", "B6"} <= set(carriers) - {"ZZ"}, "bootstrapped carriers that the input continues"
    return sorted([_line("carrier", k, s) for k, s in carriers.items()] + [_line("route", k, s) for k, s in routes.items()])


def _stats_lines(out: Path) -> List[str]:
    return sorted(line for f in (out / "stats").glob("*.csv") for line in f.read_text().splitlines())


def test_the_main_job_continues_from_the_bootstrapped_per_carrier_figures(env, tmp_path, savepoint, flights_subset,
                                                                          expected):
    out = tmp_path / "out"
    env.get_configuration().set_string("execution.state-recovery.path", savepoint)
    flight_stats.configure(env, ["--input", flights_subset, "--output", str(out), "--parallelism", "2"])
    env.execute("main job from a bootstrapped savepoint")
    lines = _stats_lines(out)
    assert "carrier,ZZ,3,10.0,20" in lines  # in the savepoint only
    assert lines == expected


def test_rill_run_from_savepoint_continues_from_the_bootstrapped_figures(tmp_path, savepoint, flights_subset, expected,
                                                                         cache_dir):
    out = tmp_path / "out"
    proc = subprocess.run(
        [RILL, "run", "--no-progress", "-p", "2", "--from-savepoint", savepoint, "-m", "rill.examples.flight_stats",
         "--", "--input", flights_subset, "--output", str(out)],
        cwd=tmp_path, capture_output=True, text=True, timeout=180, env={**os.environ, "RILL_CACHE_DIR": str(cache_dir)})
    assert proc.returncode == 0, proc.stderr
    assert _stats_lines(out) == expected


@pytest.mark.parametrize("case,message", [
    ("max parallelism", r"failed during deployment: The maximum parallelism \(256\) with which the latest checkpoint "
                        r"of the execution job vertex Carrier Stats .* and the current maximum parallelism \(128\) "
                        r"changed"),
    ("unknown uid", r"Cannot map checkpoint/savepoint state for operator [0-9a-f]{32}, uid 'carrier-statistics'"),
])
def test_a_bootstrapped_savepoint_the_job_cannot_take_fails_its_start_with_the_rule(env, tmp_path, mismatched,
                                                                                  flights_subset, case, message):
    out = tmp_path / "out"
    env.get_configuration().set_string("execution.state-recovery.path", mismatched[case])
    flight_stats.configure(env, ["--input", flights_subset, "--output", str(out)])
    with pytest.raises(JobExecutionException, match=message):
        env.execute("main job from a savepoint it cannot restore")
    assert _stats_lines(out) == []
