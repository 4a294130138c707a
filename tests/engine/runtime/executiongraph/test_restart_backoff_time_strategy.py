"""Restart strategies: Flink 2.x's keys and defaults, the choice by configuration, and each
strategy's decisions under an injected clock (ms)."""

from __future__ import annotations

import random

import pytest

from rill.common.configuration import Configuration
from rill.common.restart_strategy_options import RestartStrategyOptions as R
from rill.common.restart_strategy_options import RestartStrategyType
from rill.runtime.executiongraph.failover.restart_backoff_time_strategy import (
    ExponentialDelayRestartBackoffTimeStrategy,
    FailureRateRestartBackoffTimeStrategy,
    FixedDelayRestartBackoffTimeStrategy,
    NoRestartBackoffTimeStrategy,
    restart_backoff_time_strategy_from_configuration,
)

FAILURE = RuntimeError("task failed")


class ManualClock:
    def __init__(self, now: int = 0):
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.mark.parametrize("option,key,default", [
    (R.RESTART_STRATEGY, "restart-strategy.type", None),
    (R.RESTART_STRATEGY_FIXED_DELAY_ATTEMPTS, "restart-strategy.fixed-delay.attempts", 1),
    (R.RESTART_STRATEGY_FIXED_DELAY_DELAY, "restart-strategy.fixed-delay.delay", 1000),
    (R.RESTART_STRATEGY_FAILURE_RATE_MAX_FAILURES_PER_INTERVAL,
     "restart-strategy.failure-rate.max-failures-per-interval", 1),
    (R.RESTART_STRATEGY_FAILURE_RATE_FAILURE_RATE_INTERVAL, "restart-strategy.failure-rate.failure-rate-interval",
     60_000),
    (R.RESTART_STRATEGY_FAILURE_RATE_DELAY, "restart-strategy.failure-rate.delay", 1000),
    (R.RESTART_STRATEGY_EXPONENTIAL_DELAY_INITIAL_BACKOFF, "restart-strategy.exponential-delay.initial-backoff", 1000),
    (R.RESTART_STRATEGY_EXPONENTIAL_DELAY_MAX_BACKOFF, "restart-strategy.exponential-delay.max-backoff", 60_000),
    (R.RESTART_STRATEGY_EXPONENTIAL_DELAY_BACKOFF_MULTIPLIER, "restart-strategy.exponential-delay.backoff-multiplier",
     1.5),
    (R.RESTART_STRATEGY_EXPONENTIAL_DELAY_RESET_BACKOFF_THRESHOLD,
     "restart-strategy.exponential-delay.reset-backoff-threshold", 3_600_000),
    (R.RESTART_STRATEGY_EXPONENTIAL_DELAY_JITTER_FACTOR, "restart-strategy.exponential-delay.jitter-factor", 0.1),
    (R.RESTART_STRATEGY_EXPONENTIAL_DELAY_ATTEMPTS, "restart-strategy.exponential-delay.attempts-before-reset-backoff",
     2147483647),
])
def test_keys_and_defaults(option, key, default):
    assert (option.key, option.default) == (key, default)


def test_default_strategy_depends_on_checkpointing():
    assert type(restart_backoff_time_strategy_from_configuration(Configuration(), False)) is NoRestartBackoffTimeStrategy
    s = restart_backoff_time_strategy_from_configuration(Configuration(), True)
    assert type(s) is ExponentialDelayRestartBackoffTimeStrategy
    assert (s.initial_backoff_ms, s.max_backoff_ms, s.backoff_multiplier, s.reset_backoff_threshold_ms,
            s.jitter_factor, s.attempts_before_reset_backoff) == (1000, 60_000, 1.5, 3_600_000, 0.1, 2147483647)


@pytest.mark.parametrize("name,kind", [
    ("none", NoRestartBackoffTimeStrategy), ("off", NoRestartBackoffTimeStrategy),
    ("disable", NoRestartBackoffTimeStrategy), ("NONE", NoRestartBackoffTimeStrategy),
    ("fixed-delay", FixedDelayRestartBackoffTimeStrategy), ("fixeddelay", FixedDelayRestartBackoffTimeStrategy),
    ("failure-rate", FailureRateRestartBackoffTimeStrategy), ("failurerate", FailureRateRestartBackoffTimeStrategy),
    ("exponential-delay", ExponentialDelayRestartBackoffTimeStrategy),
    ("exponentialdelay", ExponentialDelayRestartBackoffTimeStrategy),
])
def test_type_names(name, kind):
    # an explicit type wins over the checkpointing default, either way
    for checkpointing in (False, True):
        conf = Configuration().set_string("restart-strategy.type", name)
        assert type(restart_backoff_time_strategy_from_configuration(conf, checkpointing)) is kind


def test_deprecated_type_key():
    conf = Configuration().set_string("restart-strategy", "fixed-delay")
    assert type(restart_backoff_time_strategy_from_configuration(conf, False)) is FixedDelayRestartBackoffTimeStrategy


