"""bench/recovery.py's measuring parts: the task state changes read back from the cluster log's
format, the failover phases computed from them, and the restore benchmark restoring every key
(tiny, embedded). Timings are never asserted; the phases are, from fixed inputs."""

import sys
import time
from pathlib import Path

import pytest

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:  # bench/ is a top-level folder of the repository, not installed
    sys.path.insert(0, _ROOT)

from bench.failover_timeline import DirectoryWatch, StateChange, parse_cluster_log, phases  # noqa: E402
from bench.restore_keys import run_restore_benchmark  # noqa: E402

JOB = "96c469bb25350a10317a3cf7be553cf1"


def _line(clock: str, pid: int, task: str, attempt: int, old: str, new: str, job: str = JOB) -> str:
    return (f"2026-11-25 {clock} {pid} INFO rill.runtime.taskmanager.task {task}#{attempt} (eeb7e2d5) "
            f"switched from {old} to {new}. [job {job}]\n")


def _epoch(clock: str) -> float:
    hms, ms = clock.split(",")
    return time.mktime(time.strptime(f"2026-11-25 {hms}", "%Y-%m-%d %H:%M:%S")) + int(ms) / 1000


def test_state_changes_are_read_from_the_cluster_log_of_one_job(tmp_path):
    log = tmp_path / "cluster.log"
    log.write_text(_line("23:26:31,023", 20067, "Map (2/2)", 1, "CREATED", "DEPLOYING")
                   + "2026-11-25 23:26:31,030 20001 INFO rill.cluster.jobmaster something else\n"
                   + _line("23:26:31,040", 20068, "Map (1/2)", 0, "RUNNING", "CANCELING", job="0" * 32)
                   + _line("23:26:30,500", 19999, "Window(x) -> Sink: FileSink (1/2)", 0, "RUNNING", "CANCELING"))
    assert parse_cluster_log(str(log), JOB) == [
        StateChange(_epoch("23:26:30,500"), 19999, "Window(x) -> Sink: FileSink (1/2)", 0, "RUNNING", "CANCELING", JOB),
        StateChange(_epoch("23:26:31,023"), 20067, "Map (2/2)", 1, "CREATED", "DEPLOYING", JOB),
    ]


def test_the_phases_of_a_failover_come_from_the_state_changes_and_the_sink_files(tmp_path):
    def change(t, task, attempt, old, new):
        return StateChange(100.0 + t, 1, task, attempt, old, new, JOB)

    changes = [change(-5, "A", 0, "INITIALIZING", "RUNNING"), change(0.25, "B", 0, "RUNNING", "CANCELING"),
               change(0.5, "B", 0, "CANCELING", "CANCELED"), change(0.75, "A", 0, "RUNNING", "FAILED"),
               change(2.0, "A", 1, "CREATED", "DEPLOYING"), change(2.25, "B", 1, "CREATED", "DEPLOYING"),
               change(2.5, "A", 1, "INITIALIZING", "RUNNING"), change(3.0, "B", 1, "INITIALIZING", "RUNNING")]
    files = DirectoryWatch(str(tmp_path))
    files.first_seen.update({"old-part": 101.5, "new-part": 104.0, "later-part": 105.0})
    p = phases(changes, 100.0, 0, files, flowing_at_s=103.5)
    assert (p.detected_s, p.old_attempt_gone_s, p.redeploying_s, p.all_running_s, p.flowing_s, p.first_record_s,
            p.total_s) == (0.25, 0.75, 2.0, 3.0, 3.5, 4.0, 3.5)
    assert [name for name, _ in p.rows()][-1].startswith("TOTAL")
    assert sum(seconds for _, seconds in p.rows()[:5]) == pytest.approx(3.5)
    with pytest.raises(ValueError, match="missing state changes"):
        phases([c for c in changes if c.attempt == 0], 100.0, 0, files, 103.5)


def test_the_restore_benchmark_restores_every_key_of_its_savepoint(tmp_path):
    from rill.common import Configuration
    from rill.datastream import StreamExecutionEnvironment

    result = run_restore_benchmark(lambda: StreamExecutionEnvironment.get_execution_environment(Configuration()),
                                   3000, 2, str(tmp_path), timeout_s=120)
    assert result.keys == 3000 and result.state_bytes > 3000 * 40  # 96 hex-ish characters per key
    assert result.to_state_restored_s > 0 and result.pyarrow_read_s > 0
