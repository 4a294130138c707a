"""Retry strategies and predicates: attempts allowed, delays, validation with exact messages."""

from __future__ import annotations

import pytest

from rill.datastream import AsyncRetryStrategy
from rill.datastream.async_retry_predicates import (
    empty_result_predicate,
    exception_type_predicate,
    has_exception_predicate,
)
from rill.datastream.async_retry_strategies import (
    NO_RETRY_STRATEGY,
    ExponentialBackoffDelayRetryStrategy,
    FixedDelayRetryStrategy,
)
from rill.datastream.functions import AsyncFunction


def test_fixed_delay_allows_max_attempts_retries():
    s = FixedDelayRetryStrategy(3, 50, empty_result_predicate, None)
    assert [s.can_retry(n) for n in range(1, 6)] == [True, True, True, False, False]
    assert [s.get_backoff_time_millis(n) for n in range(1, 4)] == [50, 50, 50]
    assert s.get_retry_predicate().result_predicate() is empty_result_predicate
    assert s.get_retry_predicate().exception_predicate() is None


def test_exponential_backoff_grows_to_its_cap_per_attempt_not_per_call_history():
    s = ExponentialBackoffDelayRetryStrategy(10, 100, 1000, 2.0, None, has_exception_predicate)
    assert [s.get_backoff_time_millis(n) for n in range(1, 7)] == [100, 200, 400, 800, 1000, 1000]
    assert s.get_backoff_time_millis(2) == 200  # no state carried between records
    assert s.can_retry(10) and not s.can_retry(11)


def test_no_retry_and_the_static_factories():
    assert not NO_RETRY_STRATEGY.can_retry(1)
    assert AsyncRetryStrategy.no_restart() is NO_RETRY_STRATEGY
    assert isinstance(AsyncRetryStrategy.fixed_delay(1, 1, None, None), FixedDelayRetryStrategy)
    assert isinstance(AsyncRetryStrategy.exponential_backoff(1, 1, 1, 1.5, None, None),
                      ExponentialBackoffDelayRetryStrategy)


def test_invalid_strategy_arguments_name_the_strategy_and_the_value():
    with pytest.raises(ValueError, match=r"^FixedDelayRetryStrategy: max_attempts must be a positive int, got 0$"):
        FixedDelayRetryStrategy(0, 10)
    with pytest.raises(ValueError, match=r"ExponentialBackoffDelayRetryStrategy: multiplier must be a positive "
                                         r"float, got -1"):
        ExponentialBackoffDelayRetryStrategy(1, 1, 1, -1)
    with pytest.raises(TypeError, match=r"RetryPredicate: result_predicate must be callable or None, got 'x'"):
        FixedDelayRetryStrategy(1, 1, "x")


def test_predicates():
    assert empty_result_predicate([]) and empty_result_predicate(None) and not empty_result_predicate([0])
    assert has_exception_predicate(ValueError()) and not has_exception_predicate(None)
    assert exception_type_predicate(ConnectionResetError(), ConnectionError)
    assert not exception_type_predicate(KeyError(), ConnectionError)


def test_pyflink_import_paths():
    from rill.datastream import AsyncFunction as FromPackage
    assert FromPackage is AsyncFunction
