"""Collecting sink behind ``execute_and_collect`` and ``CollectSink``.

Rill difference: Flink's ``CollectSinkFunction`` streams results to the client through a
socket coordinated by the JobMaster. In embedded mode the job runs in the client's process,
so subtasks hand batches to a :class:`CollectChannel` (a thread-safe queue) that the client
iterates; the channel is found by id in a process-wide registry because operators are copied
per subtask.
"""

from __future__ import annotations

import queue
import threading
import uuid
from typing import Any, Dict, List, Optional

from rill.operators.base import AbstractStreamOperator

__all__ = ["CollectChannel", "CollectSinkOperator", "register_channel", "get_channel", "release_channel"]

_END = object()
_registry: Dict[str, "CollectChannel"] = {}
_registry_lock = threading.Lock()


class CollectChannel:
    """Batches of collected records, in arrival order, plus the end-of-job signal.

    ``max_batches`` bounds the queue so a slow reader back-pressures the job instead of
    buffering the whole output (0: unbounded, used by ``CollectSink``)."""

    def __init__(self, channel_id: str, max_batches: int = 0):
        self.channel_id = channel_id
        self._queue: "queue.Queue[Any]" = queue.Queue(max_batches)
        self.error: Optional[BaseException] = None
        self._lock = threading.Lock()
        self._ended = False  # end() was called
        self._end_queued = False  # _END sits at the tail of the queue
        self._closed = False  # the reader is gone: batches are dropped

    def put_batch(self, values: List[Any]) -> None:
        if not self._closed:
            self._queue.put(values)

    def end(self, error: Optional[BaseException] = None) -> None:
        """Mark the end of the job. Never blocks (it runs in the thread that ends the job): when
        the queue is full, the reader queues the end marker once it has taken a batch."""
        self.error = error
        self._ended = True
        self._offer_end()

    def _offer_end(self) -> None:
        with self._lock:
            if self._ended and not self._end_queued:
                try:
                    self._queue.put_nowait(_END)
                    self._end_queued = True
                except queue.Full:
                    pass

    def _took_end(self) -> None:
        with self._lock:
            self._end_queued = False
        self._offer_end()  # stay ended for later callers

    def close(self) -> None:
        """The reader stops reading: drop queued and later batches, so that no producer stays
        blocked on a full queue (a cancelled task could never finish)."""
        self._closed = True
        self.drain()

    def get_batch(self, timeout_s: Optional[float] = None) -> Optional[List[Any]]:
        """The next batch, or ``None`` once the job has ended (raises its error if it failed)."""
        item = self._queue.get(timeout=timeout_s)
        if item is _END:
            self._took_end()
            if self.error is not None:
                raise self.error
            return None
        self._offer_end()
        return item

    def drain(self) -> List[Any]:
        out: List[Any] = []
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return out
            if item is _END:
                self._took_end()
                return out
            out.extend(item)


def register_channel(max_batches: int = 0) -> CollectChannel:
    """Create and register a :class:`CollectChannel` in this process (``max_batches`` 0 =
    unbounded)."""
    channel = CollectChannel(uuid.uuid4().hex, max_batches)
    with _registry_lock:
        _registry[channel.channel_id] = channel
    return channel


def get_channel(channel_id: str) -> CollectChannel:
    """The registered channel ``channel_id``.

    :raises RuntimeError: if it is not registered in this process.
    """
    with _registry_lock:
        try:
            return _registry[channel_id]
        except KeyError:
            raise RuntimeError(
                f"Collect channel {channel_id} is not registered in this process: collecting "
                "sinks deliver results only to the process that submitted the job"
            ) from None


def release_channel(channel_id: str) -> None:
    """Forget the channel ``channel_id`` (idempotent)."""
    with _registry_lock:
        _registry.pop(channel_id, None)


class CollectSinkOperator(AbstractStreamOperator):
    """Hands each batch to the registered :class:`CollectChannel` ``channel_id``."""

    def __init__(self, channel_id: str):
        self.channel_id = channel_id

    def open(self) -> None:
        self._channel = get_channel(self.channel_id)

    def process_batch(self, values, timestamps=None) -> None:
        self._channel.put_batch(list(values))

    def process_watermark(self, watermark) -> None:
        pass
