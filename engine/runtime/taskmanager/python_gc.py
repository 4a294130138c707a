"""CPython's garbage collector in a task process (what JVM GC options are to a Flink TaskManager).

Records are tuples, which the collector tracks: a task process allocates millions of them, and
with CPython's default thresholds (700, 10, 10) a generation-0 collection runs every 700 net
allocations and walks whatever is young at that moment -- a buffer's 1,024 records among them.
Measured on the cluster WordCount at p=2 (540,000 lines; ``bench/README.md``, "Cluster
WordCount"): each source task process spent ≈0.47 s of its ≈1.25 s of CPU in ≈1,700
collections that freed nearly nothing (records rarely form reference cycles); with
``10000,10,10`` the job used ≈16 % less CPU in all and its net runtime fell by ≈15 %.

So a task process on a cluster sets :data:`ConfigOptions.TASK_GC_THRESHOLDS
<rill.common.configuration.ConfigOptions>` when its task is deployed. Reference cycles are
still collected, only in larger batches. The embedded mode runs in the caller's process and
never changes its collector.
"""

from __future__ import annotations

import gc
from typing import Tuple

__all__ = ["parse_gc_thresholds", "apply_gc_thresholds", "CPYTHON_DEFAULT_GC_THRESHOLDS"]

#: CPython's own thresholds, what ``"default"`` stands for.
CPYTHON_DEFAULT_GC_THRESHOLDS = (700, 10, 10)
#: ``gc.set_threshold`` takes C ints.
_MAX_THRESHOLD = 2**31 - 1


def parse_gc_thresholds(value, key: str = "taskmanager.python.gc-thresholds") -> Tuple[int, ...]:
    """``"10000,10,10"`` -> ``(10000, 10, 10)``; ``"default"`` -> CPython's ``(700, 10, 10)``.

    :param value: a string of one to three comma-separated ints (as ``gc.set_threshold``
        takes them: generation 0, then optionally 1 and 2), an int, a tuple or list of ints,
        or ``"default"``.
    :param key: the configuration key, for the error message.
    :raises ValueError: for anything else, or a threshold outside ``[0, 2**31 - 1]`` (0
        disables collection and is allowed, as in ``gc.set_threshold``, which refuses larger
        values).
    """
    if isinstance(value, str):
        text = value.strip()
        if text.lower() == "default":
            return CPYTHON_DEFAULT_GC_THRESHOLDS
        parts = [p.strip() for p in text.split(",")]
    elif isinstance(value, (tuple, list)):
        parts = list(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        parts = [value]
    else:
        parts = []
    try:
        thresholds = tuple(_threshold(p) for p in parts)
    except (TypeError, ValueError):
        thresholds = ()
    if not 1 <= len(thresholds) <= 3 or any(not 0 <= t <= _MAX_THRESHOLD for t in thresholds):
        raise ValueError(
            f"{key} must be 'default' or one to three comma-separated ints in [0, {_MAX_THRESHOLD}] "
            f"(generation 0, 1, 2 thresholds, as gc.set_threshold takes them), got {value!r}"
        )
    return thresholds


def _threshold(part) -> int:
    if isinstance(part, bool) or not isinstance(part, (int, str)):
        raise TypeError(part)  # 1.5 must not become 1
    return int(part)


def apply_gc_thresholds(thresholds: Tuple[int, ...]) -> Tuple[int, int, int]:
    """Set the collector's thresholds (as :func:`parse_gc_thresholds` returns them); returns
    the previous ones.

    :raises OverflowError, ValueError: for values :func:`parse_gc_thresholds` refuses.
    """
    previous = gc.get_threshold()
    gc.set_threshold(*thresholds)
    return previous
