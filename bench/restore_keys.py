"""Issue 11's restore benchmark: a keyed job holding ``n`` keys of ~100 bytes of state each
(10^6 keys: ~100 MB of state) is savepointed, then a second run of the same job restores it
(``execution.state-recovery.path``, what ``rill run --from-savepoint`` sets) and the time from
its submission until every keyed subtask has its state back is measured, against reading the
same Parquet files with pyarrow alone (the baseline, same run).

Part of ``bench/recovery.py`` (``--part restore``); the job and the timings live here.
"""

from __future__ import annotations

import glob
import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional

import pyarrow.parquet as pq

from rill.common import Types
from rill.common.functions import KeyedProcessFunction, SinkFunction
from rill.datastream.connectors import Boundedness, Source, SourceReader, SourceSplit
from rill.state import ValueStateDescriptor
from rill.state.checkpoint.filesystem import resolve_checkpoint_pointer

from bench.failover_timeline import StateChange

__all__ = ["KeysSource", "KeepPayload", "RestoreTimings", "build_job", "run_restore_benchmark"]

UID = "keyed-payload"
STATE = "payload"


def payload(key: int) -> str:
    """Key ``key``'s state: 96 characters, as incompressible as hex gets (a BLAKE2b digest)."""
    return f"{key:016d}" + hashlib.blake2b(key.to_bytes(8, "little"), digest_size=40).hexdigest()


@dataclass(frozen=True)
class KeyRange(SourceSplit):
    """Keys ``start .. end - 1``."""

    start: int
    end: int

    def split_id(self) -> str:
        return f"{self.start}-{self.end}"


class _KeysReader(SourceReader):
    """Emits ``(key, payload)`` per key of its split, then nothing, forever: the job stays up
    until it is savepointed or cancelled, as a streaming job does."""

    batch_size = 4096

    def read(self, split: KeyRange):
        for i in range(split.start, split.end, self.batch_size):
            batch = [(k, payload(k)) for k in range(i, min(i + self.batch_size, split.end))]
            self.progress_units += len(batch)
            yield batch
        while True:
            yield []

    def read_from(self, split: KeyRange, records_to_skip: int):
        return self.read(KeyRange(min(split.start + records_to_skip, split.end), split.end))


