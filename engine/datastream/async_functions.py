"""The async I/O function and its retry interfaces, with PyFlink 2.x's names
(``pyflink.datastream.functions.AsyncFunction``, ``AsyncRetryPredicate``,
``AsyncRetryStrategy``; Flink's ``AsyncFunction``, ``AsyncRetryStrategy`` and
``AsyncRetryPredicate`` in ``org.apache.flink.streaming.api.functions.async``).

PyFlink's Python API has no ``ResultFuture``: ``async_invoke`` is a coroutine that *returns* the
list of output records, and ``timeout`` returns the list to emit when the call took too long.
``rill.datastream.functions`` re-exports these names, as PyFlink keeps them there.

Where the code runs (see :mod:`rill.operators.async_io.async_wait_operator`): ``open`` and
``close`` on the task thread; ``async_invoke`` and the retry predicates on the operator's
event-loop thread; ``timeout`` on the task thread.
"""

from __future__ import annotations

import abc
from typing import Any, Callable, Generic, List, Optional, TypeVar

from rill.common.functions import Function

__all__ = ["AsyncFunction", "AsyncRetryPredicate", "AsyncRetryStrategy"]

IN = TypeVar("IN")
OUT = TypeVar("OUT")


class AsyncRetryPredicate(abc.ABC, Generic[OUT]):
    """When a finished attempt is retried (Flink's ``AsyncRetryPredicate``).

    Both predicates are optional; a missing one never asks for a retry.
    """

    @abc.abstractmethod
    def result_predicate(self) -> Optional[Callable[[List[OUT]], bool]]:
        """A predicate on the list an attempt returned; true asks for another attempt."""

    @abc.abstractmethod
    def exception_predicate(self) -> Optional[Callable[[Exception], bool]]:
        """A predicate on the exception an attempt raised; true asks for another attempt."""


class AsyncRetryStrategy(abc.ABC, Generic[OUT]):
    """How often and after which delay a call is attempted again (Flink's
    ``AsyncRetryStrategy``; implementations in :mod:`rill.datastream.async_retry_strategies`).

    ``current_attempts`` counts the attempts made so far for one input record: 1 after the
    first call. Methods are called on the event-loop thread, concurrently for many records, so
    an implementation must not keep per-record state in the strategy object.
    """

    @abc.abstractmethod
    def can_retry(self, current_attempts: int) -> bool:
        """Whether another attempt may follow ``current_attempts`` attempts."""

    @abc.abstractmethod
    def get_backoff_time_millis(self, current_attempts: int) -> int:
        """Delay in ms before the attempt that follows ``current_attempts`` attempts."""

    @abc.abstractmethod
    def get_retry_predicate(self) -> AsyncRetryPredicate[OUT]:
        """The predicates that decide whether a finished attempt is retried."""

    @staticmethod
    def no_restart() -> "AsyncRetryStrategy":
        """The strategy that never retries (PyFlink's ``NO_RETRY_STRATEGY``)."""
        from rill.datastream.async_retry_strategies import NO_RETRY_STRATEGY  # noqa: PLC0415 - cycle
        return NO_RETRY_STRATEGY

    @staticmethod
    def fixed_delay(max_attempts: int, backoff_time_millis: int,
                    result_predicate: Optional[Callable[[List[Any]], bool]],
                    exception_predicate: Optional[Callable[[Exception], bool]]) -> "AsyncRetryStrategy":
        """A :class:`~rill.datastream.async_retry_strategies.FixedDelayRetryStrategy`."""
        from rill.datastream.async_retry_strategies import FixedDelayRetryStrategy  # noqa: PLC0415 - cycle
        return FixedDelayRetryStrategy(max_attempts, backoff_time_millis, result_predicate, exception_predicate)

    @staticmethod
    def exponential_backoff(max_attempts: int, initial_delay: int, max_retry_delay: int, multiplier: float,
                            result_predicate: Optional[Callable[[List[Any]], bool]],
                            exception_predicate: Optional[Callable[[Exception], bool]]) -> "AsyncRetryStrategy":
        """An :class:`~rill.datastream.async_retry_strategies.ExponentialBackoffDelayRetryStrategy`."""
        from rill.datastream.async_retry_strategies import ExponentialBackoffDelayRetryStrategy  # noqa: PLC0415
        return ExponentialBackoffDelayRetryStrategy(max_attempts, initial_delay, max_retry_delay, multiplier,
                                                    result_predicate, exception_predicate)


class AsyncFunction(Function, Generic[IN, OUT]):
    """A function that starts one asynchronous operation per input record (PyFlink's
    ``AsyncFunction``), applied with :class:`~rill.datastream.async_data_stream.AsyncDataStream`.

    Implement ``async def async_invoke(self, value) -> list``: await whatever I/O the record
    needs and return the list of output records (empty to emit nothing). Many calls are in
    flight at once (up to the operator's capacity), all on one event loop per operator, so a
    call must await rather than block: a blocking call stalls every other call of the subtask.
    Raising an exception fails the job (after the retries the strategy allows).
    """

    @abc.abstractmethod
    async def async_invoke(self, value: IN) -> List[OUT]:
        """Start the operation for ``value`` and return its output records as a list."""

    def timeout(self, value: IN) -> List[OUT]:
        """The records to emit when the call for ``value`` (all its attempts) did not finish
        within the operator's timeout. Runs on the task thread. By default it raises
        ``TimeoutError``, which fails the job.

        :raises TimeoutError: by default.
        """
        raise TimeoutError(f"Async function call has timed out for input: {value!r}")
