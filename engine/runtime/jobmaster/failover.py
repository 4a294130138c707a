"""What the JobMaster does when a task fails (Flink's ``DefaultScheduler`` failover with the
``ExecutionFailureHandler``, the ``RestartAllFailoverStrategy`` and the exception history).

Rill restarts the whole job (every task, Flink's ``full`` failover strategy; region failover
is not built): the first failure of a running attempt asks the job's
``RestartBackoffTimeStrategy``; if it allows a restart, the job goes RESTARTING, every task is
cancelled, and once all are terminal and released, after the strategy's backoff, every task is
deployed again as a new attempt, restored from the latest completed checkpoint (else from the
snapshot the job started from, else empty). Otherwise the job fails as without restarts.

The backoff is a timer, never a sleep on a task or actor thread: the embedded JobMaster uses
:func:`schedule_on_timer`, the cluster's JobMasterActor its own wake-up message.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable

from rill.runtime.executiongraph.failover.restart_backoff_time_strategy import RestartBackoffTimeStrategy

__all__ = ["FailureHandlingResult", "ExecutionFailureHandler", "ExceptionHistoryEntry", "schedule_on_timer",
           "RestartScheduler"]

#: ``(delay_ms, restart)``: call ``restart()`` once ``delay_ms`` passed (and, on a cluster,
#: once the slots of lost TaskExecutors are replaced), on the JobMaster's thread.
RestartScheduler = Callable[[int, Callable[[], None]], None]


@dataclass(frozen=True)
class FailureHandlingResult:
    """The decision on one failure (Flink's ``FailureHandlingResult``).

    :param can_restart: whether the job restarts.
    :param restart_delay_ms: the backoff before the restart, ms (-1 when it does not restart).
    :param error: the failure's exception.
    :param timestamp_ms: when it was handled, epoch ms.
    """

    can_restart: bool
    restart_delay_ms: int
    error: BaseException
    timestamp_ms: int


class ExecutionFailureHandler:
    """Asks the restart strategy about each failure of a running attempt (Flink's
    ``ExecutionFailureHandler``); with the full-restart failover strategy every task restarts.

    :param restart_backoff_time_strategy: the job's strategy.
    """

    def __init__(self, restart_backoff_time_strategy: RestartBackoffTimeStrategy) -> None:
        self._strategy = restart_backoff_time_strategy
        self.number_of_restarts = 0

    def get_failure_handling_result(self, error: BaseException, timestamp_ms: int) -> FailureHandlingResult:
        """Tell the strategy about the failure and ask whether the job may restart; counts the
        restarts it allows."""
        self._strategy.notify_failure(error)
        if self._strategy.can_restart():
            self.number_of_restarts += 1
            return FailureHandlingResult(True, max(0, int(self._strategy.get_backoff_time())), error, timestamp_ms)
        return FailureHandlingResult(False, -1, error, timestamp_ms)


@dataclass(frozen=True)
class ExceptionHistoryEntry:
    """One failure the job went through (Flink's ``RootExceptionHistoryEntry``).

    :param failure: the task's ``TaskFailure`` (task name, operator, exception, traceback).
    :param timestamp_ms: when it was handled, epoch ms.
    :param task: the failed task's handle (where it ran, for the REST API).
    :param restarted: whether the job restarted after it (the last entry of a failed job: no).
    """

    failure: Any
    timestamp_ms: int
    task: Any
    restarted: bool


def schedule_on_timer(delay_ms: int, restart: Callable[[], None]) -> None:
    """The embedded mode's :data:`RestartScheduler`: ``restart()`` on a timer thread after
    ``delay_ms``."""
    timer = threading.Timer(delay_ms / 1000.0, restart)
    timer.daemon = True
    timer.name = "rill-restart-timer"
    timer.start()
