"""Ready-made retry predicates, with PyFlink's names (``pyflink.datastream.
async_retry_predicates``; Flink's ``RetryPredicates``).

Pass them to a retry strategy, e.g. ``FixedDelayRetryStrategy(3, 100,
empty_result_predicate, has_exception_predicate)``; ``exception_type_predicate`` takes the
expected type as a second argument, so bind it first:
``functools.partial(exception_type_predicate, expected_error_type=ConnectionError)``.
"""

from __future__ import annotations

from typing import Any, Optional

__all__ = ["empty_result_predicate", "has_exception_predicate", "exception_type_predicate"]


def empty_result_predicate(result: Optional[list]) -> bool:
    """True when an attempt returned ``None`` or an empty list (Flink's
    ``EMPTY_RESULT_PREDICATE``)."""
    return result is None or len(result) == 0


def has_exception_predicate(error: Optional[BaseException]) -> bool:
    """True for any exception (Flink's ``HAS_EXCEPTION_PREDICATE``)."""
    return error is not None


def exception_type_predicate(error: Optional[BaseException], expected_error_type: Any) -> bool:
    """True when ``error`` is an instance of ``expected_error_type`` (a type or tuple of types)."""
    return isinstance(error, expected_error_type)
