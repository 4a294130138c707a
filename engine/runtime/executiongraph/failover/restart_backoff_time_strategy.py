"""Restart backoff time strategies: whether a failed job may restart, and after how long
(Flink's ``RestartBackoffTimeStrategy`` and its four implementations, ported with their
semantics; ``RestartBackoffTimeStrategyFactoryLoader`` as
:func:`restart_backoff_time_strategy_from_configuration`).

The scheduler's use, as in Flink's ``ExecutionFailureHandler``: on every task failure call
:meth:`~RestartBackoffTimeStrategy.notify_failure`, then :meth:`~RestartBackoffTimeStrategy.can_restart`;
if it may, restart after :meth:`~RestartBackoffTimeStrategy.get_backoff_time` ms, else fail
the job. A strategy is not thread-safe: the JobMaster calls it under its lock.

Time comes from ``clock``, a callable returning ms; the default is the monotonic clock (Flink
uses the wall clock, which may jump). Tests inject their own.

What is built here is the decision only: restarting a job (cancel, reset the ExecutionGraph,
restore from the latest checkpoint, redeploy) is the recovery work of ``wip/ckpt-recovery``.
"""

from __future__ import annotations

import random
import time
from abc import ABC, abstractmethod
from collections import deque
from typing import Callable, Deque, Optional

from rill.common.configuration import Configuration
from rill.common.option_parsing import get_duration_ms, get_float, get_int, get_str
from rill.common.restart_strategy_options import RestartStrategyOptions as R
from rill.common.restart_strategy_options import RestartStrategyType

__all__ = [
    "Clock",
    "ExponentialDelayRestartBackoffTimeStrategy",
    "FailureRateRestartBackoffTimeStrategy",
    "FixedDelayRestartBackoffTimeStrategy",
    "NoRestartBackoffTimeStrategy",
    "RestartBackoffTimeStrategy",
    "restart_backoff_time_strategy_from_configuration",
]

_JAVA_LONG_MAX = 2**63 - 1

#: A source of time in ms (only differences matter).
Clock = Callable[[], int]


def _monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


class RestartBackoffTimeStrategy(ABC):
    """Decides whether a failed job restarts and how long it waits first (Flink's interface)."""

    @abstractmethod
    def can_restart(self) -> bool:
        """Whether the job may restart after the failures notified so far."""

    @abstractmethod
    def get_backoff_time(self) -> int:
        """ms to wait before the restart."""

    @abstractmethod
    def notify_failure(self, cause: BaseException) -> bool:
        """Record a failure; ``True`` if it counts as a new restart attempt (``False``: merged
        into the restart already pending, as exponential-delay does)."""


class NoRestartBackoffTimeStrategy(RestartBackoffTimeStrategy):
    """Never restarts: the first failure fails the job."""

    def can_restart(self) -> bool:
        return False

    def get_backoff_time(self) -> int:
        return 0

    def notify_failure(self, cause: BaseException) -> bool:
        return True

    def __repr__(self) -> str:
        return "NoRestartBackoffTimeStrategy"


class FixedDelayRestartBackoffTimeStrategy(RestartBackoffTimeStrategy):
    """Restarts at most ``max_number_restart_attempts`` times, ``backoff_time_ms`` apart.

    :raises ValueError: for negative attempts or delay (Flink's checks).
    """

    def __init__(self, max_number_restart_attempts: int, backoff_time_ms: int):
        _require(max_number_restart_attempts >= 0,
                 f"Maximum number of restart attempts must be at least 0, got {max_number_restart_attempts}")
        _require(backoff_time_ms >= 0,
                 f"Backoff time between restart attempts must be at least 0 ms, got {backoff_time_ms} ms")
        self.max_number_restart_attempts = max_number_restart_attempts
        self.backoff_time_ms = backoff_time_ms
        self._current_restart_attempt = 0

    def can_restart(self) -> bool:
        # notify_failure counts first, so n attempts allow n restarts
        return self._current_restart_attempt <= self.max_number_restart_attempts

    def get_backoff_time(self) -> int:
        return self.backoff_time_ms

    def notify_failure(self, cause: BaseException) -> bool:
        self._current_restart_attempt += 1
        return True

    def __repr__(self) -> str:
        return (f"FixedDelayRestartBackoffTimeStrategy(maxNumberRestartAttempts={self.max_number_restart_attempts}, "
                f"backoffTimeMS={self.backoff_time_ms})")


