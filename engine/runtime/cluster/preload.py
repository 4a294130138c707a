"""What a cluster process loads before it forks the processes that restore and write state.

pyarrow imports pandas (when it is installed) lazily, on its first conversion of Python
objects (``pyarrow.array``) and its first ``pyarrow.parquet.read_table``: ~0.7 s of CPU on a
quiet machine, 1.7-7.8 s measured at load 14-28. A new task process paid it in the middle of
its restore (and a new JobMaster in reading its sources' checkpointed enumerators), all of them
at once on a restart: the 17 task processes of the main job at p=2 on 2 cores held the restarted
window task 7-18 s after every task was RUNNING, the cluster-only gap of issue 11 (the embedded
mode pays it once per process). Paid once instead, in the supervisor when the cluster starts:
the ResourceManager, the TaskExecutors and their task processes, the Dispatcher and its
JobMasters are all forked from it and inherit the loaded modules (a Dispatcher restarted after a
crash does not pay it again: restarts stay fast). The TaskExecutor and the Dispatcher call it
too, a no-op there unless they run in an actor system of their own (``rill cluster join``).
"""

from __future__ import annotations

import pyarrow

__all__ = ["preload_pyarrow_conversions"]


def preload_pyarrow_conversions() -> None:
    """Make pyarrow load what its conversions import lazily (pandas, if installed), now."""
    pyarrow.array([])