def test_options_are_read_from_the_configuration():
    conf = Configuration().set_string("restart-strategy.type", "fixed-delay")
    conf.set_string("restart-strategy.fixed-delay.attempts", "4").set_string("restart-strategy.fixed-delay.delay", "10 s")
    s = restart_backoff_time_strategy_from_configuration(conf, False)
    assert (s.max_number_restart_attempts, s.backoff_time_ms) == (4, 10_000)

    conf = Configuration().set_string("restart-strategy.type", "failure-rate")
    conf.set_string("restart-strategy.failure-rate.max-failures-per-interval", "3")
    conf.set_string("restart-strategy.failure-rate.failure-rate-interval", "5 min")
    conf.set_string("restart-strategy.failure-rate.delay", "250 ms")
    s = restart_backoff_time_strategy_from_configuration(conf, False)
    assert (s.max_failures_per_interval, s.failures_interval_ms, s.backoff_time_ms) == (3, 300_000, 250)

    conf = Configuration().set_string("restart-strategy.type", "exponential-delay")
    for key, value in [("initial-backoff", "10 s"), ("max-backoff", "2 min"), ("backoff-multiplier", "1.4"),
                       ("reset-backoff-threshold", "10 min"), ("jitter-factor", "0.2"),
                       ("attempts-before-reset-backoff", "10")]:
        conf.set_string(f"restart-strategy.exponential-delay.{key}", value)
    s = restart_backoff_time_strategy_from_configuration(conf, False)
    assert (s.initial_backoff_ms, s.max_backoff_ms, s.backoff_multiplier, s.reset_backoff_threshold_ms,
            s.jitter_factor, s.attempts_before_reset_backoff) == (10_000, 120_000, 1.4, 600_000, 0.2, 10)


