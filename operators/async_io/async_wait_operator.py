"""``AsyncWaitOperator``: calls an ``AsyncFunction`` for every record with many calls in flight
(Flink's ``AsyncWaitOperator``, ``streaming.api.operators.async``; PyFlink 2.x's async I/O).

Design
======

Threads. Each operator instance (one per subtask) owns one asyncio event loop running on a
thread of its own (:class:`~rill.operators.async_io.loop_thread.AsyncLoopThread`). The task
thread never runs a user coroutine; the loop thread never touches operator state:

1. The task thread takes a record, puts a :class:`RecordEntry` into the queue and hands the
   record's value to the loop thread (one ``call_soon_threadsafe`` per input batch, not per
   record).
2. On the loop thread, a coroutine awaits ``async_invoke(value)`` under the timeout, retries as
   the strategy and its predicates say, and puts the outcome (records, exception or timeout)
   on a completion list. The first completion after the list was drained sends one mail
   (``MailboxExecutor.execute``) to the task.
3. The mail runs on the task thread: it validates each outcome (``timeout(value)`` is called
   here for calls that timed out), completes the entries and emits what the queue allows.

Capacity and back-pressure. At most ``capacity`` entries (records in flight or done but not
yet emitted, and watermarks waiting behind them) are in the queue. When it is full, the task
thread yields to its mailbox (``MailboxExecutor.yield_``): it sleeps in the mailbox until a
mail comes, runs it (a completion mail makes room; timers and other mails run as usual) and
checks again. No busy loop, no lock held while waiting. Input is not read meanwhile, so
upstream back-pressure builds through the network's credits as for any slow operator.

Order. ``ORDERED`` emits in input order. ``UNORDERED`` emits records as they complete but never
across a watermark (see :mod:`rill.operators.async_io.queue`). Output records carry their input
record's timestamp.

Timeouts and retries. The timeout (ms; 0 or less: none) covers all attempts of a record, as in
Flink. When it expires, the running attempt is cancelled and ``timeout(value)`` gives the
records to emit (its default raises ``TimeoutError``, which fails the job). After an attempt,
if ``strategy.can_retry(attempts)`` and the result predicate (on a returned list) or the
exception predicate (on a raised exception) is true, the call is made again after
``strategy.get_backoff_time_millis(attempts)`` ms.

End of input. ``end_input`` waits (yielding to the mailbox) until every entry is emitted, as
Flink's ``endInput`` does; so the task finishes only after all calls did. ``close`` stops the
loop; calls still running (after a failure or cancellation) are cancelled.

Errors. A call that raises (after its retries) fails the task with
:class:`AsyncFunctionError` naming the operator, the input value, the attempts and the cause;
so does a ``timeout`` that raises, and a result that is not a list.

Checkpoints. As Flink's: a snapshot stores every element of the queue not emitted yet (the
input record, done or not, and the watermarks between) in the list state
``"_async_wait_operator_state_"`` as ``("record", value, timestamp)`` / ``("watermark", ts)``;
a restored operator processes them again in ``open``, before any new input. A call that had
completed but was not emitted is made again (its output was never emitted, so the output stays
exactly once; the call itself is at least once, as in Flink). A snapshot taken while the task
yields inside ``process_batch`` (a source task's checkpoint mail) also stores the records of
that batch not queued yet and a watermark deferred behind them.

Differences from Flink, and why
    * Flink stops retrying once the input has ended (``endInput``: a retry waiting for its
      delay is made at once and no further retry follows); here retries go on as the strategy
      says (bounded by the timeout), because bounded inputs are Rill's common case and would
      otherwise lose the retries of their tail.
    * One event loop per operator instance, not per task: two async operators chained in one
      task have a loop each.
"""

from __future__ import annotations

import asyncio
import threading
from enum import Enum
from typing import Any, List, Optional, Tuple

from rill.operators.async_io.loop_thread import AsyncLoopThread
from rill.operators.async_io.queue import OrderedQueue, RecordEntry, UnorderedQueue
from rill.common.streamrecord import Watermark
from rill.operators.base import AbstractUdfStreamOperator
from rill.state.descriptors import ListStateDescriptor

__all__ = ["AsyncWaitOperator", "AsyncFunctionError", "OutputMode", "STATE_NAME"]

#: Flink's ``AsyncWaitOperator.STATE_NAME``
STATE_NAME = "_async_wait_operator_state_"


class OutputMode(Enum):
    """Whether results keep the input order (Flink's ``AsyncDataStream.OutputMode``)."""

    ORDERED = "ORDERED"
    UNORDERED = "UNORDERED"


class AsyncFunctionError(RuntimeError):
    """An async call failed for good: it raised after its retries, it timed out and
    ``timeout()`` raised, or it returned something that is not a list."""


_RESULT, _ERROR, _TIMEOUT = "result", "error", "timeout"


