"""Which subtask receives which record, for every partitioning of the DataStream API.

Records are tagged with the index of the subtask that saw them by a ``MapFunction`` that
reads ``runtime_context.get_index_of_this_subtask()`` in ``open``: once right after the
source (the sender) and once after the partitioning (the receiver).
"""

from __future__ import annotations

from collections import Counter

import pytest

from _ds_helpers import PerSubtaskSequence, collect
from rill.datastream import MapFunction, Partitioner, RuntimeContext
from rill.state.key_groups import assign_key_to_parallel_operator, compute_default_max_parallelism


class Tag(MapFunction):
    """value -> (subtask index, value)."""

    def open(self, runtime_context: RuntimeContext):
        self.index = runtime_context.get_index_of_this_subtask()

    def map(self, value):
        return self.index, value


def _route(env, partition, n=300, senders=2, receivers=3):
    """Run source(p=senders, subtask i reads i, i+senders, ...) -> Tag -> partition -> Tag(p=receivers); return
    ``[(sender, receiver, value)]``."""
    env.set_parallelism(senders)
    sent = env.from_source(PerSubtaskSequence(n), source_name="Numbers").map(Tag())
    received = partition(sent).map(Tag()).set_parallelism(receivers)
    return [(s, r, v) for r, (s, v) in collect(received.map(lambda x: x).set_parallelism(receivers))]


def test_rebalance_is_round_robin_per_sender(env):
    out = _route(env, lambda ds: ds.rebalance())
    assert sorted(v for _, _, v in out) == list(range(300))
    for sender in (0, 1):
        counts = Counter(r for s, r, _ in out if s == sender)
        assert set(counts) == {0, 1, 2}
        assert max(counts.values()) - min(counts.values()) <= 1, counts


def test_default_between_different_parallelisms_is_rebalance(env):
    out = _route(env, lambda ds: ds)
    for sender in (0, 1):
        counts = Counter(r for s, r, _ in out if s == sender)
        assert max(counts.values()) - min(counts.values()) <= 1, counts


def test_shuffle_delivers_every_record_once(env):
    out = _route(env, lambda ds: ds.shuffle())
    assert sorted(v for _, _, v in out) == list(range(300))
    assert {r for _, r, _ in out} == {0, 1, 2}  # 300 random picks reach every subtask


def test_rescale_connects_each_sender_to_its_own_receivers(env):
    out = _route(env, lambda ds: ds.rescale(), n=400, senders=2, receivers=4)
    assert sorted(v for _, _, v in out) == list(range(400))
    assert {s: sorted({r for s2, r, _ in out if s2 == s}) for s in (0, 1)} == {0: [0, 1], 1: [2, 3]}
    for sender in (0, 1):
        counts = Counter(r for s, r, _ in out if s == sender)
        assert max(counts.values()) - min(counts.values()) <= 1, counts


def test_rescale_fan_in(env):
    out = _route(env, lambda ds: ds.rescale(), n=100, senders=4, receivers=2)
    assert sorted(v for _, _, v in out) == list(range(100))
    assert {s: {r for s2, r, _ in out if s2 == s} for s in range(4)} == {0: {0}, 1: {0}, 2: {1}, 3: {1}}


def test_broadcast_sends_every_record_to_every_subtask(env):
    out = _route(env, lambda ds: ds.broadcast(), n=50)
    assert Counter((r, v) for _, r, v in out) == Counter({(r, v): 1 for r in range(3) for v in range(50)})


def test_global_sends_everything_to_subtask_0(env):
    out = _route(env, lambda ds: ds.global_())
    assert sorted(v for _, _, v in out) == list(range(300))
    assert {r for _, r, _ in out} == {0}


def test_forward_keeps_subtask_alignment(env):
    env.set_parallelism(3)
    sent = env.from_source(PerSubtaskSequence(300), source_name="Numbers").map(Tag())
    received = sent.forward().map(Tag()).disable_chaining()
    out = collect(received)
    assert sorted(v for _, (_, v) in out) == list(range(300))
    assert all(receiver == sender == v % 3 for receiver, (sender, v) in out)
    assert {r for r, _ in out} == {0, 1, 2}


def test_forward_edge_is_pointwise_in_the_job_graph(env):
    env.set_parallelism(3)
    env.from_sequence(0, 9).forward().map(lambda x: x).disable_chaining().add_sink(lambda v: None)
    [_, mapper, _] = env.get_stream_graph().get_job_graph().get_vertices_sorted_topologically_from_sources()
    [edge] = mapper.get_inputs()
    assert (edge.get_ship_strategy_name(), str(edge.get_distribution_pattern())) == ("FORWARD", "POINTWISE")


class ModPartitioner(Partitioner):
    def partition(self, key, num_partitions):
        return key % num_partitions


@pytest.mark.parametrize("as_class", [True, False])
def test_partition_custom_follows_the_partition_function(env, as_class):
    partitioner = ModPartitioner() if as_class else (lambda key, n: key % n)
    out = _route(env, lambda ds: ds.partition_custom(partitioner, lambda t: t[1] // 10))
    assert sorted(v for _, _, v in out) == list(range(300))
    assert all(r == (v // 10) % 3 for _, r, v in out)


@pytest.mark.parametrize("max_parallelism", [None, 7, 300])
def test_key_by_puts_every_key_on_its_key_group_owner(env, max_parallelism):
    keys = ["apple", "banana", 42, -7, ("t", 1), "ü", 3.5, True, None, "", 10**20]
    env.set_parallelism(2)
    data = [(keys[i % len(keys)], i) for i in range(330)]
    keyed = env.from_collection(data).key_by(lambda t: t[0])
    received = keyed.map(Tag()).set_parallelism(3)
    if max_parallelism is not None:
        received = received.set_max_parallelism(max_parallelism)
    out = collect(received)
    assert sorted((v for _, v in out), key=lambda t: t[1]) == data
    owners = {}
    for r, (k, _) in out:
        owners.setdefault(repr(k), set()).add(r)
    mp = max_parallelism or compute_default_max_parallelism(3)
    assert mp == (max_parallelism or 128)
    for k in keys:
        assert owners[repr(k)] == {assign_key_to_parallel_operator(k, mp, 3)}, k
    assert len({next(iter(s)) for s in owners.values()}) > 1  # keys spread over subtasks


def test_key_by_with_a_key_selector_class(env):
    from rill.datastream import KeySelector

    class First(KeySelector):
        def get_key(self, value):
            return value[0]

    env.set_parallelism(3)
    out = collect(env.from_collection([("a", 1), ("b", 2), ("a", 3), ("c", 4)])
                  .key_by(First()).map(Tag()))
    for r, (k, _) in out:
        assert r == assign_key_to_parallel_operator(k, 128, 3)
    assert sorted(v for _, v in out) == [("a", 1), ("a", 3), ("b", 2), ("c", 4)]
