"""Checkpointing settings: Flink 2.x's keys and defaults, and ``CheckpointingOptions``, the
frozen record of their parsed values that the JobMaster builds once per job.

Keys, defaults and deprecated keys follow Flink 2.x's ``CheckpointingOptions``; the enums are
PyFlink 2.x's ``pyflink.datastream.CheckpointingMode`` and ``ExternalizedCheckpointRetention``.
The job's ``Configuration`` is the one source of truth: ``CheckpointConfig`` (the DataStream
API's view) reads and writes these keys, and :meth:`CheckpointingOptions.from_configuration`
parses and validates them, so a bad value set any way (setter, config file, ``-D``) fails the
same way, with a ``ValueError`` naming the key, the value and the rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import ClassVar, Optional

from rill.common.configuration import ConfigOption, Configuration
from rill.common.option_parsing import get_bool, get_duration_ms, get_enum, get_int, get_str

__all__ = [
    "CheckpointingMode",
    "CheckpointingOptions",
    "ExternalizedCheckpointRetention",
    "MINIMAL_CHECKPOINT_TIME_MS",
    "validate_checkpoint_interval",
    "validate_checkpoint_timeout",
    "validate_max_concurrent_checkpoints",
    "validate_min_pause",
    "validate_tolerable_failures",
]

#: The shortest checkpoint interval and timeout (Flink's ``CheckpointConfig.MINIMAL_CHECKPOINT_TIME``).
MINIMAL_CHECKPOINT_TIME_MS = 10


class CheckpointingMode(Enum):
    """The consistency a checkpoint gives (PyFlink's ``CheckpointingMode``, Flink's
    ``org.apache.flink.core.execution.CheckpointingMode``).

    ``EXACTLY_ONCE``: barriers are aligned, so a restored job sees every record's effect on
    state exactly once. ``AT_LEAST_ONCE``: barriers are not aligned; after a restore some
    records may have affected state twice, in exchange for lower latency.
    """

    EXACTLY_ONCE = 0
    AT_LEAST_ONCE = 1


class ExternalizedCheckpointRetention(Enum):
    """What happens to a job's completed checkpoints when it ends (PyFlink 2.x's
    ``ExternalizedCheckpointRetention``).

    ``DELETE_ON_CANCELLATION``: kept if the job fails, deleted when it is cancelled.
    ``RETAIN_ON_CANCELLATION``: kept when the job fails or is cancelled (delete them by hand).
    ``NO_EXTERNALIZED_CHECKPOINTS``: checkpoints are not kept once the job ends (the default).
    """

    DELETE_ON_CANCELLATION = 0
    RETAIN_ON_CANCELLATION = 1
    NO_EXTERNALIZED_CHECKPOINTS = 2


# -- the rules of Flink's CheckpointConfig setters, shared by the setters and the parser ---------
def validate_checkpoint_interval(interval_ms: int) -> None:
    """:raises ValueError: Flink's ``Checkpoint interval must be larger than or equal to 10 ms``."""
    if interval_ms < MINIMAL_CHECKPOINT_TIME_MS:
        raise ValueError(f"Checkpoint interval must be larger than or equal to {MINIMAL_CHECKPOINT_TIME_MS} ms, "
                         f"got {interval_ms} ms")


def validate_checkpoint_timeout(timeout_ms: int) -> None:
    """:raises ValueError: Flink's ``Checkpoint timeout must be larger than or equal to 10 ms``."""
    if timeout_ms < MINIMAL_CHECKPOINT_TIME_MS:
        raise ValueError(f"Checkpoint timeout must be larger than or equal to {MINIMAL_CHECKPOINT_TIME_MS} ms, "
                         f"got {timeout_ms} ms")


def validate_min_pause(min_pause_ms: int) -> None:
    """:raises ValueError: Flink's ``Pause value must be zero or positive``."""
    if min_pause_ms < 0:
        raise ValueError(f"Pause value must be zero or positive, got {min_pause_ms} ms")


def validate_max_concurrent_checkpoints(n: int) -> None:
    """:raises ValueError: Flink's ``The maximum number of concurrent attempts must be at least one.``"""
    if n < 1:
        raise ValueError(f"The maximum number of concurrent attempts must be at least one, got {n}")


def validate_tolerable_failures(n: int) -> None:
    """:raises ValueError: Flink's ``The tolerable failure checkpoint number must be non-negative.``"""
    if n < 0:
        raise ValueError(f"The tolerable failure checkpoint number must be non-negative, got {n}")


