"""``CompletableFuture`` (PyFlink's ``pyflink.common.completable_future``; Java's
``CompletableFuture`` as PyFlink wraps it): a ``concurrent.futures.Future`` that can also wrap
another future (a job client's), converting its result with ``py_class``.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any, Callable, Optional

__all__ = ["CompletableFuture"]


class CompletableFuture(concurrent.futures.Future):
    """A future completed by :meth:`set_result` / :meth:`set_exception` / :meth:`cancel`, or
    mirroring ``future`` (a ``concurrent.futures.Future``, e.g. ``JobClient.
    get_job_execution_result()``) when given one; then :meth:`result` is
    ``py_class(future.result())`` (``py_class`` omitted: the result itself), and cancelling this
    future cancels ``future``. When several threads complete it, only the first succeeds (the
    others raise ``concurrent.futures.InvalidStateError``, as Python's futures do).

    Being a ``concurrent.futures.Future``, it works with ``concurrent.futures.wait`` and
    ``asyncio.wrap_future``. ``result(timeout)`` / ``exception(timeout)`` take seconds.

    :raises TypeError: if ``future`` is not a ``concurrent.futures.Future``.
    """

    def __init__(self, future: Optional[concurrent.futures.Future] = None,
                 py_class: Optional[Callable[[Any], Any]] = None):
        super().__init__()
        if future is not None and not isinstance(future, concurrent.futures.Future):
            raise TypeError(f"CompletableFuture wraps a concurrent.futures.Future, got {type(future).__name__}")
        self._source = future
        self._py_class = py_class
        if future is not None:
            future.add_done_callback(self._copy)

    def _copy(self, source: concurrent.futures.Future) -> None:
        if self.done():
            return
        if source.cancelled():
            self._cancel_self()
            return
        error = source.exception()
        try:
            if error is not None:
                self.set_exception(error)
            else:
                value = source.result()
                self.set_result(value if self._py_class is None else self._py_class(value))
        except concurrent.futures.InvalidStateError:
            pass  # completed by another thread in between: the first completion wins
        except Exception as e:  # noqa: BLE001 - py_class failed: the future fails with it
            self.set_exception(e)

    def _cancel_self(self) -> bool:
        with self._condition:  # an RLock: done() and the base methods take it again
            if self.done():
                return self.cancelled()
            super().cancel()
            self.set_running_or_notify_cancel()  # wakes concurrent.futures.wait() callers too
            return True

    def cancel(self) -> bool:
        """Cancel this future (and the wrapped one); False if it had completed already."""
        if self._source is not None:
            self._source.cancel()
        return self._cancel_self()