@pytest.mark.parametrize("settings,message", [
    ({"restart-strategy.type": "sometimes"},
     "Invalid value 'sometimes' for 'restart-strategy.type': unknown restart strategy; accepted: none, off, "
     "disable, fixed-delay, fixeddelay, failure-rate, failurerate, exponential-delay, exponentialdelay"),
    ({"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "many"},
     "Invalid value 'many' for 'restart-strategy.fixed-delay.attempts': expected an integer"),
    ({"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "-1"},
     "Invalid restart-strategy.fixed-delay.* configuration: Maximum number of restart attempts must be at "
     "least 0, got -1"),
    ({"restart-strategy.type": "failure-rate", "restart-strategy.failure-rate.failure-rate-interval": "0 s"},
     "Invalid restart-strategy.failure-rate.* configuration: Failures interval must be greater than 0 ms, "
     "got 0 ms"),
    ({"restart-strategy.type": "exponential-delay", "restart-strategy.exponential-delay.backoff-multiplier": "1"},
     "Invalid restart-strategy.exponential-delay.* configuration: Backoff multiplier must be greater than 1, "
     "got 1.0"),
    ({"restart-strategy.type": "exponential-delay", "restart-strategy.exponential-delay.initial-backoff": "2 min"},
     "Invalid restart-strategy.exponential-delay.* configuration: Initial backoff (120000 ms) cannot be higher "
     "than maximum backoff (60000 ms)"),
    ({"restart-strategy.type": "exponential-delay", "restart-strategy.exponential-delay.jitter-factor": "1.5"},
     "Invalid restart-strategy.exponential-delay.* configuration: Jitter factor must be >= 0 and <= 1, got 1.5"),
    ({"restart-strategy.type": "exponential-delay", "restart-strategy.exponential-delay.max-backoff": "soon"},
     "Invalid value 'soon' for 'restart-strategy.exponential-delay.max-backoff': duration 'soon' does not start "
     "with a whole number"),
])
def test_configuration_errors(settings, message):
    conf = Configuration()
    for k, v in settings.items():
        conf.set_string(k, v)
    with pytest.raises(ValueError) as e:
        restart_backoff_time_strategy_from_configuration(conf, True)
    assert str(e.value) == message


def test_type_of():
    assert RestartStrategyType.of(" Fixed-Delay ") is RestartStrategyType.FIXED_DELAY


def test_no_restart():
    s = NoRestartBackoffTimeStrategy()
    assert s.notify_failure(FAILURE) is True
    assert (s.can_restart(), s.get_backoff_time()) == (False, 0)


def test_fixed_delay_allows_exactly_the_configured_attempts():
    s = FixedDelayRestartBackoffTimeStrategy(2, 500)
    decisions = []
    for _ in range(3):
        s.notify_failure(FAILURE)
        decisions.append((s.can_restart(), s.get_backoff_time()))
    assert decisions == [(True, 500), (True, 500), (False, 500)]
    zero = FixedDelayRestartBackoffTimeStrategy(0, 0)
    zero.notify_failure(FAILURE)
    assert zero.can_restart() is False


def test_failure_rate_counts_failures_within_the_interval():
    clock = ManualClock()
    s = FailureRateRestartBackoffTimeStrategy(2, 10_000, 100, clock)
    decisions = []
    for t in (0, 1000, 2000):
        clock.now = t
        s.notify_failure(FAILURE)
        decisions.append(s.can_restart())
    assert decisions == [True, True, False]  # three failures within 10 s: more than 2
    clock.now = 10_000
    assert s.can_restart() is False  # the oldest is exactly 10 s old: still within
    clock.now = 10_001
    assert s.can_restart() is True  # it left the window
    assert s.get_backoff_time() == 100


def test_failure_rate_window_slides():
    clock = ManualClock()
    s = FailureRateRestartBackoffTimeStrategy(2, 10_000, 0, clock)
    decisions = []
    for t in (0, 6000, 12_000, 13_000):
        clock.now = t
        s.notify_failure(FAILURE)
        decisions.append(s.can_restart())
    # at 12 s the failure at 0 is out of the window; at 13 s three (6, 12, 13 s) are within it
    assert decisions == [True, True, True, False]


def test_exponential_delay_grows_merges_caps_and_fails_after_the_attempts():
    clock = ManualClock()
    s = ExponentialDelayRestartBackoffTimeStrategy(1000, 10_000, 2.0, 5000, 0.0, 4, clock)
    with pytest.raises(RuntimeError, match="Please call notify_failure first."):
        s.get_backoff_time()
    trace = []
    for t in (0, 500, 1500, 4000, 9000, 17_500):
        clock.now = t
        counted = s.notify_failure(FAILURE)
        trace.append((t, counted, s.get_backoff_time(), s.can_restart()))
    assert trace == [
        (0, True, 1000, True),        # attempt 1: 1 s
        (500, False, 500, True),      # the restart at 1 s is pending: merged into it
        (1500, True, 2000, True),     # attempt 2: 2 s
        (4000, True, 4000, True),     # attempt 3: 4 s (restart at 8 s)
        (9000, True, 8000, True),     # attempt 4: 8 s (restart at 17 s)
        (17_500, True, 10_000, False),  # attempt 5: 16 s capped at 10 s; more than 4 attempts
    ]


def test_exponential_delay_resets_after_the_threshold():
    clock = ManualClock()
    s = ExponentialDelayRestartBackoffTimeStrategy(1000, 60_000, 2.0, 5000, 0.0, 2, clock)
    for t in (0, 2000):
        clock.now = t
        s.notify_failure(FAILURE)
    assert s.get_backoff_time() == 2000  # next restart at 4 s, attempt 2
    clock.now = 4000 + 4999
    s.notify_failure(FAILURE)  # 4.999 s after the restart: no reset, attempt 3
    assert (s.get_backoff_time(), s.can_restart()) == (4000, False)
    clock.now = 8999 + 4000 + 5000
    s.notify_failure(FAILURE)  # 5 s without failure after the last restart: back to 1 s, attempt 1
    assert (s.get_backoff_time(), s.can_restart()) == (1000, True)


def test_exponential_delay_jitter_is_seeded_and_bounded():
    clock = ManualClock()
    s = ExponentialDelayRestartBackoffTimeStrategy(1000, 60_000, 2.0, 3_600_000, 0.25, 100, clock, seed=7)
    expected_rng = random.Random(7)
    backoffs, expected = [], []
    for attempt in range(5):
        clock.now += 100_000  # each failure after the pending restart
        s.notify_failure(FAILURE)
        backoffs.append(s.get_backoff_time())
        base = 1000 * 2 ** attempt
        offset = int(base * 0.25)
        expected.append(max(1000, min(base + expected_rng.randint(-offset, offset), 60_000)))
    assert backoffs == expected
    assert all(1000 <= b <= 1000 * 2 ** i * 1.25 for i, b in enumerate(backoffs))
    assert len(set(b - 1000 * 2 ** i for i, b in enumerate(backoffs[1:], 1))) > 1  # jitter moved them


def test_exponential_delay_survives_a_huge_attempt_count():
    clock = ManualClock()
    s = ExponentialDelayRestartBackoffTimeStrategy(1, 60_000, 10.0, 3_600_000, 0.0, 2147483647, clock)
    for _ in range(400):  # 10**400 overflows a float: the delay saturates at the maximum
        clock.now += 100_000
        s.notify_failure(FAILURE)
    assert (s.get_backoff_time(), s.can_restart()) == (60_000, True)


@pytest.mark.parametrize("make,message", [
    (lambda: ExponentialDelayRestartBackoffTimeStrategy(0, 10, 2.0, 1, 0.0, 1), "Initial backoff must be at least 1 ms, got 0 ms"),
    (lambda: ExponentialDelayRestartBackoffTimeStrategy(1, 10, 2.0, 0, 0.0, 1),
     "Threshold duration for exponential backoff reset must be at least 1 ms, got 0 ms"),
    (lambda: ExponentialDelayRestartBackoffTimeStrategy(1, 10, 2.0, 1, 0.0, 0),
     "The attempts before reset backoff must be at least 1, got 0"),
    (lambda: FailureRateRestartBackoffTimeStrategy(0, 10, 0),
     "Maximum number of restart attempts per time unit must be greater than 0, got 0"),
    (lambda: FixedDelayRestartBackoffTimeStrategy(1, -1), "Backoff time between restart attempts must be at least 0 ms, got -1 ms"),
])
def test_constructor_errors(make, message):
    with pytest.raises(ValueError) as e:
        make()
    assert str(e.value) == message
