"""Checkpoints end to end, in both execution modes (the ``env`` fixture): the coordinator
triggers, barriers align, every task acknowledges, statistics and notifications arrive, and the
completed checkpoint holds exactly the state of the records before its barrier.

Sources are made slow by their own per-record work (``time.sleep`` inside ``map``: load, not
synchronization); every wait on the job is a wait for its result with a deadline.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rill.common.checkpointing_options import CheckpointingMode
from rill.common.co_functions import KeyedCoProcessFunction
from rill.common.functions import CheckpointListener, KeyedProcessFunction, MapFunction
from rill.datastream.async_client import AsyncJobClient
from rill.operators.checkpointed_function import CheckpointedFunction
from rill.runtime.checkpoint.checkpoint_stats import CheckpointStatsStatus
from rill.runtime.reporting import format_checkpoint_line, format_summary
from rill.state import ListStateDescriptor, ValueStateDescriptor
from rill.state.checkpoint.storage import create_checkpoint_storage

KEYS = 5
RESULT_TIMEOUT_S = 120
#: a finished job keeps its checkpoints (the default, NO_EXTERNALIZED_CHECKPOINTS, discards them)
RETAIN = {"execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION"}


def _configure(env, interval_ms=50, batch=10, **settings):
    conf = env.get_configuration()
    conf.set_integer("rill.source.batch-size", batch)
    conf.set_integer("taskmanager.network.records-per-buffer", batch)
    for key, value in settings.items():
        conf.set_string(key, str(value))
    env.enable_checkpointing(interval_ms, settings.pop("mode", None))
    return env


class Position(MapFunction, CheckpointedFunction):
    """Passes records on after ``delay_s`` each and checkpoints how many it passed (the source's
    position at the barrier); writes ``snapshot <id>`` lines to ``log`` when given."""

    def __init__(self, delay_s: float, log: str = ""):
        self.delay_s = delay_s
        self.log = log
        self.n = 0

    def initialize_state(self, context):
        self.state = context.get_operator_state_store().get_list_state(ListStateDescriptor("position"))

    def snapshot_state(self, context):
        self.state.update([self.n])
        if self.log:
            with open(self.log, "a") as f:
                f.write(f"snapshot {context.get_checkpoint_id()}\n")

    def map(self, value):
        if self.delay_s:
            time.sleep(self.delay_s)
        self.n += 1
        return value


class Count(KeyedProcessFunction, CheckpointListener):
    """Counts records per key; logs the checkpoint notifications it gets to ``log`` (as a
    ``CheckpointListener``: only those hear of checkpoints, as in Flink)."""

    def __init__(self, log: str = ""):
        self.log = log

    def open(self, ctx):
        self.count = ctx.get_state(ValueStateDescriptor("count"))

    def process_element(self, value, ctx):
        self.count.update((self.count.value() or 0) + 1)
        return iter(())

    def _write(self, line):
        if self.log:
            with open(self.log, "a") as f:
                f.write(line + "\n")

    def notify_checkpoint_complete(self, checkpoint_id):
        self._write(f"complete {checkpoint_id}")

    def notify_checkpoint_aborted(self, checkpoint_id):
        self._write(f"aborted {checkpoint_id}")


def _counting_job(env, n, delay_s, log="", position_log=""):
    (env.from_collection(list(range(n))).map(Position(delay_s, position_log)).name("Position")
     .key_by(lambda i: i % KEYS).process(Count(log)).name("Count").set_parallelism(2)
     .add_sink(lambda v: None).set_parallelism(2))


def _prefix_counts(p):
    return {k: len(range(k, p, KEYS)) for k in range(KEYS) if k < p}


def _log_lines(path: Path):
    return path.read_text().split("\n")[:-1] if path.exists() else []


def test_checkpoints_complete_in_order_with_stats_and_notifications(env, tmp_path):
    log = tmp_path / "notifications"
    _configure(env)
    _counting_job(env, 600, 0.002, str(log))
    client = env.execute_async("checkpointed count")
    client.get_job_execution_result().result(RESULT_TIMEOUT_S)
    stats = client.get_checkpoint_stats()
    counts = stats.counts
    assert counts.number_of_completed_checkpoints >= 3
    assert counts.number_of_in_progress_checkpoints == 0
    total = counts.number_of_total_checkpoints
    assert [c.checkpoint_id for c in stats.history] == list(range(total, total - len(stats.history), -1))
    # none fails: the tasks end after their final checkpoint (FLIP-147)
    completed = [c for c in stats.history if c.status is CheckpointStatsStatus.COMPLETED]
    assert completed == list(stats.history) and counts.number_of_failed_checkpoints == 0
    assert stats.latest_completed.checkpoint_id == completed[0].checkpoint_id == total
    for c in completed:
        assert c.number_of_subtasks == c.number_of_acknowledged_subtasks == 3  # source chain + 2 counters
        assert sorted((s.task_name, s.subtask_index) for s in c.subtask_stats) == [
            ("Count -> Sink: Unnamed", 0), ("Count -> Sink: Unnamed", 1),
            ("Source: Collection Source -> Position", 0)]
        assert all(s.sync_checkpoint_duration_ms >= 0 and s.async_checkpoint_duration_ms >= 0
                   for s in c.subtask_stats)
        assert c.end_to_end_duration_ms >= max(s.end_to_end_duration_ms for s in c.subtask_stats)
    summary = stats.summary  # over every completed checkpoint, not only the history's
    assert summary.end_to_end_duration_ms.count == counts.number_of_completed_checkpoints
    assert summary.sync_checkpoint_duration_ms.count == 3 * counts.number_of_completed_checkpoints
    assert summary.end_to_end_duration_ms.maximum >= max(c.end_to_end_duration_ms for c in completed)
    latest = stats.latest_completed
    assert format_checkpoint_line(stats) == (
        f"Checkpoints: {counts.number_of_completed_checkpoints} completed, {counts.number_of_failed_checkpoints} "
        f"failed, 0 in progress; latest #{latest.checkpoint_id}: "
        f"{latest.end_to_end_duration_ms} ms, {latest.state_size_bytes:,} bytes, "
        f"sync {latest.sync_checkpoint_duration_ms:.1f} ms, async {latest.async_checkpoint_duration_ms:.1f} ms, "
        f"alignment {latest.alignment_duration_ms:.1f} ms")
    assert format_checkpoint_line(stats) in format_summary(client).split("\n")
    # the counting subtasks hear of completed checkpoints, and of an aborted one only as aborted
    heard = {}
    for line in _log_lines(log):
        kind, cid = line.split()
        heard.setdefault(kind, set()).add(int(cid))
    failed = {c.checkpoint_id for c in stats.history if c.status is CheckpointStatsStatus.FAILED}
    assert heard["complete"] and heard["complete"] <= set(range(1, total + 1)) - failed
    assert heard.get("aborted", set()) <= failed


@pytest.mark.embedded_only("reads the completed checkpoints in the JobMaster of this process")
def test_every_retained_checkpoint_holds_the_counts_of_the_records_before_its_barrier(env):
    _configure(env, **{"execution.checkpointing.num-retained": 1000}, **RETAIN)
    _counting_job(env, 600, 0.002)
    client = env.execute_async("checkpointed count")
    client.get_job_execution_result().result(RESULT_TIMEOUT_S)
    checkpoints = client._jm.checkpoint_coordinator.completed_checkpoint_store.get_all()
    assert len(checkpoints) >= 3
    assert [c.checkpoint_id for c in checkpoints] == list(range(1, len(checkpoints) + 1))
    # the final checkpoint (FLIP-147): every task acknowledged it with its operators finished
    final = checkpoints.pop().metadata.operator_states.values()
    assert all(op.fully_finished and not op.subtask_states for op in final)
    positions = []
    for c in checkpoints:
        ops = {op.name: op for op in c.metadata.operator_states.values()}
        assert set(ops) == {"Source: Collection Source", "Position", "Count", "Sink: Unnamed"}
        assert not any(op.fully_finished for op in ops.values())
        (position,) = ops["Position"].subtask_states[0].read().operator_state["position"][1]
        counts = {}
        for subtask, handle in ops["Count"].subtask_states.items():
            state = handle.read()
            assert state.checkpoint_id == c.checkpoint_id
            for per_state in state.keyed_state[0].key_groups.values():
                for key, _namespace, value in per_state.get("count", ()):
                    assert key not in counts, f"key {key} in two subtasks"
                    counts[key] = value
        assert counts == _prefix_counts(position), f"checkpoint {c.checkpoint_id} at position {position}"
        positions.append(position)
    assert positions == sorted(positions) and positions[-1] > 0


class TwoInputCount(KeyedCoProcessFunction):
    def open(self, ctx):
        self.a = ctx.get_state(ValueStateDescriptor("a"))
        self.b = ctx.get_state(ValueStateDescriptor("b"))

    def process_element1(self, value, ctx):
        self.a.update((self.a.value() or 0) + 1)
        return iter(())

    def process_element2(self, value, ctx):
        self.b.update((self.b.value() or 0) + 1)
        return iter(())


def _two_input_checkpoints(env, mode):
    """A fast and a slow source into one keyed two-input counter: the slow source's barrier
    arrives tens of ms after the fast one's. Returns [(position a, position b, counts a, counts b)]."""
    _configure(env, interval_ms=60, mode=mode, **{"execution.checkpointing.num-retained": 1000}, **RETAIN)
    fast = env.from_collection(list(range(3000))).map(Position(0.0002)).name("FastPosition")
    slow = env.from_collection(list(range(300))).map(Position(0.004)).name("SlowPosition")
    (fast.connect(slow).key_by(lambda i: i % KEYS, lambda i: i % KEYS).process(TwoInputCount()).name("Count")
     .add_sink(lambda v: None))
    client = env.execute_async("two inputs")
    client.get_job_execution_result().result(RESULT_TIMEOUT_S)
    out = []
    for c in client._jm.checkpoint_coordinator.completed_checkpoint_store.get_all():
        ops = {op.name: op for op in c.metadata.operator_states.values()}
        if ops["Count"].fully_finished:  # the final checkpoint: no state left
            continue
        # a source that finished (FLIP-147) passed all its records: fully finished, no state
        pos = {name: (total if ops[name].fully_finished
                      else ops[name].subtask_states[0].read().operator_state["position"][1][0])
               for name, total in (("FastPosition", 3000), ("SlowPosition", 300))}
        counts = {"a": {}, "b": {}}
        for handle in ops["Count"].subtask_states.values():
            for per_state in handle.read().keyed_state[0].key_groups.values():
                for name in ("a", "b"):
                    for key, _ns, value in per_state.get(name, ()):
                        counts[name][key] = value
        out.append((pos["FastPosition"], pos["SlowPosition"], counts["a"], counts["b"]))
    return client, out