class FailureRateRestartBackoffTimeStrategy(RestartBackoffTimeStrategy):
    """Restarts, ``backoff_time_ms`` after each failure, until more than
    ``max_failures_per_interval`` failures fall within ``failures_interval_ms``.

    Keeps the times of the last ``max_failures_per_interval + 1`` failures: the job may restart
    unless that many are recorded and the oldest is at most ``failures_interval_ms`` old.

    :raises ValueError: for max failures or interval under 1, or a negative delay (Flink's checks).
    """

    def __init__(self, max_failures_per_interval: int, failures_interval_ms: int, backoff_time_ms: int,
                 clock: Optional[Clock] = None):
        _require(max_failures_per_interval > 0, "Maximum number of restart attempts per time unit must be "
                                                f"greater than 0, got {max_failures_per_interval}")
        _require(failures_interval_ms > 0,
                 f"Failures interval must be greater than 0 ms, got {failures_interval_ms} ms")
        _require(backoff_time_ms >= 0, f"Backoff time must be at least 0 ms, got {backoff_time_ms} ms")
        self.max_failures_per_interval = max_failures_per_interval
        self.failures_interval_ms = failures_interval_ms
        self.backoff_time_ms = backoff_time_ms
        self._clock = clock or _monotonic_ms
        self._failure_timestamps: Deque[int] = deque()

    def _is_full(self) -> bool:
        return len(self._failure_timestamps) > self.max_failures_per_interval

    def can_restart(self) -> bool:
        if self._is_full():
            return self._clock() - self._failure_timestamps[0] > self.failures_interval_ms
        return True

    def get_backoff_time(self) -> int:
        return self.backoff_time_ms

    def notify_failure(self, cause: BaseException) -> bool:
        if self._is_full():
            self._failure_timestamps.popleft()
        self._failure_timestamps.append(self._clock())
        return True

    def __repr__(self) -> str:
        return (f"FailureRateRestartBackoffTimeStrategy(failuresIntervalMS={self.failures_interval_ms}, "
                f"backoffTimeMS={self.backoff_time_ms}, maxFailuresPerInterval={self.max_failures_per_interval})")


class ExponentialDelayRestartBackoffTimeStrategy(RestartBackoffTimeStrategy):
    """Restarts with a delay that starts at ``initial_backoff_ms`` and is multiplied by
    ``backoff_multiplier`` after every attempt, up to ``max_backoff_ms``, each delay moved by a
    random jitter within ``jitter_factor`` of it (never below the initial backoff nor above the
    maximum). Failures while a restart is pending are merged into it. A failure more than
    ``reset_backoff_threshold_ms`` after the last scheduled restart resets the delay and the
    attempt count; more than ``attempts_before_reset_backoff`` attempts without a reset fail
    the job.

    :param seed: seeds the jitter's ``random.Random`` (``None``: unseeded), for reproducible tests.
    :raises ValueError: for the values Flink's constructor refuses (initial or max backoff under
        1 ms, initial above max, multiplier not above 1, threshold under 1 ms, jitter outside
        [0, 1], attempts under 1).
    """

    def __init__(self, initial_backoff_ms: int, max_backoff_ms: int, backoff_multiplier: float,
                 reset_backoff_threshold_ms: int, jitter_factor: float, attempts_before_reset_backoff: int,
                 clock: Optional[Clock] = None, seed: Optional[int] = None):
        _require(initial_backoff_ms >= 1, f"Initial backoff must be at least 1 ms, got {initial_backoff_ms} ms")
        _require(max_backoff_ms >= 1, f"Maximum backoff must be at least 1 ms, got {max_backoff_ms} ms")
        _require(initial_backoff_ms <= max_backoff_ms, f"Initial backoff ({initial_backoff_ms} ms) cannot be "
                                                       f"higher than maximum backoff ({max_backoff_ms} ms)")
        _require(backoff_multiplier > 1, f"Backoff multiplier must be greater than 1, got {backoff_multiplier}")
        _require(reset_backoff_threshold_ms >= 1, "Threshold duration for exponential backoff reset must be at "
                                                  f"least 1 ms, got {reset_backoff_threshold_ms} ms")
        _require(0 <= jitter_factor <= 1, f"Jitter factor must be >= 0 and <= 1, got {jitter_factor}")
        _require(attempts_before_reset_backoff >= 1, "The attempts before reset backoff must be at least 1, "
                                                     f"got {attempts_before_reset_backoff}")
        self.initial_backoff_ms = initial_backoff_ms
        self.max_backoff_ms = max_backoff_ms
        self.backoff_multiplier = backoff_multiplier
        self.reset_backoff_threshold_ms = reset_backoff_threshold_ms
        self.jitter_factor = jitter_factor
        self.attempts_before_reset_backoff = attempts_before_reset_backoff
        self._clock = clock or _monotonic_ms
        self._random = random.Random(seed)
        self._current_restart_attempt = 0
        self._next_restart_timestamp: Optional[int] = None

    def can_restart(self) -> bool:
        return self._current_restart_attempt <= self.attempts_before_reset_backoff

    def get_backoff_time(self) -> int:
        """ms until the restart scheduled by the last counted failure (0 if it is due).

        :raises RuntimeError: before the first :meth:`notify_failure`.
        """
        if self._next_restart_timestamp is None:
            raise RuntimeError("Please call notify_failure first.")
        return max(0, self._next_restart_timestamp - self._clock())

    def notify_failure(self, cause: BaseException) -> bool:
        now = self._clock()
        if self._next_restart_timestamp is not None:
            if now <= self._next_restart_timestamp:
                return False  # a restart is pending: this failure is part of it
            if now - self._next_restart_timestamp >= self.reset_backoff_threshold_ms:
                self._current_restart_attempt = 0
        self._next_restart_timestamp = now + self._actual_backoff_ms()
        self._current_restart_attempt += 1
        return True

    def _actual_backoff_ms(self) -> int:
        try:
            current = int(self.initial_backoff_ms * self.backoff_multiplier ** self._current_restart_attempt)
        except OverflowError:  # Java's (long) cast of an infinite double saturates
            current = _JAVA_LONG_MAX
        return max(self.initial_backoff_ms, min(current + self._jitter_ms(current), self.max_backoff_ms))

    def _jitter_ms(self, current_backoff_ms: int) -> int:
        """A uniform offset in [-n, n], n = jitter * current backoff (spreads restarts of many
        jobs failing together)."""
        if self.jitter_factor == 0:
            return 0
        offset = int(current_backoff_ms * self.jitter_factor)
        return self._random.randint(-offset, offset)

    def __repr__(self) -> str:
        return (f"ExponentialDelayRestartBackoffTimeStrategy(initialBackoffMS={self.initial_backoff_ms}, "
                f"maxBackoffMS={self.max_backoff_ms}, backoffMultiplier={self.backoff_multiplier}, "
                f"resetBackoffThresholdMS={self.reset_backoff_threshold_ms}, jitterFactor={self.jitter_factor}, "
                f"attemptsBeforeResetBackoff={self.attempts_before_reset_backoff}, "
                f"currentRestartAttempt={self._current_restart_attempt})")


