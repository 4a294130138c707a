"""Where the checkpoint coordinator's timers run (Flink's ``ScheduledExecutor`` of the
JobMaster's main thread).

The coordinator asks for two kinds of timer: the periodic trigger and each checkpoint's
timeout. Embedded, :class:`ThreadTimer` runs them on one daemon thread; in the cluster the
JobMaster actor supplies a timer that runs them on the actor's own thread (as Thespian wake-ups),
because an actor must only send messages from that thread.
"""

from __future__ import annotations

import abc
import heapq
import itertools
import logging
import threading
import time
from typing import Callable, List, Optional, Tuple

__all__ = ["CheckpointTimer", "Cancellable", "ThreadTimer"]

_LOG = logging.getLogger(__name__)


class Cancellable:
    """A scheduled action that can be cancelled before it runs."""

    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        """Do not run the action (if it has not run yet)."""
        self.cancelled = True


class CheckpointTimer(abc.ABC):
    """Runs actions after a delay."""

    @abc.abstractmethod
    def schedule(self, delay_ms: float, action: Callable[[], None]) -> Cancellable:
        """Run ``action`` once, ``delay_ms`` ms from now (at once for ``delay_ms <= 0``).
        Actions run one at a time; one that raises is logged."""

    @abc.abstractmethod
    def shutdown(self) -> None:
        """Run nothing more (idempotent)."""


class ThreadTimer(CheckpointTimer):
    """One daemon thread over a heap of deadlines.

    :param name: the thread's name.
    """

    def __init__(self, name: str = "rill-checkpoint-timer") -> None:
        self._heap: List[Tuple[float, int, Cancellable, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._stopped = False
        self._thread: Optional[threading.Thread] = None
        self._name = name

    def schedule(self, delay_ms: float, action: Callable[[], None]) -> Cancellable:
        handle = Cancellable()
        with self._cond:
            if self._stopped:
                handle.cancel()
                return handle
            heapq.heappush(self._heap, (time.monotonic() + max(0.0, delay_ms) / 1000.0, next(self._seq),
                                        handle, action))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._cond.notify()
        return handle

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped:
                    if self._heap:
                        wait_s = self._heap[0][0] - time.monotonic()
                        if wait_s <= 0:
                            break
                        self._cond.wait(wait_s)
                    else:
                        self._cond.wait()
                if self._stopped:
                    return
                _, _, handle, action = heapq.heappop(self._heap)
            if handle.cancelled:
                continue
            try:
                action()
            except Exception:  # noqa: BLE001 - a timer must keep running
                _LOG.exception("Checkpoint timer action failed")

    def shutdown(self) -> None:
        with self._cond:
            self._stopped = True
            self._heap.clear()
            self._cond.notify()
