"""Async I/O: the async wait operator, its queues and its event-loop thread (Flink's
``streaming.api.operators.async``). See :mod:`.async_wait_operator` for the design."""

from rill.operators.async_io.async_wait_operator import AsyncFunctionError, AsyncWaitOperator, OutputMode
from rill.operators.async_io.loop_thread import AsyncLoopThread
from rill.operators.async_io.queue import OrderedQueue, UnorderedQueue

__all__ = ["AsyncFunctionError", "AsyncLoopThread", "AsyncWaitOperator", "OrderedQueue", "OutputMode",
           "UnorderedQueue"]