def restart_backoff_time_strategy_from_configuration(conf: Configuration, checkpointing_enabled: bool,
                                                     clock: Optional[Clock] = None,
                                                     seed: Optional[int] = None) -> RestartBackoffTimeStrategy:
    """A new strategy for one job, from its configuration (Flink's
    ``RestartBackoffTimeStrategyFactoryLoader``): ``restart-strategy.type`` and its options; when
    the type is unset, exponential-delay with its defaults if ``checkpointing_enabled``, else
    no restart.

    :param clock: ms source of the failure-rate and exponential-delay strategies.
    :param seed: seeds the exponential-delay jitter.
    :raises ValueError: for an unknown type, a value that does not parse, or one the strategy
        refuses; the message names the key(s) and the value.
    """
    name = get_str(conf, R.RESTART_STRATEGY)
    if name is None:
        kind = (RestartStrategyType.EXPONENTIAL_DELAY if checkpointing_enabled
                else RestartStrategyType.NO_RESTART_STRATEGY)
    else:
        kind = RestartStrategyType.of(name)
    if kind is RestartStrategyType.NO_RESTART_STRATEGY:
        return NoRestartBackoffTimeStrategy()
    # values parse first (their errors name the key), then the strategy checks them together
    if kind is RestartStrategyType.FIXED_DELAY:
        make = FixedDelayRestartBackoffTimeStrategy
        args = (get_int(conf, R.RESTART_STRATEGY_FIXED_DELAY_ATTEMPTS),
                get_duration_ms(conf, R.RESTART_STRATEGY_FIXED_DELAY_DELAY))
    elif kind is RestartStrategyType.FAILURE_RATE:
        make = FailureRateRestartBackoffTimeStrategy
        args = (get_int(conf, R.RESTART_STRATEGY_FAILURE_RATE_MAX_FAILURES_PER_INTERVAL),
                get_duration_ms(conf, R.RESTART_STRATEGY_FAILURE_RATE_FAILURE_RATE_INTERVAL),
                get_duration_ms(conf, R.RESTART_STRATEGY_FAILURE_RATE_DELAY), clock)
    else:
        make = ExponentialDelayRestartBackoffTimeStrategy
        args = (get_duration_ms(conf, R.RESTART_STRATEGY_EXPONENTIAL_DELAY_INITIAL_BACKOFF),
                get_duration_ms(conf, R.RESTART_STRATEGY_EXPONENTIAL_DELAY_MAX_BACKOFF),
                get_float(conf, R.RESTART_STRATEGY_EXPONENTIAL_DELAY_BACKOFF_MULTIPLIER),
                get_duration_ms(conf, R.RESTART_STRATEGY_EXPONENTIAL_DELAY_RESET_BACKOFF_THRESHOLD),
                get_float(conf, R.RESTART_STRATEGY_EXPONENTIAL_DELAY_JITTER_FACTOR),
                get_int(conf, R.RESTART_STRATEGY_EXPONENTIAL_DELAY_ATTEMPTS), clock, seed)
    try:
        return make(*args)
    except ValueError as e:
        raise ValueError(f"Invalid restart-strategy.{kind.names[0]}.* configuration: {e}") from None
