"""A job on the RocksDB state backend (``state.backend.type: rocksdb``, issue 16), in both
execution modes: keyed value and map state live in RocksDB under the configured local
directory, a retained checkpoint holds them, and a second job restores that checkpoint, on
RocksDB or on the heap backend (the snapshot files are the same), and continues the counts
exactly. The RocksDB directories are gone once the tasks end."""

from __future__ import annotations

import pytest

from rill.common import JobStatus
from rill.common.functions import KeyedProcessFunction
from rill.datastream import EmbeddedRocksDBStateBackend, HashMapStateBackend, StreamExecutionEnvironment
from rill.state import MapStateDescriptor, ValueStateDescriptor

from _fail_on_signal import TIMEOUT_S, FailOnSignal, Lines, counts_by_attempt, wait_for
from test_restart_from_checkpoint import KEYS, N


class CountAndRemember(KeyedProcessFunction):
    """Per key: a count (value state) and the records seen (map state); emits
    ``(key, count)`` and checks that the map holds exactly ``count`` records."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))
        self.seen = runtime_context.get_map_state(MapStateDescriptor("seen"))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        self.seen.put(value, n)
        if len(self.seen.keys()) != n:
            raise AssertionError(f"key {ctx.get_current_key()}: map state holds {self.seen.keys()}, count {n}")
        yield (ctx.get_current_key(), n)


@pytest.mark.parametrize("restore_on", ["rocksdb", "hashmap"])
def test_rocksdb_state_is_checkpointed_and_restored(env, tmp_path, restore_on):
    markers, out, checkpoints, local = (tmp_path / "markers", tmp_path / "out", tmp_path / "checkpoints",
                                        tmp_path / "rocksdb")
    markers.mkdir()
    out.mkdir()
    backend = EmbeddedRocksDBStateBackend()
    backend.set_db_storage_paths(str(local))
    assert env.set_state_backend(backend) is env
    assert env.get_state_backend() == backend
    env.enable_checkpointing(100)
    env.get_configuration().set_string("execution.checkpointing.dir", str(checkpoints))
    # read after the cancel: kept (by default they are deleted when the job ends)
    env.get_configuration().set_string("execution.checkpointing.externalized-checkpoint-retention",
                                       "RETAIN_ON_CANCELLATION")
    env.set_parallelism(2)
    (env.from_source(FailOnSignal(str(markers), N), None, "waits").uid("source-1").set_parallelism(1)
        .key_by(lambda x: x % KEYS).process(CountAndRemember()).uid("count").add_sink(Lines(str(out))))
    first = env.execute_async("first run on rocksdb")

    def completed():
        stats = first.get_checkpoint_stats()
        return 0 if stats is None else stats.counts.number_of_completed_checkpoints

    wait_for(lambda: sum(len(c) for c in counts_by_attempt(out).get(0, {}).values()) == N, "every record counted")
    # both keyed subtasks keep their RocksDB instance under the configured directory
    assert len(list(local.iterdir())) == 2
    seen = completed()
    wait_for(lambda: completed() >= seen + 2, "a checkpoint taken after every record was counted")
    first.cancel()
    assert first.wait(TIMEOUT_S) is JobStatus.CANCELED
    wait_for(lambda: list(local.iterdir()) == [], "the RocksDB directories removed with the tasks")
    job_dir = checkpoints / first.get_job_id()
    latest = max((d for d in job_dir.iterdir() if (d / "_metadata").exists()), key=lambda d: int(d.name[4:]))
    for f in out.iterdir():
        f.rename(tmp_path / f"first-{f.name}")

    env2 = StreamExecutionEnvironment.get_execution_environment()
    env2.set_parallelism(3)
    env2.set_state_backend(EmbeddedRocksDBStateBackend() if restore_on == "rocksdb" else HashMapStateBackend())
    conf = env2.get_configuration()
    conf.set_string("state.backend.rocksdb.localdir", str(local))
    conf.set_string("execution.state-recovery.path", str(latest))
    conf.set_string("execution.state-recovery.ignore-unclaimed-state", "true")
    (env2.from_collection(list(range(N, 2 * N))).uid("source-2")
        .key_by(lambda x: x % KEYS).process(CountAndRemember()).uid("count").add_sink(Lines(str(out))))
    env2.execute_async("resumed").get_job_execution_result().result(timeout=TIMEOUT_S)
    per_key = N // KEYS
    assert counts_by_attempt(out) == {0: {k: list(range(per_key + 1, 2 * per_key + 1)) for k in range(KEYS)}}
    wait_for(lambda: list(local.iterdir()) == [], "the RocksDB directories removed with the tasks")