class AsyncWaitOperator(AbstractUdfStreamOperator):
    """Runs an ``AsyncFunction`` with up to ``capacity`` calls in flight (see the module
    docstring for threads, order, timeouts, retries and errors).

    :param user_function: an ``AsyncFunction`` (``async def async_invoke(value) -> list``,
        ``timeout(value) -> list``).
    :param timeout_ms: per-record timeout over all attempts, in ms; ``<= 0``: no timeout.
    :param capacity: most entries in flight (> 0).
    :param output_mode: :class:`OutputMode`.
    :param retry_strategy: an ``AsyncRetryStrategy`` (``can_retry``,
        ``get_backoff_time_millis``, ``get_retry_predicate``).
    :raises ValueError: if ``capacity`` is not a positive int.
    """

    default_name = "async wait operator"
    #: elements restored by ``initialize_state``, replayed by ``open``
    _recovered: Any = ()

    def __init__(self, user_function: Any, timeout_ms: int, capacity: int, output_mode: OutputMode,
                 retry_strategy: Any):
        super().__init__(user_function)
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity <= 0:
            raise ValueError(f"The capacity of an async wait operator must be a positive int, got {capacity!r}")
        self.timeout_ms = timeout_ms
        self.capacity = capacity
        self.output_mode = output_mode
        self.retry_strategy = retry_strategy

    # -- life cycle (task thread) ------------------------------------------------------------
    def setup(self, context: Any, output: Any) -> None:
        super().setup(context, output)
        self._mailbox = context.mailbox_executor
        self._name = context.operator_name

    def initialize_state(self) -> None:
        """Register ``"_async_wait_operator_state_"``; keep the restored elements for ``open``."""
        super().initialize_state()
        self._state = self.operator_state_backend.get_list_state(ListStateDescriptor(STATE_NAME))
        self._recovered = self._state.get() if self.is_restored() else []

    def snapshot_state(self, checkpoint_id: int, timestamp: int):
        """Store the queue's elements not emitted yet, then the records of a batch interrupted
        by this snapshot and its deferred watermark (see the module docstring)."""
        elements = self._queue.values()
        for values, timestamps in self._unqueued:
            elements.extend(("record", v, None if timestamps is None else timestamps[i]) for i, v in enumerate(values))
        if self._deferred_watermark is not None:
            elements.append(("watermark", self._deferred_watermark.timestamp))
        self._state.update(elements)
        return super().snapshot_state(checkpoint_id, timestamp)

    def open(self) -> None:
        self._queue = OrderedQueue() if self.output_mode is OutputMode.ORDERED else UnorderedQueue()
        self._to_start: List[RecordEntry] = []
        self._batch_depth = 0  # > 0 while process_batch queues records (it may yield)
        self._unqueued: List[Tuple[List[Any], Optional[List[int]]]] = []  # batches' rest during a yield
        self._deferred_watermark: Any = None
        self._lock = threading.Lock()  # guards the two fields below (task and loop thread)
        self._completions: List[Tuple[RecordEntry, str, Any, int]] = []
        self._mail_pending = False
        predicate = self.retry_strategy.get_retry_predicate()
        self._result_predicate = predicate.result_predicate()
        self._exception_predicate = predicate.exception_predicate()
        self._timeout_s = self.timeout_ms / 1000 if self.timeout_ms > 0 else None
        self._loop = AsyncLoopThread(f"async-io {self.context.task_name_with_subtasks}")
        self._loop.start()
        super().open()
        recovered, self._recovered = self._recovered, []
        for element in recovered:
            if element[0] == "record":
                self.process_element(element[1], element[2])
            else:
                self.process_watermark(Watermark(element[1]))

    def end_input(self) -> None:
        """Wait, yielding to the mailbox, until every call is complete and emitted."""
        self._start_pending()
        while not self._queue.is_empty():
            self._yield_to_mailbox("the end of its input")

    def close(self) -> None:
        loop = getattr(self, "_loop", None)
        if loop is not None:
            loop.stop()
        super().close()

    # -- input (task thread) -----------------------------------------------------------------
    def process_element(self, value: Any, timestamp: Optional[int] = None) -> None:
        self.process_batch([value], None if timestamp is None else [timestamp])

    def process_batch(self, values: List[Any], timestamps: Optional[List[int]] = None) -> None:
        queue, capacity = self._queue, self.capacity
        self._batch_depth += 1
        try:
            for i, value in enumerate(values):
                if queue.size() >= capacity:
                    self._unqueued.append((values[i:], None if timestamps is None else timestamps[i:]))
                    try:
                        while queue.size() >= capacity:
                            self._yield_to_mailbox("room in its queue")
                    finally:
                        self._unqueued.pop()
                self._to_start.append(queue.add_record(value, None if timestamps is None else timestamps[i]))
        finally:
            self._batch_depth -= 1
        self._start_pending()
        deferred = self._deferred_watermark
        if deferred is not None and not self._batch_depth:
            self._deferred_watermark = None
            self.process_watermark(deferred)

    def process_watermark(self, watermark: Any) -> None:
        """Queue the watermark behind the records before it; emitted once they are.

        A watermark that arrives while a batch is being queued (a timer mail run during a
        yield, e.g. a periodic watermark of a chained upstream assigner) is held until the
        whole batch is queued: the upstream operator saw the whole batch before it made the
        watermark, so the batch's records belong before it (as in Flink, where they would
        have crossed the chain one by one before the timer fired).
        """
        if self._batch_depth:
            self._deferred_watermark = watermark  # watermarks only grow: the last one covers all
            return
        queue = self._queue
        while queue.size() >= self.capacity:
            self._yield_to_mailbox("room in its queue")
        queue.add_watermark(watermark)
        queue.emit(self.output)

    def _yield_to_mailbox(self, what: str) -> None:
        self._start_pending()
        self._mailbox.yield_()
        cancelled = self.context.task_cancelled
        if cancelled is not None and cancelled():
            raise AsyncFunctionError(
                f"Async wait operator '{self._name}' stopped waiting for {what}: the task is being "
                f"cancelled ({self._queue.size()} entries still in flight)")

    def _start_pending(self) -> None:
        if self._to_start:
            entries, self._to_start = self._to_start, []
            self._loop.call_soon(self._start_on_loop, entries)

    # -- the loop thread -----------------------------------------------------------------------
    def _start_on_loop(self, entries: List[RecordEntry]) -> None:
        create_task = asyncio.get_running_loop().create_task
        for entry in entries:
            create_task(self._call(entry))

    async def _call(self, entry: RecordEntry) -> None:
        kind, payload, attempts = await self._attempts(entry.value)
        with self._lock:
            self._completions.append((entry, kind, payload, attempts))
            if self._mail_pending:
                return
            self._mail_pending = True
        try:
            self._mailbox.execute(self._process_completions, f"async I/O results of '{self._name}'")
        except RuntimeError:  # MailboxClosedError: the task is ending, nobody waits for results
            pass

    async def _attempts(self, value: Any) -> Tuple[str, Any, int]:
        invoke = self.user_function.async_invoke
        strategy = self.retry_strategy
        attempts = 0
        try:
            async with asyncio.timeout(self._timeout_s) as scope:
                while True:
                    attempts += 1
                    try:
                        result, error = await invoke(value), None
                    except Exception as e:  # noqa: BLE001 - the predicates and the task decide
                        result, error = None, e
                    if not self._should_retry(strategy, attempts, result, error):
                        return (_ERROR, error, attempts) if error is not None else (_RESULT, result, attempts)
                    await asyncio.sleep(max(strategy.get_backoff_time_millis(attempts), 0) / 1000)
        except TimeoutError as e:
            if scope.expired():
                return _TIMEOUT, None, attempts
            return _ERROR, e, attempts
        except Exception as e:  # noqa: BLE001 - a predicate or the strategy raised
            return _ERROR, e, attempts

    def _should_retry(self, strategy: Any, attempts: int, result: Any, error: Optional[BaseException]) -> bool:
        if not strategy.can_retry(attempts):
            return False
        if error is not None:
            predicate = self._exception_predicate
            return predicate is not None and bool(predicate(error))
        predicate = self._result_predicate
        return predicate is not None and bool(predicate(result))

    # -- completions (task thread, as a mail) ------------------------------------------------------
    def _process_completions(self) -> None:
        with self._lock:
            batch, self._completions = self._completions, []
            self._mail_pending = False
        queue = self._queue
        for entry, kind, payload, attempts in batch:
            if kind is _TIMEOUT:
                payload = self._timed_out(entry, attempts)
            elif kind is _ERROR:
                raise AsyncFunctionError(
                    f"Async function of operator '{self._name}' failed for input {entry.value!r} after "
                    f"{attempts} attempt(s): {type(payload).__name__}: {payload}") from payload
            queue.complete(entry, self._outputs(entry, payload))
        queue.emit(self.output)

    def _timed_out(self, entry: RecordEntry, attempts: int) -> Any:
        try:
            return self.user_function.timeout(entry.value)
        except Exception as e:
            raise AsyncFunctionError(
                f"Async function of operator '{self._name}' timed out for input {entry.value!r} after "
                f"{self.timeout_ms} ms ({attempts} attempt(s)), and its timeout() raised "
                f"{type(e).__name__}: {e}") from e

    def _outputs(self, entry: RecordEntry, result: Any) -> List[Any]:
        if type(result) is list:
            return result
        if isinstance(result, (list, tuple)):
            return list(result)
        raise AsyncFunctionError(
            f"Async function of operator '{self._name}' must return a list of output records "
            f"(from async_invoke or timeout), got {result!r} of type {type(result).__name__} "
            f"for input {entry.value!r}")
