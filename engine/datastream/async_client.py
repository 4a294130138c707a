"""An ``await``-able face of a job for asyncio services: submit, status, metrics, cancel, the
result, and ``async for`` over ``execute_and_collect`` records, without blocking the event loop.

Example (inside a coroutine)::

    client = await AsyncJobClient.execute_and_collect(stream, "enrich")
    async for row in client.collect():
        ...
    result = await client.get_job_execution_result()

How it avoids blocking the loop: every call of the wrapped ``JobClient`` that may block
(submission builds the graphs and, in cluster mode, asks the Dispatcher; status, metrics and
cancel ask the JobMaster actor in cluster mode) runs in the loop's default executor; futures of
the job (its result, the end of a cancel) are awaited with ``asyncio.wrap_future``, so nothing
waits on a thread at all. The collect iterator fetches one batch per hop on a thread of its own
(a blocked fetch never takes a thread of the shared executor).

Back-pressure: the records travel through the job's bounded collect channel (64 batches); a
consumer that iterates slowly leaves batches in it, the collect sink then waits for room, and
the job slows through the network's credits. Nothing is buffered without bound on the service
side: the iterator holds one batch at a time.

Threading: an :class:`AsyncJobClient` and its iterator belong to one event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any, Callable, List, Optional, TypeVar

__all__ = ["AsyncJobClient", "AsyncCollectIterator"]

T = TypeVar("T")


async def _in_executor(fn: Callable[..., T], *args: Any) -> T:
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


class AsyncCollectIterator:
    """``async for`` over the records of an ``execute_and_collect`` job, batch by batch.

    Leaving an ``async with`` block, or :meth:`aclose`, cancels the job if it still runs (as
    closing PyFlink's ``CloseableIterator`` does). A job that failed raises its
    ``JobExecutionException`` from ``__anext__``.

    :param iterator: the ``CloseableIterator`` of ``DataStream.execute_and_collect``.
    """

    def __init__(self, iterator: Any):
        self._iterator = iterator
        self._batch: List[Any] = []
        self._pos = 0
        self._done = False
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rill-async-collect")

    def __aiter__(self) -> "AsyncCollectIterator":
        return self

    async def __anext__(self) -> Any:
        if self._pos >= len(self._batch):
            if self._done:
                raise StopAsyncIteration
            loop = asyncio.get_running_loop()
            try:
                batch = await loop.run_in_executor(self._executor, self._iterator.next_batch)
            except BaseException:  # the job failed: its error goes to the caller
                self._end()
                raise
            if not batch:
                self._end()
                raise StopAsyncIteration
            self._batch, self._pos = batch, 0
        value = self._batch[self._pos]
        self._pos += 1
        return value

    def _end(self) -> None:
        self._done = True
        self._executor.shutdown(wait=False)

    async def aclose(self) -> None:
        """Stop iterating; cancels the job if it still runs and waits until it stopped."""
        self._end()
        await _in_executor(self._iterator.close)  # idempotent; blocks while the job stops

    async def __aenter__(self) -> "AsyncCollectIterator":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


class AsyncJobClient:
    """Awaitable methods over a ``JobClient`` (embedded or cluster; PyFlink's ``JobClient``
    with ``async`` methods).

    Build one with :meth:`execute` or :meth:`execute_and_collect`, or wrap the client that
    ``env.execute_async()`` returned.

    :param job_client: a ``JobClient`` or ``ClusterJobClient``.
    :param collect_iterator: the ``CloseableIterator`` of an ``execute_and_collect`` job.
    """

    def __init__(self, job_client: Any, collect_iterator: Any = None):
        self._client = job_client
        self._collect_iterator = collect_iterator
        self._collect: Optional[AsyncCollectIterator] = None

    @staticmethod
    async def execute(env: Any, job_name: Optional[str] = None) -> "AsyncJobClient":
        """Submit ``env``'s job without blocking the loop (``env.execute_async`` on an executor
        thread).

        :raises Exception: whatever submission raises (an invalid graph, an unreachable cluster).
        """
        return AsyncJobClient(await _in_executor(env.execute_async, job_name))

    @staticmethod
    async def execute_and_collect(data_stream: Any, job_name: Optional[str] = None) -> "AsyncJobClient":
        """Submit the job of ``data_stream`` with a collect sink on it; iterate its records with
        ``async for row in client.collect()``."""
        iterator = await _in_executor(data_stream.execute_and_collect, job_name)
        return AsyncJobClient(iterator._client, iterator)

    @property
    def job_client(self) -> Any:
        """The wrapped (blocking) ``JobClient``."""
        return self._client

    def get_job_id(self) -> str:
        """The job's 32-hex-character id (no I/O)."""
        return self._client.get_job_id()

    async def get_job_status(self) -> Any:
        """The job's ``JobStatus``."""
        return await _in_executor(self._client.get_job_status)

    async def get_metrics(self) -> List[Any]:
        """One ``TaskMetricsSnapshot`` per task (subtask), while the job runs or after."""
        return await _in_executor(self._client.get_metrics)

    async def get_checkpoint_stats(self) -> Any:
        """The job's ``CheckpointStatsSnapshot`` (``None`` without checkpointing)."""
        return await _in_executor(self._client.get_checkpoint_stats)

    async def trigger_savepoint(self, savepoint_directory: Optional[str] = None) -> str:
        """Take a savepoint (the job runs on); returns its directory. Raises as
        ``JobClient.trigger_savepoint``'s future."""
        future = await _in_executor(self._client.trigger_savepoint, savepoint_directory)
        return await asyncio.wrap_future(future)

    async def stop_with_savepoint(self, advance_to_end_of_event_time: bool = False,
                                  savepoint_directory: Optional[str] = None) -> str:
        """Stop the job with a savepoint (``JobClient.stop_with_savepoint``); returns the
        savepoint's directory once the job is FINISHED."""
        future = await _in_executor(self._client.stop_with_savepoint, advance_to_end_of_event_time,
                                    savepoint_directory)
        return await asyncio.wrap_future(future)

    async def cancel(self) -> None:
        """Cancel the job; returns once it has stopped."""
        done = await _in_executor(self._client.cancel)
        await asyncio.wrap_future(done)

    async def get_job_execution_result(self) -> Any:
        """The ``JobExecutionResult`` once the job has ended.

        :raises JobExecutionException: if the job failed (``__cause__``: the user's error).
        :raises JobCancellationException: if it was cancelled.
        """
        return await asyncio.wrap_future(self._client.get_job_execution_result())

    async def get_state(self, uid: str, state_name: str, key: Any) -> Any:
        """One key's keyed state in the running job (queryable state): the state named
        ``state_name`` (its descriptor name) of the operator with ``uid``, for ``key``; ``None``
        if the key has no entry. The task owning the key's key group reads it on its own
        thread, through a mail, between two input batches: consistent per key, the job keeps
        running (see :mod:`rill.runtime.queryable_state`).

        Embedded mode awaits the task's answer without any thread; cluster mode asks the
        JobMaster actor on an executor thread.

        :raises UnknownOperatorUidError: no operator of the job has ``uid``.
        :raises NotKeyedOperatorError: that operator is not keyed.
        :raises UnknownStateNameError: it has no keyed state named ``state_name``.
        :raises JobNotRunningError: the job, or the subtask owning ``key``, is not running.
        :raises UnsupportedKeyError: ``key`` has no stable hash.
        """
        future_of = getattr(self._client, "get_state_future", None)
        if future_of is not None:
            return await asyncio.wrap_future(future_of(uid, state_name, key))
        return await _in_executor(self._client.get_state, uid, state_name, key)

    def collect(self) -> AsyncCollectIterator:
        """The async iterator over the job's collected records (one per client).

        :raises RuntimeError: if the job was not submitted by :meth:`execute_and_collect`.
        """
        if self._collect_iterator is None:
            raise RuntimeError(
                f"job {self.get_job_id()} has no collect sink: submit it with "
                "AsyncJobClient.execute_and_collect(data_stream) to iterate its records")
        if self._collect is None:
            self._collect = AsyncCollectIterator(self._collect_iterator)
        return self._collect