def _checked(key: str, value, rule) -> None:
    try:
        rule(value)
    except ValueError as e:
        raise ValueError(f"Invalid value for '{key}': {e}") from None


def _checkpoint_dir(conf: Configuration) -> Optional[str]:
    """Where checkpoints go, as ``execution.checkpointing.storage`` and ``.dir`` say (Flink's
    ``CheckpointStorageLoader``): ``None`` is the JobManager's memory. With 'jobmanager' a
    configured directory is not used for checkpoints (Flink would keep only their metadata there;
    Rill keeps all of a memory checkpoint in memory).

    :raises ValueError: naming the key, for an unknown storage name, or 'filesystem' without a
        directory.
    """
    c = CheckpointingOptions
    directory = get_str(conf, c.CHECKPOINTS_DIRECTORY)
    storage = get_str(conf, c.CHECKPOINT_STORAGE)
    if storage is None:
        return directory
    name = storage.strip().lower()
    if name == "jobmanager":
        return None
    if name == "filesystem":
        if directory is None:
            raise ValueError(f"Invalid value for '{c.CHECKPOINT_STORAGE.key}': checkpoint storage 'filesystem' "
                             f"needs a directory in '{c.CHECKPOINTS_DIRECTORY.key}', and none is set")
        return directory
    raise ValueError(f"Invalid value {storage!r} for '{c.CHECKPOINT_STORAGE.key}': unknown checkpoint storage; "
                     "accepted: 'jobmanager', 'filesystem'")


