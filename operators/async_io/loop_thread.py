"""An asyncio event loop on a thread of its own, for one async wait operator.

The task thread hands it work with :meth:`AsyncLoopThread.call_soon` (thread-safe, one
wake-up of the loop per call, so callers batch); coroutines started there never run on the
task thread. :meth:`AsyncLoopThread.stop` cancels what is still running, stops the loop,
closes it and joins the thread.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable, Optional

__all__ = ["AsyncLoopThread"]


class AsyncLoopThread:
    """A running event loop and its daemon thread.

    :param name: the thread's name, e.g. ``"async-io Async Wait (1/2)"``.
    """

    def __init__(self, name: str):
        self.name = name
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._started = threading.Event()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop (after :meth:`start`).

        :raises RuntimeError: before :meth:`start`.
        """
        if self._loop is None:
            raise RuntimeError(f"event loop thread {self.name!r} is not started")
        return self._loop

    def start(self, timeout_s: float = 10.0) -> None:
        """Start the thread and wait until its loop runs.

        :raises RuntimeError: if the loop did not start within ``timeout_s`` seconds.
        """
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        if not self._started.wait(timeout_s):
            raise RuntimeError(f"event loop thread {self.name!r} did not start within {timeout_s} s")

    def _run(self) -> None:
        loop = self._loop
        asyncio.set_event_loop(loop)
        loop.call_soon(self._started.set)
        try:
            loop.run_forever()
        finally:
            try:
                _cancel_all(loop)
            finally:
                loop.close()

    def call_soon(self, callback: Callable[..., Any], *args: Any) -> None:
        """Run ``callback(*args)`` on the loop thread soon (thread-safe).

        :raises RuntimeError: if the loop is closed.
        """
        self.loop.call_soon_threadsafe(callback, *args)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Cancel the loop's tasks, stop it and join the thread (idempotent, any thread but the
        loop's own)."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if thread.is_alive():
            try:
                loop.call_soon_threadsafe(loop.stop)
            except RuntimeError:  # already closed
                pass
            thread.join(timeout_s)
        self._thread = None


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())
