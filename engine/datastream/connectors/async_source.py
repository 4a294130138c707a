"""A source fed by the host service: records come from an async iterator (or an
``asyncio.Queue``) that the service owns and that runs on the service's event loop.

Example (inside the service's coroutine; embedded mode)::

    queue = asyncio.Queue(maxsize=1000)
    source = AsyncIteratorSource(queue_items(queue), asyncio.get_running_loop())
    stream = env.from_source(source, source_name="requests")
    client = await AsyncJobClient.execute_and_collect(stream.map(handle))
    await queue.put(event)            # from request handlers; waits while the job is behind
    await queue.put(END_OF_INPUT)     # the end of the input: the job finishes

How it runs. When the job's source subtask starts reading, a pump coroutine is scheduled on
the service's loop (``asyncio.run_coroutine_threadsafe``); it iterates the async iterator and
appends the items to a buffer of at most ``max_buffered`` items. The task thread takes the
buffer's items as one batch per mailbox action; when the buffer is empty it reports "nothing
available" and the task sleeps in its mailbox (it looks again every millisecond).

Back-pressure. A full buffer makes the pump wait (it is woken when the task thread drains it),
so the iterator is not advanced: a bounded ``asyncio.Queue`` then fills and the service's
``await queue.put(...)`` waits: a slow job slows its producers instead of growing a queue.

End of input and cancellation. The input ends when the iterator ends (for
:func:`queue_items`: when :data:`END_OF_INPUT` is taken from the queue); the source then
finishes and the job ends normally once everything downstream is done. An exception raised by
the iterator fails the job with it as cause. When the job is cancelled or fails, the reader's
``close`` cancels the pump: the iterator gets ``CancelledError`` at its ``await`` (an async
generator's ``finally`` runs on the service's loop). Items already buffered are dropped.

Limits: not replayable (``supports_replay`` is ``False``: no exactly-once checkpoints);
embedded mode only (the iterator and the loop live in the service's process; shipping
the source to a cluster fails with ``OperatorSerializationError`` naming the operator);
parallelism 1; an iterator can be consumed once, so the source runs once.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from typing import Any, AsyncIterator, Deque, Iterator, List, Optional

from rill.datastream.connectors.source import Boundedness, Source, SourceReader, SourceSplit

__all__ = ["AsyncIteratorSource", "END_OF_INPUT", "queue_items"]


class _EndOfInput:
    def __repr__(self) -> str:
        return "END_OF_INPUT"


#: Put it into the queue of :func:`queue_items` to end the input.
END_OF_INPUT = _EndOfInput()


async def queue_items(queue: "asyncio.Queue[Any]") -> AsyncIterator[Any]:
    """The items of ``queue`` until :data:`END_OF_INPUT` is taken from it."""
    while True:
        item = await queue.get()
        if item is END_OF_INPUT:
            return
        yield item


class _OneSplit(SourceSplit):
    def split_id(self) -> str:
        return "async-iterator"


class AsyncIteratorSource(Source):
    """Records from an async iterator on the service's event loop (see the module docstring).

    :param iterator: an async iterator (e.g. an async generator, or :func:`queue_items`).
    :param loop: the running event loop the iterator belongs to.
    :param max_buffered: most items taken from the iterator and not yet read by the job (> 0).
    :raises TypeError: if ``iterator`` is not an async iterator or ``loop`` not an event loop.
    :raises ValueError: if ``max_buffered`` is not a positive int.
    """

    non_parallel = True

    def __init__(self, iterator: AsyncIterator[Any], loop: asyncio.AbstractEventLoop, max_buffered: int = 1024):
        if not hasattr(iterator, "__anext__"):
            raise TypeError(f"AsyncIteratorSource expects an async iterator, got {iterator!r}")
        if not isinstance(loop, asyncio.AbstractEventLoop):
            raise TypeError(f"AsyncIteratorSource expects the service's event loop, got {loop!r}")
        if isinstance(max_buffered, bool) or not isinstance(max_buffered, int) or max_buffered <= 0:
            raise ValueError(f"AsyncIteratorSource: max_buffered must be a positive int, got {max_buffered!r}")
        self._iterator = iterator
        self._loop = loop
        self._max_buffered = max_buffered
        self._used = False

    def get_boundedness(self) -> Boundedness:
        return Boundedness.CONTINUOUS_UNBOUNDED

    @property
    def supports_replay(self) -> bool:
        """``False``: the iterator's items are consumed once and cannot be read again after a
        restore, so a job with this source cannot be checkpointed EXACTLY_ONCE."""
        return False

    def create_splits(self, parallelism: int) -> List[SourceSplit]:
        return [_OneSplit()]

    def create_reader(self) -> SourceReader:
        if self._used:
            raise RuntimeError("an AsyncIteratorSource reads its async iterator once; it was used by a job already")
        self._used = True
        return _AsyncIteratorReader(self._iterator, self._loop, self._max_buffered)


class _AsyncIteratorReader(SourceReader):
    """The task-thread side; the pump runs on the service's loop."""

    def __init__(self, iterator: AsyncIterator[Any], loop: asyncio.AbstractEventLoop, max_buffered: int):
        self._iterator = iterator
        self._loop = loop
        self._max_buffered = max_buffered
        self._lock = threading.Lock()  # guards _buffer, _ended, _error (task thread and loop thread)
        self._buffer: Deque[Any] = deque()
        self._ended = False
        self._error: Optional[BaseException] = None
        self._room: Optional[asyncio.Event] = None  # loop thread only
        self._pump_future: Any = None

    def read(self, split: SourceSplit) -> Iterator[List[Any]]:
        self._pump_future = asyncio.run_coroutine_threadsafe(self._pump(), self._loop)
        while True:
            with self._lock:
                batch = list(self._buffer)
                self._buffer.clear()
                ended, error = self._ended, self._error
            if batch:
                self.progress_units += len(batch)
                self._loop.call_soon_threadsafe(self._room.set)
                yield batch
            elif error is not None:
                raise error
            elif ended:
                return
            else:
                yield []  # nothing available: the task sleeps in its mailbox and looks again

    async def _pump(self) -> None:
        self._room = room = asyncio.Event()
        try:
            async for item in self._iterator:
                while True:
                    with self._lock:
                        if len(self._buffer) < self._max_buffered:
                            self._buffer.append(item)
                            break
                    room.clear()
                    await room.wait()
        except Exception as e:  # noqa: BLE001 - the job fails with it
            with self._lock:
                self._error = e
        finally:
            with self._lock:
                self._ended = True

    def close(self) -> None:
        future = self._pump_future
        if future is not None and not future.done():
            future.cancel()
