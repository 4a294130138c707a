"""``StreamTask``: runs one subtask's OperatorChain on its task thread, driven by a mailbox
(Flink's ``StreamTask``, ``OneInputStreamTask``, ``SourceOperatorStreamTask``).

Everything that touches operators happens on the task thread: input processing is the
mailbox's default action (one network buffer, or one source batch, per call), and timers,
output flushes and control messages arrive as mails that run ahead of it. When no input is
available the default action suspends and the thread sleeps in the mailbox; an input gate that
gets data resumes it. A writer that finds no free output buffer blocks in the buffer pool (that
time is the task's back-pressured time) and wakes when the consumer recycles a buffer or the
task is cancelled.
"""

from __future__ import annotations

import time
from typing import Any, List, Optional

from rill.network.events import EndOfPartitionEvent
from rill.operators.context import StreamOperatorContext
from rill.operators.source_operator import InputStatus
from rill.runtime.io.status_watermark_valve import StatusWatermarkValve
from rill.runtime.mailbox.mail import MailPriority
from rill.runtime.mailbox.mailbox_processor import MailboxProcessor
from rill.runtime.metrics import TaskIOMetrics
from rill.runtime.streamrecord import Watermark
from rill.runtime.tasks.operator_chain import OperatorChain
from rill.runtime.tasks.outputs import attribute_error
from rill.runtime.tasks.processing_time_service import SystemProcessingTimeService

__all__ = ["StreamTask", "OneInputStreamTask", "SourceOperatorStreamTask", "CancelTaskException"]


class CancelTaskException(Exception):
    """The task stopped because it was cancelled (not a failure)."""


class StreamTask:
    """Base of stream tasks.

    :param environment: the task's ``RuntimeEnvironment`` (vertex, subtask index,
        parallelism, attempt, partitions, gates, record writers, services).
    """

    def __init__(self, environment):
        self.env = environment
        self.metrics: TaskIOMetrics = environment.metrics
        self.mailbox_processor = MailboxProcessor(self._process_input)
        self.processing_time_service = SystemProcessingTimeService(
            self.mailbox_processor.get_mailbox_executor(MailPriority.TIMER),
            task_name=environment.task_name_with_subtasks,
        )
        self.metrics.idle_ns = lambda: self.mailbox_processor.idle_time_ns
        self.operator_chain: Optional[OperatorChain] = None
        self.canceled = False
        self._flusher = None
        self._cleaned_up = False

    # -- context for operators (called by OperatorChain) -----------------------------------
    def _operator_context(self, cfg) -> StreamOperatorContext:
        env = self.env
        ctx = StreamOperatorContext(
            task_name=env.task_name,
            operator_name=cfg.operator_name,
            operator_id=str(cfg.operator_id),
            subtask_index=env.subtask_index,
            parallelism=env.parallelism,
            max_parallelism=cfg.max_parallelism,
            attempt_number=env.attempt_number,
            processing_time_service=self.processing_time_service,
            key_selector=cfg.state_key_selector,
            mailbox_executor=self.mailbox_processor.get_mailbox_executor(MailPriority.DEFAULT),
            job_parameters=dict(env.job_parameters),
            operator_coordinator=env.operator_coordinators.get(cfg.node_id),
            records_per_batch=env.records_per_batch,
        )
        from rill.runtime.tasks.keyed_services import create_keyed_services  # noqa: PLC0415
        create_keyed_services(ctx)
        return ctx

    # -- life cycle (task thread) ------------------------------------------------------------
    def invoke(self) -> None:
        """Run the task to its end.

        :raises CancelTaskException: if cancelled.
        :raises BaseException: whatever an operator raised, tagged with the operator name.
        """
        env = self.env
        self.operator_chain = OperatorChain(env.vertex, env.record_writers, self._operator_context)
        self.init_input()
        self.operator_chain.initialize_state_and_open()
        timeout = env.buffer_timeout_ms
        if env.record_writers and timeout is not None and timeout > 0:
            writers = env.record_writers
            self._flusher = self.processing_time_service.schedule_at_fixed_rate(
                lambda _ts: [w.flush_all() for w in writers], timeout, timeout)
        self.metrics.mark_start()
        self.mailbox_processor.run_mailbox_loop()
        if self.canceled:
            raise CancelTaskException()
        self.operator_chain.end_input_and_finish()
        if self._flusher is not None:
            self._flusher.cancel()
        for w in env.record_writers:
            w.flush_all()
        for p in env.result_partitions:
            p.finish()
        self.metrics.mark_end()

    def cleanup(self) -> List[BaseException]:
        """Close operators and stop services; always called, also after failure; idempotent."""
        errors: List[BaseException] = []
        if self._cleaned_up:
            return errors
        self._cleaned_up = True
        self.metrics.mark_end()
        try:
            self.processing_time_service.shutdown()
        except BaseException as e:  # pragma: no cover
            errors.append(e)
        if self.operator_chain is not None:
            errors.extend(self.operator_chain.close())
            for _, op in self.operator_chain.all_operators:
                timers = getattr(getattr(op, "context", None), "timer_service_manager", None)
                if timers is not None:
                    timers.close()
        for w in self.env.record_writers:
            try:
                w.close()
            except BaseException as e:  # pragma: no cover
                errors.append(e)
        self.mailbox_processor.close()
        return errors

    def cancel(self) -> None:
        """Stop promptly from any thread: the mailbox loop ends, blocked writers wake."""
        self.canceled = True
        self.mailbox_processor.cancel()
        for p in self.env.result_partitions:
            p.buffer_pool.destroy()
        for g in self.env.input_gates:
            g.close()

    # -- input ------------------------------------------------------------------------------
    def init_input(self) -> None:
        pass

    def _process_input(self, controller) -> None:
        raise NotImplementedError


