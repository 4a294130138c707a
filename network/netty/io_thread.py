"""The per-process network thread (Flink's Netty event loop), over ``selectors``.

One :class:`IOThread` serves every connection of a process, client and server side: it waits
on all sockets at once (non-blocking sockets, one ``select`` per iteration), runs callbacks
posted by other threads (:meth:`IOThread.call_soon`), runs timers (retries, back-off) and
flushes the connections that have output. Task threads never touch a socket: they post work
here and learn about results through their channels.

An iteration: ``select`` (no timeout while callbacks are queued, else until the next timer) ->
read/write events of ready sockets -> queued callbacks -> due timers -> flush of every
connection marked dirty. An exception from a handler fails that handler (its connection) only;
an exception from a callback or timer is recorded in :attr:`IOThread.errors` and the loop goes
on. Other connections are unaffected either way.

Handlers (connections, the server's listener) are :meth:`IOThread.attach` ed for their life
and implement ``handle_read()``, ``handle_write()``, ``handle_error(exc)``, ``flush()`` and
``close(cause)``; :meth:`IOThread.register` says which of their sockets' events to watch. On
shutdown every attached handler is closed with the shutdown's cause.
"""

from __future__ import annotations

import heapq
import itertools
import selectors
import socket
import threading
import time
import traceback
from collections import deque
from typing import Any, Callable, Optional

__all__ = ["IOThread", "Timer"]

EVENT_READ = selectors.EVENT_READ
EVENT_WRITE = selectors.EVENT_WRITE


class Timer:
    """A callback scheduled with :meth:`IOThread.call_later`; :meth:`cancel` it to skip it."""

    __slots__ = ("deadline", "callback", "cancelled")

    def __init__(self, deadline: float, callback: Callable[[], Any]) -> None:
        self.deadline = deadline
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        """Do not run the callback (idempotent)."""
        self.cancelled = True


