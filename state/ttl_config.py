"""State TTL configuration (PyFlink's ``StateTtlConfig``) and the TTL clock.

See :mod:`rill.state.ttl` for the TTL states that apply it.
"""

from __future__ import annotations

import datetime
import enum
import time
from typing import Any, Callable, Dict, Optional

from rill.common.time import Time, to_milliseconds

__all__ = [
    "Time",
    "StateTtlConfig",
    "UpdateType",
    "StateVisibility",
    "TtlTimeCharacteristic",
    "TtlTimeProvider",
    "default_ttl_time_provider",
    "ManualTtlTimeProvider",
    "expired",
]

#: A TTL time provider: a zero-argument callable returning the current time in epoch ms
#: (Flink's ``TtlTimeProvider``).
TtlTimeProvider = Callable[[], int]


def default_ttl_time_provider() -> int:
    """The current wall-clock time in epoch ms (Flink's ``TtlTimeProvider.DEFAULT``)."""
    return time.time_ns() // 1_000_000


class ManualTtlTimeProvider:
    """A TTL time provider the caller moves by hand (for tests).

    :param now_ms: the initial time in epoch ms (default 0).
    """

    __slots__ = ("now_ms",)

    def __init__(self, now_ms: int = 0) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def set(self, now_ms: int) -> None:
        """Set the time to ``now_ms`` (epoch ms)."""
        self.now_ms = now_ms

    def advance(self, delta_ms: int) -> None:
        """Move the time ``delta_ms`` ms forward."""
        self.now_ms += delta_ms

    def __repr__(self) -> str:
        return f"ManualTtlTimeProvider(now_ms={self.now_ms})"


def expired(last_access_ms: int, ttl_ms: int, now_ms: int) -> bool:
    """Whether a value last accessed at ``last_access_ms`` has expired at ``now_ms``
    (Flink's ``TtlUtils.expired``: ``last_access + ttl <= now``)."""
    return last_access_ms + ttl_ms <= now_ms



def _to_time(ttl: Any) -> Any:
    """``ttl`` (a ``Time``, anything with ``to_milliseconds()``, a ``datetime.timedelta`` or an
    ``int`` of ms) checked positive: Time-like objects as given, the others as a :class:`Time`."""
    try:
        ms = to_milliseconds(ttl, "TTL")
    except TypeError:
        raise TypeError(
            f"TTL must be a Time, a datetime.timedelta or an int of milliseconds, got {ttl!r} "
            f"of type {type(ttl).__name__}"
        ) from None
    if type(ms) is not int or ms <= 0:
        raise ValueError(f"TTL is expected to be positive, got {ms!r} ms")
    if isinstance(ttl, (datetime.timedelta, int)):
        return Time(ms)
    return ttl  # a Time-like object (e.g. rill.common.time.Time) is kept as given


