"""Keyed-state hot path micro-benchmark: what one record's state access costs, with and
without snapshots taken meanwhile (issue 11: copy-on-write snapshots must not make the hot
path measurably slower).

    python -m bench.keyed_state_access                  # ns per record, median of 5
    python -m bench.keyed_state_access --keys 100000 --records 1000000 --repeat 7

Three loops over the same ``records`` keys (uniform over ``--keys``, fixed seed), on a real
``HeapKeyedStateBackend`` (128 key groups, one subtask):

``value_state``
    per record ``set_current_key(k)``, ``state.value()``, ``state.update(v + 1)``: the path of
    a user function's ``ValueState``.
``reduce``
    ``StreamGroupedReduce`` (``KeyedStream.reduce``) with a plain ``ReduceFunction`` on
    ``(word, 1)`` tuples, in batches of 1,024 through the operator test harness: the path of
    WordCount's reduce (per batch key groups, then one dict look-up and store per record).
``reduce+snapshots``
    as ``reduce`` with a snapshot of the keyed state backend every ``--snapshot-every``
    records (its synchronous part only, as a checkpoint's task thread does; the snapshot is
    then dropped): what the first writes to each key group after a snapshot cost.

Figures are ns per record, median (min) over ``--repeat`` runs, each after ``gc.collect()``.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
from typing import Callable, List, Optional

from rill.datastream import ReduceFunction
from rill.operators.keyed_reduce import StreamGroupedReduce
from rill.operators.testing import KeyedOneInputStreamOperatorTestHarness
from rill.state.descriptors import ValueStateDescriptor
from rill.state.heap import HeapKeyedStateBackend
from rill.state.key_groups import KeyGroupRange

__all__ = ["main", "BATCH"]

BATCH = 1024
MAX_PARALLELISM = 128


class _AddCounts(ReduceFunction):
    def reduce(self, a, b):
        return a[0], a[1] + b[1]


def _value_state(keys: List[int]) -> float:
    backend = HeapKeyedStateBackend(KeyGroupRange(0, MAX_PARALLELISM - 1), MAX_PARALLELISM)
    state = backend.get_or_create_keyed_state(ValueStateDescriptor("count"))
    set_key, value, update = backend.set_current_key, state.value, state.update
    t0 = time.perf_counter()
    for k in keys:
        set_key(k)
        v = value()
        update(1 if v is None else v + 1)
    return time.perf_counter() - t0


def _reduce(keys: List[int], snapshot_every: int = 0) -> float:
    records = [(k, 1) for k in keys]
    batches = [records[i:i + BATCH] for i in range(0, len(records), BATCH)]
    harness = KeyedOneInputStreamOperatorTestHarness(StreamGroupedReduce(_AddCounts()), lambda r: r[0])
    harness.open()
    operator = harness.operator
    operator.output.collect_batch = lambda values, timestamps=None: None  # the sink's cost is not measured
    backend = harness.keyed_state_backend
    every = max(1, snapshot_every // BATCH) if snapshot_every else 0
    t0 = time.perf_counter()
    for i, batch in enumerate(batches):
        if every and i % every == 0:
            backend.sync_prepare_resources()  # the synchronous part; dropped at once
        operator.process_batch(batch)
    elapsed = time.perf_counter() - t0
    harness.close()
    return elapsed


def _measure(run: Callable[[], float], n: int, repeat: int) -> str:
    times = []
    for _ in range(repeat):
        gc.collect()
        times.append(run() / n * 1e9)
    return f"{statistics.median(times):7.1f} ns/record (min {min(times):.1f})"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.keyed_state_access", description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--snapshot-every", type=int, default=200_000,
                        help="reduce+snapshots: records between two snapshots (default 200,000)")
    args = parser.parse_args(argv)
    rng = random.Random(11)
    keys = [rng.randrange(args.keys) for _ in range(args.records)]
    n = len(keys)
    print(f"{n:,} records over {args.keys:,} keys, {MAX_PARALLELISM} key groups")
    print(f"value_state       {_measure(lambda: _value_state(keys), n, args.repeat)}")
    print(f"reduce            {_measure(lambda: _reduce(keys), n, args.repeat)}")
    print(f"reduce+snapshots  {_measure(lambda: _reduce(keys, args.snapshot_every), n, args.repeat)} "
          f"(a snapshot every {args.snapshot_every:,} records)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
