"""``CheckpointConfig``: the DataStream API's checkpointing settings (PyFlink 2.x's
``pyflink.datastream.checkpoint_config.CheckpointConfig``).

As in Flink 2.x, it holds nothing itself: every getter reads and every setter writes the job's
``Configuration`` under the keys of :class:`~rill.common.checkpointing_options.CheckpointingOptions`,
so ``env.get_checkpoint_config().set_checkpoint_timeout(60000)`` and
``execution.checkpointing.timeout: 1 min`` in the config file are the same setting, and the
JobMaster reads whichever was set last. Setters store plain values (int ms, enum names), which
travel to a cluster unchanged.

PyFlink 2.x has no checkpoint-storage methods on ``CheckpointConfig`` (it sets
``execution.checkpointing.storage``/``.dir`` in the ``Configuration``); Rill keeps Flink 1.x's
``set_checkpoint_storage``/``get_checkpoint_storage``, which read and write those keys.
"""

from __future__ import annotations

from typing import Any

from rill.common.checkpointing_options import (
    CheckpointingMode,
    CheckpointingOptions,
    ExternalizedCheckpointRetention,
    validate_checkpoint_interval,
    validate_checkpoint_timeout,
    validate_max_concurrent_checkpoints,
    validate_min_pause,
    validate_tolerable_failures,
)
from rill.common.configuration import Configuration
from rill.common.option_parsing import get_bool, get_duration_ms, get_enum, get_int
from rill.common.time import Duration, to_milliseconds
from rill.datastream.checkpoint_storage import CheckpointStorage, FileSystemCheckpointStorage

__all__ = ["CheckpointConfig"]

_O = CheckpointingOptions
#: what ``set_fail_on_checkpointing_errors(False)`` sets: every failure tolerated (Java's Integer.MAX_VALUE)
_UNLIMITED_TOLERABLE_FAILURES = 2147483647


def _ms(value: Any, what: str) -> int:
    """An int ms, timedelta or Duration as int ms; :raises TypeError: naming ``what``."""
    return to_milliseconds(value, f"CheckpointConfig.{what}")


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"CheckpointConfig.{what} needs an int, got {value!r} ({type(value).__name__})")
    return value


