"""A restart restores every task from the latest completed checkpoint (issue 11, Recovery), in
both execution modes: keyed counts continue from the checkpoint exactly.

The source emits N records and then waits; once every record is counted and a checkpoint
taken after that has completed, the test makes the source fail. The restarted attempt resumes
the split after its N restored records (the reader's position and the enumerator are restored)
and reads N more onto the restored counts, so each key ends at exactly twice its count, and the
restarted attempt's first count of a key is one more than the checkpoint's."""

from __future__ import annotations

from _fail_on_signal import TIMEOUT_S, Count, FailOnSignal, Lines, counts_by_attempt, run_failing_once, wait_for
from rill.common import JobStatus

N, KEYS = 400, 8


def test_keyed_counts_continue_from_the_latest_completed_checkpoint(env, tmp_path):
    env.set_parallelism(2)
    client, out = run_failing_once(env, tmp_path, N, KEYS, "restored counts")
    assert client.get_job_status() is JobStatus.FINISHED
    per_key = N // KEYS
    by_attempt = counts_by_attempt(out)
    assert sorted(by_attempt) == [0, 1]
    assert by_attempt[0] == {k: list(range(1, per_key + 1)) for k in range(KEYS)}
    assert by_attempt[1] == {k: list(range(per_key + 1, 2 * per_key + 1)) for k in range(KEYS)}


def test_a_job_resumes_from_a_retained_checkpoint_at_another_parallelism(env, tmp_path):
    """Job 1 (parallelism 2) counts N records and is cancelled after a checkpoint that holds
    every count; job 2 (parallelism 3) starts from that checkpoint's directory
    (``execution.state-recovery.path``) and counts the N records again."""
    markers, out, checkpoints = tmp_path / "markers", tmp_path / "out", tmp_path / "checkpoints"
    markers.mkdir()
    out.mkdir()
    env.enable_checkpointing(100)
    env.get_configuration().set_string("execution.checkpointing.dir", str(checkpoints))
    # a cancelled job keeps its checkpoints only with RETAIN_ON_CANCELLATION, as in Flink
    env.get_configuration().set_string("execution.checkpointing.externalized-checkpoint-retention",
                                       "RETAIN_ON_CANCELLATION")
    env.set_parallelism(2)
    (env.from_source(FailOnSignal(str(markers), N), None, "waits").uid("source-1").set_parallelism(1)
        .key_by(lambda x: x % KEYS).process(Count()).uid("count").add_sink(Lines(str(out))))
    first = env.execute_async("first run")

    def completed():
        stats = first.get_checkpoint_stats()
        return 0 if stats is None else stats.counts.number_of_completed_checkpoints

    wait_for(lambda: sum(len(c) for c in counts_by_attempt(out).get(0, {}).values()) == N, "every record counted")
    seen = completed()
    wait_for(lambda: completed() >= seen + 2, "a checkpoint taken after every record was counted")
    first.cancel()
    assert first.wait(TIMEOUT_S) is JobStatus.CANCELED
    job_dir = checkpoints / first.get_job_id()
    latest = max((d for d in job_dir.iterdir() if (d / "_metadata").exists()), key=lambda d: int(d.name[4:]))

    from rill.datastream import StreamExecutionEnvironment
    for f in out.iterdir():
        f.rename(tmp_path / f"first-{f.name}")

    def second_job(allow: bool):
        env2 = StreamExecutionEnvironment.get_execution_environment()
        env2.set_parallelism(3)
        conf = env2.get_configuration()
        conf.set_string("execution.state-recovery.path", str(latest))
        conf.set_string("execution.state-recovery.ignore-unclaimed-state", "true" if allow else "false")
        (env2.from_collection(list(range(N))).uid("source-2")
            .key_by(lambda x: x % KEYS).process(Count()).uid("count").add_sink(Lines(str(out))))
        return env2.execute_async("resumed at parallelism 3")

    refused = second_job(allow=False)
    try:
        refused.get_job_execution_result().result(timeout=TIMEOUT_S)
        raise AssertionError("the state of source-1 was not refused")
    except Exception as e:  # noqa: BLE001 - JobExecutionException, also from a cluster
        assert "Cannot map checkpoint/savepoint state for operator" in str(e) and "uid 'source-1'" in str(e), e
    resumed = second_job(allow=True)
    resumed.get_job_execution_result().result(timeout=TIMEOUT_S)
    per_key = N // KEYS
    assert counts_by_attempt(out) == {0: {k: list(range(per_key + 1, 2 * per_key + 1)) for k in range(KEYS)}}
