"""The cluster log carries job, task and subtask context: every task state change of a cluster
job is one line in Flink's words ("Map (1/2)#0 (<attempt>) switched from RUNNING to FINISHED.")
with the job id, written by the task process itself."""

from __future__ import annotations

import re


def test_task_state_changes_are_logged_with_job_task_and_subtask(cluster):
    env = cluster.environment(2)
    env.from_collection(list(range(100))).name("Numbers").map(lambda x: x).name("Identity") \
        .disable_chaining().add_sink(lambda x: None).name("Drop")
    job_id = env.execute("log context").get_job_id()
    lines = [line for line in cluster.log_file.read_text().splitlines() if f"[job {job_id}]" in line]
    changes = {}
    for line in lines:
        m = re.search(r"rill\.runtime\.taskmanager\.task (.+ \(\d/\d\))#0 \(([0-9a-f]{32})\) "
                      r"switched from (\w+) to (\w+)\. \[job [0-9a-f]{32}\]$", line)
        assert m, line
        changes.setdefault(m.group(1), []).append((m.group(3), m.group(4)))
    expected = [("CREATED", "DEPLOYING"), ("DEPLOYING", "INITIALIZING"), ("INITIALIZING", "RUNNING"),
                ("RUNNING", "FINISHED")]
    assert changes == {name: expected for name in
                       ["Source: Numbers (1/1)", "Identity (1/2)", "Identity (2/2)", "Sink: Drop (1/2)",
                        "Sink: Drop (2/2)"]}, changes
