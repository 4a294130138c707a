"""Retry strategies for async I/O, with PyFlink's names (``pyflink.datastream.
async_retry_strategies``; Flink's ``AsyncRetryStrategies``).

``current_attempts`` is the number of attempts made so far for one record (1 after the first
call). A strategy with ``max_attempts = n`` allows ``n`` retries after the first call, as
Flink's ``canRetry(currentAttempts) = currentAttempts <= maxAttempts``.

Difference from PyFlink: PyFlink's exponential strategy keeps the last delay in the strategy
object, which all in-flight records share, so concurrent records disturb each other's delays.
Here the delay is a pure function of ``current_attempts``: ``min(initial_delay *
multiplier ** (current_attempts - 1), max_retry_delay)``.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional

from rill.datastream.async_functions import AsyncRetryPredicate, AsyncRetryStrategy

__all__ = [
    "RetryPredicate",
    "NoRetryStrategy",
    "FixedDelayRetryStrategy",
    "ExponentialBackoffDelayRetryStrategy",
    "NO_RETRY_STRATEGY",
]

ResultPredicate = Optional[Callable[[List[Any]], bool]]
ExceptionPredicate = Optional[Callable[[Exception], bool]]


def _check_positive(strategy: str, name: str, value: Any, kind: type = int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float) if kind is float else int) or value <= 0:
        raise ValueError(f"{strategy}: {name} must be a positive {kind.__name__}, got {value!r}")


def _check_predicate(strategy: str, name: str, value: Any) -> None:
    if value is not None and not callable(value):
        raise TypeError(f"{strategy}: {name} must be callable or None, got {value!r}")


class RetryPredicate(AsyncRetryPredicate):
    """A result predicate and an exception predicate, each optional (PyFlink's
    ``RetryPredicate``).

    :param result_predicate: ``(list) -> bool`` on the records an attempt returned, or ``None``.
    :param exception_predicate: ``(Exception) -> bool`` on what an attempt raised, or ``None``.
    """

    def __init__(self, result_predicate: ResultPredicate, exception_predicate: ExceptionPredicate):
        _check_predicate("RetryPredicate", "result_predicate", result_predicate)
        _check_predicate("RetryPredicate", "exception_predicate", exception_predicate)
        self._result_predicate = result_predicate
        self._exception_predicate = exception_predicate

    def result_predicate(self) -> ResultPredicate:
        return self._result_predicate

    def exception_predicate(self) -> ExceptionPredicate:
        return self._exception_predicate


class NoRetryStrategy(AsyncRetryStrategy):
    """Never retries (PyFlink's ``NoRetryStrategy``; use :data:`NO_RETRY_STRATEGY`)."""

    def can_retry(self, current_attempts: int) -> bool:
        return False

    def get_backoff_time_millis(self, current_attempts: int) -> int:
        return -1

    def get_retry_predicate(self) -> AsyncRetryPredicate:
        return RetryPredicate(None, None)


class FixedDelayRetryStrategy(AsyncRetryStrategy):
    """Up to ``max_attempts`` retries, ``backoff_time_millis`` ms apart (PyFlink's
    ``FixedDelayRetryStrategy``).

    :param max_attempts: retries allowed after the first call (> 0).
    :param backoff_time_millis: delay before each retry, in ms (> 0).
    :param result_predicate: retry when it is true of the returned list (``None``: never).
    :param exception_predicate: retry when it is true of the raised exception (``None``: never).
    :raises ValueError: if ``max_attempts`` or ``backoff_time_millis`` is not a positive int.
    :raises TypeError: if a predicate is neither callable nor ``None``.
    """

    def __init__(self, max_attempts: int, backoff_time_millis: int,
                 result_predicate: ResultPredicate = None, exception_predicate: ExceptionPredicate = None):
        _check_positive("FixedDelayRetryStrategy", "max_attempts", max_attempts)
        _check_positive("FixedDelayRetryStrategy", "backoff_time_millis", backoff_time_millis)
        self._max_attempts = max_attempts
        self._backoff_time_millis = backoff_time_millis
        self._predicate = RetryPredicate(result_predicate, exception_predicate)

    def can_retry(self, current_attempts: int) -> bool:
        return current_attempts <= self._max_attempts

    def get_backoff_time_millis(self, current_attempts: int) -> int:
        return self._backoff_time_millis

    def get_retry_predicate(self) -> AsyncRetryPredicate:
        return self._predicate


class ExponentialBackoffDelayRetryStrategy(AsyncRetryStrategy):
    """Up to ``max_attempts`` retries with delays ``initial_delay``, ``initial_delay *
    multiplier``, ... capped at ``max_retry_delay`` (PyFlink's
    ``ExponentialBackoffDelayRetryStrategy``; see the module docstring for the one difference).

    :param max_attempts: retries allowed after the first call (> 0).
    :param initial_delay: delay before the first retry, in ms (> 0).
    :param max_retry_delay: largest delay, in ms (> 0).
    :param multiplier: factor between consecutive delays (> 0).
    :param result_predicate: retry when it is true of the returned list (``None``: never).
    :param exception_predicate: retry when it is true of the raised exception (``None``: never).
    :raises ValueError: if a number is not positive.
    :raises TypeError: if a predicate is neither callable nor ``None``.
    """

    def __init__(self, max_attempts: int, initial_delay: int, max_retry_delay: int, multiplier: float,
                 result_predicate: ResultPredicate = None, exception_predicate: ExceptionPredicate = None):
        name = "ExponentialBackoffDelayRetryStrategy"
        _check_positive(name, "max_attempts", max_attempts)
        _check_positive(name, "initial_delay", initial_delay)
        _check_positive(name, "max_retry_delay", max_retry_delay)
        _check_positive(name, "multiplier", multiplier, float)
        self._max_attempts = max_attempts
        self._initial_delay = initial_delay
        self._max_retry_delay = max_retry_delay
        self._multiplier = multiplier
        self._predicate = RetryPredicate(result_predicate, exception_predicate)

    def can_retry(self, current_attempts: int) -> bool:
        return current_attempts <= self._max_attempts

    def get_backoff_time_millis(self, current_attempts: int) -> int:
        delay = self._initial_delay * self._multiplier ** max(current_attempts - 1, 0)
        return int(min(delay, self._max_retry_delay))

    def get_retry_predicate(self) -> AsyncRetryPredicate:
        return self._predicate


#: The strategy that never retries; what ``unordered_wait`` and ``ordered_wait`` use.
NO_RETRY_STRATEGY = NoRetryStrategy()