@pytest.mark.embedded_only("reads the completed checkpoints in the JobMaster of this process")
def test_aligned_checkpoint_excludes_what_the_early_channel_sent_after_its_barrier(env):
    client, checkpoints = _two_input_checkpoints(env, CheckpointingMode.EXACTLY_ONCE)
    assert len(checkpoints) >= 3
    for fast_position, slow_position, a, b in checkpoints:
        assert a == _prefix_counts(fast_position)
        assert b == _prefix_counts(slow_position)
    # the fast channel waited for the slow one's barrier
    assert max(c.alignment_duration_ms for c in client.get_checkpoint_stats().history) > 0


@pytest.mark.embedded_only("reads the completed checkpoints in the JobMaster of this process")
def test_at_least_once_does_not_block_the_early_channel(env):
    _, checkpoints = _two_input_checkpoints(env, CheckpointingMode.AT_LEAST_ONCE)
    assert len(checkpoints) >= 3
    ahead = 0
    for fast_position, slow_position, a, b in checkpoints:
        for position, counts in ((fast_position, a), (slow_position, b)):
            assert all(counts.get(k, 0) >= n for k, n in _prefix_counts(position).items())
        ahead += sum(a.values()) > fast_position
    # records the fast input sent after its barrier were counted before the snapshot
    assert ahead >= 1


