"""Generate golden StreamGraph / JobGraph reference data from real Apache Flink.

DEV-ONLY TOOL. It is never run in CI and is not collected by pytest (the file
name does not start with ``test_``). It needs ``apache-flink`` (PyFlink), which
is NOT a dependency of Rill: install it into a separate virtualenv outside the
repository, e.g.::

    python3 -m venv /tmp/flinkvenv
    /tmp/flinkvenv/bin/pip install apache-flink==2.3.0
    JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 \\
        /tmp/flinkvenv/bin/python tests/engine/graph/make_flink_golden.py

It builds a handful of small topologies with PyFlink, extracts (via py4j, from
the Java side) the StreamGraph nodes/edges, the StreamGraphHasherV2 node hashes
and the chained JobGraph (vertex ids, names, operator-id order, job edges), and
writes them to ``flink_golden.json`` next to this file (or to the path given as
the first argument).

Java calls used (Flink 2.3.0):

* StreamGraph: ``env._generate_stream_graph(clear_transformations=False)``
  (PyFlink's own path: ``PythonConfigUtil.configPythonOperator(j_env)``,
  ``PythonOperatorChainingOptimizer.apply(j_env)``, then
  ``j_env.getStreamGraph(false)``).
* Hashes: ``new StreamGraphHasherV2().traverseStreamGraphAndGenerateHashes(sg)``.
* JobGraph: ``sg.getJobGraph()`` then
  ``jg.getVerticesSortedTopologicallyFromSources()``; operator ids from
  ``vertex.getOperatorIDs()`` (a ``List<OperatorIDPair>``;
  ``getGeneratedOperatorID().toHexString()``).

``python.operator-chaining.enabled`` is set to ``false`` so that PyFlink does
not fuse consecutive Python functions into a single StreamNode; one extra
topology (``T2_python_chaining_on``) records what happens when it is left on.
"""

from __future__ import annotations

import json
import os
import sys

from pyflink.common import Configuration, Types, WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.number_seq import NumberSequenceSource
from pyflink.java_gateway import get_gateway

WORDS = ["a b", "c d"]


def _jlist(jcollection):
    return list(jcollection.toArray())


def new_env(python_chaining: bool = False) -> StreamExecutionEnvironment:
    config = Configuration()
    config.set_string("python.operator-chaining.enabled", "true" if python_chaining else "false")
    return StreamExecutionEnvironment.get_execution_environment(config)


def source(env, parallelism=None):
    ds = env.from_collection(WORDS, type_info=Types.STRING())
    if parallelism is not None:
        ds = ds.set_parallelism(parallelism)
    return ds


def _map(ds):
    return ds.map(lambda x: x.upper(), output_type=Types.STRING())


def _filter(ds):
    return ds.filter(lambda x: len(x) > 0)


# ---------------------------------------------------------------- topologies
# Each builder returns (env, expected number of StreamGraph nodes).


def t1(chaining: bool):
    env = new_env()
    if not chaining:
        env.disable_operator_chaining()
    ds = source(env, 1)
    ds = ds.flat_map(lambda s: s.split(" "), output_type=Types.STRING()).set_parallelism(4)
    ds = _filter(ds.shuffle()).set_parallelism(4)
    ds.print().set_parallelism(4)
    return env, 4


def t2(python_chaining: bool = False):
    env = new_env(python_chaining)
    env.set_parallelism(1)
    _filter(_map(source(env))).print()
    return env, (3 if python_chaining else 4)


def t3():
    env = new_env()
    env.set_parallelism(1)
    _filter(_map(source(env)).uid("my-map")).print()
    return env, 4


def t4():
    env = new_env()
    env.set_parallelism(1)
    s1 = source(env)
    s2 = env.from_collection(["e f", "g h"], type_info=Types.STRING())
    _map(s1.union(s2)).print()
    return env, 4


