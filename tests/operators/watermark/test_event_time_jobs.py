"""Event time end to end, in both execution modes: timestamps and watermarks assigned in the
source or by ``assign_timestamps_and_watermarks``, carried over the network, turned into
event-time timers by a KeyedProcessFunction, with exact watermarks at every firing; idleness
in a union; bad timestamps failing the job.

Sources here yield their records in *phases*: before the next phase the reader yields empty
batches (the source task then waits on its mailbox, where periodic emission runs) until a
gate (a file in the test's gate directory, which the job creates when a timer fires, or the
test creates: task processes of a cluster see it as well as task threads) opens. So every watermark is known exactly without relying on timing; the only timing
assumption is the generous bound on each wait.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
import time
from dataclasses import dataclass
from typing import List, Optional

import pytest

from rill.common import Duration, WatermarkStrategy
from rill.datastream import KeyedProcessFunction, StreamExecutionEnvironment
from rill.datastream.connectors import CollectSink, Source, SourceReader, SourceSplit
from rill.operators.watermark import AscendingTimestampsWatermarks, WatermarkGenerator
from rill.runtime.errors import JobExecutionException
from rill.common.streamrecord import MAX_TIMESTAMP, MIN_TIMESTAMP

JOB_TIMEOUT_S = 120.0
GATE_TIMEOUT_S = 20.0

class FileGate:
    """A one-way gate shared by the test and the job's tasks, in any process: open once its
    file exists (the interface of ``threading.Event`` the tests use)."""

    def __init__(self, path: str):
        self.path = path

    def set(self) -> None:
        open(self.path, "a").close()

    def is_set(self) -> bool:
        return os.path.exists(self.path)

    def wait(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not self.is_set():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True


class AllGates:
    """Open once every one of ``gates`` is open."""

    def __init__(self, gates):
        self.gates = list(gates)

    def is_set(self) -> bool:
        return all(g.is_set() for g in self.gates)


#: the running test's gate directory (set by ``fresh_gates``); jobs carry their gates' paths
GATE_DIR = [""]
GATES = {}


def gate(name: str) -> FileGate:
    return GATES.setdefault(name, FileGate(os.path.join(GATE_DIR[0], name)))


@pytest.fixture(autouse=True)
def fresh_gates(tmp_path):
    GATES.clear()
    GATE_DIR[0] = str(tmp_path / "gates")
    os.mkdir(GATE_DIR[0])
    yield
    for event in list(GATES.values()):
        event.set()   # never leave a job waiting


@pytest.fixture(autouse=True)
def no_leaked_threads():
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 5.0
    while True:
        leaked = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not leaked:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"threads leaked by the test: {[t.name for t in leaked]}")
        time.sleep(0.01)


# -- a source in phases -------------------------------------------------------------------------

@dataclass(frozen=True)
class _OneSplit(SourceSplit):
    def split_id(self) -> str:
        return "phases"


class _PhasedReader(SourceReader):
    def __init__(self, phases, gates):
        self.phases, self.gates = phases, gates

    def read(self, split):
        for phase, event in zip(self.phases, self.gates):
            yield list(phase)
            if event is not None:
                deadline = time.monotonic() + GATE_TIMEOUT_S
                while not event.is_set() and time.monotonic() < deadline:
                    yield []


class PhasedSource(Source):
    """Yields ``phases[i]`` as one batch, then waits until gate ``gates[i]`` opens (``None``:
    no wait; a tuple of names: all of them); ends after the last phase and its gate."""

    non_parallel = True

    def __init__(self, phases: List[list], gates: List[Optional[str]]):
        assert len(phases) == len(gates)
        self.phases = phases
        self.gates = [None if name is None else AllGates(map(gate, name)) if isinstance(name, tuple)
                      else gate(name) for name in gates]

    def create_splits(self, parallelism: int):
        return [_OneSplit()]

    def create_reader(self) -> SourceReader:
        return _PhasedReader(self.phases, self.gates)


class Recorder(KeyedProcessFunction):
    """Records each element's timestamp and the current watermark, registers an event-time
    timer ``delay`` ms after it, and records each firing with the watermark at that time;
    an element opens gate ``element@<timestamp>``, a firing gate ``timer@<timestamp>``."""

    def __init__(self, delay: int):
        self.delay = delay
        self.gate_dir = GATE_DIR[0]

    def process_element(self, value, ctx):
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + self.delay)
        FileGate(os.path.join(self.gate_dir, f"element@{ctx.timestamp()}")).set()
        yield ("element", value[0], ctx.timestamp(), ctx.timer_service().current_watermark())

    def on_timer(self, timestamp, ctx):
        FileGate(os.path.join(self.gate_dir, f"timer@{timestamp}")).set()
        yield ("timer", ctx.get_current_key(), timestamp, ctx.timer_service().current_watermark())


def by_second_field(value, record_timestamp):
    return value[1]


def new_env(env: StreamExecutionEnvironment, interval_ms: int = 10) -> StreamExecutionEnvironment:
    """The two-mode ``env`` fixture's environment with a short auto-watermark interval."""
    env.set_parallelism(1)
    env.get_config().set_auto_watermark_interval(interval_ms)
    return env