class LoggedPosition(Position):
    """A Position that logs ``<name> <checkpoint id> <position>`` at every snapshot."""

    def __init__(self, delay_s, log, name):
        super().__init__(delay_s)
        self.position_log, self.name = log, name

    def snapshot_state(self, context):
        super().snapshot_state(context)
        with open(self.position_log, "a") as f:
            f.write(f"{self.name} {context.get_checkpoint_id()} {self.n}\n")


class LoggedTwoInputCount(KeyedCoProcessFunction, CheckpointedFunction):
    """Counts per input and key, and logs the counts it holds at every snapshot (what the
    snapshot of its keyed state holds, written from the task's process in both modes)."""

    def __init__(self, log):
        self.log = log

    def initialize_state(self, context):
        self.counts = {"a": {}, "b": {}}

    def snapshot_state(self, context):
        with open(self.log, "a") as f:
            f.write(f"counts {context.get_checkpoint_id()} {self.counts!r}\n")

    def _count(self, name, value):
        c = self.counts[name]
        c[value % KEYS] = c.get(value % KEYS, 0) + 1
        return iter(())

    def process_element1(self, value, ctx):
        return self._count("a", value)

    def process_element2(self, value, ctx):
        return self._count("b", value)


@pytest.mark.parametrize("mode", [CheckpointingMode.EXACTLY_ONCE, CheckpointingMode.AT_LEAST_ONCE])
def test_alignment_across_processes(env, tmp_path, mode):
    """The two-input job of the tests above, checked through what the functions see at their
    snapshots, so that the cluster's remote channels are aligned too."""
    log = str(tmp_path / "snapshots")
    _configure(env, interval_ms=60, mode=mode)
    fast = env.from_collection(list(range(3000))).map(LoggedPosition(0.0002, log, "a")).name("FastPosition")
    slow = env.from_collection(list(range(300))).map(LoggedPosition(0.004, log, "b")).name("SlowPosition")
    (fast.connect(slow).key_by(lambda i: i % KEYS, lambda i: i % KEYS).process(LoggedTwoInputCount(log))
     .name("Count").add_sink(lambda v: None))
    client = env.execute_async("two inputs")
    client.get_job_execution_result().result(RESULT_TIMEOUT_S)
    completed = [c.checkpoint_id for c in client.get_checkpoint_stats().history
                 if c.status is CheckpointStatsStatus.COMPLETED]
    assert len(completed) >= 3
    positions, counts = {}, {}
    for line in _log_lines(Path(log)):
        kind, cid, rest = line.split(" ", 2)
        if kind == "counts":
            counts[int(cid)] = eval(rest)  # noqa: S307 - our own repr of two dicts of ints
        else:
            positions[(kind, int(cid))] = int(rest)
    ahead = 0
    totals = {"a": 3000, "b": 300}
    for cid in completed:
        for name in ("a", "b"):
            # a source task that finished is not in later checkpoints (FLIP-147): it passed all
            positions.setdefault((name, cid), totals[name])
            expected = _prefix_counts(positions[(name, cid)])
            if mode is CheckpointingMode.EXACTLY_ONCE:
                assert counts[cid][name] == expected, f"checkpoint {cid}, input {name}"
            else:  # every record before the barrier is in, maybe some after it
                assert all(counts[cid][name].get(k, 0) >= n for k, n in expected.items())
        ahead += sum(counts[cid]["a"].values()) > positions[("a", cid)]
    if mode is CheckpointingMode.AT_LEAST_ONCE:  # the fast input was not held back
        assert ahead >= 1
    else:
        assert ahead == 0