@dataclass(frozen=True)
class CheckpointingOptions:
    """The job's checkpointing settings, parsed and validated once (what Flink's JobMaster reads
    into its ``CheckpointCoordinatorConfiguration``). Build it with :meth:`from_configuration`;
    the ``ClassVar`` s are the ``ConfigOption`` s, under Flink's constant names.

    :ivar interval_ms: ms between periodic checkpoints; ``None`` when checkpointing is disabled
        (the key unset or 0).
    :ivar mode: EXACTLY_ONCE (aligned barriers) or AT_LEAST_ONCE.
    :ivar timeout_ms: ms after which a checkpoint in progress is discarded.
    :ivar min_pause_ms: ms from the end of one checkpoint to the start of the next, at least.
    :ivar max_concurrent_checkpoints: checkpoints in progress at once, at most.
    :ivar tolerable_failed_checkpoints: consecutive checkpoint failures tolerated before the
        job fails over.
    :ivar externalized_checkpoint_retention: what happens to checkpoints when the job ends.
    :ivar num_retained: completed checkpoints kept.
    :ivar unaligned: unaligned checkpoints; ``False`` in AT_LEAST_ONCE mode whatever the key
        says (Flink turns them off there too).
    :ivar aligned_checkpoint_timeout_ms: with unaligned checkpoints, ms a checkpoint starts
        aligned before it switches to unaligned (0: unaligned from the start).
    :ivar force_unaligned: unaligned checkpoints even where Flink would refuse them.
    :ivar checkpoints_after_tasks_finish: checkpoints continue once some tasks finished (FLIP-147).
    :ivar checkpoint_dir: where checkpoints are written (``None``: in the JobManager's memory).
    :ivar savepoint_dir: the default directory of savepoints.
    """

    CHECKPOINTING_INTERVAL: ClassVar[ConfigOption] = ConfigOption(
        "execution.checkpointing.interval", None,
        "Interval between periodic checkpoints (a duration, e.g. '10 s'; ms if no unit). "
        "Unset or 0: checkpointing disabled. At least 10 ms.")
    CHECKPOINTING_CONSISTENCY_MODE: ClassVar[ConfigOption] = ConfigOption(
        "execution.checkpointing.mode", CheckpointingMode.EXACTLY_ONCE,
        "The checkpointing mode (EXACTLY_ONCE vs. AT_LEAST_ONCE).")
    CHECKPOINTING_TIMEOUT: ClassVar[ConfigOption] = ConfigOption(
        "execution.checkpointing.timeout", 10 * 60 * 1000,
        "The maximum time that a checkpoint may take before being discarded. At least 10 ms.")
    MIN_PAUSE_BETWEEN_CHECKPOINTS: ClassVar[ConfigOption] = ConfigOption(
        "execution.checkpointing.min-pause", 0,
        "The minimal pause between the end of one checkpoint and the start of the next.")
    MAX_CONCURRENT_CHECKPOINTS: ClassVar[ConfigOption] = ConfigOption(
        "execution.checkpointing.max-concurrent-checkpoints", 1,
        "The maximum number of checkpoint attempts that may be in progress at the same time.")
    TOLERABLE_FAILURE_NUMBER: ClassVar[ConfigOption] = ConfigOption(
        "execution.checkpointing.tolerable-failed-checkpoints", 0,
        "The tolerable checkpoint consecutive failure number (0: none tolerated).")
    EXTERNALIZED_CHECKPOINT_RETENTION: ClassVar[ConfigOption] = ConfigOption(
        "execution.checkpointing.externalized-checkpoint-retention",
        ExternalizedCheckpointRetention.NO_EXTERNALIZED_CHECKPOINTS,
        "What happens to completed checkpoints when the job ends: DELETE_ON_CANCELLATION, "
        "RETAIN_ON_CANCELLATION or NO_EXTERNALIZED_CHECKPOINTS.")
    MAX_RETAINED_CHECKPOINTS: ClassVar[ConfigOption] = ConfigOption(
        "execution.checkpointing.num-retained", 1,
        "The maximum number of completed checkpoints to retain.",
        ("state.checkpoints.num-retained",))
    ENABLE_UNALIGNED: ClassVar[ConfigOption] = ConfigOption(
        "execution.checkpointing.unaligned.enabled", False,
        "Enables unaligned checkpoints (only with EXACTLY_ONCE and max-concurrent-checkpoints 1).",
        ("execution.checkpointing.unaligned",))
    ALIGNED_CHECKPOINT_TIMEOUT: ClassVar[ConfigOption] = ConfigOption(
        "execution.checkpointing.aligned-checkpoint-timeout", 0,
        "With unaligned checkpoints: 0 starts them unaligned; a positive duration starts them "
        "aligned and switches to unaligned once the checkpoint's start delay exceeds it.",
        ("execution.checkpointing.alignment-timeout",))
    FORCE_UNALIGNED: ClassVar[ConfigOption] = ConfigOption(
        "execution.checkpointing.unaligned.forced", False,
        "Forces unaligned checkpoints, particularly allowing them for iterative jobs.")
    ENABLE_CHECKPOINTS_AFTER_TASKS_FINISH: ClassVar[ConfigOption] = ConfigOption(
        "execution.checkpointing.checkpoints-after-tasks-finish", True,
        "Checkpoints continue after some tasks finished (FLIP-147).",
        ("execution.checkpointing.checkpoints-after-tasks-finish.enabled",))
    CHECKPOINTS_DIRECTORY: ClassVar[ConfigOption] = ConfigOption(
        "execution.checkpointing.dir", None,
        "The directory checkpoints (data files and metadata) are written to.",
        ("state.checkpoints.dir", "state.backend.fs.checkpointdir"))
    CHECKPOINT_STORAGE: ClassVar[ConfigOption] = ConfigOption(
        "execution.checkpointing.storage", None,
        "'jobmanager' (checkpoints in the JobManager's memory) or 'filesystem' (in "
        "'execution.checkpointing.dir'). Unset: 'filesystem' when a directory is set, else 'jobmanager'.",
        ("state.checkpoint-storage",))
    SAVEPOINT_DIRECTORY: ClassVar[ConfigOption] = ConfigOption(
        "execution.checkpointing.savepoint-dir", None,
        "The default directory for savepoints.",
        ("state.savepoints.dir", "savepoints.state.backend.fs.dir"))

    interval_ms: Optional[int] = None
    mode: CheckpointingMode = CheckpointingMode.EXACTLY_ONCE
    timeout_ms: int = 10 * 60 * 1000
    min_pause_ms: int = 0
    max_concurrent_checkpoints: int = 1
    tolerable_failed_checkpoints: int = 0
    externalized_checkpoint_retention: ExternalizedCheckpointRetention = \
        ExternalizedCheckpointRetention.NO_EXTERNALIZED_CHECKPOINTS
    num_retained: int = 1
    unaligned: bool = False
    aligned_checkpoint_timeout_ms: int = 0
    force_unaligned: bool = False
    checkpoints_after_tasks_finish: bool = True
    checkpoint_dir: Optional[str] = None
    savepoint_dir: Optional[str] = None

    @property
    def enabled(self) -> bool:
        """Whether periodic checkpoints are taken (an interval is set)."""
        return self.interval_ms is not None

    @staticmethod
    def from_configuration(conf: Configuration) -> "CheckpointingOptions":
        """Parse and validate every checkpointing key of ``conf`` (deprecated keys included).

        :raises ValueError: naming the key and the value, for a value of the wrong type (a
            duration that does not parse, an unknown mode) or one that breaks Flink's rule:
            interval 1..9 ms or negative (``Checkpoint interval must be larger than or equal to
            10 ms``), timeout under 10 ms, negative min pause or aligned-checkpoint timeout,
            max concurrent checkpoints under 1, negative tolerable failures, num-retained under
            1 (Flink warns and uses 1; Rill refuses), unaligned checkpoints with more than one
            concurrent checkpoint (Flink's ``CheckpointCoordinatorConfiguration`` rule).
        """
        c = CheckpointingOptions
        interval = get_duration_ms(conf, c.CHECKPOINTING_INTERVAL)
        if interval == 0:
            interval = None  # Flink: enabled only when the interval is positive
        if interval is not None:
            _checked(c.CHECKPOINTING_INTERVAL.key, interval, validate_checkpoint_interval)
        timeout = get_duration_ms(conf, c.CHECKPOINTING_TIMEOUT)
        _checked(c.CHECKPOINTING_TIMEOUT.key, timeout, validate_checkpoint_timeout)
        min_pause = get_duration_ms(conf, c.MIN_PAUSE_BETWEEN_CHECKPOINTS)
        _checked(c.MIN_PAUSE_BETWEEN_CHECKPOINTS.key, min_pause, validate_min_pause)
        max_concurrent = get_int(conf, c.MAX_CONCURRENT_CHECKPOINTS)
        _checked(c.MAX_CONCURRENT_CHECKPOINTS.key, max_concurrent, validate_max_concurrent_checkpoints)
        tolerable = get_int(conf, c.TOLERABLE_FAILURE_NUMBER)
        _checked(c.TOLERABLE_FAILURE_NUMBER.key, tolerable, validate_tolerable_failures)
        num_retained = get_int(conf, c.MAX_RETAINED_CHECKPOINTS)
        if num_retained < 1:
            raise ValueError(f"Invalid value for '{c.MAX_RETAINED_CHECKPOINTS.key}': at least one completed "
                             f"checkpoint must be retained, got {num_retained}")
        aligned_timeout = get_duration_ms(conf, c.ALIGNED_CHECKPOINT_TIMEOUT)
        if aligned_timeout < 0:
            raise ValueError(f"Invalid value for '{c.ALIGNED_CHECKPOINT_TIMEOUT.key}': the aligned checkpoint "
                             f"timeout must be zero or positive, got {aligned_timeout} ms")
        mode = get_enum(conf, c.CHECKPOINTING_CONSISTENCY_MODE, CheckpointingMode)
        unaligned = get_bool(conf, c.ENABLE_UNALIGNED) and mode is CheckpointingMode.EXACTLY_ONCE
        if unaligned and max_concurrent > 1:
            raise ValueError(f"Invalid value for '{c.MAX_CONCURRENT_CHECKPOINTS.key}': unaligned checkpoints "
                             f"('{c.ENABLE_UNALIGNED.key}') allow at most one concurrent checkpoint, "
                             f"got {max_concurrent}")
        return CheckpointingOptions(
            interval_ms=interval,
            mode=mode,
            timeout_ms=timeout,
            min_pause_ms=min_pause,
            max_concurrent_checkpoints=max_concurrent,
            tolerable_failed_checkpoints=tolerable,
            externalized_checkpoint_retention=get_enum(conf, c.EXTERNALIZED_CHECKPOINT_RETENTION,
                                                       ExternalizedCheckpointRetention),
            num_retained=num_retained,
            unaligned=unaligned,
            aligned_checkpoint_timeout_ms=aligned_timeout,
            force_unaligned=get_bool(conf, c.FORCE_UNALIGNED),
            checkpoints_after_tasks_finish=get_bool(conf, c.ENABLE_CHECKPOINTS_AFTER_TASKS_FINISH),
            checkpoint_dir=_checkpoint_dir(conf),
            savepoint_dir=get_str(conf, c.SAVEPOINT_DIRECTORY),
        )