class IOThread:
    """A selector loop on its own daemon thread.

    :param name: the thread's name (appears in thread dumps and statistics).

    Life cycle: :meth:`start`, then :meth:`shutdown` (closes every registered handler with a
    cause, closes the selector, joins the thread). Thread-safety: :meth:`call_soon` and
    :meth:`shutdown` from any thread; everything else only on the loop's thread.
    """

    def __init__(self, name: str = "rill-network-io") -> None:
        self.name = name
        self._selector = selectors.DefaultSelector()
        self._wake_recv, self._wake_send = socket.socketpair()
        self._wake_recv.setblocking(False)
        self._wake_send.setblocking(False)
        self._selector.register(self._wake_recv, EVENT_READ, None)
        self._lock = threading.Lock()
        self._callbacks: deque = deque()
        # Both guarded by _lock: the loop blocks (or is about to) in select, and a wake-up
        # byte was written since it last drained the wake socket.
        self._sleeping = False
        self._wake_pending = False
        self._timers: list = []
        self._timer_seq = itertools.count()
        self._dirty: dict = {}
        self._handlers: dict = {}
        self._stopping = False
        self._stop_cause: Optional[BaseException] = None
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        #: Errors raised by callbacks and timers (the loop survives them), newest last.
        self.errors: list[BaseException] = []
        #: Loop iterations since start (a statistic).
        self.iterations = 0

    # ------------------------------------------------------------------ life cycle

    def start(self) -> None:
        """Start the loop thread."""
        self._thread.start()

    def is_alive(self) -> bool:
        """Whether the loop thread runs."""
        return self._thread.is_alive()

    def in_loop_thread(self) -> bool:
        """Whether the caller is the loop thread."""
        return threading.current_thread() is self._thread

    def shutdown(self, cause: Optional[BaseException] = None, timeout_s: float = 10.0) -> None:
        """Close every registered handler with ``cause``, stop and join the loop. Idempotent.

        :raises RuntimeError: if the thread does not end within ``timeout_s``.
        """
        if not self._thread.is_alive():
            if not self._stopped.is_set():
                self._cleanup(cause)
            return
        if self.in_loop_thread():
            self._stopping = True
            return
        self.call_soon(self._stop, cause)
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise RuntimeError(f"network thread {self.name!r} did not stop within {timeout_s}s")

    def _stop(self, cause: Optional[BaseException]) -> None:
        self._stopping = True
        self._stop_cause = cause

    # ------------------------------------------------------------------ scheduling

    def call_soon(self, callback: Callable[..., Any], *args: Any) -> bool:
        """Run ``callback(*args)`` on the loop thread soon (FIFO). Any thread.

        The loop is woken (one byte on its wake socket, as Netty's ``wakeup``) only if it
        blocks in ``select``, or is about to, and no byte is pending: callbacks posted while it
        runs cost no system call.

        :returns: ``False`` (and drops the callback) if the loop has stopped.
        """
        with self._lock:
            if self._stopped.is_set():
                return False
            self._callbacks.append((callback, args))
            # The loop looks at the queue under this lock before it blocks: a loop that is not
            # (about to be) blocked in select runs the callback this iteration anyway, and one
            # byte wakes a blocked loop however many callbacks follow. Each byte written is a
            # system call on this thread and a wake-up of the loop's (~5-15% of a busy task
            # thread when sent per buffer).
            if not self._sleeping or self._wake_pending:
                return True
            self._wake_pending = True
        try:
            self._wake_send.send(b"\x00")
        except (BlockingIOError, OSError):
            pass  # wake-up bytes are pending already, or we are shutting down
        return True

    def call_later(self, delay_s: float, callback: Callable[[], Any]) -> Timer:
        """Run ``callback()`` on the loop thread after ``delay_s`` (loop thread only)."""
        timer = Timer(time.monotonic() + delay_s, callback)
        heapq.heappush(self._timers, (timer.deadline, next(self._timer_seq), timer))
        return timer

    # ------------------------------------------------------------------ sockets

    def attach(self, handler: Any) -> None:
        """Own ``handler`` until :meth:`detach`: it is closed if the loop shuts down first."""
        self._handlers[handler] = None

    def detach(self, handler: Any) -> None:
        """Forget ``handler`` (it closed itself)."""
        self._handlers.pop(handler, None)
        self._dirty.pop(handler, None)

    def register(self, sock: socket.socket, events: int, handler: Any) -> None:
        """Watch ``sock`` for ``events`` (``EVENT_READ``/``EVENT_WRITE``) on behalf of
        ``handler``; 0 events unregisters it."""
        key = self._selector.get_map().get(sock.fileno()) if sock.fileno() >= 0 else None
        if key is None:
            if events:
                self._selector.register(sock, events, handler)
        elif not events:
            self._selector.unregister(sock)
        elif key.events != events:
            self._selector.modify(sock, events, handler)

    def unregister(self, sock: socket.socket) -> None:
        """Stop watching ``sock`` (no-op if it is not watched)."""
        try:
            self._selector.unregister(sock)
        except (KeyError, ValueError):
            pass

    def mark_dirty(self, handler: Any) -> None:
        """Call ``handler.flush()`` at the end of this iteration (loop thread only)."""
        self._dirty[handler] = None

    # ------------------------------------------------------------------ the loop

    def _run(self) -> None:
        selector = self._selector
        try:
            lock = self._lock
            while not self._stopping:
                self.iterations += 1
                with lock:
                    if self._callbacks or self._dirty:
                        timeout: Optional[float] = 0
                    else:
                        timeout = max(0.0, self._timers[0][0] - time.monotonic()) if self._timers else None
                        self._sleeping = True
                events = selector.select(timeout)
                # Unlocked: a call_soon that still saw True writes one byte too many (a spurious
                # wake-up); one that sees False is run by this iteration's _run_callbacks.
                self._sleeping = False
                for key, mask in events:
                    handler = key.data
                    if handler is None:
                        self._drain_wakeups()
                        continue
                    try:
                        if mask & EVENT_READ:
                            handler.handle_read()
                        if mask & EVENT_WRITE:
                            handler.handle_write()
                    except Exception as error:  # noqa: BLE001 - one connection fails, not the loop
                        self._handler_failed(handler, error)
                self._run_callbacks()
                self._run_timers()
                self._flush_dirty()
        except BaseException as error:  # pragma: no cover - a bug in the loop itself
            self.errors.append(error)
            traceback.print_exc()
        finally:
            self._cleanup(self._stop_cause)

    def _handler_failed(self, handler: Any, error: BaseException) -> None:
        try:
            handler.handle_error(error)
        except Exception as nested:  # noqa: BLE001
            self.errors.append(nested)

    def _drain_wakeups(self) -> None:
        with self._lock:
            self._wake_pending = False  # before reading: a byte written later stays readable
        try:
            while self._wake_recv.recv(4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    def _run_callbacks(self) -> None:
        with self._lock:
            if not self._callbacks:
                return
            callbacks = self._callbacks
            self._callbacks = deque()
        for callback, args in callbacks:
            try:
                callback(*args)
            except Exception as error:  # noqa: BLE001 - recorded, the loop goes on
                self.errors.append(error)

    def _run_timers(self) -> None:
        timers = self._timers
        now = time.monotonic()
        while timers and timers[0][0] <= now:
            _, _, timer = heapq.heappop(timers)
            if timer.cancelled:
                continue
            try:
                timer.callback()
            except Exception as error:  # noqa: BLE001
                self.errors.append(error)

    def _flush_dirty(self) -> None:
        # One pass: a handler that marks itself dirty again (more to write than one flush
        # allows) is flushed next iteration, after the sockets were polled again.
        dirty = self._dirty
        self._dirty = {}
        for handler in dirty:
            try:
                handler.flush()
            except Exception as error:  # noqa: BLE001
                self._handler_failed(handler, error)

    def _cleanup(self, cause: Optional[BaseException]) -> None:
        with self._lock:
            self._stopped.set()
            self._callbacks.clear()
        cause = cause or ConnectionAbortedError("the network thread shut down")
        while self._handlers:
            handler = next(iter(self._handlers))
            self._handlers.pop(handler)
            try:
                handler.close(cause)
            except Exception as error:  # noqa: BLE001
                self.errors.append(error)
        self._dirty.clear()
        self._timers.clear()
        self._selector.close()
        self._wake_recv.close()
        self._wake_send.close()

    def __repr__(self) -> str:
        return f"IOThread({self.name!r}, alive={self._thread.is_alive()})"
