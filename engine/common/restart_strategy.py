"""``RestartStrategies``: PyFlink's factory of restart strategy configurations
(``pyflink.common.restart_strategy``; Flink's ``RestartStrategies``, deprecated by FLIP-381).

Flink 2.x chooses the restart strategy with the ``restart-strategy.*`` keys
(:class:`~rill.common.restart_strategy_options.RestartStrategyOptions`); a configuration
built here is those keys: :meth:`RestartStrategyConfiguration.to_configuration` returns them and
``StreamExecutionEnvironment.set_restart_strategy`` writes them into the job's Configuration.

Example::

    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 10_000))
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Dict, Union

from rill.common.configuration import Configuration
from rill.common.restart_strategy_options import RestartStrategyOptions as _O

__all__ = ["RestartStrategies", "RestartStrategyConfiguration"]

Interval = Union[int, timedelta]


def _interval_ms(value: Interval, strategy: str, parameter: str) -> int:
    """``value`` in ms (an int is ms already, as PyFlink).

    :raises TypeError: naming the strategy and parameter, for anything but an int or timedelta.
    :raises ValueError: for a negative interval.
    """
    if isinstance(value, timedelta):
        ms = int(value.total_seconds() * 1000)
    elif isinstance(value, int) and not isinstance(value, bool):
        ms = value
    else:
        raise TypeError(f"RestartStrategies.{strategy}: the parameter '{parameter}' only supports integer "
                        f"(ms) and datetime.timedelta, got {type(value).__name__} {value!r}")
    if ms < 0:
        raise ValueError(f"RestartStrategies.{strategy}: '{parameter}' must not be negative, got {ms} ms")
    return ms


def _count(value: Any, strategy: str, parameter: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"RestartStrategies.{strategy}: '{parameter}' must be an int >= 0, got {value!r}")
    return value


class RestartStrategyConfiguration:
    """A restart strategy as the ``restart-strategy.*`` keys that select it (PyFlink's
    ``RestartStrategyConfiguration``). Equal when the keys are equal."""

    def __init__(self, description: str, keys: Dict[str, Any]) -> None:
        self._description = description
        self._keys = dict(keys)

    def get_description(self) -> str:
        """A one-line description of the strategy (Flink's ``getDescription``)."""
        return self._description

    def to_configuration(self) -> Configuration:
        """The ``restart-strategy.*`` keys of this strategy (durations as ms); empty for
        :meth:`RestartStrategies.fall_back_restart`, which leaves the cluster's choice."""
        conf = Configuration()
        for key, value in self._keys.items():
            conf.set_string(key, str(value))
        return conf

    def __eq__(self, other: object) -> bool:
        return isinstance(other, self.__class__) and self._keys == other._keys

    def __hash__(self) -> int:
        return hash((self.__class__, tuple(sorted(self._keys.items()))))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._description})"


