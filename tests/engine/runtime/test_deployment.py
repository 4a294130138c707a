"""What a task's deployment carries: a :class:`TaskInformation` holds its own vertex's operators
and edges and nothing of the rest of the JobGraph (a downstream task's descriptor does not grow
with a source's collection), and a descriptor split into its per-subtask, task and job parts,
pickled and put together again, runs the job as the embedded JobVertex does."""

from __future__ import annotations

import io
import pickle

import cloudpickle
import pytest

from rill.common import Configuration, Types
from rill.datastream import StreamExecutionEnvironment
from rill.datastream.connectors.source import Source
from rill.graph.job_graph import IntermediateDataSet, JobEdge, JobGraph, JobVertex
from rill.graph.stream_config import StreamConfig
from rill.runtime.deployment import (
    JobInformation,
    TaskDeploymentDescriptor,
    TaskInformation,
    assemble_descriptor,
    subtask_descriptor,
)
from rill.runtime.jobmaster.job_master import JobMaster
from rill.runtime.taskmanager.task_executor import TaskExecutor

GRAPH_TYPES = (JobGraph, JobVertex, JobEdge, IntermediateDataSet, Source, StreamConfig)


class _Recorder(cloudpickle.CloudPickler):
    """Pickles as the cluster does and records every graph object it meets on the way."""

    def __init__(self, file):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.met = []

    def persistent_id(self, obj):
        if isinstance(obj, GRAPH_TYPES):
            self.met.append(obj)
        return None


def pickled(obj):
    """``(size in bytes, graph objects in the pickle)``."""
    buf = io.BytesIO()
    recorder = _Recorder(buf)
    recorder.dump(obj)
    return len(buf.getvalue()), recorder.met


def word_count_graph(num_lines: int):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    lines = [f"line {i} of the collection" for i in range(num_lines)]
    (env.from_collection(lines)
        .flat_map(lambda line: [(w, 1) for w in line.split()], output_type=Types.TUPLE([Types.STRING(), Types.INT()]))
        .key_by(lambda t: t[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1])).name("Count")
        .add_sink(lambda v: None))
    return env.get_stream_graph("deployment", clear_transformations=True).get_job_graph()


def vertex_named(job_graph, prefix: str):
    return next(v for v in job_graph.get_vertices() if v.get_name().startswith(prefix))


def test_a_downstream_task_information_holds_only_its_own_vertex():
    job_graph = word_count_graph(100_000)
    source = vertex_named(job_graph, "Source")
    reduce = vertex_named(job_graph, "Count")
    collection_bytes = sum(len(s) for s in source.stream_configs[source.head_node_id].source.elements)

    # what was shipped before: the JobVertex reaches the source through its edges
    vertex_size, _ = pickled(reduce)
    assert vertex_size > collection_bytes

    size, met = pickled(TaskInformation.from_job_vertex(reduce))
    assert [type(o) for o in met if not isinstance(o, StreamConfig)] == []  # no vertex, edge, data set or source
    assert {o.node_id for o in met} == set(reduce.stream_configs)  # its own operators' configs, no other
    assert size == pickled(TaskInformation.from_job_vertex(vertex_named(word_count_graph(10), "Count")))[0]
    assert size < 10_000

    size, met = pickled(TaskInformation.from_job_vertex(source))
    # met twice (the StreamConfig's and the source operator's reference), pickled once
    assert {id(o) for o in met if isinstance(o, Source)} == {id(source.stream_configs[source.head_node_id].source)}
    assert not [o for o in met if isinstance(o, (JobGraph, JobVertex, JobEdge, IntermediateDataSet))]
    assert size > collection_bytes


def test_task_information_keeps_the_chains_edges_identical_to_its_configs_outputs():
    info = cloudpickle.loads(cloudpickle.dumps(TaskInformation.from_job_vertex(
        vertex_named(word_count_graph(10), "FlatMap"))))
    outputs = [e for cfg in info.stream_configs.values() for e in cfg.non_chained_outputs]
    assert len(outputs) == len(info.transitive_out_edges) == 1
    assert outputs[0] is info.transitive_out_edges[0]  # the OperatorChain pairs writers by identity


RESULTS = []


def remember(value):
    RESULTS.append(value)


class ShippingTaskExecutor(TaskExecutor):
    """Deploys every task as a cluster task gets it: its descriptor in three pickled parts."""

    def submit_task(self, tdd, coordinators, listener, checkpoint_responder=None):
        job = cloudpickle.dumps(JobInformation(tdd.job_id, tdd.job_name, Configuration(), tdd.job_parameters))
        task = cloudpickle.dumps(TaskInformation.from_job_vertex(tdd.vertex))
        subtask = cloudpickle.dumps(subtask_descriptor(tdd))
        assert b"line 3 of the collection" not in subtask
        shipped = assemble_descriptor(cloudpickle.loads(subtask), cloudpickle.loads(task), cloudpickle.loads(job))
        assert isinstance(shipped.vertex, TaskInformation) and shipped.job_parameters == {"k": "v"}
        return super().submit_task(shipped, coordinators, listener, checkpoint_responder)


def test_a_job_runs_from_the_shipped_parts():
    RESULTS.clear()
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    lines = [f"line {i} of the collection" for i in range(500)]
    (env.from_collection(lines)
        .flat_map(lambda line: line.split(), output_type=Types.STRING())
        .key_by(lambda w: w)
        .map(lambda w: (w, 1))
        .add_sink(remember))
    job_graph = env.get_stream_graph("shipped", clear_transformations=True).get_job_graph()
    jm = JobMaster(job_graph, ShippingTaskExecutor(8), Configuration(), {"k": "v"})
    jm.start()
    jm.result_future.result(timeout=30)
    assert sorted(RESULTS) == sorted((w, 1) for line in lines for w in line.split())


def test_parts_of_another_task_are_refused():
    job_graph = word_count_graph(10)
    tdd_vertex = vertex_named(job_graph, "Count")
    tdd = TaskDeploymentDescriptor(job_id="j1", job_name="j", vertex=tdd_vertex, subtask_index=0, parallelism=2,
                                   attempt_number=0, attempt_id="a", task_name=tdd_vertex.get_name(),
                                   produced_partitions=[], input_gates=[])
    info = TaskInformation.from_job_vertex(vertex_named(job_graph, "Source"))
    with pytest.raises(ValueError, match="task information of 'Source"):
        assemble_descriptor(subtask_descriptor(tdd), info, JobInformation("j1", "j", Configuration()))
    with pytest.raises(ValueError, match="job information of j2"):
        assemble_descriptor(subtask_descriptor(tdd), TaskInformation.from_job_vertex(tdd_vertex),
                            JobInformation("j2", "j", Configuration()))