def _slow_downstream_job(env, log, position_log=""):
    (env.from_collection(list(range(200))).map(Position(0.001, position_log)).name("Position")
     .key_by(lambda i: i % KEYS).map(Position(0.01)).name("Slow")
     .key_by(lambda i: i % KEYS).process(Count(log)).name("Count")
     .add_sink(lambda v: None))


def test_a_checkpoint_that_times_out_is_aborted_and_operators_are_told(env, tmp_path):
    log = tmp_path / "notifications"
    # without FLIP-147's final checkpoint: the job could not end on a box too loaded for any
    # checkpoint to complete within 10 ms (its tasks would wait for one that never completes)
    _configure(env, interval_ms=100, **{"execution.checkpointing.timeout": "10 ms",
                                        "execution.checkpointing.tolerable-failed-checkpoints": 1000,
                                        "execution.checkpointing.checkpoints-after-tasks-finish": "false"})
    _slow_downstream_job(env, str(log))
    client = env.execute_async("timeouts")
    client.get_job_execution_result().result(RESULT_TIMEOUT_S)
    stats = client.get_checkpoint_stats()
    assert stats.counts.number_of_failed_checkpoints >= 1
    failed = [c for c in stats.history if c.status is CheckpointStatsStatus.FAILED]
    expired = [c for c in failed if c.failure_message.startswith("Checkpoint expired before completing.")]
    # none fails otherwise (once a task finished, triggers are skipped, not failed)
    assert expired and [c.failure_message for c in failed if c not in expired] == []
    aborted = {int(line.split()[1]) for line in _log_lines(log) if line.startswith("aborted ")}
    assert aborted and aborted <= {c.checkpoint_id for c in failed} | set(
        range(1, stats.counts.number_of_total_checkpoints + 1))


