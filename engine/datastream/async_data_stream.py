"""``AsyncDataStream``: applies an ``AsyncFunction`` to a stream with many calls in flight
(PyFlink 2.x's ``pyflink.datastream.AsyncDataStream``; Flink's ``AsyncDataStream``).

Example::

    class Lookup(AsyncFunction):
        async def async_invoke(self, value):
            row = await db.fetch(value)          # any awaitable I/O
            return [(value, row)]                # a list: zero, one or more output records

        def timeout(self, value):
            return [(value, None)]               # emitted when the call exceeds the timeout

    enriched = AsyncDataStream.ordered_wait(ds, Lookup(), Time.seconds(1), capacity=100)

The operator and its threads are described in :mod:`rill.operators.async_io.async_wait_operator`.
"""

from __future__ import annotations

import inspect
from typing import Any

from rill.common.time import to_milliseconds
from rill.datastream.async_functions import AsyncFunction, AsyncRetryStrategy
from rill.datastream.async_retry_strategies import NO_RETRY_STRATEGY, NoRetryStrategy
from rill.datastream.data_stream import DataStream
from rill.datastream.async_function_descriptor import AsyncFunctionDescriptor
from rill.operators.async_io import AsyncWaitOperator
from rill.operators.batching import ChunkingOperator

__all__ = ["AsyncDataStream"]

_Mode = AsyncFunctionDescriptor.OutputMode


