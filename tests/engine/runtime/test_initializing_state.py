"""A task is INITIALIZING while its state is restored and its operators open, and RUNNING only
after (Flink's ``ExecutionState.INITIALIZING``, ``Task.restoreAndInvoke``), in both modes."""

from __future__ import annotations

import os
import time

from rill.common.functions import MapFunction
from rill.graph.states import ExecutionState

TIMEOUT_S = 60


class OpenWhenReleased(MapFunction):
    """``open`` returns once the file ``release`` exists (at most 60 s)."""

    def __init__(self, release: str):
        self.release = release

    def open(self, runtime_context):
        deadline = time.monotonic() + TIMEOUT_S
        while not os.path.exists(self.release) and time.monotonic() < deadline:
            time.sleep(0.01)

    def map(self, value):
        return value


def state_of(client, name_part: str):
    states = [s for task, s in client.get_execution_states().items() if name_part in task]
    return states[0] if states else None


def test_a_task_is_initializing_until_its_operators_are_open(env, tmp_path):
    release = tmp_path / "release"
    env.from_collection([1, 2, 3]).map(OpenWhenReleased(str(release))).name("Held Open").print()
    client = env.execute_async("initializing")
    seen = []
    deadline = time.monotonic() + TIMEOUT_S
    while state_of(client, "Held Open") is not ExecutionState.INITIALIZING:
        assert time.monotonic() < deadline, f"the held task never showed INITIALIZING: {client.get_execution_states()}"
        time.sleep(0.01)
    seen.append(ExecutionState.INITIALIZING)
    release.touch()
    while not client.is_done():
        assert time.monotonic() < deadline, "the job did not end"
        state = state_of(client, "Held Open")
        if state is not seen[-1]:
            seen.append(state)
        time.sleep(0.005)
    client.wait(TIMEOUT_S)
    final = state_of(client, "Held Open")
    if final is not seen[-1]:
        seen.append(final)
    # RUNNING may pass between two polls of a cluster's reports (100 ms); never before INITIALIZING
    assert seen in ([ExecutionState.INITIALIZING, ExecutionState.RUNNING, ExecutionState.FINISHED],
                    [ExecutionState.INITIALIZING, ExecutionState.FINISHED]), seen
