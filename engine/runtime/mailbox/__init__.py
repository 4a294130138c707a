"""The task thread's mailbox model, after Flink's ``streaming.runtime.tasks.mailbox``.

Everything that touches a task's operators runs on its one task thread. Input
processing is the mailbox's *default action*; checkpoint triggers, timers and
control messages arrive as :class:`Mail` in the :class:`TaskMailbox` and run
ahead of input. :class:`MailboxProcessor` runs the loop; other threads hand it
work through a :class:`MailboxExecutor`.

Modules: ``mail`` (Mail, MailPriority), ``task_mailbox`` (TaskMailbox, its
states and errors), ``mailbox_processor`` (the loop, MailboxController,
Suspension), ``mailbox_executor`` (MailboxExecutor).
"""

from .mail import Mail, MailPriority
from .mailbox_executor import MailboxExecutor
from .mailbox_processor import (
    DefaultAction,
    MailboxController,
    MailboxProcessor,
    MailboxProcessorStatistics,
    Suspension,
)
from .task_mailbox import (
    MailboxClosedError,
    MailboxState,
    MailboxStatistics,
    MailboxThreadError,
    TaskMailbox,
)

__all__ = [
    "DefaultAction",
    "Mail",
    "MailPriority",
    "MailboxClosedError",
    "MailboxController",
    "MailboxExecutor",
    "MailboxProcessor",
    "MailboxProcessorStatistics",
    "MailboxState",
    "MailboxStatistics",
    "MailboxThreadError",
    "Suspension",
    "TaskMailbox",
]