class RestartStrategies:
    """Factory methods of :class:`RestartStrategyConfiguration` s (PyFlink's ``RestartStrategies``).
    Intervals are int ms or ``datetime.timedelta``."""

    class NoRestartStrategyConfiguration(RestartStrategyConfiguration):
        """The job fails on the first task failure (``restart-strategy.type: none``)."""

        def __init__(self) -> None:
            super().__init__("Restart deactivated.", {_O.RESTART_STRATEGY.key: "none"})

    class FixedDelayRestartStrategyConfiguration(RestartStrategyConfiguration):
        """``restart_attempts`` restarts, ``delay_between_attempts_interval`` apart (fixed-delay)."""

        def __init__(self, restart_attempts: int, delay_between_attempts_interval: Interval) -> None:
            self._attempts = _count(restart_attempts, "fixed_delay_restart", "restart_attempts")
            self._delay = _interval_ms(delay_between_attempts_interval, "fixed_delay_restart",
                                       "delay_between_attempts")
            super().__init__(
                f"Restart with fixed delay ({self._delay} ms). #{self._attempts} restart attempts.",
                {_O.RESTART_STRATEGY.key: "fixed-delay",
                 _O.RESTART_STRATEGY_FIXED_DELAY_ATTEMPTS.key: self._attempts,
                 _O.RESTART_STRATEGY_FIXED_DELAY_DELAY.key: self._delay})

        def get_restart_attempts(self) -> int:
            return self._attempts

        def get_delay_between_attempts_interval(self) -> timedelta:
            return timedelta(milliseconds=self._delay)

    class FailureRateRestartStrategyConfiguration(RestartStrategyConfiguration):
        """Restarts until more than ``max_failure_rate`` failures fall within
        ``failure_interval``, ``delay_between_attempts_interval`` apart (failure-rate)."""

        def __init__(self, max_failure_rate: int, failure_interval: Interval,
                     delay_between_attempts_interval: Interval) -> None:
            self._rate = _count(max_failure_rate, "failure_rate_restart", "failure_rate")
            self._interval = _interval_ms(failure_interval, "failure_rate_restart", "failure_interval")
            self._delay = _interval_ms(delay_between_attempts_interval, "failure_rate_restart", "delay_interval")
            super().__init__(
                f"Failure rate restart with maximum of {self._rate} failures within interval "
                f"{self._interval} ms and fixed delay {self._delay} ms.",
                {_O.RESTART_STRATEGY.key: "failure-rate",
                 _O.RESTART_STRATEGY_FAILURE_RATE_MAX_FAILURES_PER_INTERVAL.key: self._rate,
                 _O.RESTART_STRATEGY_FAILURE_RATE_FAILURE_RATE_INTERVAL.key: self._interval,
                 _O.RESTART_STRATEGY_FAILURE_RATE_DELAY.key: self._delay})

        def get_max_failure_rate(self) -> int:
            return self._rate

        def get_failure_interval(self) -> timedelta:
            return timedelta(milliseconds=self._interval)

        def get_delay_between_attempts_interval(self) -> timedelta:
            return timedelta(milliseconds=self._delay)

    class ExponentialDelayRestartStrategyConfiguration(RestartStrategyConfiguration):
        """Restarts with a delay growing from ``initial_backoff`` by ``backoff_multiplier`` up to
        ``max_backoff``, reset after ``reset_backoff_threshold`` without failure, each moved by up
        to ``jitter_factor`` of it (exponential-delay; Flink's Java ``RestartStrategies``, which
        PyFlink does not expose)."""

        def __init__(self, initial_backoff: Interval, max_backoff: Interval, backoff_multiplier: float,
                     reset_backoff_threshold: Interval, jitter_factor: float) -> None:
            name = "exponential_delay_restart"
            self._initial = _interval_ms(initial_backoff, name, "initial_backoff")
            self._max = _interval_ms(max_backoff, name, "max_backoff")
            self._reset = _interval_ms(reset_backoff_threshold, name, "reset_backoff_threshold")
            if isinstance(backoff_multiplier, bool) or not isinstance(backoff_multiplier, (int, float)) \
                    or backoff_multiplier < 1:
                raise ValueError(f"RestartStrategies.{name}: 'backoff_multiplier' must be a number >= 1, "
                                 f"got {backoff_multiplier!r}")
            if isinstance(jitter_factor, bool) or not isinstance(jitter_factor, (int, float)) \
                    or not 0 <= jitter_factor <= 1:
                raise ValueError(f"RestartStrategies.{name}: 'jitter_factor' must be a number in [0, 1], "
                                 f"got {jitter_factor!r}")
            self._multiplier, self._jitter = float(backoff_multiplier), float(jitter_factor)
            super().__init__(
                f"Restart with exponential delay: starting at {self._initial} ms, increasing by "
                f"{self._multiplier}, with maximum {self._max} ms. Delay resets after {self._reset} ms.",
                {_O.RESTART_STRATEGY.key: "exponential-delay",
                 _O.RESTART_STRATEGY_EXPONENTIAL_DELAY_INITIAL_BACKOFF.key: self._initial,
                 _O.RESTART_STRATEGY_EXPONENTIAL_DELAY_MAX_BACKOFF.key: self._max,
                 _O.RESTART_STRATEGY_EXPONENTIAL_DELAY_BACKOFF_MULTIPLIER.key: self._multiplier,
                 _O.RESTART_STRATEGY_EXPONENTIAL_DELAY_RESET_BACKOFF_THRESHOLD.key: self._reset,
                 _O.RESTART_STRATEGY_EXPONENTIAL_DELAY_JITTER_FACTOR.key: self._jitter})

        def get_initial_backoff(self) -> timedelta:
            return timedelta(milliseconds=self._initial)

        def get_max_backoff(self) -> timedelta:
            return timedelta(milliseconds=self._max)

        def get_backoff_multiplier(self) -> float:
            return self._multiplier

        def get_reset_backoff_threshold(self) -> timedelta:
            return timedelta(milliseconds=self._reset)

        def get_jitter_factor(self) -> float:
            return self._jitter

    class FallbackRestartStrategyConfiguration(RestartStrategyConfiguration):
        """Keeps whatever ``restart-strategy.*`` the cluster/Configuration already has."""

        def __init__(self) -> None:
            super().__init__("Cluster level default restart strategy", {})

    @staticmethod
    def no_restart() -> "RestartStrategies.NoRestartStrategyConfiguration":
        return RestartStrategies.NoRestartStrategyConfiguration()

    @staticmethod
    def fall_back_restart() -> "RestartStrategies.FallbackRestartStrategyConfiguration":
        return RestartStrategies.FallbackRestartStrategyConfiguration()

    @staticmethod
    def fixed_delay_restart(restart_attempts: int, delay_between_attempts: Interval) \
            -> "RestartStrategies.FixedDelayRestartStrategyConfiguration":
        """:raises ValueError/TypeError: for a negative count or a delay that is not an
        int (ms) or timedelta."""
        return RestartStrategies.FixedDelayRestartStrategyConfiguration(restart_attempts, delay_between_attempts)

    @staticmethod
    def failure_rate_restart(failure_rate: int, failure_interval: Interval, delay_interval: Interval) \
            -> "RestartStrategies.FailureRateRestartStrategyConfiguration":
        """:raises ValueError/TypeError: as :meth:`fixed_delay_restart`."""
        return RestartStrategies.FailureRateRestartStrategyConfiguration(failure_rate, failure_interval,
                                                                         delay_interval)

    @staticmethod
    def exponential_delay_restart(initial_backoff: Interval, max_backoff: Interval, backoff_multiplier: float,
                                  reset_backoff_threshold: Interval, jitter_factor: float) \
            -> "RestartStrategies.ExponentialDelayRestartStrategyConfiguration":
        """Flink's Java ``RestartStrategies.exponentialDelayRestart`` (PyFlink 2.3 lacks it).

        :raises ValueError/TypeError: for a negative interval, a multiplier under 1 or a jitter
            factor outside [0, 1].
        """
        return RestartStrategies.ExponentialDelayRestartStrategyConfiguration(
            initial_backoff, max_backoff, backoff_multiplier, reset_backoff_threshold, jitter_factor)