def t5(variant: str):
    env = new_env()
    env.set_parallelism(1)
    f = _filter(_map(source(env)))
    if variant == "start_new_chain":
        f = f.start_new_chain()
    else:
        f = f.disable_chaining()
    f.print()
    return env, 4


def t6():
    env = new_env()
    ds = source(env, 1).rebalance()
    _map(ds).set_parallelism(2).print().set_parallelism(2)
    return env, 3


def t7():
    env = new_env()
    env.set_parallelism(1)
    m = _map(source(env))
    m.print()
    m.print()
    return env, 4


def t8(partitioning: str):
    env = new_env()
    ds = env.from_source(
        NumberSequenceSource(1, 10), WatermarkStrategy.no_watermarks(), "Sequence Source"
    ).set_parallelism(2)
    ds = ds.rescale() if partitioning == "rescale" else ds.broadcast()
    ds = ds.map(lambda x: x + 1, output_type=Types.LONG()).set_parallelism(4)
    ds.print().set_parallelism(4)
    return env, 3


TOPOLOGIES = {
    "T1_chaining": (
        "from_collection(p=1) -> flat_map(p=4) -> shuffle -> filter(p=4) -> print(p=4)",
        lambda: t1(True),
    ),
    "T1_no_chaining": (
        "T1 with env.disable_operator_chaining()",
        lambda: t1(False),
    ),
    "T2": ("from_collection -> map -> filter -> print, env p=1", lambda: t2()),
    "T2_python_chaining_on": (
        "T2 with python.operator-chaining.enabled=true (PyFlink fuses map+filter)",
        lambda: t2(True),
    ),
    "T3": ("T2 with map.uid('my-map')", t3),
    "T4": ("two from_collection sources, s1.union(s2) -> map -> print, p=1", t4),
    "T5_start_new_chain": (
        "from_collection -> map -> filter.start_new_chain() -> print, p=1",
        lambda: t5("start_new_chain"),
    ),
    "T5_disable_chaining": (
        "from_collection -> map -> filter.disable_chaining() -> print, p=1",
        lambda: t5("disable_chaining"),
    ),
    "T6": ("from_collection(p=1) -> rebalance -> map(p=2) -> print(p=2)", t6),
    "T7": ("from_collection -> map -> {print, print} (fork), p=1", t7),
    "T8_rescale": (
        "NumberSequenceSource(p=2) -> rescale -> map(p=4) -> print(p=4)",
        lambda: t8("rescale"),
    ),
    "T8_broadcast": (
        "NumberSequenceSource(p=2) -> broadcast -> map(p=4) -> print(p=4)",
        lambda: t8("broadcast"),
    ),
}


# ---------------------------------------------------------------- extraction


def _operator_class(node) -> str:
    factory = node.getOperatorFactory()
    if factory is None:
        return None
    name = factory.getClass().getName()
    try:
        op = node.getOperator()
        if op is not None:
            return op.getClass().getName()
    except Exception:  # noqa: BLE001 - non-simple factories throw
        pass
    return name