def wait_for(predicate, timeout_s: float = GATE_TIMEOUT_S) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def finish(client) -> None:
    try:
        client.get_job_execution_result().result(timeout=JOB_TIMEOUT_S)
    except concurrent.futures.TimeoutError:
        client.cancel()
        pytest.fail(f"job did not finish within {JOB_TIMEOUT_S} s (cancelled)")


MIN, MAX = MIN_TIMESTAMP, MAX_TIMESTAMP


# -- out-of-order records, bounded out-of-orderness, timers ------------------------------------

PHASES = [
    [("a", 1000), ("b", 1200)],                # max 1200 -> watermark 1099
    [("a", 1150), ("b", 1120), ("a", 1400)],   # max 1400 -> watermark 1299
    [("a", 1250), ("b", 1500)],                # a@1250 is late; max 1500 -> watermark 1399
]
PHASE_GATES = ["timer@1050", "timer@1250", "timer@1300"]

EXPECTED = [
    ("element", "a", 1000, MIN), ("element", "b", 1200, MIN),
    ("timer", "a", 1050, 1099),
    ("element", "a", 1150, 1099), ("element", "b", 1120, 1099), ("element", "a", 1400, 1099),
    ("timer", "b", 1170, 1299), ("timer", "a", 1200, 1299), ("timer", "b", 1250, 1299),
    ("element", "a", 1250, 1299), ("element", "b", 1500, 1299),
    ("timer", "a", 1300, 1399),
    ("timer", "a", 1450, MAX), ("timer", "b", 1550, MAX),
]


@pytest.mark.parametrize("where", ["in the source", "assign_timestamps_and_watermarks"])
def test_out_of_order_timestamps_fire_event_time_timers_at_exact_watermarks(env, where):
    env = new_env(env)
    strategy = (WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(100))
                .with_timestamp_assigner(by_second_field))
    source = PhasedSource(PHASES, PHASE_GATES)
    if where == "in the source":
        ds = env.from_source(source, strategy, "Phases")
    else:
        ds = env.from_source(source, None, "Phases").assign_timestamps_and_watermarks(strategy)
    sink = CollectSink()
    try:
        ds.key_by(lambda v: v[0]).process(Recorder(50)).sink_to(sink)
        finish(env.execute_async("event time"))
        assert sink.get_results() == EXPECTED
    finally:
        sink.close()


def _vertex_names(env):
    return [v.get_name() for v in env.get_stream_graph().get_job_graph()
            .get_vertices_sorted_topologically_from_sources()]


