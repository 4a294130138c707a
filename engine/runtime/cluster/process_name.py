"""The name a cluster's task process shows in ``/proc/PID/comm`` (Linux ``prctl(PR_SET_NAME)``),
telling a process waiting in its TaskExecutor's pool (never used by a job) from one that runs
or ran a task: ``ps``, ``top`` and the tests' leftover-process checks read it. The command line,
by which ``rill cluster stop`` recognises the cluster's processes
(:mod:`~rill.runtime.cluster.processes`), does not change.
"""

from __future__ import annotations

import ctypes
import sys

__all__ = ["POOLED", "TASK", "set_process_name", "process_name"]

#: a task process in its TaskExecutor's pool: started and ready, no job's code ever loaded
POOLED = "rill-pooled"
#: a task process given to a job (it never goes back to the pool)
TASK = "rill-task"

_PR_SET_NAME = 15


def set_process_name(name: str) -> bool:
    """Set this process's name (at most 15 bytes are kept by Linux); returns whether it was
    set (``False`` off Linux or without a C library, where nothing changes)."""
    if not sys.platform.startswith("linux"):
        return False
    # the process's own symbol table already holds libc's prctl: no ``find_library``, which
    # runs ``ldconfig -p`` in a child process each time (two per task process)
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(_PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0) == 0


def process_name(pid: int) -> str:
    """The name of process ``pid`` (``""`` when it is gone or off Linux)."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""
