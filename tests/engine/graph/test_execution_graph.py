"""ExecutionGraph: subtasks, partitions, channels (rill.graph.execution_graph, rill.graph.states)."""

from __future__ import annotations

import pytest

from _builders import Builder, acceptance
from rill.graph.execution_graph import ExecutionGraph, JobException
from rill.graph.job_graph import (
    DistributionPattern,
    InvalidProgramException,
    JobGraph,
    JobVertex,
    JobVertexID,
    ResultPartitionType,
)
from rill.graph.states import ExecutionState, JobStatus


def _pointwise(producers: int, consumers: int):
    b = Builder()
    b.sink(b.rescale(b.source(parallelism=producers)), parallelism=consumers)
    eg = ExecutionGraph.build(b.stream_graph().get_job_graph())
    up, down = eg.get_vertices_topologically()
    return up, down


def _channels(down):
    """Per consumer subtask: [(producer subtask, subpartition index)]."""
    return [[(p.partition_number, s) for p, s in ev.consumed[0]] for ev in down.task_vertices]


def _subpartitions(up):
    return [[p.number_of_subpartitions for p in ev.produced_partitions.values()] for ev in up.task_vertices]


def test_pointwise_equal_parallelism_connects_i_to_i():
    up, down = _pointwise(3, 3)
    assert _channels(down) == [[(0, 0)], [(1, 0)], [(2, 0)]]
    assert _subpartitions(up) == [[1], [1], [1]]


def test_pointwise_fewer_producers_each_feeds_a_range_of_consumers():
    up, down = _pointwise(2, 4)
    assert _channels(down) == [[(0, 0)], [(0, 1)], [(1, 0)], [(1, 1)]]
    assert down.task_vertices[1].get_consumed_partitions(0) == down.task_vertices[1].consumed[0]
    assert _subpartitions(up) == [[2], [2]]
    p0 = next(iter(up.task_vertices[0].produced_partitions.values()))
    assert [c.subtask_index for c in p0.consumers] == [0, 1]


def test_pointwise_more_producers_each_consumer_reads_a_range():
    up, down = _pointwise(4, 2)
    assert _channels(down) == [[(0, 0), (1, 0)], [(2, 0), (3, 0)]]
    assert _subpartitions(up) == [[1], [1], [1], [1]]


def test_pointwise_uneven_ranges_follow_flinks_formulas():
    _, down = _pointwise(3, 5)
    assert _channels(down) == [[(0, 0)], [(0, 1)], [(1, 0)], [(1, 1)], [(2, 0)]]
    _, down = _pointwise(5, 3)
    assert _channels(down) == [[(0, 0)], [(1, 0), (2, 0)], [(3, 0), (4, 0)]]


def test_all_to_all_connects_every_partition_to_every_consumer():
    b = Builder()
    b.sink(b.rebalance(b.source(parallelism=2)), parallelism=3)
    up, down = ExecutionGraph.build(b.stream_graph().get_job_graph()).get_vertices_topologically()
    assert _channels(down) == [[(0, 0), (1, 0)], [(0, 1), (1, 1)], [(0, 2), (1, 2)]]
    assert _subpartitions(up) == [[3], [3]]
    edges = down.task_vertices[2].input_edges[0]
    assert [(e.source.partition_number, e.subpartition_index, e.input_number) for e in edges] == [(0, 2, 0), (1, 2, 0)]


def test_acceptance_execution_graph():
    _, sg = acceptance()
    eg = ExecutionGraph(sg.get_job_graph())
    assert eg.state is JobStatus.CREATED
    assert eg.get_total_number_of_vertices() == 9
    names = [ev.get_task_name_with_subtask_index() for ev in eg.get_all_execution_vertices()]
    assert names[:2] == ["Source: Collection Source (1/1)", "FlatMap (1/4)"]
    assert names[-1] == "Filter -> Sink: Print to Std. Out (4/4)"
    ev = eg.get_all_execution_vertices()[3]
    assert ev.get_current_execution() is ev.current_execution
    assert ev.current_execution.attempt_number == 0
    assert ev.current_execution.state is ExecutionState.CREATED
    assert len(ev.current_execution.attempt_id) == 32
    int(ev.current_execution.attempt_id, 16)
    assert str(ev.get_id()).endswith("_2")
    # results are registered under the data set ids of the job graph
    for ejv in eg.get_vertices_topologically():
        for result, ds in zip(ejv.produced_data_sets, ejv.job_vertex.get_produced_data_sets()):
            assert result.get_id() == ds.get_id()
            assert eg.get_all_intermediate_results()[result.id] is result
            assert [str(p.partition_id) for p in result.partitions] == [
                f"{ds.get_id()}#{i}" for i in range(ejv.parallelism)]
            for ev, p in zip(ejv.task_vertices, result.partitions):
                assert ev.get_produced_partition(ds.get_id()) is p
                assert p.get_producer() is ev
                assert p.get_number_of_subpartitions() == p.number_of_subpartitions