class AsyncDataStream:
    """Static methods that add an async wait operator (named ``"async wait operator"``, as in
    PyFlink) after ``data_stream``.

    Common parameters:

    :param data_stream: the input ``DataStream``.
    :param async_function: an ``AsyncFunction`` whose ``async_invoke`` is an ``async def``.
    :param timeout: per-record time limit over all attempts: ``Time``, ``Duration``,
        ``datetime.timedelta`` or an int of ms; ``0`` means none (not allowed with retries).
    :param capacity: most records in flight per subtask (default 100, as PyFlink).
    :param output_type: the output records' type information (optional).
    :raises TypeError: if ``async_invoke`` is not a coroutine function, or ``timeout`` is not a
        duration; the message names the call and the value.
    :raises ValueError: if ``capacity`` is not a positive int, if a retry strategy is given
        without a positive timeout, or if the strategy has no retry predicate.
    """

    @staticmethod
    def unordered_wait(data_stream: DataStream, async_function: Any, timeout: Any, capacity: int = 100,
                       output_type: Any = None) -> DataStream:
        """Results in completion order; no record overtakes a watermark."""
        return AsyncDataStream._add("AsyncDataStream.unordered_wait", data_stream, async_function, timeout,
                                    NO_RETRY_STRATEGY, capacity, output_type, _Mode.UNORDERED)

    @staticmethod
    def unordered_wait_with_retry(data_stream: DataStream, async_function: Any, timeout: Any,
                                  async_retry_strategy: AsyncRetryStrategy, capacity: int = 100,
                                  output_type: Any = None) -> DataStream:
        """As :meth:`unordered_wait`, retrying calls as ``async_retry_strategy`` says."""
        return AsyncDataStream._add("AsyncDataStream.unordered_wait_with_retry", data_stream, async_function,
                                    timeout, async_retry_strategy, capacity, output_type, _Mode.UNORDERED)

    @staticmethod
    def ordered_wait(data_stream: DataStream, async_function: Any, timeout: Any, capacity: int = 100,
                     output_type: Any = None) -> DataStream:
        """Results in input order."""
        return AsyncDataStream._add("AsyncDataStream.ordered_wait", data_stream, async_function, timeout,
                                    NO_RETRY_STRATEGY, capacity, output_type, _Mode.ORDERED)

    @staticmethod
    def ordered_wait_with_retry(data_stream: DataStream, async_function: Any, timeout: Any,
                                async_retry_strategy: AsyncRetryStrategy, capacity: int = 100,
                                output_type: Any = None) -> DataStream:
        """As :meth:`ordered_wait`, retrying calls as ``async_retry_strategy`` says."""
        return AsyncDataStream._add("AsyncDataStream.ordered_wait_with_retry", data_stream, async_function,
                                    timeout, async_retry_strategy, capacity, output_type, _Mode.ORDERED)

    @staticmethod
    def add_sink(data_stream: DataStream, sink_function: Any, timeout: Any = 0, capacity: int = 100) -> Any:
        """A sink that awaits ``sink_function.invoke(value)`` (an ``async def``) for every
        record, with up to ``capacity`` calls in flight per subtask and the job ending only after
        every call did (not in PyFlink: Rill's async sink for services). Built from an unordered
        async wait operator whose calls emit nothing, then a discarding sink; a call that raises
        fails the job naming the value.

        :param sink_function: an object with ``async def invoke(self, value)`` (and optional
            ``open``/``close``).
        :param timeout: per-record time limit as for :meth:`unordered_wait`; ``0``: none. A
            call over it fails the job.
        :returns: the ``DataStreamSink``.
        :raises TypeError: if ``invoke`` is not an ``async def``.
        """
        if not inspect.iscoroutinefunction(getattr(sink_function, "invoke", None)):
            raise TypeError(f"AsyncDataStream.add_sink: method 'invoke' of {type(sink_function).__name__} must "
                            "be declared 'async def'")
        awaited = AsyncDataStream.unordered_wait(data_stream, _AwaitEachRecord(sink_function), timeout, capacity)
        return awaited.name("Async Sink").add_sink(_discard).name("Sink: Discard")

    @staticmethod
    def add_batch_sink(data_stream: DataStream, sink_function: Any, batch_size: int = 100,
                       timeout: Any = 0, capacity: int = 10) -> Any:
        """A sink that awaits ``sink_function.invoke_batch(values)`` (an ``async def``; ``values``
        a list of at most ``batch_size`` records) with up to ``capacity`` batches in flight per
        subtask; the job ends only after every call did (not in PyFlink: Rill's per-batch async
        sink for services, e.g. one bulk INSERT or HTTP request per batch).

        Batches are cut from the input batches the subtask receives (one network buffer or
        source batch at a time, see :mod:`rill.operators.batching`): no record waits for more
        to arrive, so a batch may be smaller than ``batch_size``; each record is in exactly one
        batch, in input order within it. Batches may complete in any order (unordered wait).
        A call that raises fails the job naming the batch.

        :param sink_function: an object with ``async def invoke_batch(self, values)`` (and
            optional ``open``/``close``).
        :param batch_size: most records per call (a positive int).
        :param timeout: per-batch time limit as for :meth:`unordered_wait`; ``0``: none. A call
            over it fails the job.
        :param capacity: most batches in flight per subtask (a positive int).
        :returns: the ``DataStreamSink``.
        :raises TypeError: if ``invoke_batch`` is not an ``async def``.
        :raises ValueError: if ``batch_size`` or ``capacity`` is not a positive int.
        """
        if not isinstance(data_stream, DataStream):
            raise TypeError(f"AsyncDataStream.add_batch_sink expects a DataStream, got {data_stream!r}")
        if not inspect.iscoroutinefunction(getattr(sink_function, "invoke_batch", None)):
            raise TypeError(f"AsyncDataStream.add_batch_sink: method 'invoke_batch' of "
                            f"{type(sink_function).__name__} must be declared 'async def'")
        chunks = data_stream._one_input(ChunkingOperator.default_name, ChunkingOperator(batch_size))
        awaited = AsyncDataStream.unordered_wait(chunks, _AwaitEachBatch(sink_function), timeout, capacity)
        return awaited.name("Async Batch Sink").add_sink(_discard).name("Sink: Discard")

    @staticmethod
    def _add(call: str, data_stream: DataStream, async_function: Any, timeout: Any, strategy: Any,
             capacity: int, output_type: Any, mode: AsyncFunctionDescriptor.OutputMode) -> DataStream:
        if not isinstance(data_stream, DataStream):
            raise TypeError(f"{call} expects a DataStream as its first argument, got {data_stream!r}")
        invoke = getattr(async_function, "async_invoke", None)
        if not inspect.iscoroutinefunction(invoke):
            raise TypeError(
                f"{call}: method 'async_invoke' of {type(async_function).__name__} must be declared "
                f"'async def' (got {invoke!r})")
        timeout_ms = to_milliseconds(timeout, f"{call} timeout")
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity <= 0:
            raise ValueError(f"{call}: capacity must be a positive int, got {capacity!r}")
        if strategy is None:
            raise ValueError(f"{call}: the async retry strategy must not be None")
        if not isinstance(strategy, NoRetryStrategy) and timeout_ms <= 0:
            raise ValueError(f"{call}: a positive timeout is required with a retry strategy, got {timeout_ms} ms")
        if strategy.get_retry_predicate() is None:
            raise ValueError(f"{call}: the retry predicate of {type(strategy).__name__} is None")
        operator = AsyncFunctionDescriptor(async_function, timeout, capacity, strategy, mode).create_operator()
        return data_stream._one_input(AsyncWaitOperator.default_name, operator, output_type)



class _AwaitEachRecord(AsyncFunction):
    """Adapts a sink function with ``async def invoke(value)`` to an ``AsyncFunction`` that
    emits nothing."""

    def __init__(self, sink_function: Any):
        self.sink_function = sink_function

    def open(self, runtime_context: Any) -> None:
        open_fn = getattr(self.sink_function, "open", None)
        if open_fn is not None:
            open_fn(runtime_context)

    def close(self) -> None:
        close_fn = getattr(self.sink_function, "close", None)
        if close_fn is not None:
            close_fn()

    async def async_invoke(self, value: Any) -> list:
        await self.sink_function.invoke(value)
        return []


class _AwaitEachBatch(_AwaitEachRecord):
    """Adapts a sink function with ``async def invoke_batch(values)`` to an ``AsyncFunction``
    over lists that emits nothing."""

    async def async_invoke(self, value: Any) -> list:
        await self.sink_function.invoke_batch(value)
        return []


def _discard(value: Any) -> None:
    pass