class KeysSource(Source):
    """``n`` keys in one split per reader; replays exactly (restored readers skip what they
    emitted)."""

    def __init__(self, n: int):
        self.n = n

    def create_splits(self, parallelism: int) -> List[SourceSplit]:
        return [KeyRange(self.n * i // parallelism, self.n * (i + 1) // parallelism) for i in range(parallelism)]

    def create_reader(self) -> SourceReader:
        return _KeysReader()

    def get_boundedness(self):
        return Boundedness.CONTINUOUS_UNBOUNDED

    def estimated_total_units(self) -> Optional[int]:
        return self.n


class KeepPayload(KeyedProcessFunction):
    """Stores each key's payload in a STRING ValueState and emits nothing. ``open`` writes the
    wall-clock time (``time.time()``, s) to ``<marker_dir>/open-<attempt>-<subtask>``: the
    operator's state was initialized (restored) right before."""

    def __init__(self, marker_dir: str):
        self.marker_dir = marker_dir

    def open(self, runtime_context):
        now = time.time()
        self.state = runtime_context.get_state(ValueStateDescriptor(STATE, Types.STRING()))
        name = f"open-{runtime_context.get_attempt_number()}-{runtime_context.get_index_of_this_subtask()}"
        Path(self.marker_dir, name + ".tmp").write_text(repr(now))
        os.replace(Path(self.marker_dir, name + ".tmp"), Path(self.marker_dir, name))

    def process_element(self, value, ctx):
        self.state.update(value[1])
        return ()


class Discard(SinkFunction):
    def invoke(self, value, context):
        pass


def build_job(env, n: int, parallelism: int, marker_dir: str) -> None:
    """source (``n`` keys) → key_by(key) → KeepPayload (uid ``keyed-payload``) → discarding
    sink; checkpointing on (savepoints need its coordinator) with an interval of an hour."""
    env.set_parallelism(parallelism)
    env.enable_checkpointing(3_600_000)  # savepoints need the coordinator; no periodic checkpoint
    (env.from_source(KeysSource(n), None, "keys").uid("keys")
        .key_by(lambda kv: kv[0], key_type=Types.LONG()).process(KeepPayload(marker_dir)).uid(UID).name("keep")
        .add_sink(Discard()))


@dataclass(frozen=True)
class RestoreTimings:
    """One restore run, seconds.

    :ivar keys: keys restored. :ivar state_bytes: the savepoint's Parquet files, bytes.
    :ivar to_state_restored_s: submission → the last keyed subtask's ``open`` (its state restored).
    :ivar pyarrow_read_s: the baseline: ``pq.read_table`` of the same keyed files, every column.
    :ivar snapshot_s: building the state: the first run until its savepoint completed.
    :ivar to_all_running_s: submission → every task of the restoring run RUNNING (from the
        tasks' logged state changes; ``None`` without a log). Rill restores after RUNNING.
    :ivar restore_part_s: the longest span of a keyed subtask from RUNNING to its ``open``:
        reading its files and filling its backend (``None`` without a log).
    """

    keys: int
    state_bytes: int
    to_state_restored_s: float
    pyarrow_read_s: float
    snapshot_s: float
    to_all_running_s: Optional[float] = None
    restore_part_s: Optional[float] = None


def _wait(condition: Callable[[], bool], what: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.005)


def _records_in(client, name: str) -> int:
    return sum(v.records_in for v in client.get_vertex_summaries() if name in v.name)


def run_restore_benchmark(make_env: Callable[[], object], n: int, parallelism: int, work_dir: str,
                          timeout_s: float = 600,
                          log: Optional[Callable[[str], List[StateChange]]] = None) -> RestoreTimings:
    """Build the state (first run, savepoint, cancel), then restore it (second run) and time it;
    three keys' restored values are read back (queryable state) before the second run is
    cancelled. ``log(job_id)``: the job's task state changes, for the phases.

    :raises TimeoutError: if a phase does not end within ``timeout_s``.
    :raises AssertionError: if the savepoint does not hold ``n`` keys, or a key read back
        differs from what the first run stored.
    """
    markers = os.path.join(work_dir, "markers")
    os.makedirs(markers, exist_ok=True)
    env = make_env()
    build_job(env, n, parallelism, markers)
    start = time.monotonic()
    client = env.execute_async("restore benchmark: build the state")
    _wait(lambda: _records_in(client, "keep") >= n, f"{n} keys in the keyed operator", timeout_s)
    path = client.trigger_savepoint(os.path.join(work_dir, "savepoints")).result(timeout_s)
    snapshot_s = time.monotonic() - start
    client.cancel()
    client.wait(timeout_s)

    files = sorted(glob.glob(os.path.join(path, "*", "keyed", STATE, "*.parquet")))
    state_bytes = sum(os.path.getsize(f) for f in files)
    t = time.perf_counter()
    rows = sum(pq.read_table(f).num_rows for f in files)
    pyarrow_read_s = time.perf_counter() - t
    assert rows == n, f"the savepoint holds {rows} keys, expected {n}"
    resolve_checkpoint_pointer(path)  # a complete snapshot

    for f in glob.glob(os.path.join(markers, "open-*")):
        os.remove(f)  # the first run's
    env = make_env()
    env.get_configuration().set_string("execution.state-recovery.path", path)
    build_job(env, n, parallelism, markers)
    submitted = time.time()
    client = env.execute_async("restore benchmark: restore")
    opened = [os.path.join(markers, f"open-0-{i}") for i in range(parallelism)]
    try:
        _wait(lambda: all(os.path.exists(p) for p in opened), "every keyed subtask to open", timeout_s)
        for key in sorted({0, n // 3, n - 1}):  # restored, not empty: read back (queryable state)
            found = client.get_state(UID, STATE, key, timeout_s)
            if found != payload(key):
                raise AssertionError(f"key {key} restored as {found!r}, expected {payload(key)!r}")
    finally:
        client.cancel()
        client.wait(timeout_s)
    opens = [float(Path(p).read_text()) for p in opened]
    all_running = restore_part = None
    if log is not None:
        changes = log(client.get_job_id())
        running = {c.task: c.time_s for c in changes if c.new == "RUNNING"}
        keyed = [t for i in range(parallelism) for name, t in running.items() if name.endswith(f"({i + 1}/{parallelism})")
                 and name.startswith("keep")]
        if running and len(keyed) == parallelism:
            all_running = max(running.values()) - submitted
            restore_part = max(o - t for o, t in zip(opens, keyed))
    return RestoreTimings(n, state_bytes, max(opens) - submitted, pyarrow_read_s, snapshot_s, all_running,
                          restore_part)
