"""End to end: ``rill plan`` / ``rill run`` on job files (the issue's acceptance).

Topology T1 of tests/engine/graph/flink_golden.json — from_collection(p=1) → flat_map(p=4) →
shuffle → filter(p=4) → print(p=4) — must plan to the StreamGraph and JobGraph real Flink
2.3.0 builds, with the same operator ids, whether chaining is on or off.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import List, Tuple

import pytest

REPO = Path(__file__).resolve().parents[2]
RILL = str(Path(sys.executable).parent / "rill")
GOLDEN = json.loads((REPO / "tests" / "engine" / "graph" / "flink_golden.json").read_text())["topologies"]

T1 = """
    from rill.datastream import StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    {chaining}
    ds = env.from_collection(["a b", "c d"]).set_parallelism(1)
    ds = ds.flat_map(lambda s: s.split(" ")).set_parallelism(4)
    ds = ds.shuffle().filter(lambda x: len(x) > 0).set_parallelism(4)
    ds.print().set_parallelism(4)
    env.execute()
"""


def _write_job(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    return path


def _t1(tmp_path: Path, chaining: bool) -> Path:
    return _write_job(tmp_path, f"t1_{'chain' if chaining else 'nochain'}.py",
                      T1.format(chaining="" if chaining else "env.disable_operator_chaining()"))


def _rill(tmp_path: Path, *args: str, hash_seed: str = "0") -> subprocess.CompletedProcess:
    return subprocess.run([RILL, *args], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONHASHSEED": hash_seed})


def _parse_plan(text: str) -> Tuple[list, list, List[Tuple[str, str, int, List[str]]]]:
    """(stream nodes (id, kind, name, parallelism), edges (source, target, partitioner),
    vertices (id, name, parallelism, operator ids in printed order)) of ``rill plan`` text."""
    nodes, edges, vertices = [], [], []
    section = None
    for line in text.splitlines():
        if line.startswith("== "):
            section = line.split()[1]
            continue
        if section == "StreamGraph":
            if m := re.match(r"^  node (\d+) \[(\w+)\] '(.*)' parallelism=(\d+)", line):
                nodes.append((int(m[1]), m[2], m[3], int(m[4])))
            elif m := re.match(r"^  edge (\d+) -> (\d+) (\w+)", line):
                edges.append((int(m[1]), int(m[2]), m[3]))
        elif section == "JobGraph":
            if m := re.match(r"^  vertex ([0-9a-f]{32}) '(.*)' parallelism=(\d+)", line):
                vertices.append((m[1], m[2], int(m[3]), []))
            elif m := re.match(r"^    operator ([0-9a-f]{32})", line):
                vertices[-1][3].append(m[1])
    return nodes, edges, vertices


def _golden(name: str):
    g = GOLDEN[name]
    nodes = [(n["id"], n["operatorName"], n["parallelism"]) for n in g["streamGraph"]["nodes"]]
    edges = [(e["source"], e["target"], e["partitioner"]) for e in g["streamGraph"]["edges"]]
    vertices = [(v["id"], v["name"], v["parallelism"], [o["generated"] for o in v["operatorIDs"]])
                for v in g["jobGraph"]["vertices"]]
    return nodes, edges, vertices


@pytest.mark.parametrize("chaining, golden, names", [
    (True, "T1_chaining", ["Source: Collection Source", "FlatMap", "Filter -> Sink: Print to Std. Out"]),
    (False, "T1_no_chaining", ["Source: Collection Source", "FlatMap", "Filter", "Sink: Print to Std. Out"]),
])
def test_plan_t1_equals_flink(tmp_path, chaining, golden, names):
    job = _t1(tmp_path, chaining)
    first = _rill(tmp_path, "plan", str(job), hash_seed="1")
    assert first.returncode == 0, first.stderr
    nodes, edges, vertices = _parse_plan(first.stdout)
    g_nodes, g_edges, g_vertices = _golden(golden)

    assert len(nodes) == 4
    assert [(i, name, p) for i, _, name, p in nodes] == g_nodes
    assert [kind for _, kind, _, _ in nodes] == ["source", "operator", "operator", "sink"]
    assert edges == g_edges
    assert {p for _, _, p in edges} == {"REBALANCE", "SHUFFLE", "FORWARD"}
    assert f"chaining {'enabled' if chaining else 'disabled'}" in first.stdout

    assert [name for _, name, _, _ in vertices] == names
    assert vertices == g_vertices  # vertex ids, names, parallelism, operator ids (in Flink's order)

    # the ids do not depend on the process (e.g. on Python's string hash seed): the whole plan repeats
    second = _rill(tmp_path, "plan", str(job), hash_seed="2")
    assert second.returncode == 0, second.stderr
    assert _parse_plan(second.stdout) == (nodes, edges, vertices)
    assert second.stdout == first.stdout


@pytest.mark.parametrize("chaining, golden", [(True, "T1_chaining"), (False, "T1_no_chaining")])
def test_plan_json_t1(tmp_path, chaining, golden):
    job = _t1(tmp_path, chaining)
    proc = _rill(tmp_path, "plan", "--json", str(job))
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    g_nodes, g_edges, g_vertices = _golden(golden)

    sg_nodes = plan["stream_graph"]["nodes"]
    assert [(n["id"], n["contents"], n["parallelism"]) for n in sg_nodes] == g_nodes
    assert sorted((p["id"], n["id"], p["ship_strategy"]) for n in sg_nodes
                  for p in n.get("predecessors", [])) == sorted(g_edges)

    jg_nodes = plan["job_graph"]["nodes"]
    assert {n["id"] for n in jg_nodes} == {v[0] for v in g_vertices}
    assert {n["id"]: n["parallelism"] for n in jg_nodes} == {v[0]: v[2] for v in g_vertices}
    inputs = {(i["id"], n["id"], i["ship_strategy"]) for n in jg_nodes for i in n.get("inputs", [])}
    assert {(s, t, p) for s, t, p in inputs} == {
        (g_vertices[k][0], g_vertices[k + 1][0], p)
        for k, p in enumerate(["REBALANCE", "SHUFFLE", "FORWARD"][:len(g_vertices) - 1])}

    eg = plan["execution_graph"]["vertices"]
    assert [(v["id"], v["name"], len(v["subtasks"])) for v in eg] == [(v[0], v[1], v[2]) for v in g_vertices]

    again = json.loads(_rill(tmp_path, "plan", "--json", str(job), hash_seed="3").stdout)
    assert again["stream_graph"] == plan["stream_graph"]
    assert [n["id"] for n in again["job_graph"]["nodes"]] == [n["id"] for n in jg_nodes]


def test_plan_does_not_run_the_job(tmp_path):
    marker = tmp_path / "marker.txt"
    job = _write_job(tmp_path, "marker_job.py", f"""
        from pathlib import Path
        from rill.datastream import StreamExecutionEnvironment

        def write_marker(value):
            with open({str(marker)!r}, "a", encoding="utf-8") as f:
                f.write(f"{{value}}\\n")

        env = StreamExecutionEnvironment.get_execution_environment()
        env.from_collection([1, 2, 3]).map(lambda x: x * 10).add_sink(write_marker)
        env.execute("marker")
    """)
    proc = _rill(tmp_path, "plan", str(job))
    assert proc.returncode == 0, proc.stderr
    assert "== JobGraph 'marker'" in proc.stdout
    assert not marker.exists()

    proc = _rill(tmp_path, "plan", "--json", str(job))
    assert proc.returncode == 0, proc.stderr
    json.loads(proc.stdout)
    assert not marker.exists()

    # control: the same file run for real does write the marker
    proc = _rill(tmp_path, "run", "--no-progress", str(job))
    assert proc.returncode == 0, proc.stderr
    assert sorted(marker.read_text().split()) == ["10", "20", "30"]


def test_plan_of_program_without_execute_fails(tmp_path):
    job = _write_job(tmp_path, "no_execute.py", """
        from rill.datastream import StreamExecutionEnvironment

        env = StreamExecutionEnvironment.get_execution_environment()
        env.from_collection([1, 2]).print()
    """)
    proc = _rill(tmp_path, "plan", str(job))
    assert proc.returncode == 1
    assert "did not call execute()" in proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize("command", ["plan", "run"])
def test_invalid_topology_names_both_operators(tmp_path, command):
    job = _write_job(tmp_path, "bad_forward.py", """
        from rill.datastream import StreamExecutionEnvironment

        env = StreamExecutionEnvironment.get_execution_environment()
        ds = env.from_collection([1, 2, 3]).map(lambda x: x).name("Widen Upstream").set_parallelism(2)
        ds.forward().filter(lambda x: True).name("Narrow Downstream").set_parallelism(3).print()
        env.execute()
    """)
    proc = _rill(tmp_path, command, str(job))
    assert proc.returncode != 0
    assert "Widen Upstream" in proc.stderr and "Narrow Downstream" in proc.stderr, proc.stderr
    assert "Forward partitioning does not allow change of parallelism" in proc.stderr
    assert proc.stdout == ""


PARALLELISM_JOB = """
    from rill.datastream import StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection(list(range(30))).map(lambda x: x * 2).name("Double").print()
    env.execute("Default parallelism")
