"""``AsyncFunctionDescriptor``: what an async wait operator is built from (PyFlink's
``pyflink.datastream.functions.AsyncFunctionDescriptor``, which ``AsyncDataStream`` hands to
the operator factory; Flink's ``AsyncWaitOperatorFactory`` arguments).

``AsyncDataStream`` validates its arguments, builds a descriptor and adds the operator
:meth:`AsyncFunctionDescriptor.create_operator` returns.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from rill.common.time import to_milliseconds
from rill.operators.async_io import AsyncWaitOperator, OutputMode as _OperatorOutputMode

__all__ = ["AsyncFunctionDescriptor"]


class AsyncFunctionDescriptor:
    """An async function with its operator settings, under PyFlink's attribute names.

    :ivar async_function: the ``AsyncFunction`` (its ``async_invoke`` an ``async def``).
    :ivar timeout: per-record time limit over all attempts: ``Time``, ``Duration``,
        ``datetime.timedelta`` or int ms; 0 means none.
    :ivar capacity: most records in flight per subtask.
    :ivar async_retry_strategy: an ``AsyncRetryStrategy`` (``NO_RETRY_STRATEGY`` for none).
    :ivar output_mode: :class:`AsyncFunctionDescriptor.OutputMode`.
    """

    class OutputMode(Enum):
        """Results in input order (ORDERED) or completion order (UNORDERED), as PyFlink."""

        ORDERED = 0
        UNORDERED = 1

    def __init__(self, async_function: Any, timeout: Any, capacity: int, async_retry_strategy: Any,
                 output_mode: "AsyncFunctionDescriptor.OutputMode") -> None:
        self.async_function = async_function
        self.timeout = timeout
        self.capacity = capacity
        self.async_retry_strategy = async_retry_strategy
        self.output_mode = output_mode

    def create_operator(self) -> AsyncWaitOperator:
        """The async wait operator this descriptor describes.

        :raises TypeError: if ``output_mode`` is not an ``AsyncFunctionDescriptor.OutputMode``
            or ``timeout`` is not a duration (the message names the value).
        """
        if not isinstance(self.output_mode, AsyncFunctionDescriptor.OutputMode):
            raise TypeError(f"AsyncFunctionDescriptor: output_mode must be an AsyncFunctionDescriptor.OutputMode, "
                            f"got {self.output_mode!r}")
        timeout_ms = to_milliseconds(self.timeout, "AsyncFunctionDescriptor timeout")
        return AsyncWaitOperator(self.async_function, timeout_ms, self.capacity,
                                 _OperatorOutputMode[self.output_mode.name], self.async_retry_strategy)
