"""The apache-flink 2.3.0 wheel the PyFlink-compatibility tests read (examples, ``__all__``
lists): fetched once with ``pip download --no-deps`` into ``$RILL_PYFLINK_WHEEL_DIR`` or
``~/.cache/rill-tests/apache-flink-2.3.0``; nothing of it is imported."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import zipfile

import pytest

WHEEL_VERSION = "2.3.0"


def _wheel_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("RILL_PYFLINK_WHEEL_DIR",
                                       pathlib.Path.home() / ".cache" / "rill-tests" / f"apache-flink-{WHEEL_VERSION}"))


def pyflink_wheel() -> zipfile.ZipFile:
    """The opened wheel; skips the calling test when it cannot be fetched from PyPI."""
    cache = _wheel_dir()
    wheels = sorted(cache.glob(f"apache_flink-{WHEEL_VERSION}-*.whl"))
    if not wheels:
        cache.mkdir(parents=True, exist_ok=True)
        fetched = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                                  f"apache-flink=={WHEEL_VERSION}", "-d", str(cache)],
                                 capture_output=True, text=True, timeout=300)
        wheels = sorted(cache.glob(f"apache_flink-{WHEEL_VERSION}-*.whl"))
        if not wheels:
            pytest.skip(f"cannot fetch apache-flink {WHEEL_VERSION} from PyPI: {fetched.stderr.strip()[-500:]}")
    return zipfile.ZipFile(wheels[0])
