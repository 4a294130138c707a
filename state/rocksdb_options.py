"""The RocksDB backend's settings: Flink's ``PredefinedOptions`` and the ``RocksDBOptions`` keys
(``state.backend.rocksdb.*``) Rill reads, parsed from a plain ``{key: value}`` dict (the state
layer sits below ``rill.common``'s ``Configuration``; the task hands the keys down as strings).

Keys read (Flink's names and defaults, except where noted):

- ``state.backend.rocksdb.localdir``: the parent directories of the tasks' RocksDB
  directories, separated by ``,`` (each backend takes the next, round robin, as Flink);
  default: the system's temp directory (Flink: the TaskManager's ``io.tmp.dirs``).
- ``state.backend.rocksdb.predefined-options``: a :class:`PredefinedOptions` name, default
  ``DEFAULT``.
- ``state.backend.rocksdb.timer-service.factory``: ``HEAP`` or ``ROCKSDB``. Rill keeps timers
  in the task's heap timer service; Flink's default ``ROCKSDB`` (timers in RocksDB) is not
  built, so Rill's default is ``HEAP`` and ``ROCKSDB`` raises ``NotImplementedError``.
- ``state.backend.incremental``: ``true`` raises ``NotImplementedError`` (Rill takes full
  snapshots only).
"""

from __future__ import annotations

import enum
import tempfile
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple

__all__ = ["PredefinedOptions", "RocksDBSettings", "LOCAL_DIRECTORIES", "PREDEFINED_OPTIONS",
           "TIMER_SERVICE_FACTORY", "INCREMENTAL_CHECKPOINTS"]

LOCAL_DIRECTORIES = "state.backend.rocksdb.localdir"
PREDEFINED_OPTIONS = "state.backend.rocksdb.predefined-options"
TIMER_SERVICE_FACTORY = "state.backend.rocksdb.timer-service.factory"
INCREMENTAL_CHECKPOINTS = "state.backend.incremental"



class PredefinedOptions(enum.Enum):
    """Preset RocksDB tunings (Flink's ``org.apache.flink.contrib.streaming.state.PredefinedOptions``).

    - ``DEFAULT``: RocksDB's defaults, with ``use_fsync`` off (as Flink).
    - ``SPINNING_DISK_OPTIMIZED``: level-style compaction with dynamic level sizes, 4 background
      jobs, ``max_open_files -1`` (as Flink).
    - ``SPINNING_DISK_OPTIMIZED_HIGH_MEM``: as above plus 256 MB block cache, 128 KB blocks,
      64 MB write buffers, 4 write buffers (as Flink; needs memory).
    - ``FLASH_SSD_OPTIMIZED``: 4 background jobs, ``max_open_files -1`` (as Flink).
    """

    DEFAULT = "DEFAULT"
    SPINNING_DISK_OPTIMIZED = "SPINNING_DISK_OPTIMIZED"
    SPINNING_DISK_OPTIMIZED_HIGH_MEM = "SPINNING_DISK_OPTIMIZED_HIGH_MEM"
    FLASH_SSD_OPTIMIZED = "FLASH_SSD_OPTIMIZED"


@dataclass(frozen=True)
class RocksDBSettings:
    """The parsed settings of one RocksDB keyed state backend.

    :param local_dirs: parent directories of the per-task RocksDB directories (paths).
    :param predefined_options: the tuning preset.
    """

    local_dirs: Tuple[str, ...]
    predefined_options: PredefinedOptions = PredefinedOptions.DEFAULT

    @staticmethod
    def from_dict(settings: Optional[Mapping[str, Any]]) -> "RocksDBSettings":
        """The settings of ``settings`` (``{key: value}``, values as strings or native types);
        missing keys take their defaults (see the module docstring).

        :raises ValueError: naming the key and value, for an unknown predefined-options or
            timer-service name or a non-boolean ``state.backend.incremental``.
        :raises NotImplementedError: for ``timer-service.factory: ROCKSDB`` or incremental
            checkpoints, naming what is missing.
        """
        settings = settings or {}
        local_dirs = tuple(p.strip() for p in str(settings.get(LOCAL_DIRECTORIES) or "").split(",") if p.strip())
        raw = settings.get(PREDEFINED_OPTIONS, PredefinedOptions.DEFAULT)
        if isinstance(raw, PredefinedOptions):
            predefined = raw
        else:
            try:
                predefined = PredefinedOptions[str(raw).strip().upper()]
            except KeyError:
                raise ValueError(f"Invalid value {raw!r} for '{PREDEFINED_OPTIONS}'; accepted: "
                                 f"{', '.join(p.name for p in PredefinedOptions)}") from None
        timers = str(settings.get(TIMER_SERVICE_FACTORY, "HEAP")).strip().upper()
        if timers == "ROCKSDB":
            raise NotImplementedError(f"'{TIMER_SERVICE_FACTORY}: ROCKSDB': timers in RocksDB are not built "
                                      f"in Rill; timers stay in the heap timer service (use 'HEAP')")
        if timers != "HEAP":
            raise ValueError(f"Invalid value {settings.get(TIMER_SERVICE_FACTORY)!r} for "
                             f"'{TIMER_SERVICE_FACTORY}'; accepted: 'HEAP' ('ROCKSDB' is not built in Rill)")
        incremental = str(settings.get(INCREMENTAL_CHECKPOINTS, "false")).strip().lower()
        if incremental == "true":
            raise NotImplementedError(f"'{INCREMENTAL_CHECKPOINTS}: true': incremental RocksDB checkpoints "
                                      f"are not built in Rill; snapshots are full")
        if incremental != "false":
            raise ValueError(f"Invalid value {settings.get(INCREMENTAL_CHECKPOINTS)!r} for "
                             f"'{INCREMENTAL_CHECKPOINTS}'; expected 'true' or 'false'")
        return RocksDBSettings(local_dirs or (tempfile.gettempdir(),), predefined)