def test_failed_checkpoints_beyond_the_tolerable_number_fail_the_job(env, tmp_path):
    _configure(env, interval_ms=100, **{"execution.checkpointing.timeout": "10 ms"})
    _slow_downstream_job(env, "")
    client = env.execute_async("no tolerance")
    with pytest.raises(Exception) as info:
        client.get_job_execution_result().result(RESULT_TIMEOUT_S)
    text = f"{info.value} {info.value.__cause__}"
    assert "Exceeded checkpoint tolerable failure threshold." in text
    assert client.get_checkpoint_stats().counts.number_of_failed_checkpoints == 1


@pytest.mark.parametrize("min_pause_ms", [0, 150])
def test_one_checkpoint_at_a_time_and_the_minimum_pause_between_them(env, min_pause_ms):
    _configure(env, interval_ms=10, **{"execution.checkpointing.min-pause": f"{min_pause_ms} ms",
                                       "execution.checkpointing.num-retained": 1000})
    _counting_job(env, 600, 0.002)
    client = env.execute_async("pauses")
    client.get_job_execution_result().result(RESULT_TIMEOUT_S)
    history = list(reversed(client.get_checkpoint_stats().history))  # oldest first
    # every one completes, the last ones too: finishing tasks take them (FLIP-147)
    assert all(c.status is CheckpointStatsStatus.COMPLETED for c in history)
    completed = list(history)
    assert len(completed) >= 3
    for earlier, later in zip(completed, completed[1:]):
        # ms clocks: trigger and completion times are rounded down to the ms (2 ms of slack)
        assert later.trigger_timestamp + 2 >= earlier.trigger_timestamp + earlier.end_to_end_duration_ms + min_pause_ms


class FailingSnapshot(Position):
    def snapshot_state(self, context):
        raise ValueError("cannot snapshot")


def test_a_declined_checkpoint_counts_as_a_failure(env):
    _configure(env, interval_ms=50)
    (env.from_collection(list(range(300))).map(FailingSnapshot(0.002)).name("Declines")
     .add_sink(lambda v: None))
    client = env.execute_async("declines")
    with pytest.raises(Exception) as info:
        client.get_job_execution_result().result(RESULT_TIMEOUT_S)
    assert "Exceeded checkpoint tolerable failure threshold." in f"{info.value} {info.value.__cause__}"
    failed = client.get_checkpoint_stats().latest_failed
    assert failed.checkpoint_id == 1
    assert failed.failure_message.startswith("Checkpoint was declined. Source: Collection Source -> Declines -> Sink: Unnamed (1/1): "
                                             "ValueError: cannot snapshot")