class CheckpointConfig:
    """Checkpointing settings of one job, as a view of its ``Configuration`` (Flink 2.x).

    Getters return Flink's values: ``get_checkpoint_interval()`` is ``-1`` while checkpointing
    is disabled; durations are int ms except the aligned-checkpoint timeout, a ``Duration``.
    Setters return ``self`` (PyFlink 2.x) and raise ``ValueError`` with Flink's message for
    values Flink's setters refuse, ``TypeError`` for a value of the wrong type. A value set
    through the ``Configuration`` directly is parsed when read: a getter then raises
    ``ValueError`` naming the key for a value that does not parse.

    :param configuration: the job's configuration (``env.get_configuration()``), written in place.
    """

    def __init__(self, configuration: Configuration):
        self._conf = configuration

    # -- enabling -------------------------------------------------------------------------
    def is_checkpointing_enabled(self) -> bool:
        """Whether periodic checkpoints are taken (an interval above 0 is set)."""
        return self.get_checkpoint_interval() > 0

    def get_checkpoint_interval(self) -> int:
        """ms between periodic checkpoints; ``-1`` while checkpointing is disabled."""
        interval = get_duration_ms(self._conf, _O.CHECKPOINTING_INTERVAL)
        return -1 if interval is None else interval

    def set_checkpoint_interval(self, checkpoint_interval: int) -> "CheckpointConfig":
        """Checkpoint every ``checkpoint_interval`` ms (``execution.checkpointing.interval``).

        :raises ValueError: under 10 ms (Flink's ``Checkpoint interval must be larger than or
            equal to 10 ms``).
        """
        interval = _int(checkpoint_interval, "set_checkpoint_interval")
        validate_checkpoint_interval(interval)
        self._conf.set(_O.CHECKPOINTING_INTERVAL, interval)
        return self

    # -- consistency ----------------------------------------------------------------------
    def get_checkpointing_mode(self) -> CheckpointingMode:
        """EXACTLY_ONCE (the default) or AT_LEAST_ONCE (``execution.checkpointing.mode``)."""
        return get_enum(self._conf, _O.CHECKPOINTING_CONSISTENCY_MODE, CheckpointingMode)

    def set_checkpointing_mode(self, checkpointing_mode: CheckpointingMode) -> "CheckpointConfig":
        """:raises TypeError: if ``checkpointing_mode`` is not a ``CheckpointingMode``."""
        if not isinstance(checkpointing_mode, CheckpointingMode):
            raise TypeError(f"CheckpointConfig.set_checkpointing_mode needs a CheckpointingMode, "
                            f"got {checkpointing_mode!r}")
        self._conf.set(_O.CHECKPOINTING_CONSISTENCY_MODE, checkpointing_mode.name)
        return self

    def get_checkpointing_consistency_mode(self) -> CheckpointingMode:
        """Flink 2.x's Java name of :meth:`get_checkpointing_mode`."""
        return self.get_checkpointing_mode()

    def set_checkpointing_consistency_mode(self, mode: CheckpointingMode) -> "CheckpointConfig":
        """Flink 2.x's Java name of :meth:`set_checkpointing_mode`."""
        return self.set_checkpointing_mode(mode)

    # -- pacing ---------------------------------------------------------------------------
    def get_checkpoint_timeout(self) -> int:
        """ms after which a checkpoint in progress is discarded (default 10 min)."""
        return get_duration_ms(self._conf, _O.CHECKPOINTING_TIMEOUT)

    def set_checkpoint_timeout(self, checkpoint_timeout: int) -> "CheckpointConfig":
        """:raises ValueError: under 10 ms (Flink's ``Checkpoint timeout must be larger than or
        equal to 10 ms``)."""
        timeout = _int(checkpoint_timeout, "set_checkpoint_timeout")
        validate_checkpoint_timeout(timeout)
        self._conf.set(_O.CHECKPOINTING_TIMEOUT, timeout)
        return self

    def get_min_pause_between_checkpoints(self) -> int:
        """ms from the end of one checkpoint to the start of the next, at least (default 0)."""
        return get_duration_ms(self._conf, _O.MIN_PAUSE_BETWEEN_CHECKPOINTS)

    def set_min_pause_between_checkpoints(self, min_pause_between_checkpoints: int) -> "CheckpointConfig":
        """:raises ValueError: if negative (Flink's ``Pause value must be zero or positive``)."""
        pause = _int(min_pause_between_checkpoints, "set_min_pause_between_checkpoints")
        validate_min_pause(pause)
        self._conf.set(_O.MIN_PAUSE_BETWEEN_CHECKPOINTS, pause)
        return self

    def get_max_concurrent_checkpoints(self) -> int:
        """Checkpoints in progress at once, at most (default 1)."""
        return get_int(self._conf, _O.MAX_CONCURRENT_CHECKPOINTS)

    def set_max_concurrent_checkpoints(self, max_concurrent_checkpoints: int) -> "CheckpointConfig":
        """:raises ValueError: under 1 (Flink's ``The maximum number of concurrent attempts must
        be at least one.``)."""
        n = _int(max_concurrent_checkpoints, "set_max_concurrent_checkpoints")
        validate_max_concurrent_checkpoints(n)
        self._conf.set(_O.MAX_CONCURRENT_CHECKPOINTS, n)
        return self

    # -- failures -------------------------------------------------------------------------
    def get_tolerable_checkpoint_failure_number(self) -> int:
        """Consecutive checkpoint failures tolerated before the job fails over (default 0)."""
        return get_int(self._conf, _O.TOLERABLE_FAILURE_NUMBER)

    def set_tolerable_checkpoint_failure_number(self, tolerable_checkpoint_failure_number: int) -> "CheckpointConfig":
        """:raises ValueError: if negative (Flink's ``The tolerable failure checkpoint number
        must be non-negative.``)."""
        n = _int(tolerable_checkpoint_failure_number, "set_tolerable_checkpoint_failure_number")
        validate_tolerable_failures(n)
        self._conf.set(_O.TOLERABLE_FAILURE_NUMBER, n)
        return self

    def is_fail_on_checkpointing_errors(self) -> bool:
        """Whether no checkpoint failure is tolerated (deprecated in PyFlink 2.0: use
        :meth:`get_tolerable_checkpoint_failure_number`)."""
        return self.get_tolerable_checkpoint_failure_number() == 0

    def set_fail_on_checkpointing_errors(self, fail_on_checkpointing_errors: bool) -> "CheckpointConfig":
        """``True``: tolerate no failure (0); ``False``: tolerate every failure (2147483647), as
        PyFlink 2.x maps it (deprecated there: use :meth:`set_tolerable_checkpoint_failure_number`)."""
        return self.set_tolerable_checkpoint_failure_number(
            0 if fail_on_checkpointing_errors else _UNLIMITED_TOLERABLE_FAILURES)

    # -- retention ------------------------------------------------------------------------
    def get_externalized_checkpoint_retention(self) -> ExternalizedCheckpointRetention:
        """What happens to completed checkpoints when the job ends (default
        NO_EXTERNALIZED_CHECKPOINTS)."""
        return get_enum(self._conf, _O.EXTERNALIZED_CHECKPOINT_RETENTION, ExternalizedCheckpointRetention)

    def set_externalized_checkpoint_retention(
            self, retention_mode: ExternalizedCheckpointRetention) -> "CheckpointConfig":
        """:raises TypeError: if ``retention_mode`` is not an ``ExternalizedCheckpointRetention``."""
        if not isinstance(retention_mode, ExternalizedCheckpointRetention):
            raise TypeError(f"CheckpointConfig.set_externalized_checkpoint_retention needs an "
                            f"ExternalizedCheckpointRetention, got {retention_mode!r}")
        self._conf.set(_O.EXTERNALIZED_CHECKPOINT_RETENTION, retention_mode.name)
        return self

    def is_externalized_checkpoints_enabled(self) -> bool:
        """Whether completed checkpoints outlive the job (retention other than
        NO_EXTERNALIZED_CHECKPOINTS)."""
        return self.get_externalized_checkpoint_retention() is not \
            ExternalizedCheckpointRetention.NO_EXTERNALIZED_CHECKPOINTS

    # -- unaligned ------------------------------------------------------------------------
    def is_unaligned_checkpoints_enabled(self) -> bool:
        """Whether ``execution.checkpointing.unaligned.enabled`` is set (they take effect only
        in EXACTLY_ONCE mode)."""
        return get_bool(self._conf, _O.ENABLE_UNALIGNED)

    def enable_unaligned_checkpoints(self, enabled: bool = True) -> "CheckpointConfig":
        """Turn unaligned checkpoints on (or off with ``False``)."""
        if not isinstance(enabled, bool):
            raise TypeError(f"CheckpointConfig.enable_unaligned_checkpoints needs a bool, got {enabled!r}")
        self._conf.set(_O.ENABLE_UNALIGNED, enabled)
        return self

    def disable_unaligned_checkpoints(self) -> "CheckpointConfig":
        return self.enable_unaligned_checkpoints(False)

    def get_aligned_checkpoint_timeout(self) -> Duration:
        """How long a checkpoint starts aligned before it switches to unaligned (default 0)."""
        return Duration.of_millis(get_duration_ms(self._conf, _O.ALIGNED_CHECKPOINT_TIMEOUT))

    def set_aligned_checkpoint_timeout(self, alignment_timeout: Duration) -> "CheckpointConfig":
        """:param alignment_timeout: a ``Duration`` (or int ms, or ``timedelta``).
        :raises ValueError: if negative."""
        ms = _ms(alignment_timeout, "set_aligned_checkpoint_timeout")
        if ms < 0:
            raise ValueError(f"The aligned checkpoint timeout must be zero or positive, got {ms} ms")
        self._conf.set(_O.ALIGNED_CHECKPOINT_TIMEOUT, ms)
        return self

    def get_alignment_timeout(self) -> Duration:
        """Deprecated in PyFlink 2.0: :meth:`get_aligned_checkpoint_timeout`."""
        return self.get_aligned_checkpoint_timeout()

    def set_alignment_timeout(self, alignment_timeout: Duration) -> "CheckpointConfig":
        """Deprecated in PyFlink 2.0: :meth:`set_aligned_checkpoint_timeout`."""
        return self.set_aligned_checkpoint_timeout(alignment_timeout)

    def is_force_unaligned_checkpoints(self) -> bool:
        return get_bool(self._conf, _O.FORCE_UNALIGNED)

    def set_force_unaligned_checkpoints(self, force_unaligned_checkpoints: bool = True) -> "CheckpointConfig":
        if not isinstance(force_unaligned_checkpoints, bool):
            raise TypeError(f"CheckpointConfig.set_force_unaligned_checkpoints needs a bool, "
                            f"got {force_unaligned_checkpoints!r}")
        self._conf.set(_O.FORCE_UNALIGNED, force_unaligned_checkpoints)
        return self

    def set_checkpoint_storage(self, storage: CheckpointStorage) -> "CheckpointConfig":
        """Where checkpoints go: writes ``storage``'s keys (``execution.checkpointing.storage``,
        ``.dir``) into the job's Configuration. Flink 1.x's ``setCheckpointStorage`` (removed
        from PyFlink 2.x, which sets the keys directly; both work in Rill).

        :raises TypeError: naming the value, when it is not a ``CheckpointStorage``.
        """
        if not isinstance(storage, CheckpointStorage):
            raise TypeError(f"CheckpointConfig.set_checkpoint_storage needs a CheckpointStorage, got {storage!r}")
        self._conf.add_all(storage.to_configuration())
        return self

    def set_checkpoint_storage_dir(self, checkpoint_path: str) -> "CheckpointConfig":
        """Shorthand for ``set_checkpoint_storage(FileSystemCheckpointStorage(checkpoint_path))``
        (Flink 1.x's ``setCheckpointStorage(String)``).

        :raises ValueError: for an empty path.
        """
        return self.set_checkpoint_storage(FileSystemCheckpointStorage(checkpoint_path))

    def get_checkpoint_storage(self) -> CheckpointStorage:
        """The storage the Configuration's keys choose (``JobManagerCheckpointStorage`` unless a
        directory is set).

        :raises ValueError: naming the key, for storage keys that choose no valid storage.
        """
        return CheckpointStorage.from_configuration(self._conf)