def _vertex(name, n, parallelism=1):
    v = JobVertex(name, JobVertexID(bytes([n]) * 16))
    v.set_parallelism(parallelism)
    return v


def test_attach_fails_clearly_on_a_cycle():
    jg = JobGraph("cyclic")
    a, b = _vertex("A", 1), _vertex("B", 2)
    jg.add_vertex(a)
    jg.add_vertex(b)
    b.connect_new_data_set_as_input(a, DistributionPattern.POINTWISE, ResultPartitionType.PIPELINED_BOUNDED)
    a.connect_new_data_set_as_input(b, DistributionPattern.POINTWISE, ResultPartitionType.PIPELINED_BOUNDED)
    with pytest.raises(InvalidProgramException, match="The job graph is cyclic: vertices 'A' .*'B'"):
        ExecutionGraph(jg)
    with pytest.raises(InvalidProgramException, match="The job graph is cyclic"):
        ExecutionGraph(jg, attach=False).attach_job_graph()
    # given in an order where an input's producer is not attached yet
    with pytest.raises(JobException) as e:
        ExecutionGraph(jg, attach=False).attach_job_graph([a, b])
    ds_id = a.get_inputs()[0].get_source_id()
    assert str(e.value).startswith(
        "Cannot connect this job graph to the previous graph. No previous intermediate result "
        f"found for ID {ds_id}")
    assert "'A'" in str(e.value) and "'B'" in str(e.value)


def test_attach_rejects_a_vertex_twice_and_parallelism_above_max():
    jg = JobGraph("j")
    a = _vertex("A", 1)
    jg.add_vertex(a)
    with pytest.raises(JobException, match="Encountered two job vertices with ID"):
        ExecutionGraph(jg, attach=False).attach_job_graph([a, a])
    big = _vertex("Big", 2, parallelism=8)
    big.set_max_parallelism(4)
    with pytest.raises(JobException, match=r"Vertex Big's parallelism \(8\) is higher than the max parallelism \(4\)"):
        ExecutionGraph(JobGraph("k"), attach=False).attach_job_graph([big])


def test_execution_state_transitions_stop_at_terminal_states():
    b = Builder()
    b.source()
    b.transformations.append(b.source())
    ex = ExecutionGraph.build(b.stream_graph().get_job_graph()).get_all_execution_vertices()[0].current_execution
    assert ex.transition_state(ExecutionState.SCHEDULED)
    assert ex.transition_state(ExecutionState.RUNNING)
    assert ex.transition_state(ExecutionState.FINISHED)
    assert not ex.transition_state(ExecutionState.FAILED)
    assert ex.state is ExecutionState.FINISHED
    assert set(ex.state_timestamps_ms) == {ExecutionState.CREATED, ExecutionState.SCHEDULED,
                                           ExecutionState.RUNNING, ExecutionState.FINISHED}


def test_state_enums_are_flinks():
    assert [s.name for s in ExecutionState] == [
        "CREATED", "SCHEDULED", "DEPLOYING", "INITIALIZING", "RUNNING", "FINISHED", "CANCELING", "CANCELED", "FAILED"]
    assert [s.name for s in JobStatus] == [
        "CREATED", "RUNNING", "FAILING", "FAILED", "CANCELLING", "CANCELED", "FINISHED", "RESTARTING"]
    assert ExecutionState.CANCELED.is_terminal() and not ExecutionState.CANCELING.is_terminal()
    assert JobStatus.FAILED.is_globally_terminal_state() and not JobStatus.FAILING.is_globally_terminal_state()