def test_plans_with_a_strategy_in_the_source_and_with_a_chained_timestamps_operator(env):
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(by_second_field)
    env = new_env(env)
    env.from_source(PhasedSource([[("a", 1)]], [None]), strategy, "Phases") \
        .key_by(lambda v: v[0]).process(Recorder(0)).print()
    assert _vertex_names(env) == ["Source: Phases", "KeyedProcess -> Sink: Print to Std. Out"]
    env = new_env(StreamExecutionEnvironment.get_execution_environment())
    env.from_source(PhasedSource([[("a", 1)]], [None]), None, "Phases").assign_timestamps_and_watermarks(strategy) \
        .key_by(lambda v: v[0]).process(Recorder(0)).print()
    assert _vertex_names(env) == ["Source: Phases -> Timestamps/Watermarks", "KeyedProcess -> Sink: Print to Std. Out"]


def test_watermarks_reach_every_parallel_downstream_subtask(env):
    env = new_env(env)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(by_second_field)
    phases = [[(k, 100) for k in "abcd"] + [("a", 300)],   # watermark 299
              [(k, 400) for k in "abcd"]]                   # watermark 399
    sink = CollectSink()
    try:
        env.from_source(PhasedSource(phases, ["timer@100", "timer@300"]), strategy, "Phases") \
            .key_by(lambda v: v[0]).process(Recorder(0)).set_parallelism(2).sink_to(sink)
        finish(env.execute_async())
        timers = sorted(r for r in sink.get_results() if r[0] == "timer")
        assert timers == sorted([("timer", k, 100, 299) for k in "abcd"] + [("timer", "a", 300, 399)]
                                + [("timer", k, 400, MAX) for k in "abcd"])
    finally:
        sink.close()


# -- idleness in a union -------------------------------------------------------------------------

class FlaggingMonotonous(WatermarkGenerator):
    """The generator of ``for_monotonous_timestamps`` (``max - 1``, periodically) that opens
    gate ``name`` once it has emitted a watermark of at least ``at``."""

    def __init__(self, name: str, at: int):
        self.gate, self.at = gate(name), at
        self.monotonous = AscendingTimestampsWatermarks()
        self.max = None

    def on_event(self, event, event_timestamp, output):
        self.monotonous.on_event(event, event_timestamp, output)
        self.max = event_timestamp if self.max is None else max(self.max, event_timestamp)

    def on_periodic_emit(self, output):
        self.monotonous.on_periodic_emit(output)  # max - 1
        if self.max is not None and self.max - 1 >= self.at:
            self.gate.set()


def flagging(name: str, at: int) -> WatermarkStrategy:
    return WatermarkStrategy.for_generator(lambda: FlaggingMonotonous(name, at)) \
        .with_timestamp_assigner(by_second_field)


def _union_job(env, idle_side_strategy, active=None, phases_a=None, gates_a=("release",)):
    env = new_env(env)
    active = active or WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(by_second_field)
    phases_a = phases_a or [[("a", 1000), ("a", 2000), ("a", 3000)]]
    side_a = env.from_source(PhasedSource(phases_a, list(gates_a)), active, "A")
    side_b = env.from_source(PhasedSource([[("b", 500)]], ["release"]), None, "B") \
        .assign_timestamps_and_watermarks(idle_side_strategy)
    sink = CollectSink()
    side_a.union(side_b).key_by(lambda v: "k").process(Recorder(500)).sink_to(sink)
    return env, sink


