"""Collecting sink behind ``execute_and_collect`` and ``CollectSink``.

Rill difference: Flink's ``CollectSinkFunction`` streams results to the client through a
socket coordinated by the JobMaster. In embedded mode the job runs in the client's process,
so subtasks hand batches to a :class:`CollectChannel` (a thread-safe queue) that the client
iterates; the channel is found by id in a process-wide registry because operators are copied
per subtask. In cluster mode the channel lives in the client's process: a task process
registers the client's collect server with :func:`register_remote_endpoint` before its tasks
run, and each sink subtask writes through a
:class:`~rill.runtime.cluster.collect_service.RemoteCollectChannel` (a socket to the client's
:class:`~rill.runtime.cluster.collect_service.CollectServer`).
"""

from __future__ import annotations

import queue
import threading
import uuid
from typing import Any, Dict, List, Optional, Tuple

from rill.operators.base import AbstractStreamOperator

__all__ = [
    "CollectChannel",
    "CollectSinkOperator",
    "register_channel",
    "register_channel_as",
    "get_channel",
    "release_channel",
    "register_remote_endpoint",
    "release_remote_endpoint",
]

_END = object()
_registry: Dict[str, "CollectChannel"] = {}
_registry_lock = threading.Lock()
#: channel id -> ((host, port) of the client's CollectServer, shared secret, connect timeout s)
_remote_endpoints: Dict[str, Tuple[Tuple[str, int], bytes, float]] = {}


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

    def put_batch(self, values: List[Any], timeout_s: Optional[float] = None) -> None:
        """Queue one batch (a ``list``), blocking while the queue is full; dropped once the
        reader closed the channel.

        :param timeout_s: ``None`` (default): wait for room as long as needed; else seconds.
        :raises queue.Full: if there was no room within ``timeout_s`` (nothing was queued).
        """
        if not self._closed:
            self._queue.put(values, timeout=timeout_s)

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


def register_channel_as(channel_id: str) -> CollectChannel:
    """Create and register an unbounded :class:`CollectChannel` under the id of a channel that
    lives in another process: a Spark task's collect sink writes into it, and the task hands its
    batches to the driver, which owns the real one (``rill.runtime.spark``).

    :raises ValueError: if ``channel_id`` is already registered in this process.
    """
    channel = CollectChannel(channel_id)
    with _registry_lock:
        if channel_id in _registry:
            raise ValueError(f"Collect channel {channel_id} is already registered in this process")
        _registry[channel_id] = channel
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


def register_remote_endpoint(channel_id: str, address: Tuple[str, int], secret: bytes, *,
                             connect_timeout_s: float = 30.0) -> None:
    """Tell this (task) process where the collect channel ``channel_id`` lives: the client's
    :class:`~rill.runtime.cluster.collect_service.CollectServer` at ``address`` (``(host,
    port)``), authenticated with ``secret`` (``bytes``). Call before the job's tasks run;
    re-registering replaces the endpoint. A channel registered locally
    (:func:`register_channel`) takes precedence.

    :param connect_timeout_s: seconds a sink subtask keeps retrying to connect at ``open``.
    :raises ValueError: if ``secret`` is empty or ``address`` is not ``(host, port)``.
    """
    if not isinstance(secret, (bytes, bytearray)) or not secret:
        raise ValueError("register_remote_endpoint needs a non-empty bytes secret")
    host, port = address
    with _registry_lock:
        _remote_endpoints[channel_id] = ((str(host), int(port)), bytes(secret), float(connect_timeout_s))


def release_remote_endpoint(channel_id: str) -> None:
    """Forget the remote endpoint of ``channel_id`` (idempotent)."""
    with _registry_lock:
        _remote_endpoints.pop(channel_id, None)


class CollectSinkOperator(AbstractStreamOperator):
    """Hands each batch to the collect channel ``channel_id`` (Flink's ``CollectSinkFunction``):
    the :class:`CollectChannel` registered in this process if there is one (embedded mode),
    else a :class:`~rill.runtime.cluster.collect_service.RemoteCollectChannel` to the endpoint
    registered with :func:`register_remote_endpoint` (cluster mode), keyed by this subtask's
    index; :meth:`close` then sends the end frame.

    :raises RuntimeError: at ``open`` if the channel is neither registered nor remote.
    :raises ~rill.runtime.cluster.collect_service.CollectConnectionError: at ``open``,
        ``process_batch`` or ``close`` if the remote connection fails.
    """

    def __init__(self, channel_id: str):
        self.channel_id = channel_id

    def open(self) -> None:
        with _registry_lock:
            endpoint = None if self.channel_id in _registry else _remote_endpoints.get(self.channel_id)
        if endpoint is None:
            self._channel = get_channel(self.channel_id)
            return
        from rill.runtime.cluster.collect_service import RemoteCollectChannel  # noqa: PLC0415
        address, secret, connect_timeout_s = endpoint
        self._channel = RemoteCollectChannel(self.channel_id, self.context.subtask_index, address, secret,
                                             connect_timeout_s=connect_timeout_s)

    def close(self) -> None:
        channel = getattr(self, "_channel", None)
        try:
            if channel is not None and not isinstance(channel, CollectChannel):
                self._channel = None
                channel.close()  # the end frame: this subtask has delivered everything
        finally:
            super().close()

    def process_batch(self, values, timestamps=None) -> None:
        self._channel.put_batch(list(values))

    def process_watermark(self, watermark) -> None:
        pass
