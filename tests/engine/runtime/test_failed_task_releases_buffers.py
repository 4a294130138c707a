"""A task that FAILS gives back every network buffer it held, as Flink's
``Task.releaseResources`` does on failure: its result partitions are released with the cause
(``ResultPartition.fail``) and its input gates are closed, so a remote channel's exclusive
buffers and its gate's floating buffers return to the process's NetworkBufferPool and the
producers' subpartition views are released -- before the task reports FAILED.

Two set-ups, both on the real runtime:

* embedded: a keyed job at parallelism 2 whose map raises mid-stream;
* cluster-like: a real JobMaster deploys every task into its own "process" (a partition
  manager, a NettyConnectionManager serving on 127.0.0.1 and a NetworkBufferPool, all in this
  process), so every channel is a RemoteInputChannel reading over a loopback socket. The
  consumer fails either because its map raises or because its producer's network goes away
  (a remote transport error on its input channel).
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

import pytest

from rill.common.configuration import Configuration
from rill.datastream import StreamExecutionEnvironment
from rill.graph.states import ExecutionState, JobStatus
from rill.network import (
    NettyConfig,
    NettyConnectionManager,
    NetworkBufferPool,
    PartitionReleasedError,
    RemoteInputChannel,
    RemoteTransportError,
    ResultPartitionManager,
)
from rill.runtime.errors import JobExecutionException
from rill.runtime.jobmaster.job_master import JobMaster
from rill.runtime.jobmaster.scheduler import required_slots
from rill.runtime.taskmanager.network_environment import NetworkEnvironment
from rill.runtime.taskmanager.task import Task

DEADLINE_S = 20.0


def wait_until(predicate: Callable[[], bool], what: Callable[[], str]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {DEADLINE_S}s waiting until {what()}")
        time.sleep(0.002)


def no_thread_left(before: set) -> None:
    """Every thread started since ``before`` (task threads, timers, network threads) ends."""
    wait_until(lambda: not [t for t in threading.enumerate() if t.ident not in before],
               lambda: f"threads still running: {[t.name for t in threading.enumerate() if t.ident not in before]}")


def segments(pool: NetworkBufferPool) -> tuple:
    """``(available, total)``: equal when every segment is back."""
    return pool.get_number_of_available_memory_segments(), pool.get_total_number_of_memory_segments()


# ---------------------------------------------------------------------- embedded, keyed, p=2


FAIL_AT = 3_777


def _fail_mid_stream(x):
    if x == FAIL_AT:
        raise ValueError(f"bad record {x}")
    return x


def test_a_failed_embedded_task_closes_its_gates_and_every_segment_comes_back():
    threads_before = {t.ident for t in threading.enumerate()}
    env = StreamExecutionEnvironment.get_execution_environment(
        Configuration().set_integer("taskmanager.network.records-per-buffer", 16))
    env.set_parallelism(2)
    (env.from_sequence(1, 20_000)
        .key_by(lambda x: x % 10)
        .map(_fail_mid_stream).name("Check")
        .rebalance()
        .add_sink(lambda v: None))
    client = env.execute_async("fails mid-stream")
    with pytest.raises(JobExecutionException) as info:
        client.get_job_execution_result().result(timeout=DEADLINE_S)
    assert isinstance(info.value.__cause__, ValueError) and str(info.value.__cause__) == f"bad record {FAIL_AT}"
    assert client.get_job_status() is JobStatus.FAILED

    jm = client._jm
    [failed] = [t for t in jm.tasks if t.failure is not None and isinstance(t.failure.error, ValueError)]
    assert failed.execution_state is ExecutionState.FAILED
    assert failed.task_name_with_subtasks.startswith("Check")
    assert failed.metrics.snapshot().num_records_in > 16  # mid-stream: whole buffers before the bad one
    # Its partition is released with the cause (Flink's ResultPartition.fail): the pool
    # destroyed, nothing queued, the sinks reading it see the ValueError.
    [partition] = failed.result_partitions
    stats = partition.statistics()
    assert partition.get_failure_cause() is failed.failure.error
    assert (stats.released, stats.buffer_pool.destroyed, stats.backlog) == (True, True, (0, 0))
    # A failed task closed its gate (Flink's closeAllInputGates): every local channel released
    # its subpartition view, so no producer's subpartition waits for a consumer that is gone.
    [gate] = failed.input_gates
    assert gate.statistics().closed is True
    assert [gate.get_channel(i).is_released() for i in range(gate.get_number_of_input_channels())] == [True] * 2
    # (Other tasks may fail too, reading a partition released by a failed or cancelled task.)
    for task in [t for t in jm.tasks if t.execution_state is ExecutionState.FAILED]:
        assert all(g.statistics().closed for g in task.input_gates), task
        assert all(p.is_released() for p in task.result_partitions), task
    for task in jm.tasks:  # the others: finished (EndOfPartition) or cancelled
        for g in task.input_gates:
            assert all(g.get_channel(i).is_released() for i in range(g.get_number_of_input_channels())), task

    pool = jm.task_executor.network.network_buffer_pool
    wait_until(lambda: segments(pool)[0] == segments(pool)[1], lambda: f"the budget is full: {pool.statistics()}")
    assert segments(pool) == (pool.get_total_number_of_memory_segments(),) * 2
    assert pool.statistics().holders == ()
    no_thread_left(threads_before)


# ---------------------------------------------------------------------- remote channels over loopback


@dataclass
class Process:
    """What one task's TaskExecutor process holds of the network (cluster mode gives every task
    its own process: its partitions, its transport, its budget)."""

    name: str
    partitions: ResultPartitionManager
    connections: NettyConnectionManager
    pool: NetworkBufferPool
    env: NetworkEnvironment
    task: Optional[Task] = None


class LoopbackDeployer:
    """Stands in for the TaskExecutor a real JobMaster deploys to, as cluster mode's
    ``ClusterDeployer`` does: each task runs in its own :class:`Process` and every channel of
    its gates reads from its producer's server, over 127.0.0.1 (a ``RemoteInputChannel``).

    ``before_report(task, state, failure)`` runs on the task thread before the JobMaster hears
    of a state change (so it sees what the task had released when it reported),
    ``after_report(task, state)`` after the JobMaster handled it."""

    def __init__(self, num_slots: int, total_segments: int, before_report, after_report) -> None:
        self.num_slots = num_slots
        self.total_segments = total_segments
        self.before_report = before_report
        self.after_report = after_report
        self.secret = os.urandom(32)
        self.processes: Dict[str, Process] = {}  # by attempt id

    def submit_task(self, tdd, coordinators, listener, checkpoint_responder=None) -> Task:
        name = tdd.task_name_with_subtasks
        partitions = ResultPartitionManager()
        connections = NettyConnectionManager(
            NettyConfig(secret=self.secret, retry_initial_backoff_s=0.002, retry_max_backoff_s=0.05), partitions,
            name=f"loopback-{len(self.processes)}")
        connections.start()
        pool = NetworkBufferPool(self.total_segments)
        process = Process(name, partitions, connections, pool,
                          NetworkEnvironment(partitions, connection_manager=connections, network_buffer_pool=pool))
        self.processes[tdd.attempt_id] = process
        gates = [dataclasses.replace(gdd, locations=[self.processes[pid.producer_id].connections.server_address
                                                     for pid, _ in gdd.channels])
                 for gdd in tdd.input_gates]

        def report(task, state, failure):
            self.before_report(task, state, failure)
            listener(task, state, failure)
            self.after_report(task, state)

        process.task = Task(dataclasses.replace(tdd, input_gates=gates), process.env, coordinators, report,
                            checkpoint_responder)
        return process.task

    def tasks(self) -> List[Task]:
        return [p.task for p in self.processes.values() if p.task is not None]

    def shutdown(self) -> None:
        tasks = self.tasks()
        for task in tasks:
            task.cancel_execution()
        alive = [t.task_name_with_subtasks for t in tasks if not t.join(DEADLINE_S)]
        for process in self.processes.values():
            process.connections.shutdown()
            process.partitions.shutdown()
        assert alive == [], f"task threads still running: {alive}"
        errors = [e for p in self.processes.values() for e in p.connections.network_thread_errors()]
        assert errors == [], f"callbacks failed on a network thread: {errors!r}"
        assert not [p.name for p in self.processes.values() if p.connections.is_running()]


#: Each producer emits this many records (whole source batches of 1024), then holds its next
#: record until a consumer has failed and the JobMaster has cancelled the other tasks: the
#: consumer fails mid-stream, while its producers are alive and cannot fail first.
EMIT_BEFORE_HOLD = 4 * 1024
PER_PRODUCER = 100_000
HOLD = threading.Event()
HELD: List[int] = []  # the record each producer holds (one per producer until HOLD is set)


def _hold_after_prefix(x):
    if x % PER_PRODUCER >= EMIT_BEFORE_HOLD and not HOLD.is_set():
        HELD.append(x)
        HOLD.wait(DEADLINE_S)
    return x


REMOTE_FAIL_AT = 2 * 1024 + 7  # in the first producer's emitted prefix


def _raise_at(x):
    if x == REMOTE_FAIL_AT:
        raise ValueError(f"bad record {x}")
    return x


@pytest.fixture
def loopback_job():
    """``run(fail_in_map) -> (deployer, job master, consumers' state at their FAILED report)``."""
    made: List[LoopbackDeployer] = []
    threads_before = {t.ident for t in threading.enumerate()}

    def run(fail_in_map: bool):
        HOLD.clear()
        HELD.clear()
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(2)
        (env.from_sequence(0, 2 * PER_PRODUCER - 1)
            .map(_hold_after_prefix).name("Hold")
            .key_by(lambda x: x % 10)
            .map(_raise_at if fail_in_map else (lambda x: x)).name("Consume")
            .add_sink(lambda v: None))
        job_graph = env.get_stream_graph("remote consumer fails", clear_transformations=True).get_job_graph()
        at_failure: Dict[str, dict] = {}

        def before_report(task, state, failure):
            if state is ExecutionState.FAILED and task.task_name_with_subtasks.startswith("Consume"):
                # what the consumer still held when it reported FAILED
                process = next(p for p in deployer.processes.values() if p.task is task)
                [gate] = task.input_gates
                at_failure[task.task_name_with_subtasks] = dict(
                    error=failure.error,
                    records_in=task.metrics.snapshot().num_records_in,
                    segments=segments(process.pool),
                    holders=process.pool.statistics().holders,
                    floating=process.env._floating_pools[gate].statistics(),
                    channels=[gate.get_channel(i).statistics() for i in range(gate.get_number_of_input_channels())],
                )

        def after_report(task, state):
            if state is ExecutionState.FAILED:
                HOLD.set()  # the JobMaster cancelled the producers: let them see it

        deployer = LoopbackDeployer(sum(required_slots(job_graph).values()), 64, before_report, after_report)
        made.append(deployer)
        conf = Configuration().set_integer("taskmanager.network.records-per-buffer", 16)
        jm = JobMaster(job_graph, deployer, conf)
        jm.start()
        return deployer, jm, at_failure

    yield run
    HOLD.set()
    for deployer in made:
        deployer.shutdown()
    no_thread_left(threads_before)


def _consumers(deployer):
    return [p for p in deployer.processes.values() if p.name.startswith("Consume")]


def _producers(deployer):
    return [p for p in deployer.processes.values() if not p.name.startswith("Consume")]


def _receiving_buffers(process) -> tuple:
    """``(floating pool, channels)`` of a consumer's gate: ``(available, assigned)`` of its
    floating pool, ``(released, exclusive in use, floating held, queued)`` per channel."""
    [gate] = process.task.input_gates
    floating = process.env._floating_pools[gate].statistics()
    channels = [gate.get_channel(i).statistics() for i in range(gate.get_number_of_input_channels())]
    return ((floating.available_buffers, floating.assigned_buffers),
            [(c.released, c.exclusive_buffers_in_use, c.floating_buffers, c.queued) for c in channels])


def _check_everything_released(deployer, jm, at_failure) -> None:
    assert at_failure, "no consumer task failed"
    for name, seen in at_failure.items():
        # When it reported FAILED the consumer had given back its receiving buffers: both
        # remote channels released, their exclusive buffers and the gate's floating buffers
        # returned to its process's NetworkBufferPool (it holds nothing else: its sink is chained).
        assert seen["segments"] == (64, 64), (name, seen)
        assert seen["holders"] == (), (name, seen)
        assert seen["floating"].total_buffers == 8
        # Nothing queued, no free floating buffer kept. (A frame the network thread was taking
        # in when the channel was released may still hold its one receiving buffer: the network
        # thread drops it and gives the buffer back, checked below once the job is over.)
        assert [(c.released, c.queued, c.floating_buffers - c.floating_buffers_in_use)
                for c in seen["channels"]] == [(True, 0, 0)] * 2, (name, seen)
    with pytest.raises(JobExecutionException):
        jm.result_future.result(timeout=DEADLINE_S)
    assert jm.status is JobStatus.FAILED
    for process in deployer.processes.values():
        assert process.task.execution_state.is_terminal()
        for gate in process.task.input_gates:
            for i in range(gate.get_number_of_input_channels()):
                channel = gate.get_channel(i)
                assert isinstance(channel, RemoteInputChannel) and channel.is_released(), (process.name, channel)
    for process in _consumers(deployer):
        wait_until(lambda: _receiving_buffers(process) == ((8, 0), [(True, 0, 0, 0)] * 2),
                   lambda: f"every receiving buffer of {process.name} is back: {_receiving_buffers(process)}")
    # The producers' side: every subpartition view a remote channel read is released on the
    # server (no reader left), every partition released, every budget full.
    wait_until(lambda: all(p.connections.reader_statistics() == () for p in deployer.processes.values()),
               lambda: f"no reader is left: {[p.connections.reader_statistics() for p in _producers(deployer)]}")
    for process in _producers(deployer):
        assert all(p.is_released() for p in process.task.result_partitions), process.name
    wait_until(lambda: all(segments(p.pool) == (64, 64) for p in deployer.processes.values()),
               lambda: f"every budget is full: {[(p.name, p.pool.statistics()) for p in deployer.processes.values()]}")
    for process in deployer.processes.values():
        assert process.pool.statistics().holders == (), process.name


def test_a_consumer_whose_function_raises_releases_its_remote_channels_buffers(loopback_job):
    deployer, jm, at_failure = loopback_job(fail_in_map=True)
    with pytest.raises(JobExecutionException) as info:
        jm.result_future.result(timeout=DEADLINE_S)
    assert str(info.value.__cause__) == f"bad record {REMOTE_FAIL_AT}"
    [raised] = [seen for seen in at_failure.values() if isinstance(seen["error"], ValueError)]
    assert raised["records_in"] > 16  # mid-stream: whole buffers before the bad one
    # the other consumer is cancelled, or fails reading a producer the JobMaster cancelled
    assert all(isinstance(seen["error"], (ValueError, PartitionReleasedError)) for seen in at_failure.values())
    _check_everything_released(deployer, jm, at_failure)


def test_a_consumer_whose_channel_reports_a_transport_error_releases_its_buffers(loopback_job):
    deployer, jm, at_failure = loopback_job(fail_in_map=False)
    consumers = _consumers(deployer)
    wait_until(lambda: all(c.task.metrics.snapshot().num_records_in > 0 for c in consumers),
               lambda: "records reach both consumers over the network")
    # Both producers hold a record (not blocked on a buffer): when the network of one goes
    # away, its partition is released as consumed, and it must not fail before a consumer does.
    wait_until(lambda: len(HELD) == 2, lambda: f"both producers hold a record: {HELD}")
    _producers(deployer)[0].connections.shutdown()  # a producer's network goes away mid-stream
    with pytest.raises(JobExecutionException) as info:
        jm.result_future.result(timeout=DEADLINE_S)
    assert isinstance(info.value.__cause__, RemoteTransportError)
    assert any(isinstance(seen["error"], RemoteTransportError) and seen["records_in"] > 0
               for seen in at_failure.values())
    assert all(isinstance(seen["error"], (RemoteTransportError, PartitionReleasedError))
               for seen in at_failure.values())
    _check_everything_released(deployer, jm, at_failure)


# ---------------------------------------------------------------------- real task processes


CLUSTER_FAIL_AT = 60_000


def _raise_at_cluster_point(x):
    if x == CLUSTER_FAIL_AT:
        raise ValueError(f"bad record {x}")
    return x


def test_a_failed_task_process_and_the_cancelled_ones_give_back_every_buffer_before_reporting(cluster):
    """On a real cluster every task has a process of its own with its own NetworkBufferPool.
    A consumer whose function raises mid-stream reports FAILED, the other tasks (other
    processes, still running) are cancelled; each task reports its process's
    ``(available, total)`` segments as read right before its final state."""
    env = cluster.environment(2, **{"taskmanager.network.records-per-buffer": "16"})
    (env.from_sequence(0, 10**7)
        .key_by(lambda x: x % 10)
        .map(_raise_at_cluster_point).name("Consume")
        .add_sink(lambda v: None))
    client = env.execute_async("fails in a task process")
    names = {"Source: Sequence Source (1/2)", "Source: Sequence Source (2/2)", "Consume -> Sink: Unnamed (1/2)",
             "Consume -> Sink: Unnamed (2/2)"}
    # while it runs, the tasks' partitions and gates hold segments of their processes' pools
    deadline = time.monotonic() + DEADLINE_S
    while not (names <= client.get_network_memory_segments().keys() or client.is_done()):
        assert time.monotonic() < deadline, "no network memory reported for every task"
        time.sleep(0.01)
    running = client.get_network_memory_segments()
    with pytest.raises(JobExecutionException) as info:
        client.get_job_execution_result().result(timeout=60)
    assert str(info.value.__cause__) == f"bad record {CLUSTER_FAIL_AT}"
    states = client.get_execution_states()
    failed = [name for name, state in states.items() if state is ExecutionState.FAILED]
    assert len(failed) == 1 and failed[0].startswith("Consume"), states
    assert {n: states[n] for n in names - set(failed)} == dict.fromkeys(names - set(failed), ExecutionState.CANCELED)
    consumer = next(s for s in client.get_metrics() if f"{s.task_name} ({s.subtask_index + 1}/2)" == failed[0])
    assert consumer.num_records_in > 16  # mid-stream: whole buffers before the bad one
    final = client.get_network_memory_segments()
    assert final.keys() == names == running.keys()
    assert all(total > 0 and available < total for available, total in running.values()), running
    # the failed task: every segment back in its process's pool when it reported FAILED
    assert final[failed[0]][0] == final[failed[0]][1], final
    # a cancelled task: its partitions and gates hold nothing when it reports CANCELED, but a
    # buffer the network server took from a subpartition without credit to send it (a reader's
    # one-entry stash, network/netty/view_reader.py: at most one per consumer channel, 2 here)
    # stays out until the network thread releases that reader, just after the report
    assert all(0 <= total - available <= 2 for name, (available, total) in final.items()), final