class FailAfterSnapshot(Position):
    """Fails on the first record after the first snapshot it takes with records already passed
    on, and writes that checkpoint's id to ``log``. Those records are in front of the barrier
    downstream (a slow consumer needs 200 ms per buffer of them), so the checkpoint is still
    pending when the failure comes; a snapshot before the first record (the barrier then has
    nothing ahead and may complete at once) does not arm it."""

    def snapshot_state(self, context):
        super().snapshot_state(context)
        if self.n > 0 and not getattr(self, "fail", False):
            self.fail = True
            with open(self.log, "w") as f:
                f.write(str(context.get_checkpoint_id()))

    def map(self, value):
        if getattr(self, "fail", False):
            raise RuntimeError("failing while its checkpoint is pending")
        return super().map(value)


def test_a_task_failure_aborts_the_pending_checkpoint(env, tmp_path):
    # no restart: with checkpointing the default (exponential-delay) would restart the job forever
    _configure(env, interval_ms=50, **{"restart-strategy.type": "none"})
    armed = tmp_path / "armed"
    (env.from_collection(list(range(2000))).map(FailAfterSnapshot(0.001, str(armed))).name("Fail")
     .key_by(lambda i: i % KEYS).map(Position(0.02)).name("Slow")
     .add_sink(lambda v: None))
    client = env.execute_async("fails")
    with pytest.raises(Exception, match="failing while its checkpoint is pending"):
        client.get_job_execution_result().result(RESULT_TIMEOUT_S)
    pending_at_failure = int(armed.read_text())
    stats = client.get_checkpoint_stats()
    # the earlier ones (taken before the first record) completed; the armed one was aborted
    assert stats.counts.number_of_completed_checkpoints == pending_at_failure - 1
    assert stats.latest_failed.checkpoint_id == pending_at_failure
    assert stats.latest_failed.failure_message.startswith("Task has failed.")


def test_without_checkpointing_nothing_is_snapshotted(env, tmp_path):
    log, positions = tmp_path / "notifications", tmp_path / "snapshots"
    env.get_configuration().set_integer("rill.source.batch-size", 10)
    _counting_job(env, 300, 0.001, str(log), str(positions))
    client = env.execute_async("no checkpoints")
    client.get_job_execution_result().result(RESULT_TIMEOUT_S)
    assert client.get_checkpoint_stats() is None
    assert not positions.exists() and not log.exists()


async def test_the_async_client_gives_the_checkpoint_stats(env):
    _configure(env)
    _counting_job(env, 300, 0.002)
    client = await AsyncJobClient.execute(env, "async stats")
    await client.get_job_execution_result()
    stats = await client.get_checkpoint_stats()
    assert stats == client.job_client.get_checkpoint_stats()
    assert stats.counts.number_of_completed_checkpoints >= 1


def test_checkpoints_in_a_directory_keep_the_retained_ones_and_read_back(env, tmp_path):
    """With ``execution.checkpointing.dir`` the tasks write Parquet files in their own
    processes and the JobMaster finalizes ``chk-<n>``; the newest ``num-retained`` stay, each
    read back from its directory with the counts of the records before its barrier."""
    directory = tmp_path / "checkpoints"
    _configure(env, **{"execution.checkpointing.dir": str(directory), "execution.checkpointing.num-retained": 2},
               **RETAIN)
    _counting_job(env, 600, 0.002)
    client = env.execute_async("checkpoints in files")
    client.get_job_execution_result().result(RESULT_TIMEOUT_S)
    stats = client.get_checkpoint_stats()
    completed = [c.checkpoint_id for c in stats.history if c.status is CheckpointStatsStatus.COMPLETED]
    assert len(completed) >= 3
    job_dir = directory / client.get_job_id()
    # the two newest completed ones stay (the job finished, RETAIN_ON_CANCELLATION), nothing else
    assert sorted(p.name for p in job_dir.iterdir() if p.name.startswith("chk-")) == sorted(
        f"chk-{n}" for n in completed[:2])
    assert stats.latest_completed.external_path.rstrip("/").endswith(f"chk-{completed[0]}")
    assert stats.latest_completed.state_size_bytes > 0
    for n in completed[:2]:
        metadata = create_checkpoint_storage(str(directory), client.get_job_id()).resolve_checkpoint(
            str(job_dir / f"chk-{n}"))
        assert metadata.checkpoint_id == n
        ops = {op.name: op for op in metadata.operator_states.values()}
        if n == completed[0]:  # the final checkpoint (FLIP-147): every operator finished, no state
            assert all(op.fully_finished and not op.subtask_states for op in ops.values())
            continue
        if ops["Position"].fully_finished:
            # taken after the source chain had finished (FLIP-147; a loaded machine can take more
            # than one): it recorded no position, and every record was before its barrier
            assert not ops["Position"].subtask_states
            position = 600
            if len(ops["Count"].subtask_states) < ops["Count"].parallelism:
                continue  # a Count subtask had finished too: its keys are in no file
        else:
            (position,) = ops["Position"].subtask_states[0].read().operator_state["position"][1]
        counts = {}
        for handle in ops["Count"].subtask_states.values():
            for per_state in handle.read().keyed_state[0].key_groups.values():
                counts.update((key, value) for key, _ns, value in per_state.get("count", ()))
        assert counts == _prefix_counts(position), f"checkpoint {n} at position {position}"


