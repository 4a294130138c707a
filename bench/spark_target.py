"""The Spark execution target against Rill's own BATCH and STREAMING runs, same input, same run.

    python -m bench.spark_target                          # WordCount 200,000 lines, main job 50,000 flights
    python -m bench.spark_target --lines 50000 --flights 20000 --repeat 3
    python -m bench.spark_target --hot-key 10000000       # one key, 10 M records, 2 GB workers

Two programs, each at parallelism 2, on the same bounded input:

* WordCount: ``read_text_file`` of ``--lines`` lines (8 words each, 1,000 distinct words) →
  flat_map → map ``(word, 1)`` → ``key_by`` → ``reduce`` → CSV lines into a ``FileSink``;
* the main job (``rill.examples.flight_stats``: carrier and route statistics, hourly event-time
  windows joined with the weather, late flights) over the first ``--flights`` lines of
  flights.csv and the whole weather file.

Each runs ``--repeat`` times as Rill STREAMING and Rill BATCH (embedded), then on Spark
``local[1]`` and ``local[2]`` (one SparkSession each, started and stopped here; one warm-up job
per session first, so Python worker start-up is not counted). The figure is the wall time of
``execute()``; the ratio is against Rill BATCH of the same run. The Spark outputs are checked
equal to Rill BATCH's (STREAMING's hold its incremental results). Needs Java 17 and pyspark (the ``spark`` extra). Not a test: timings never go into tests.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time

from pyspark.sql import SparkSession

from rill.common import Configuration, Encoder
from rill.datastream import StreamExecutionEnvironment
from rill.datastream.connectors import FileSink
from rill.examples import flight_stats
from rill.examples.data import flights_csv, weather_csv

_JAVA_17 = "/usr/lib/jvm/java-17-openjdk-amd64"
PARALLELISM = 2


def word_count(env: StreamExecutionEnvironment, path: str, out: str) -> None:
    (env.read_text_file(path).flat_map(lambda line: line.split()).map(lambda w: (w, 1))
     .key_by(lambda p: p[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).map(lambda p: f"{p[0]},{p[1]}")
     .sink_to(FileSink.for_row_format(out, Encoder.simple_string_encoder()).build()))


def main_job(env: StreamExecutionEnvironment, flights: str, out: str) -> None:
    flight_stats.configure(env, ["--input", flights, "--weather", weather_csv(), "--output", out])


def environment(mode: str) -> StreamExecutionEnvironment:
    conf = Configuration()
    if mode == "spark":
        conf.set_string("execution.target", "spark")
    else:
        conf.set_string("execution.runtime-mode", mode)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(PARALLELISM)
    return env


def lines_written(out: str):
    return sorted(line for root, _, names in os.walk(out) for n in names if not n.startswith(".")
                  for line in open(os.path.join(root, n)).read().splitlines())


def timed(build, mode: str, work: str, tag: str) -> tuple:
    out = os.path.join(work, tag)
    env = environment(mode)
    build(env, out)
    started = time.perf_counter()
    env.execute(tag)
    return time.perf_counter() - started, lines_written(out)


def spark_session(master: str):
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    if os.path.isdir(_JAVA_17):
        os.environ["JAVA_HOME"] = _JAVA_17
    session = (SparkSession.builder.master(master).appName("rill-bench").config("spark.ui.enabled", "false")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    return session


def hot_key(records: int) -> None:
    """``records`` records of one key, summed on Spark local[2] with every Python worker capped
    at 2 GB (``spark.executor.pyspark.memory``: an address-space limit on the worker, so a
    worker holding the key's records would fail); prints the time and whether the sum is right."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    if os.path.isdir(_JAVA_17):
        os.environ["JAVA_HOME"] = _JAVA_17
    session = (SparkSession.builder.master("local[2]").appName("rill-bench-hot-key")
               .config("spark.ui.enabled", "false").config("spark.executor.pyspark.memory", "2g").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    try:
        env = environment("spark")
        started = time.perf_counter()
        result = list(env.from_sequence(1, records).map(lambda i: ("hot", i % 3)).key_by(lambda p: p[0]).sum(1)
                      .execute_and_collect())
        seconds = time.perf_counter() - started
    finally:
        session.stop()
    expected = [("hot", sum(i % 3 for i in range(1, records + 1)))]
    print(f"hot key: {records:,} records of one key on Spark local[2], Python workers capped at 2 GB: "
          f"{seconds:.1f} s, {'correct' if result == expected else f'WRONG {result}'}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=200_000, help="WordCount input lines")
    parser.add_argument("--flights", type=int, default=50_000, help="flights of the main job's input")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--hot-key", type=int, metavar="N", default=0,
                        help="instead: sum N records of one key on local[2] within 2 GB per Python worker")
    args = parser.parse_args(argv)
    if args.hot_key:
        hot_key(args.hot_key)
        return
    work = tempfile.mkdtemp(prefix="rill-spark-bench-")
    rng = random.Random(7)
    words = [f"w{i}" for i in range(1000)]
    text = os.path.join(work, "words.txt")
    with open(text, "w") as f:
        for _ in range(args.lines):
            f.write(" ".join(rng.choice(words) for _ in range(8)) + "\n")
    flights = os.path.join(work, "flights.csv")
    with open(flights_csv()) as src, open(flights, "w") as dst:
        for _ in range(args.flights + 1):
            dst.write(src.readline())
    programs = {"WordCount": lambda env, out: word_count(env, text, out),
                "main job": lambda env, out: main_job(env, flights, out)}
    times = {}
    outputs = {}
    runs = [("Rill STREAMING", "STREAMING", None), ("Rill BATCH", "BATCH", None),
            ("Spark local[1]", "spark", "local[1]"), ("Spark local[2]", "spark", "local[2]")]
    for label, mode, master in runs:
        session = spark_session(master) if master else None
        try:
            if session is not None:  # Python workers start here, not in the timed runs
                timed(programs["WordCount"], mode, work, f"warmup-{master}")
            for name, build in programs.items():
                for i in range(args.repeat):
                    seconds, written = timed(build, mode, work, f"{name}-{label}-{i}".replace(" ", "_"))
                    times.setdefault((name, label), []).append(seconds)
                    outputs.setdefault(name, {})[label] = written
        finally:
            if session is not None:
                session.stop()
    print(f"WordCount: {args.lines:,} lines; main job: {args.flights:,} flights; parallelism {PARALLELISM}; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'program':<10} {'run':<15} {'median s':>9} {'÷ Rill BATCH':>13}  output")
    for name in programs:
        # STREAMING emits incremental results (and late flights): compared with nothing
        same = {label: "same" if written == outputs[name]["Rill BATCH"] else "DIFFERS"
                for label, written in outputs[name].items()}
        same["Rill STREAMING"] = "incremental"
        base = statistics.median(times[(name, "Rill BATCH")])
        for label, _, _ in runs:
            t = statistics.median(times[(name, label)])
            print(f"{name:<10} {label:<15} {t:>9.2f} {t / base:>13.2f}  "
                  f"{same[label]} ({len(outputs[name][label])} lines)")


if __name__ == "__main__":
    main()
