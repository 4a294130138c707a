"""Identifying a cluster's processes from its record: process group, start time and command
line must all match, and only matching processes are ever signalled."""

import dataclasses
import subprocess
import sys
import time

from rill.runtime.cluster import processes


def test_members_are_the_processes_matching_group_start_time_and_command_line():
    leader = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        expected = f"{sys.executable}\0-c\0import time; time.sleep(60)\0"
        deadline = time.monotonic() + 10
        while (identity := processes.identify(leader.pid)).cmdline != expected:  # forked, not yet exec'ed
            assert time.monotonic() < deadline, identity
            time.sleep(0.01)
        assert identity.process_group == leader.pid
        assert processes.members(identity) == [leader.pid]
        assert processes.members(dataclasses.replace(identity, cmdline="python3\0other\0")) == []
        assert processes.members(dataclasses.replace(identity, start_ticks=identity.start_ticks + 1)) == []
        assert processes.terminate(dataclasses.replace(identity, cmdline="python3\0other\0")) == []
        assert leader.poll() is None  # a process that does not match is never signalled
        assert processes.terminate(identity, grace_s=5.0) == [leader.pid]
        assert leader.wait(5) == -15
        assert processes.identify(leader.pid) is None
    finally:
        leader.kill()
        leader.wait()
