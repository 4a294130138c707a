"""What a StreamTask hands each operator at ``setup`` (Flink spreads this over
``StreamOperatorParameters``, ``StreamConfig`` and ``StreamingRuntimeContext``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional

__all__ = ["StreamOperatorContext"]


@dataclass
class StreamOperatorContext:
    """Runtime facts and services of one operator in one subtask.

    :param task_name: the vertex name, e.g. ``"Filter -> Sink: Print to Std. Out"``.
    :param operator_name: this operator's name, e.g. ``"Filter"``.
    :param operator_id: the operator's 32-hex-character id (its StreamGraph hash).
    :param subtask_index: 0-based index of this subtask.
    :param parallelism: number of parallel subtasks of the vertex.
    :param max_parallelism: number of key groups.
    :param attempt_number: 0 for the first execution attempt.
    :param processing_time_service: the task's ``ProcessingTimeService`` (timers run as mails).
    :param key_selector: the state key selector for keyed operators, else ``None``.
    :param key_selector2: the second input's key selector of a keyed two-input operator.
    :param key_type: the declared type of the state keys (``key_by(..., key_type)``), or ``None``;
        a snapshot writes its keys in that type's column (else untyped).
    :param keyed_state_backend: a ``HeapKeyedStateBackend`` for keyed operators, else ``None``.
    :param timer_service_manager: keyed timers (``InternalTimeServiceManager``) or ``None``.
    :param runtime_context: the user-facing ``RuntimeContext`` given to ``Function.open``.
    :param mailbox_executor: submits actions to the task's mailbox (thread-safe).
    :param task_cancelled: ``() -> bool``, true once the task is being cancelled; operators that
        wait in the mailbox (``MailboxExecutor.yield_``, e.g. async I/O) check it after each
        yield (a cancel wakes the mailbox). ``None`` outside a task.
    :param job_parameters: global job parameters (str → str).
    :param metrics: the operator's metric counters (``OperatorMetrics``) or ``None``.
    :param operator_coordinator: for sources, the job's ``SourceCoordinator`` handing out splits.
    :param records_per_batch: how many records a source emits per mailbox default action.
    :param operator_state_backend: the operator's ``DefaultOperatorStateBackend`` (list,
        union list and broadcast state; snapshotted per subtask).
    :param auto_watermark_interval_ms: period of watermark generators' ``on_periodic_emit``
        (0: never).
    :param restored: whether the state services were restored from a snapshot (Flink's
        ``StreamOperatorStateContext.isRestored``); set by the ``StreamTaskStateInitializer``.
    :param restored_checkpoint_id: the id of the checkpoint restored from, if known.
    :param checkpointing_enabled: whether the job takes checkpoints (Flink's
        ``StreamingRuntimeContext.isCheckpointingEnabled``); two-phase-commit sinks commit at
        the end of input only without (``FileSinkOperator``). Set by the runtime.
    :param coordinator_event_executor: submits the operator coordinator's events (a source's
        split assignments) to the task's mailbox at checkpoint priority, so that a checkpoint
        trigger that arrives after an event cannot run before it (Flink delivers operator
        events in order with checkpoint triggers). ``None`` outside a task.
    :param final_checkpoint_expected: ``() -> bool``, asked at the end of input: whether a
        checkpoint taken after ``finish`` will complete before the task ends (FLIP-147's final
        checkpoint: checkpointing on, ``checkpoints-after-tasks-finish`` on, not stopping with a
        savepoint); two-phase-commit sinks commit their last data through it, else at the end
        of input. ``None``: no final checkpoint (outside a task).
    """

    task_name: str
    operator_name: str
    operator_id: str
    subtask_index: int
    parallelism: int
    max_parallelism: int
    attempt_number: int = 0
    processing_time_service: Any = None
    key_selector: Optional[Callable[[Any], Any]] = None
    key_selector2: Optional[Callable[[Any], Any]] = None
    key_type: Any = None
    keyed_state_backend: Any = None
    timer_service_manager: Any = None
    runtime_context: Any = None
    mailbox_executor: Any = None
    task_cancelled: Optional[Callable[[], bool]] = None
    job_parameters: Dict[str, str] = field(default_factory=dict)
    metrics: Any = None
    operator_coordinator: Any = None
    records_per_batch: int = 1024
    auto_watermark_interval_ms: int = 200
    operator_state_backend: Any = None
    restored: bool = False
    restored_checkpoint_id: Optional[int] = None
    checkpointing_enabled: bool = False
    coordinator_event_executor: Any = None
    final_checkpoint_expected: Optional[Callable[[], bool]] = None

    @property
    def task_name_with_subtasks(self) -> str:
        return f"{self.task_name} ({self.subtask_index + 1}/{self.parallelism})"
