"""Rill's StreamGraph, operator hashes and JobGraph against real Apache Flink 2.3.

``flink_golden.json`` was produced by ``make_flink_golden.py`` with PyFlink 2.3 (see that
file). Each topology is rebuilt here from Transformations in the same creation order as the
PyFlink program, so node ids match Flink's normalized ids; everything the golden file records
must then be equal byte for byte: node names, parallelism, edges and partitioners, the
StreamGraphHasherV2 hash of every node, JobVertex ids, names, pretty names, operator-id order
and job edges.

Differences in the StreamGraph that PyFlink introduces are reproduced in the Transformations:

* ``from_collection`` is a non-parallel legacy source in Flink, so its max parallelism is 1
  (set explicitly here);
* with ``python.operator-chaining.enabled`` (T2_python_chaining_on) PyFlink fuses Map and
  Filter into one new node "Map, Filter" with a fresh id (5) before building the StreamGraph;
  the test builds that fused node directly.
"""

from __future__ import annotations

import json
import os

import pytest

from _builders import Builder
from rill.graph.hashing import StreamGraphHasherV2
from rill.operators.base import ChainingStrategy

GOLDEN_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "flink_golden.json")

with open(GOLDEN_PATH) as f:
    GOLDEN = json.load(f)


def _collection_source(b: Builder, parallelism=-1, id=None):
    s = b.source("Collection Source", parallelism=parallelism, id=id)
    s.set_max_parallelism(1)  # Flink: non-parallel legacy source
    return s


def t1(chaining: bool):
    b = Builder()
    src = _collection_source(b, 1)
    fm = b.one("FlatMap", src, parallelism=4)
    flt = b.one("Filter", b.shuffle(fm), parallelism=4)
    b.sink(flt, parallelism=4)
    return b.stream_graph(chaining=chaining, parallelism=1)


def t2():
    b = Builder()
    b.sink(b.one("Filter", b.one("Map", _collection_source(b))))
    return b.stream_graph(parallelism=1)


def t2_python_chaining_on():
    b = Builder()
    src = _collection_source(b, id=1)
    fused = b.one("Map, Filter", src, id=5, register=False)
    sink = b.sink(fused, id=4)
    return b.stream_graph(parallelism=1, transformations=[fused, sink])


def t3():
    b = Builder()
    m = b.one("Map", _collection_source(b))
    m.set_uid("my-map")
    b.sink(b.one("Filter", m))
    return b.stream_graph(parallelism=1)


def t4():
    b = Builder()
    s1 = _collection_source(b)
    s2 = _collection_source(b)
    b.sink(b.one("Map", b.union(s1, s2)))
    return b.stream_graph(parallelism=1)


def t5(strategy: ChainingStrategy):
    b = Builder()
    f = b.one("Filter", b.one("Map", _collection_source(b)))
    f.set_chaining_strategy(strategy)
    b.sink(f)
    return b.stream_graph(parallelism=1)


def t6():
    b = Builder()
    ds = b.rebalance(_collection_source(b, 1))
    b.sink(b.one("Map", ds, parallelism=2), parallelism=2)
    return b.stream_graph(parallelism=1)


def t7():
    b = Builder()
    m = b.one("Map", _collection_source(b))
    b.sink(m)
    b.sink(m)
    return b.stream_graph(parallelism=1)


def t8(partitioning: str):
    b = Builder()
    src = b.source("Sequence Source", parallelism=2)  # FLIP-27: no max parallelism
    ds = b.rescale(src) if partitioning == "rescale" else b.broadcast(src)
    b.sink(b.one("Map", ds, parallelism=4), parallelism=4)
    return b.stream_graph(parallelism=1)


BUILDERS = {
    "T1_chaining": lambda: t1(True),
    "T1_no_chaining": lambda: t1(False),
    "T2": t2,
    "T2_python_chaining_on": t2_python_chaining_on,
    "T3": t3,
    "T4": t4,
    "T5_start_new_chain": lambda: t5(ChainingStrategy.HEAD),
    "T5_disable_chaining": lambda: t5(ChainingStrategy.NEVER),
    "T6": t6,
    "T7": t7,
    "T8_rescale": lambda: t8("rescale"),
    "T8_broadcast": lambda: t8("broadcast"),
}


def test_every_golden_topology_has_a_builder():
    assert set(GOLDEN["topologies"]) == set(BUILDERS)
    assert GOLDEN["flinkVersion"] == "2.3.0"


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_stream_graph_equals_flink(name):
    golden = GOLDEN["topologies"][name]["streamGraph"]
    sg = BUILDERS[name]()
    hashes = StreamGraphHasherV2().traverse_stream_graph_and_generate_hashes(sg)
    ours_nodes = [
        {
            "id": n.id,
            "operatorName": n.operator_name,
            "parallelism": n.parallelism,
            "maxParallelism": n.max_parallelism,
            "slotSharingGroup": n.slot_sharing_group,
            "transformationUID": n.transformation_uid,
            "userHash": n.user_hash,
            "hash": hashes[n.id].hex(),
        }
        for n in sg.get_stream_nodes()
    ]
    keys = ["id", "operatorName", "parallelism", "maxParallelism", "slotSharingGroup",
            "transformationUID", "userHash", "hash"]
    assert ours_nodes == [{k: n[k] for k in keys} for n in golden["nodes"]]
    ours_edges = [
        {"source": e.source_id, "target": e.target_id, "partitioner": str(e.partitioner),
         "exchangeMode": e.exchange_mode, "typeNumber": e.type_number}
        for n in sg.get_stream_nodes() for e in n.out_edges
    ]
    assert ours_edges == golden["edges"]
    assert sg.chaining_enabled == golden["chainingEnabled"]


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_job_graph_equals_flink(name):
    golden = GOLDEN["topologies"][name]["jobGraph"]["vertices"]
    jg = BUILDERS[name]().get_job_graph()
    ours = []
    for v in jg.get_vertices_sorted_topologically_from_sources():
        ours.append({
            "id": str(v.get_id()),
            "name": v.get_name(),
            "operatorPrettyName": v.get_operator_pretty_name(),
            "parallelism": v.get_parallelism(),
            "maxParallelism": v.get_max_parallelism(),
            "operatorIDs": [
                {"generated": p.generated_operator_id.to_hex_string(),
                 "userDefined": None if p.user_defined_operator_id is None
                 else p.user_defined_operator_id.to_hex_string()}
                for p in v.get_operator_id_pairs()
            ],
            "inputs": [
                {
                    "sourceVertex": str(e.get_source().get_producer().get_id()),
                    "distributionPattern": str(e.distribution_pattern),
                    "shipStrategyName": e.ship_strategy_name,
                    "resultPartitionType": str(e.get_source().get_result_type()),
                    "isBroadcast": e.is_broadcast,
                    "isForward": e.is_forward,
                }
                for e in v.get_inputs()
            ],
        })
    keys = ["id", "name", "operatorPrettyName", "parallelism", "maxParallelism", "operatorIDs", "inputs"]
    assert ours == [{k: v[k] for k in keys} for v in golden]
