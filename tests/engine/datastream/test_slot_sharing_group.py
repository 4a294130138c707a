"""``SlotSharingGroup`` with resources and ``MemorySize`` (PyFlink's
``pyflink.datastream.slot_sharing_group``): the builder's rules, the group carried into the
StreamGraph and JobGraph as Flink carries it, and a job using groups runs in both modes."""

from __future__ import annotations

import pytest

from _ds_helpers import collect
from rill.datastream import MemorySize, SlotSharingGroup
from rill.datastream.slot_sharing_group import ResourceSpec


def test_memory_size_units_order_and_text():
    m = MemorySize.of_mebi_bytes(1536)
    assert (m.get_bytes(), m.get_kibi_bytes(), m.get_mebi_bytes(), m.get_gibi_bytes()) == (
        1536 << 20, 1536 << 10, 1536, 1)
    assert str(m) == "1536 mb" and str(MemorySize(bytes_size=1 << 30)) == "1 gb"
    assert str(MemorySize(bytes_size=1500)) == "1500 bytes" and str(MemorySize.ZERO) == "0 bytes"
    assert MemorySize(bytes_size=1) < m <= MemorySize.of_mebi_bytes(1536) == m
    assert len({m, MemorySize.of_mebi_bytes(1536)}) == 1
    with pytest.raises(ValueError, match="MemorySize: bytes must be an int >= 0, got -1"):
        MemorySize(bytes_size=-1)


def test_builder_follows_flinks_rules():
    ssg = (SlotSharingGroup.builder("heavy").set_cpu_cores(1.5).set_task_heap_memory_mb(100)
           .set_managed_memory(MemorySize.of_mebi_bytes(50)).set_external_resource("gpu", 1).build())
    assert ssg.get_name() == "heavy" and ssg.get_cpu_cores() == 1.5
    assert ssg.get_task_heap_memory() == MemorySize.of_mebi_bytes(100)
    assert ssg.get_task_off_heap_memory() == MemorySize.ZERO
    assert ssg.get_managed_memory() == MemorySize.of_mebi_bytes(50)
    assert ssg.get_external_resources() == {"gpu": 1.0}
    plain = SlotSharingGroup.builder("plain").build()
    assert plain.get_cpu_cores() is None and plain.resource_spec is None
    with pytest.raises(ValueError, match="'x': the cpu cores and task heap memory are required"):
        SlotSharingGroup.builder("x").set_cpu_cores(1).build()
    with pytest.raises(ValueError, match="'x': the cpu cores should be positive, got 0"):
        SlotSharingGroup.builder("x").set_cpu_cores(0)
    with pytest.raises(ValueError, match="'x': the task heap memory should be positive"):
        SlotSharingGroup.builder("x").set_task_heap_memory(MemorySize.ZERO)


def test_group_and_resources_reach_the_stream_graph_and_job_graph(env):
    heavy = SlotSharingGroup.builder("heavy").set_cpu_cores(2).set_task_heap_memory_mb(64).build()
    (env.from_collection([1, 2, 3]).map(lambda v: v).slot_sharing_group(heavy)
        .map(lambda v: v).slot_sharing_group("light").print())
    stream_graph = env.get_stream_graph()
    nodes = sorted(stream_graph.nodes.values(), key=lambda n: n.id)
    # the sink inherits the group of its input, as in Flink
    assert [(n.operator_name, n.slot_sharing_group) for n in nodes] == [
        ("Source: Collection Source", "default"), ("Map", "heavy"), ("Map", "light"),
        ("Sink: Print to Std. Out", "light")]
    assert stream_graph.slot_sharing_group_resources == {
        "heavy": ResourceSpec(2.0, MemorySize.of_mebi_bytes(64))}
    job_graph = stream_graph.get_job_graph()
    assert job_graph.slot_sharing_group_resources == {"heavy": ResourceSpec(2.0, MemorySize.of_mebi_bytes(64))}
    assert sorted(v.slot_sharing_group for v in job_graph.get_vertices()) == ["default", "heavy", "light"]


def test_one_group_name_with_two_resource_specs_is_refused(env):
    a = SlotSharingGroup.builder("g").set_cpu_cores(1).set_task_heap_memory_mb(10).build()
    b = SlotSharingGroup.builder("g").set_cpu_cores(2).set_task_heap_memory_mb(10).build()
    env.from_collection([1]).map(lambda v: v).slot_sharing_group(a).map(lambda v: v).slot_sharing_group(b).print()
    with pytest.raises(ValueError, match="slot sharing group 'g' is given resources"):
        env.get_stream_graph()


def test_a_job_with_resource_groups_runs(env):
    heavy = SlotSharingGroup.builder("heavy").set_cpu_cores(1).set_task_heap_memory_mb(64).build()
    ds = env.from_collection([1, 2, 3]).map(lambda v: v * 10).slot_sharing_group(heavy)
    assert collect(ds) == [10, 20, 30]