def test_idle_side_of_a_union_does_not_hold_the_watermark_back(env):
    strategy = (WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(by_second_field)
                .with_idleness(Duration.of_millis(50)))
    # A starts once B's element (timer at 1000) reached the operator: B may go idle before its
    # first record when its task starts late (the idleness clock runs from its first periodic
    # emission, as Flink's IdlenessTimer), and its timer would then be registered after the
    # watermark passed 1000 and fire only at the end
    env, sink = _union_job(env, strategy, phases_a=[[], [("a", 1000), ("a", 2000), ("a", 3000)]],
                           gates_a=("element@500", "release"))
    try:
        gate("timer@2500")
        client = env.execute_async("idle union")
        try:
            # B (watermark 499) goes idle: the downstream watermark becomes A's 2999
            assert gate("timer@2500").wait(GATE_TIMEOUT_S), "the idle side held the watermark back"
        finally:
            gate("release").set()
        finish(client)
        results = sink.get_results()
        assert sorted(r[2] for r in results if r[0] == "element") == [500, 1000, 2000, 3000]
        assert [r for r in results if r[0] == "timer"] == [
            ("timer", "k", 1000, 2999), ("timer", "k", 1500, 2999), ("timer", "k", 2500, 2999),
            ("timer", "k", 3500, MAX)]
    finally:
        sink.close()


def test_without_idleness_the_quiet_side_of_a_union_holds_the_watermark_back(env):
    # A emits its watermark 2999 and B its 499 (each opens a gate), then A sends one more
    # element: in band behind A's watermark, it reaches the operator after 2999 did, so the
    # watermark recorded with it is the union's, held back by B: 499, or still MIN while B's 499
    # waits in B's buffer for the buffer timeout (no timer fires before it either way)
    env, sink = _union_job(env, flagging("B-499", 499), active=flagging("A-2999", 2999),
                           phases_a=[[("a", 1000), ("a", 2000), ("a", 3000)], [("a", 3001)]],
                           gates_a=(("A-2999", "B-499"), "release"))
    try:
        client = env.execute_async("quiet union")
        try:
            assert wait_for(lambda: any(r[:3] == ("element", "a", 3001) for r in sink.get_results()))
            results = sink.get_results()
            upto = results[:results.index(next(r for r in results if r[:3] == ("element", "a", 3001))) + 1]
            assert upto[-1][:3] == ("element", "a", 3001) and upto[-1][3] in (MIN, 499), upto[-1]
            assert [r for r in upto if r[0] == "timer"] == []
        finally:
            gate("release").set()
        finish(client)
        timers = [r for r in sink.get_results() if r[0] == "timer"]
        # the sides end in either order: when B ends first, A's latest watermark (2999, or 3000
        # once it emitted one after 3001) holds until A ends; the first three fire together
        assert [r[2] for r in timers] == [1000, 1500, 2500, 3500, 3501]
        assert {r[3] for r in timers[:3]} in ({2999}, {3000}, {MAX}) and timers[3][3] == timers[4][3] == MAX
    finally:
        sink.close()


# -- bad input ------------------------------------------------------------------------------------

def test_assigner_returning_a_float_fails_the_job_naming_operator_record_and_value(env):
    env = new_env(env)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v, t: v / 2)
    env.from_collection([4, 3]).assign_timestamps_and_watermarks(strategy).print()
    client = env.execute_async("bad timestamps")
    with pytest.raises(JobExecutionException) as info:
        client.get_job_execution_result().result(timeout=JOB_TIMEOUT_S)
    assert "operator 'Timestamps/Watermarks'" in str(info.value)
    assert str(info.value.__cause__) == (
        "Timestamp assigner of operator 'Timestamps/Watermarks' returned 2.0 (float) for record 4; "
        "it must return an int of epoch milliseconds")
    assert isinstance(info.value.__cause__, TypeError)


def test_assigner_returning_a_string_in_a_source_fails_the_job_naming_the_source(env):
    env = new_env(env)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v, t: str(v))
    env.from_source(PhasedSource([[7]], [None]), strategy, "Numbers").print()
    client = env.execute_async("bad timestamps in a source")
    with pytest.raises(JobExecutionException) as info:
        client.get_job_execution_result().result(timeout=JOB_TIMEOUT_S)
    assert "operator 'Source: Numbers'" in str(info.value)
    assert str(info.value.__cause__) == (
        "Timestamp assigner of operator 'Source: Numbers' returned '7' (str) for record 7; "
        "it must return an int of epoch milliseconds")
