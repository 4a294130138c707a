"""State in running jobs, in both execution modes: keyed state with TTL and operator state
through CheckpointedFunction, in task threads (embedded) and in task processes (cluster), where
the descriptors, TTL configurations and functions travel pickled."""

from __future__ import annotations

import time
from collections import defaultdict

from rill.common import Time
from rill.datastream.checkpointed_function import CheckpointedFunction
from rill.datastream.connectors import CollectSink
from rill.datastream.functions import KeyedProcessFunction, MapFunction
from rill.datastream.state import ListStateDescriptor, StateTtlConfig, ValueStateDescriptor

JOB_TIMEOUT_S = 60.0
TTL_MS = 50


def collect(ds) -> list:
    sink = CollectSink()
    try:
        ds.sink_to(sink)
        ds.get_execution_environment().execute_async("state job").get_job_execution_result().result(
            timeout=JOB_TIMEOUT_S)
        return sink.get_results()
    finally:
        sink.close()


def now_ms() -> int:
    return time.time_ns() // 1_000_000  # the clock of TTL's default time provider


class CountWithTtl(KeyedProcessFunction):
    """Counts per key in a value state that expires ``TTL_MS`` after its last write; a record
    ``(key, True)`` first waits until the key's last write has expired."""

    def open(self, runtime_context):
        descriptor = ValueStateDescriptor("count")
        descriptor.enable_time_to_live(StateTtlConfig.new_builder(Time.milliseconds(TTL_MS)).build())
        self.count = runtime_context.get_state(descriptor)
        self.written_ms = {}

    def process_element(self, value, ctx):
        key, after_expiry = value
        if after_expiry:  # a condition on the clock TTL reads, not a guess at a duration
            while now_ms() <= self.written_ms[key] + TTL_MS:
                time.sleep(0.001)
        before = self.count.value()
        self.count.update((before or 0) + 1)
        self.written_ms[key] = now_ms()
        yield key, before


def test_ttl_value_state_expires_after_its_time_to_live(env):
    env.set_parallelism(2)
    records = [("a", False), ("b", False), ("a", False), ("b", False), ("a", True), ("a", False)]
    out = collect(env.from_collection(records).set_parallelism(1).key_by(lambda r: r[0]).process(CountWithTtl()))
    per_key = defaultdict(list)
    for key, before in out:
        per_key[key].append(before)
    assert dict(per_key) == {"a": [None, 1, None, 1], "b": [None, 1]}


class RememberingMap(MapFunction, CheckpointedFunction):
    """Keeps every record it mapped in split list state and its subtask index in union list
    state; emits ``(subtask, restored, records so far, union state)``."""

    def initialize_state(self, context):
        store = context.get_operator_state_store()
        self.restored = context.is_restored()
        self.seen = store.get_list_state(ListStateDescriptor("seen"))
        self.subtasks = store.get_union_list_state(ListStateDescriptor("subtasks"))

    def open(self, runtime_context):
        self.index = runtime_context.get_index_of_this_subtask()
        self.subtasks.update([self.index])

    def map(self, value):
        self.seen.add(value)
        return self.index, self.restored, tuple(self.seen.get()), tuple(self.subtasks.get())

    def snapshot_state(self, context):
        pass  # the list states hold everything already


def test_checkpointed_function_keeps_operator_state_per_subtask(env):
    env.set_parallelism(2)
    values = list(range(10))
    out = collect(env.from_collection(values).set_parallelism(1).rebalance().map(RememberingMap()))
    per_subtask = defaultdict(list)
    for index, restored, seen, subtasks in out:
        assert restored is False  # a fresh job (no checkpoint to restore from)
        assert subtasks == (index,)
        per_subtask[index].append(seen)
    assert sorted(per_subtask) == [0, 1]
    finals = []
    for runs in per_subtask.values():
        # each record adds itself to its subtask's list: every output extends the one before
        assert all(later[:-1] == earlier for earlier, later in zip(runs, runs[1:]))
        assert len(runs[0]) == 1
        finals.extend(runs[-1])
    assert sorted(finals) == values
