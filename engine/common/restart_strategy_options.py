"""Restart strategy settings: Flink 2.x's ``RestartStrategyOptions`` keys and defaults.

Flink 2.0 removed ``RestartStrategies`` and ``set_restart_strategy`` (FLINK-36249, FLIP-381):
a job chooses its restart strategy with these keys in its ``Configuration``. When
``restart-strategy.type`` is not set, a job with checkpointing enabled restarts with
``exponential-delay`` and its default settings, and a job without checkpointing is not
restarted (``RestartBackoffTimeStrategyFactoryLoader``).

The strategies themselves live in ``rill.runtime.executiongraph.failover``.
"""

from __future__ import annotations

from enum import Enum
from typing import Tuple

from rill.common.configuration import ConfigOption

__all__ = ["RestartStrategyOptions", "RestartStrategyType"]

#: Java's Integer.MAX_VALUE: Flink's "infinite" number of attempts
_INFINITE_ATTEMPTS = 2147483647


class RestartStrategyType(Enum):
    """The restart strategies and the names ``restart-strategy.type`` accepts for each
    (Flink's ``RestartStrategyOptions.RestartStrategyType``)."""

    NO_RESTART_STRATEGY = ("none", "off", "disable")
    FIXED_DELAY = ("fixed-delay", "fixeddelay")
    FAILURE_RATE = ("failure-rate", "failurerate")
    EXPONENTIAL_DELAY = ("exponential-delay", "exponentialdelay")

    @property
    def names(self) -> Tuple[str, ...]:
        return self.value

    @staticmethod
    def of(name: str) -> "RestartStrategyType":
        """The type ``name`` (any case) stands for.

        :raises ValueError: naming ``restart-strategy.type``, the value and the accepted names.
        """
        wanted = str(name).strip().lower()
        for t in RestartStrategyType:
            if wanted in t.names:
                return t
        accepted = ", ".join(n for t in RestartStrategyType for n in t.names)
        raise ValueError(f"Invalid value {name!r} for '{RestartStrategyOptions.RESTART_STRATEGY.key}': unknown "
                         f"restart strategy; accepted: {accepted}")


class RestartStrategyOptions:
    """The restart strategy ``ConfigOption`` s, under Flink's constant names. Durations are int
    ms by default and accept Flink duration strings (``"10 s"``)."""

    RESTART_STRATEGY = ConfigOption(
        "restart-strategy.type", None,
        "none/off/disable, fixed-delay/fixeddelay, failure-rate/failurerate or "
        "exponential-delay/exponentialdelay. Unset: exponential-delay if checkpointing is "
        "enabled, none otherwise.",
        ("restart-strategy",))
    RESTART_STRATEGY_FIXED_DELAY_ATTEMPTS = ConfigOption(
        "restart-strategy.fixed-delay.attempts", 1,
        "Restarts tried before the job fails (fixed-delay).")
    RESTART_STRATEGY_FIXED_DELAY_DELAY = ConfigOption(
        "restart-strategy.fixed-delay.delay", 1000, "Delay between two restarts (fixed-delay).")
    RESTART_STRATEGY_FAILURE_RATE_MAX_FAILURES_PER_INTERVAL = ConfigOption(
        "restart-strategy.failure-rate.max-failures-per-interval", 1,
        "Failures within the interval after which the job fails (failure-rate).")
    RESTART_STRATEGY_FAILURE_RATE_FAILURE_RATE_INTERVAL = ConfigOption(
        "restart-strategy.failure-rate.failure-rate-interval", 60_000,
        "The interval over which failures are counted (failure-rate).")
    RESTART_STRATEGY_FAILURE_RATE_DELAY = ConfigOption(
        "restart-strategy.failure-rate.delay", 1000, "Delay between two restarts (failure-rate).")
    RESTART_STRATEGY_EXPONENTIAL_DELAY_INITIAL_BACKOFF = ConfigOption(
        "restart-strategy.exponential-delay.initial-backoff", 1000,
        "The first delay, and the delay after a reset (exponential-delay).")
    RESTART_STRATEGY_EXPONENTIAL_DELAY_MAX_BACKOFF = ConfigOption(
        "restart-strategy.exponential-delay.max-backoff", 60_000,
        "The longest delay between two restarts (exponential-delay).")
    RESTART_STRATEGY_EXPONENTIAL_DELAY_BACKOFF_MULTIPLIER = ConfigOption(
        "restart-strategy.exponential-delay.backoff-multiplier", 1.5,
        "The delay is multiplied by this after every failure, up to max-backoff (exponential-delay).")
    RESTART_STRATEGY_EXPONENTIAL_DELAY_RESET_BACKOFF_THRESHOLD = ConfigOption(
        "restart-strategy.exponential-delay.reset-backoff-threshold", 3_600_000,
        "Time without failure after which the delay and attempt count return to their initial "
        "values (exponential-delay).")
    RESTART_STRATEGY_EXPONENTIAL_DELAY_JITTER_FACTOR = ConfigOption(
        "restart-strategy.exponential-delay.jitter-factor", 0.1,
        "Each delay is moved by a random amount within this fraction of it (exponential-delay).")
    RESTART_STRATEGY_EXPONENTIAL_DELAY_ATTEMPTS = ConfigOption(
        "restart-strategy.exponential-delay.attempts-before-reset-backoff", _INFINITE_ATTEMPTS,
        "Restarts tried before the job fails; the count resets with the delay (exponential-delay).")
