"""Finding the processes of a cluster this machine started, from what ``rill cluster start``
recorded, without ever mistaking another process for one of them (Linux ``/proc``).

Thespian's admin makes itself a session and process group leader (``setsid``) and every actor
process is forked from it, so a cluster's processes are the members of one process group.
They also share their command line (forked, never exec'ed) and started no earlier than the
admin. ``rill cluster stop`` and ``status`` count a process as the cluster's only when all
three match the record -- a pid reused by an unrelated program fails at least the start time
and command line -- and never signal anything else.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

__all__ = ["ProcessIdentity", "identify", "members", "alive", "terminate"]


@dataclass(frozen=True)
class ProcessIdentity:
    """What identifies a cluster's processes.

    :ivar process_group: the admin's process group (= its session).
    :ivar start_ticks: the admin's start time, in clock ticks since boot (``/proc/PID/stat``
        field 22).
    :ivar cmdline: the admin's command line, NUL-separated as in ``/proc/PID/cmdline``.
    """

    process_group: int
    start_ticks: int
    cmdline: str


def _stat(pid: int) -> Optional[List[str]]:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()  # fields from 3 (state) on: the name may hold spaces


def _cmdline(pid: int) -> Optional[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return None


def identify(pid: int) -> Optional[ProcessIdentity]:
    """The identity of the running process ``pid`` (``None`` if it is gone)."""
    stat, cmdline = _stat(pid), _cmdline(pid)
    if stat is None or cmdline is None:
        return None
    return ProcessIdentity(int(stat[2]), int(stat[19]), cmdline)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z"


def members(identity: ProcessIdentity) -> List[int]:
    """The live processes that belong to the cluster ``identity`` describes: same process
    group, same command line, started no earlier than its admin."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        stat = _stat(int(d.name))
        if stat is None or stat[0] == "Z" or int(stat[2]) != identity.process_group:
            continue
        if int(stat[19]) >= identity.start_ticks and _cmdline(int(d.name)) == identity.cmdline:
            out.append(int(d.name))
    return sorted(out)


def terminate(identity: ProcessIdentity, grace_s: float = 5.0) -> List[int]:
    """SIGTERM, then after ``grace_s`` SIGKILL, every process of the cluster; returns the pids
    signalled. Each pid is identified again right before each signal."""
    signalled: List[int] = []
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 2.0)):
        pids = members(identity)
        for pid in pids:
            try:
                os.kill(pid, sig)
                signalled.append(pid)
            except OSError:
                pass
        deadline = time.monotonic() + wait_s
        while any(alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
    return sorted(set(signalled))
