"""Event-loop lag of a service that runs a job through ``AsyncJobClient`` (issue 13).

A 1 ms ticker (``await asyncio.sleep(0.001)`` in a loop) measures how late the event loop wakes
up: lag = time between two ticks minus 1 ms. It runs twice in the same process, alternately:
alone (the baseline: what the machine's scheduler costs) and while a job runs at full speed
(a map and filter over N integers, submitted and awaited with ``AsyncJobClient``, its records
collected by ``async for``). Reported: p50 / p99 / max lag in ms per side.

In the embedded mode the tasks are threads of the service's process and share its GIL, so the
loop waits for the GIL (CPython hands it over every ``sys.getswitchinterval()``, 5 ms by
default); in the cluster mode the tasks are other processes and only the client's calls and
the collected batches touch the service's loop.

Run: ``python -m bench.event_loop_lag [--target embedded|cluster://HOST:PORT] [-p 2]
[--records N] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from typing import List, Optional

from rill.common import Configuration
from rill.common.configuration import ConfigOptions
from rill.datastream import AsyncJobClient, StreamExecutionEnvironment


async def _ticker(lags_ms: List[float], stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        t0 = loop.time()
        await asyncio.sleep(0.001)
        lags_ms.append(max(0.0, (loop.time() - t0 - 0.001) * 1000))


def _job(target: str, parallelism: int, records: int):
    conf = Configuration()
    if target != "embedded":
        conf.set(ConfigOptions.EXECUTION_TARGET, target)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    return (env.from_sequence(0, records - 1).rebalance()
            .map(lambda x: x * 3).filter(lambda x: x % 7 == 0))


async def _with_job(target: str, parallelism: int, records: int) -> tuple:
    lags: List[float] = []
    stop = asyncio.Event()
    ticker = asyncio.get_running_loop().create_task(_ticker(lags, stop))
    start = time.monotonic()
    client = await AsyncJobClient.execute_and_collect(_job(target, parallelism, records), "lag bench")
    count = 0
    async for _ in client.collect():
        count += 1
    await client.get_job_execution_result()
    elapsed = time.monotonic() - start
    stop.set()
    await ticker
    expected = sum(1 for x in range(records) if (x * 3) % 7 == 0)
    if count != expected:
        raise SystemExit(f"the job collected {count} records, expected {expected}")
    return lags, elapsed


async def _alone(duration_s: float) -> List[float]:
    lags: List[float] = []
    stop = asyncio.Event()
    ticker = asyncio.get_running_loop().create_task(_ticker(lags, stop))
    await asyncio.sleep(duration_s)
    stop.set()
    await ticker
    return lags


def _summary(lags: List[float]) -> str:
    q = statistics.quantiles(lags, n=100)
    return f"p50 {q[49]:.2f} ms, p99 {q[98]:.2f} ms, max {max(lags):.2f} ms ({len(lags):,} ticks)"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.event_loop_lag", description=__doc__.split("\n")[0])
    parser.add_argument("--target", default="embedded")
    parser.add_argument("-p", "--parallelism", type=int, default=2)
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"event-loop lag, 1 ms ticker; job: {args.records:,} records, p={args.parallelism}, "
          f"target {args.target}, switch interval {sys.getswitchinterval() * 1000:.0f} ms")
    for run in range(1, args.repeat + 1):
        job_lags, elapsed = asyncio.run(_with_job(args.target, args.parallelism, args.records))
        alone = asyncio.run(_alone(elapsed))
        print(f"run {run}: job {elapsed:.1f} s | with the job: {_summary(job_lags)} | "
              f"loop alone: {_summary(alone)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