class _Slow(MapFunction):
    """``(word, 1)`` per word, slowly (load, not synchronization), so checkpoints fall mid-stream."""

    def map(self, word):
        time.sleep(0.002)
        return word, 1


def test_a_reduce_keeps_its_state_in_the_columns_of_the_streams_declared_type(env, tmp_path):
    """``KeyedStream.reduce`` keeps its state with the stream's declared type, as PyFlink's
    reduce state does: the checkpoint's value column is ``struct<f0: string, f1: bigint>``,
    the key column ``string`` (``key_by(..., key_type=...)``), and the entries read back as the
    tuples the reduce stored, equal to the counts of the words before the barrier."""
    import pyarrow.parquet as pq  # noqa: PLC0415 - this test alone reads the files

    from rill.common.typeinfo import Types  # noqa: PLC0415
    directory = tmp_path / "checkpoints"
    _configure(env, **{"execution.checkpointing.dir": str(directory), "execution.checkpointing.num-retained": 100},
               **RETAIN)
    words = [f"w{i % 7}" for i in range(400)]
    (env.from_collection(words).map(_Slow(), output_type=Types.TUPLE([Types.STRING(), Types.LONG()]))
     .key_by(lambda wc: wc[0], key_type=Types.STRING()).reduce(lambda a, b: (a[0], a[1] + b[1])).name("Counts")
     .add_sink(lambda v: None))
    client = env.execute_async("typed reduce state")
    client.get_job_execution_result().result(RESULT_TIMEOUT_S)
    job_dir = directory / client.get_job_id()
    checked = 0
    for chk in sorted(job_dir.glob("chk-*")):
        metadata = create_checkpoint_storage(str(directory), client.get_job_id()).resolve_checkpoint(str(chk))
        (counts_op,) = [op for op in metadata.operator_states.values() if op.name == "Counts"]
        if not counts_op.subtask_states:
            continue  # the final checkpoint (FLIP-147): nothing left to keep
        files = [f for f in chk.rglob("*.parquet") if "_op_state" in pq.read_table(f, columns=["state_name"])
                 .column(0).to_pylist()[:1]]
        assert files, f"no file of the reduce's state in {chk.name}"
        for f in files:
            schema = pq.read_schema(f)
            assert schema.field("value").type == pa_struct_string_long()
            assert str(schema.field("key").type) == "string"
        entries = {}
        for handle in counts_op.subtask_states.values():
            for per_state in handle.read().keyed_state[0].key_groups.values():
                entries.update((key, value) for key, _ns, value in per_state.get("_op_state", ()))
        assert entries and all(type(v) is tuple and v == (k, v[1]) for k, v in entries.items())
        checked += 1
    assert checked >= 1


def pa_struct_string_long():
    import pyarrow as pa  # noqa: PLC0415
    return pa.struct([("f0", pa.string()), ("f1", pa.int64())])