class StateTtlConfig:
    """Configuration of state TTL (PyFlink's ``StateTtlConfig``). Built with
    :meth:`new_builder`; immutable afterwards.

    :param update_type: when the last access timestamp is refreshed.
    :param state_visibility: whether an expired, not yet removed value may be returned.
    :param ttl_time_characteristic: the time scale (only ``ProcessingTime``).
    :param ttl: the time to live.
    :param cleanup_strategies: when expired state is removed besides on read.
    """

    class UpdateType(enum.Enum):
        """When to refresh the last access timestamp (Flink's ``StateTtlConfig.UpdateType``)."""

        #: TTL is disabled: state does not expire (the backend does not wrap the state).
        Disabled = 0
        #: the timestamp is set when the value is created and on every write.
        OnCreateAndWrite = 1
        #: as ``OnCreateAndWrite``, and also on every read.
        OnReadAndWrite = 2

    class StateVisibility(enum.Enum):
        """Whether an expired value may be returned (Flink's ``StateTtlConfig.StateVisibility``)."""

        #: an expired value found by a read is removed and returned this last time.
        ReturnExpiredIfNotCleanedUp = 0
        #: an expired value is never returned.
        NeverReturnExpired = 1

    class TtlTimeCharacteristic(enum.Enum):
        """The time scale of TTL (Flink's ``StateTtlConfig.TtlTimeCharacteristic``)."""

        #: processing time (the only one, as in Flink).
        ProcessingTime = 0

    class CleanupStrategies:
        """When expired state is removed besides on read (Flink's
        ``StateTtlConfig.CleanupStrategies``).

        :param strategies: ``Strategies`` member → strategy configuration.
        :param is_cleanup_in_background: whether default background cleanup is on (then
            incremental cleanup with ``(5, False)`` applies unless configured otherwise).
        """

        class Strategies(enum.Enum):
            """The cleanup strategies (Flink's ``CleanupStrategies.Strategies``)."""

            FULL_STATE_SCAN_SNAPSHOT = 0
            INCREMENTAL_CLEANUP = 1
            ROCKSDB_COMPACTION_FILTER = 2

        class CleanupStrategy:
            """Base of the cleanup strategy configurations."""

        class EmptyCleanupStrategy(CleanupStrategy):
            """A strategy without parameters (full snapshot cleanup)."""

        class IncrementalCleanupStrategy(CleanupStrategy):
            """Incremental cleanup on state access (Flink's ``IncrementalCleanupStrategy``).

            :param cleanup_size: entries checked per state access, ``> 0``.
            :param run_cleanup_for_every_record: also check on every record (key selection).
            :raises ValueError: if ``cleanup_size`` is not a positive ``int``.
            :raises TypeError: if ``run_cleanup_for_every_record`` is not a ``bool``.
            """

            def __init__(self, cleanup_size: int, run_cleanup_for_every_record: bool) -> None:
                if type(cleanup_size) is not int or cleanup_size <= 0:
                    raise ValueError(
                        "Number of incrementally cleaned up state entries should be positive, "
                        f"got {cleanup_size!r}"
                    )
                if not isinstance(run_cleanup_for_every_record, bool):
                    raise TypeError(
                        "run_cleanup_for_every_record must be a bool, got "
                        f"{run_cleanup_for_every_record!r}"
                    )
                self._cleanup_size = cleanup_size
                self._run_cleanup_for_every_record = run_cleanup_for_every_record

            def get_cleanup_size(self) -> int:
                """Entries checked per state access."""
                return self._cleanup_size

            def run_cleanup_for_every_record(self) -> bool:
                """Whether cleanup also runs on every record."""
                return self._run_cleanup_for_every_record

            def __repr__(self) -> str:
                return (
                    f"IncrementalCleanupStrategy(cleanup_size={self._cleanup_size}, "
                    f"run_cleanup_for_every_record={self._run_cleanup_for_every_record})"
                )

        class RocksdbCompactFilterCleanupStrategy(CleanupStrategy):
            """RocksDB compaction-filter cleanup; recorded only (Rill has no RocksDB backend).

            :param query_time_after_num_entries: entries between two clock reads.
            :param periodic_compaction_time: a ``Time`` (default 30 days).
            """

            def __init__(self, query_time_after_num_entries: int, periodic_compaction_time: Any = None) -> None:
                self._query_time_after_num_entries = query_time_after_num_entries
                self._periodic_compaction_time = (
                    Time.days(30) if periodic_compaction_time is None else periodic_compaction_time
                )

            def get_query_time_after_num_entries(self) -> int:
                """Entries between two clock reads."""
                return self._query_time_after_num_entries

            def get_periodic_compaction_time(self) -> Any:
                """The periodic compaction time."""
                return self._periodic_compaction_time

        #: the single ``EmptyCleanupStrategy``
        EMPTY_STRATEGY: "StateTtlConfig.CleanupStrategies.EmptyCleanupStrategy"

        def __init__(self, strategies: Dict[Any, Any], is_cleanup_in_background: bool) -> None:
            self._strategies = dict(strategies)
            self._is_cleanup_in_background = is_cleanup_in_background

        def is_cleanup_in_background(self) -> bool:
            """Whether default background cleanup is on."""
            return self._is_cleanup_in_background

        def in_full_snapshot(self) -> bool:
            """Whether snapshots leave expired state out (``cleanup_full_snapshot()``)."""
            return StateTtlConfig.CleanupStrategies.Strategies.FULL_STATE_SCAN_SNAPSHOT in self._strategies

        def get_incremental_cleanup_strategy(self) -> Optional["StateTtlConfig.CleanupStrategies.IncrementalCleanupStrategy"]:
            """The incremental cleanup configuration: the configured one, else ``(5, False)``
            when cleanup in background is on, else ``None``."""
            cls = StateTtlConfig.CleanupStrategies
            default = cls.IncrementalCleanupStrategy(5, False) if self._is_cleanup_in_background else None
            return self._strategies.get(cls.Strategies.INCREMENTAL_CLEANUP, default)

        def get_rocksdb_compact_filter_cleanup_strategy(self) -> Optional[Any]:
            """The RocksDB compaction-filter configuration (no effect in Rill)."""
            cls = StateTtlConfig.CleanupStrategies
            default = cls.RocksdbCompactFilterCleanupStrategy(1000) if self._is_cleanup_in_background else None
            return self._strategies.get(cls.Strategies.ROCKSDB_COMPACTION_FILTER, default)

        def __repr__(self) -> str:
            names = sorted(s.name for s in self._strategies)
            return f"CleanupStrategies({names}, is_cleanup_in_background={self._is_cleanup_in_background})"

    class Builder:
        """Builds a :class:`StateTtlConfig` (PyFlink's ``StateTtlConfig.Builder``).

        Defaults: ``OnCreateAndWrite``, ``NeverReturnExpired``, ``ProcessingTime``, cleanup in
        background on.

        :param ttl: see :meth:`StateTtlConfig.new_builder`.
        """

        def __init__(self, ttl: Any) -> None:
            self._ttl = _to_time(ttl)
            self._update_type = StateTtlConfig.UpdateType.OnCreateAndWrite
            self._state_visibility = StateTtlConfig.StateVisibility.NeverReturnExpired
            self._ttl_time_characteristic = StateTtlConfig.TtlTimeCharacteristic.ProcessingTime
            self._is_cleanup_in_background = True
            self._strategies: Dict[Any, Any] = {}

        def set_update_type(self, update_type: "StateTtlConfig.UpdateType") -> "StateTtlConfig.Builder":
            """Set when the last access timestamp is refreshed.

            :raises TypeError: if ``update_type`` is not an ``UpdateType``.
            """
            _check_enum(update_type, StateTtlConfig.UpdateType, "update_type")
            self._update_type = update_type
            return self

        def update_ttl_on_create_and_write(self) -> "StateTtlConfig.Builder":
            """``set_update_type(UpdateType.OnCreateAndWrite)``."""
            return self.set_update_type(StateTtlConfig.UpdateType.OnCreateAndWrite)

        def update_ttl_on_read_and_write(self) -> "StateTtlConfig.Builder":
            """``set_update_type(UpdateType.OnReadAndWrite)``."""
            return self.set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)

        def set_state_visibility(self, state_visibility: "StateTtlConfig.StateVisibility") -> "StateTtlConfig.Builder":
            """Set whether an expired, not yet removed value may be returned.

            :raises TypeError: if ``state_visibility`` is not a ``StateVisibility``.
            """
            _check_enum(state_visibility, StateTtlConfig.StateVisibility, "state_visibility")
            self._state_visibility = state_visibility
            return self

        def return_expired_if_not_cleaned_up(self) -> "StateTtlConfig.Builder":
            """``set_state_visibility(StateVisibility.ReturnExpiredIfNotCleanedUp)``."""
            return self.set_state_visibility(StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp)

        def never_return_expired(self) -> "StateTtlConfig.Builder":
            """``set_state_visibility(StateVisibility.NeverReturnExpired)``."""
            return self.set_state_visibility(StateTtlConfig.StateVisibility.NeverReturnExpired)

        def set_ttl_time_characteristic(
            self, ttl_time_characteristic: "StateTtlConfig.TtlTimeCharacteristic"
        ) -> "StateTtlConfig.Builder":
            """Set the time scale (only ``ProcessingTime`` exists).

            :raises TypeError: if the argument is not a ``TtlTimeCharacteristic``.
            """
            _check_enum(ttl_time_characteristic, StateTtlConfig.TtlTimeCharacteristic, "ttl_time_characteristic")
            self._ttl_time_characteristic = ttl_time_characteristic
            return self

        def use_processing_time(self) -> "StateTtlConfig.Builder":
            """``set_ttl_time_characteristic(TtlTimeCharacteristic.ProcessingTime)``."""
            return self.set_ttl_time_characteristic(StateTtlConfig.TtlTimeCharacteristic.ProcessingTime)

        def cleanup_full_snapshot(self) -> "StateTtlConfig.Builder":
            """Leave expired state out of full snapshots."""
            cls = StateTtlConfig.CleanupStrategies
            self._strategies[cls.Strategies.FULL_STATE_SCAN_SNAPSHOT] = cls.EMPTY_STRATEGY
            return self

        def cleanup_incrementally(self, cleanup_size: int, run_cleanup_for_every_record: bool) -> "StateTtlConfig.Builder":
            """Check ``cleanup_size`` entries for expiry on every access to the state, and, with
            ``run_cleanup_for_every_record``, also on every record.

            :raises ValueError: if ``cleanup_size`` is not a positive ``int``.
            :raises TypeError: if ``run_cleanup_for_every_record`` is not a ``bool``.
            """
            cls = StateTtlConfig.CleanupStrategies
            self._strategies[cls.Strategies.INCREMENTAL_CLEANUP] = cls.IncrementalCleanupStrategy(
                cleanup_size, run_cleanup_for_every_record
            )
            return self

        def cleanup_in_rocksdb_compact_filter(
            self, query_time_after_num_entries: int, periodic_compaction_time: Any = None
        ) -> "StateTtlConfig.Builder":
            """Recorded for PyFlink compatibility; no effect (Rill has no RocksDB backend)."""
            cls = StateTtlConfig.CleanupStrategies
            self._strategies[cls.Strategies.ROCKSDB_COMPACTION_FILTER] = cls.RocksdbCompactFilterCleanupStrategy(
                query_time_after_num_entries, periodic_compaction_time
            )
            return self

        def disable_cleanup_in_background(self) -> "StateTtlConfig.Builder":
            """Switch off the default incremental cleanup; explicitly configured strategies stay."""
            self._is_cleanup_in_background = False
            return self

        def set_ttl(self, ttl: Any) -> "StateTtlConfig.Builder":
            """Set the time to live (as :meth:`StateTtlConfig.new_builder`)."""
            self._ttl = _to_time(ttl)
            return self

        def build(self) -> "StateTtlConfig":
            """The configuration."""
            return StateTtlConfig(
                self._update_type,
                self._state_visibility,
                self._ttl_time_characteristic,
                self._ttl,
                StateTtlConfig.CleanupStrategies(self._strategies, self._is_cleanup_in_background),
            )

    def __init__(
        self,
        update_type: "StateTtlConfig.UpdateType",
        state_visibility: "StateTtlConfig.StateVisibility",
        ttl_time_characteristic: "StateTtlConfig.TtlTimeCharacteristic",
        ttl: Any,
        cleanup_strategies: "StateTtlConfig.CleanupStrategies",
    ) -> None:
        _check_enum(update_type, StateTtlConfig.UpdateType, "update_type")
        _check_enum(state_visibility, StateTtlConfig.StateVisibility, "state_visibility")
        _check_enum(ttl_time_characteristic, StateTtlConfig.TtlTimeCharacteristic, "ttl_time_characteristic")
        self._update_type = update_type
        self._state_visibility = state_visibility
        self._ttl_time_characteristic = ttl_time_characteristic
        self._ttl = _to_time(ttl)
        self._cleanup_strategies = cleanup_strategies

    @staticmethod
    def new_builder(ttl: Any) -> "StateTtlConfig.Builder":
        """A builder for a TTL of ``ttl``: a :class:`Time` (or PyFlink ``Time``/``Duration``-like
        object with ``to_milliseconds()``), a ``datetime.timedelta`` or an ``int`` of ms.

        :raises TypeError: for another type.
        :raises ValueError: if the TTL is not positive ("TTL is expected to be positive").
        """
        return StateTtlConfig.Builder(ttl)

    def get_update_type(self) -> "StateTtlConfig.UpdateType":
        """When the last access timestamp is refreshed."""
        return self._update_type

    def get_state_visibility(self) -> "StateTtlConfig.StateVisibility":
        """Whether an expired, not yet removed value may be returned."""
        return self._state_visibility

    def get_ttl(self) -> Any:
        """The time to live: the ``Time`` given to the builder (a :class:`Time` for an ``int``
        or ``timedelta``)."""
        return self._ttl

    def get_ttl_ms(self) -> int:
        """The time to live in ms (Rill addition)."""
        return self._ttl.to_milliseconds()

    def get_ttl_time_characteristic(self) -> "StateTtlConfig.TtlTimeCharacteristic":
        """The time scale (``ProcessingTime``)."""
        return self._ttl_time_characteristic

    def is_enabled(self) -> bool:
        """Whether TTL is on (the update type is not ``Disabled``)."""
        return self._update_type is not StateTtlConfig.UpdateType.Disabled

    def get_cleanup_strategies(self) -> "StateTtlConfig.CleanupStrategies":
        """The cleanup strategies."""
        return self._cleanup_strategies

    def __repr__(self) -> str:
        return (
            f"StateTtlConfig<update_type={self._update_type}, state_visibility={self._state_visibility}, "
            f"ttl_time_characteristic={self._ttl_time_characteristic}, ttl={self._ttl}>"
        )


StateTtlConfig.CleanupStrategies.EMPTY_STRATEGY = StateTtlConfig.CleanupStrategies.EmptyCleanupStrategy()

#: Module-level aliases of the nested enums (``StateTtlConfig.UpdateType`` etc.).
UpdateType = StateTtlConfig.UpdateType
StateVisibility = StateTtlConfig.StateVisibility
TtlTimeCharacteristic = StateTtlConfig.TtlTimeCharacteristic


def _check_enum(value: Any, enum_class: type, what: str) -> None:
    if not isinstance(value, enum_class):
        raise TypeError(f"{what} must be a StateTtlConfig.{enum_class.__name__}, got {value!r}")


# -- TTL-aware user functions -------------------------------------------------------------------
