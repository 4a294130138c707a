"""Where a job's initial state comes from (Flink's ``SavepointRestoreSettings`` of
``org.apache.flink.runtime.jobgraph``, and the keys of Flink 2.x's ``StateRecoveryOptions``).

``rill run --from-savepoint PATH [--allow-non-restored-state]`` sets
``execution.state-recovery.path`` and ``execution.state-recovery.ignore-unclaimed-state`` in
the job's configuration (as ``flink run -s PATH -n`` does); the JobMaster reads them back with
:meth:`SavepointRestoreSettings.from_configuration` and restores the job from that snapshot
before its first deployment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

from rill.common.configuration import ConfigOption, Configuration
from rill.common.option_parsing import get_bool, get_str

__all__ = ["SavepointRestoreSettings", "StateRecoveryOptions"]


class StateRecoveryOptions:
    """The keys of Flink 2.x's ``StateRecoveryOptions`` (with their Flink 1.x names as
    deprecated keys)."""

    SAVEPOINT_PATH: ClassVar[ConfigOption] = ConfigOption(
        "execution.state-recovery.path", None,
        "Path to a savepoint or retained checkpoint to restore the job from (directory or "
        "metadata file).", ("execution.savepoint.path",))
    SAVEPOINT_IGNORE_UNCLAIMED_STATE: ClassVar[ConfigOption] = ConfigOption(
        "execution.state-recovery.ignore-unclaimed-state", False,
        "Allow to skip savepoint state that cannot be restored: state of an operator that is "
        "not in the job any more.", ("execution.savepoint.ignore-unclaimed-state",))


@dataclass(frozen=True)
class SavepointRestoreSettings:
    """The snapshot a job starts from, if any (Flink's ``SavepointRestoreSettings``).

    :param restore_path: the snapshot's directory or metadata file; ``None``: start empty.
    :param allow_non_restored_state: skip state that maps to no operator of the job instead of
        failing the restore.
    """

    restore_path: Optional[str] = None
    allow_non_restored_state: bool = False

    @classmethod
    def none(cls) -> "SavepointRestoreSettings":
        """No restore: the job starts with empty state."""
        return cls()

    @classmethod
    def for_path(cls, path: str, allow_non_restored_state: bool = False) -> "SavepointRestoreSettings":
        """Restore from ``path``.

        :raises ValueError: if ``path`` is empty.
        """
        if not path or not str(path).strip():
            raise ValueError(f"A savepoint restore needs a path, got {path!r}")
        return cls(str(path), allow_non_restored_state)

    def restore_savepoint(self) -> bool:
        """Whether the job restores from a snapshot."""
        return self.restore_path is not None

    def get_restore_path(self) -> Optional[str]:
        return self.restore_path

    @classmethod
    def from_configuration(cls, conf: Configuration) -> "SavepointRestoreSettings":
        """The settings of ``execution.state-recovery.*`` (or their deprecated keys).

        :raises ValueError: naming the key, for an ignore-unclaimed-state that is not a boolean.
        """
        path = get_str(conf, StateRecoveryOptions.SAVEPOINT_PATH)
        allow = bool(get_bool(conf, StateRecoveryOptions.SAVEPOINT_IGNORE_UNCLAIMED_STATE))
        return cls.none() if path is None else cls.for_path(path, allow)

    def to_configuration(self, conf: Configuration) -> Configuration:
        """Write these settings into ``conf`` (Flink's ``toConfiguration``); returns ``conf``."""
        if self.restore_path is None:
            conf.remove_config(StateRecoveryOptions.SAVEPOINT_PATH.key)
        else:
            conf.set_string(StateRecoveryOptions.SAVEPOINT_PATH.key, self.restore_path)
        conf.set_string(StateRecoveryOptions.SAVEPOINT_IGNORE_UNCLAIMED_STATE.key,
                        "true" if self.allow_non_restored_state else "false")  # as Flink writes booleans
        return conf