class OneInputStreamTask(StreamTask):
    """Reads the task's input gates (all edges into the head operator) and feeds the head
    operator one buffer per default action; watermarks pass through the valve."""

    def init_input(self) -> None:
        gates = self.env.input_gates
        self._gates = gates
        self._offsets = []
        total = 0
        for g in gates:
            self._offsets.append(total)
            total += g.get_number_of_input_channels()
        self._valve = StatusWatermarkValve(total)
        self._finished_gates = [False] * len(gates)
        self._next_gate = 0
        self._suspension = None
        self._head = self.operator_chain.head_operator
        self._head_name = self.operator_chain.head_config.operator_name
        for g in gates:
            g.set_availability_listener(self._on_input_available)
        self.metrics.input_pool_usage = lambda: 0.0

    def _on_input_available(self) -> None:
        s = self._suspension
        if s is not None:
            s.resume()

    def _poll(self):
        gates = self._gates
        n = len(gates)
        for i in range(n):
            idx = (self._next_gate + i) % n
            if self._finished_gates[idx]:
                continue
            boe = gates[idx].poll_next()
            if boe is not None:
                self._next_gate = (idx + 1) % n
                return idx, boe
        return None

    def _process_input(self, controller) -> None:
        polled = self._poll()
        if polled is None:
            if all(self._finished_gates):
                controller.all_actions_completed()
                return
            self._suspension = controller.suspend_default_action()
            polled = self._poll()  # data that arrived before the listener could see the suspension
            if polled is None:
                return
            self._suspension.resume()
            self._suspension = None
        gate_idx, boe = polled
        buffer = boe.buffer
        if buffer is not None:
            values = buffer.values
            self.metrics.num_records_in += len(values)
            self.metrics.num_buffers_in += 1
            try:
                self._head.process_batch(values, buffer.timestamps)
            except BaseException as e:
                attribute_error(e, self._head_name)
                raise
            finally:
                buffer.recycle_buffer()
            return
        event = boe.event
        channel = self._offsets[gate_idx] + boe.channel_index
        if isinstance(event, Watermark):
            new_wm = self._valve.input_watermark(event.timestamp, channel)
            if new_wm is not None:
                self._emit_watermark(new_wm)
        elif isinstance(event, EndOfPartitionEvent):
            new_wm = self._valve.channel_finished(channel)
            if new_wm is not None:
                self._emit_watermark(new_wm)
            if self._gates[gate_idx].is_finished():
                self._finished_gates[gate_idx] = True
                if all(self._finished_gates):
                    controller.all_actions_completed()
        # other events (EndOfData, barriers) need no action yet

    def _emit_watermark(self, timestamp: int) -> None:
        try:
            self._head.process_watermark(Watermark(timestamp))
        except BaseException as e:
            attribute_error(e, self._head_name)
            raise


class SourceOperatorStreamTask(StreamTask):
    """Drives a ``SourceOperator``: one batch per default action; when an unbounded reader has
    nothing, the default action sleeps ~1 ms on the mailbox (a timer mail resumes it)."""

    def init_input(self) -> None:
        self._source = self.operator_chain.head_operator
        self._source_name = self.operator_chain.head_config.operator_name
        self.metrics.source_progress = lambda: self._source.progress_units

    def _process_input(self, controller) -> None:
        try:
            status = self._source.emit_next()
        except BaseException as e:
            attribute_error(e, self._source_name)
            raise
        if status is InputStatus.MORE_AVAILABLE:
            return
        if status is InputStatus.END_OF_INPUT:
            controller.all_actions_completed()
            return
        suspension = controller.suspend_default_action()
        now = self.processing_time_service.get_current_processing_time()
        self.processing_time_service.register_timer(now + 1, lambda _ts: suspension.resume())