def extract(env: StreamExecutionEnvironment, id_base: int) -> dict:
    """Extract graphs. ``id_base`` is subtracted from Transformation ids so that
    node ids are what a fresh JVM would assign (first transformation = 1); the
    Transformation id counter is JVM-global and keeps growing across topologies."""
    gw = get_gateway()
    sg = env._generate_stream_graph(clear_transformations=False)
    hashes = gw.jvm.org.apache.flink.streaming.api.graph.StreamGraphHasherV2() \
        .traverseStreamGraphAndGenerateHashes(sg)

    nodes, edges = [], []
    for n in sorted(_jlist(sg.getStreamNodes()), key=lambda n: n.getId()):
        h = hashes.get(n.getId())
        nodes.append({
            "id": n.getId() - id_base,
            "rawId": n.getId(),
            "operatorName": n.getOperatorName(),
            "operatorClass": _operator_class(n),
            "parallelism": n.getParallelism(),
            "maxParallelism": n.getMaxParallelism(),
            "slotSharingGroup": n.getSlotSharingGroup(),
            "transformationUID": n.getTransformationUID(),
            "userHash": n.getUserHash(),
            "hash": bytes(h).hex() if h is not None else None,
        })
        for e in _jlist(n.getOutEdges()):
            edges.append({
                "source": e.getSourceId() - id_base,
                "target": e.getTargetId() - id_base,
                "partitioner": e.getPartitioner().toString(),
                "exchangeMode": e.getExchangeMode().toString(),
                "typeNumber": e.getTypeNumber(),
            })

    jg = sg.getJobGraph()
    vertices = []
    for v in _jlist(jg.getVerticesSortedTopologicallyFromSources()):
        ops = []
        for pair in _jlist(v.getOperatorIDs()):
            user = pair.getUserDefinedOperatorID()
            ops.append({
                "generated": pair.getGeneratedOperatorID().toHexString(),
                "userDefined": user.get().toHexString() if user.isPresent() else None,
            })
        inputs = []
        for je in _jlist(v.getInputs()):
            ds = je.getSource()
            inputs.append({
                "sourceVertex": ds.getProducer().getID().toString(),
                "distributionPattern": je.getDistributionPattern().toString(),
                "shipStrategyName": je.getShipStrategyName(),
                "resultPartitionType": ds.getResultType().toString(),
                "isBroadcast": je.isBroadcast(),
                "isForward": je.isForward(),
            })
        vertices.append({
            "id": v.getID().toString(),
            "name": v.getName(),
            "operatorPrettyName": v.getOperatorPrettyName(),
            "operatorDescription": v.getOperatorDescription(),
            "parallelism": v.getParallelism(),
            "maxParallelism": v.getMaxParallelism(),
            "operatorIDs": ops,
            "inputs": inputs,
        })

    return {
        "streamGraph": {
            "jobName": sg.getJobName(),
            "chainingEnabled": sg.isChainingEnabled(),
            "nodes": nodes,
            "edges": edges,
        },
        "jobGraph": {"vertices": vertices},
    }


def main(argv) -> int:
    out = argv[1] if len(argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "flink_golden.json")
    gw = get_gateway()
    from pyflink.version import __version__ as pyflink_version

    result = {
        "_comment": (
            "Golden reference data produced by make_flink_golden.py from real Apache "
            "Flink via PyFlink. JobVertex.getOperatorIDs() lists the chain's operators "
            "in DFS post-order (chained outputs first, in out-edge order, chain head "
            "last); the vertex id equals the head operator's hash. StreamNode 'id' is "
            "normalized to a fresh JVM (first transformation = 1); 'rawId' is the "
            "JVM-global Transformation id. Ids missing from 'nodes' belong to virtual "
            "(partition/union) transformations."
        ),
        "flinkVersion": gw.jvm.org.apache.flink.runtime.util.EnvironmentInformation.getVersion(),
        "pyflinkVersion": pyflink_version,
        "config": {"python.operator-chaining.enabled": "false (except T2_python_chaining_on)"},
        "topologies": {},
    }
    problems = []
    for name, (description, build) in TOPOLOGIES.items():
        # getNewNodeId() consumes one id: the next transformation gets base + 1,
        # which we report as id 1 (as in a fresh JVM).
        id_base = gw.jvm.org.apache.flink.api.dag.Transformation.getNewNodeId()
        env, expected_nodes = build()
        data = extract(env, id_base)
        n = len(data["streamGraph"]["nodes"])
        data["description"] = description
        data["expectedStreamNodes"] = expected_nodes
        if n != expected_nodes:
            problems.append(f"{name}: {n} stream nodes, expected {expected_nodes}")
        result["topologies"][name] = data
    with open(out, "w") as f:
        json.dump(result, f, indent=2, sort_keys=True)
        f.write("\n")
    print(f"wrote {out}")
    for p in problems:
        print("WARNING:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
