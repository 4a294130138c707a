"""Heap vs RocksDB state backend on WordCount-like keyed state with many keys (issue 16, "State
larger than memory"): throughput ratio and peak RSS, measured in one run.

    generated (word, 1) records → key_by(word) → sum(1) → counting sink

The source generates ``--keys`` distinct words (``w0``, ``w1``, ...) ``--passes`` times over, in
batches, so the input never sits in memory: what grows is the keyed state (one count per word).
Each backend runs in its own child process (embedded mode, parallelism 1), so its peak RSS
(``ru_maxrss`` of the child) is its own; the backends alternate over ``--repeat`` rounds. The
sink's checksum (the sum of every emitted count, ``keys * passes * (passes + 1) / 2``) must
match on both backends.

Usage (from the repository root, with ``pip install -e '.[rocksdb]'``)::

    python -m bench.state_backends --keys 1000000 --passes 2
    python -m bench.state_backends --keys 20000000 --passes 1 --backend rocksdb   # the issue's 20 M

The heap figure at 20 M keys needs several GB; ``--backend rocksdb`` runs RocksDB alone.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from operator import itemgetter
from typing import Iterator, List, Optional

from rill.common.functions import SinkFunction
from rill.datastream import EmbeddedRocksDBStateBackend, HashMapStateBackend, StreamExecutionEnvironment
from rill.datastream.connectors.source import Boundedness, Source, SourceReader, SourceSplit

__all__ = ["WordsSource", "run_backend", "main"]

BATCH = 1024
#: where ``python -m bench.state_backends`` runs from (bench/ is not installed)
_REPOSITORY = str(Path(__file__).resolve().parents[1])


@dataclass(frozen=True)
class _Whole(SourceSplit):
    keys: int
    passes: int

    def split_id(self) -> str:
        return "words"


class _WordsReader(SourceReader):
    def read(self, split: _Whole) -> Iterator[List[tuple]]:
        for _ in range(split.passes):
            for start in range(0, split.keys, BATCH):
                yield [(f"w{i}", 1) for i in range(start, min(start + BATCH, split.keys))]


class WordsSource(Source):
    """``passes`` rounds of ``(f"w{i}", 1)`` for ``i`` in ``0..keys-1``, in batches of 1024."""

    def __init__(self, keys: int, passes: int) -> None:
        self.keys = keys
        self.passes = passes

    def create_splits(self, parallelism: int) -> List[_Whole]:
        return [_Whole(self.keys, self.passes)]

    def create_reader(self) -> _WordsReader:
        return _WordsReader()

    def get_boundedness(self) -> Boundedness:
        return Boundedness.BOUNDED


class ChecksumSink(SinkFunction):
    """Adds up the emitted counts; writes the sum to ``path`` when closed."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.total = 0

    def invoke(self, value, context) -> None:
        self.total += value[1]

    def close(self) -> None:
        with open(self.path, "w") as f:
            f.write(str(self.total))


def run_backend(backend: str, keys: int, passes: int, local_dir: str) -> dict:
    """Run the job on ``backend`` ('heap' or 'rocksdb') in this process: records/s (input
    records over the job's net runtime), the sink's checksum and this process's peak RSS
    (bytes)."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    if backend == "rocksdb":
        rocksdb = EmbeddedRocksDBStateBackend()
        rocksdb.set_db_storage_paths(local_dir)
        env.set_state_backend(rocksdb)
    else:
        env.set_state_backend(HashMapStateBackend())
    with tempfile.NamedTemporaryFile("r", suffix=".sum") as checksum:
        (env.from_source(WordsSource(keys, passes), None, "words").key_by(itemgetter(0)).sum(1)
            .add_sink(ChecksumSink(checksum.name)))
        started = time.perf_counter()
        result = env.execute(f"state backends: {backend}")
        wall_s = time.perf_counter() - started
        total = int(checksum.read() or 0)
    net_s = result.get_net_runtime() / 1000
    return {"backend": backend, "keys": keys, "records": keys * passes, "net_s": net_s, "wall_s": wall_s,
            "records_per_s": keys * passes / net_s, "checksum": total,
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def _child(backend: str, args: argparse.Namespace) -> dict:
    out = subprocess.run([sys.executable, "-m", "bench.state_backends", "--child", backend, "--keys",
                          str(args.keys), "--passes", str(args.passes), "--local-dir", args.local_dir],
                         check=True, capture_output=True, text=True, cwd=_REPOSITORY)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: Optional[List[str]] = None) -> int:
    """Run the comparison and print the table; exit 1 if the checksums differ from the
    expected one."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--passes", type=int, default=2, help="records per key")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--backend", choices=["both", "heap", "rocksdb"], default="both")
    parser.add_argument("--local-dir", default=tempfile.gettempdir(), help="state.backend.rocksdb.localdir")
    parser.add_argument("--json", help="write the samples as JSON to this path")
    parser.add_argument("--child", choices=["heap", "rocksdb"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(run_backend(args.child, args.keys, args.passes, args.local_dir)))
        return 0
    backends = ["heap", "rocksdb"] if args.backend == "both" else [args.backend]
    expected = args.keys * args.passes * (args.passes + 1) // 2
    samples = []
    for round_ in range(args.repeat):
        for backend in (backends if round_ % 2 == 0 else backends[::-1]):
            sample = _child(backend, args)
            samples.append(sample)
            print(f"{backend:8s} {sample['records']:>11,d} records  {sample['records_per_s']:>10,.0f} rec/s  "
                  f"net {sample['net_s']:7.1f} s  peak RSS {sample['peak_rss_bytes'] / 2**20:8.0f} MiB  "
                  f"checksum {'ok' if sample['checksum'] == expected else 'WRONG'}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(samples, f, indent=1)
    if args.backend == "both":
        ratios = [r["records_per_s"] / h["records_per_s"] for h, r in zip(
            [s for s in samples if s["backend"] == "heap"], [s for s in samples if s["backend"] == "rocksdb"])]
        print(f"RocksDB / heap throughput: {sorted(ratios)[len(ratios) // 2]:.2f} (median of {len(ratios)})")
    return 0 if all(s["checksum"] == expected for s in samples) else 1


if __name__ == "__main__":
    sys.exit(main())