"""


def test_run_p_sets_default_parallelism(tmp_path):
    job = _write_job(tmp_path, "parallel.py", PARALLELISM_JOB)
    proc = _rill(tmp_path, "run", "--no-progress", "-p", "3", str(job))
    assert proc.returncode == 0, proc.stderr
    values, prefixes = [], set()
    for line in proc.stdout.splitlines():
        prefix, sep, value = line.partition("> ")
        assert sep, f"print at parallelism 3 must prefix the subtask: {line!r}"
        prefixes.add(prefix)
        values.append(int(value))
    assert prefixes == {"1", "2", "3"}
    assert sorted(values) == [2 * x for x in range(30)]
    assert re.search(r"^Source: Collection Source\s+1\s", proc.stderr, re.MULTILINE), proc.stderr
    assert re.search(r"^Double -> Sink: Print to Std\. Out\s+3\s+30\s", proc.stderr, re.MULTILINE), proc.stderr
    assert re.search(r"^rill: program finished in [\d.]+ s$", proc.stderr, re.MULTILINE)


def test_plan_p_sets_default_parallelism(tmp_path):
    job = _write_job(tmp_path, "parallel.py", PARALLELISM_JOB)
    proc = _rill(tmp_path, "plan", "-p", "3", str(job))
    assert proc.returncode == 0, proc.stderr
    nodes, _, vertices = _parse_plan(proc.stdout)
    assert [(name, p) for _, _, name, p in nodes] == [
        ("Source: Collection Source", 1), ("Double", 3), ("Sink: Print to Std. Out", 3)]
    assert [(name, p) for _, name, p, _ in vertices] == [
        ("Source: Collection Source", 1), ("Double -> Sink: Print to Std. Out", 3)]
