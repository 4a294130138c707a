"""The examples' output directories: a run replaces the part files of an earlier run.

FileSink names every part file uniquely (``<prefix>-<run uuid>-<subtask>-<n><suffix>``, as
Flink's), so a second run into the same directory adds its files next to the first run's and
whoever reads the directory counts every row twice. The examples are runs that produce one
result, so before they build their job they delete the part files an earlier run of the same
sink left (and only those: other files in the directory are the user's and stay).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["clear_earlier_parts"]


def clear_earlier_parts(directory: str, prefix: str, suffix: str) -> int:
    """Delete ``<prefix>-*<suffix>`` part files and ``.<prefix>-*.inprogress.*`` files directly
    under ``directory`` (a missing directory has none); returns how many were deleted and says
    so on stderr.

    :raises NotADirectoryError: when ``directory`` exists and is not a directory.
    """
    path = Path(directory)
    if not path.exists():
        return 0
    if not path.is_dir():
        raise NotADirectoryError(f"output directory '{directory}' exists and is not a directory")
    parts = [p for p in path.iterdir() if p.is_file() and (
        (p.name.startswith(f"{prefix}-") and p.name.endswith(suffix))
        or (p.name.startswith(f".{prefix}-") and ".inprogress" in p.name))]
    for p in parts:
        os.remove(p)
    if parts:
        print(f"rill: removed {len(parts)} part file(s) of an earlier run from {directory}", file=sys.stderr)
    return len(parts)
