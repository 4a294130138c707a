"""``StreamTask``: runs one subtask's OperatorChain on its task thread, driven by a mailbox
(Flink's ``StreamTask``, ``OneInputStreamTask``, ``SourceOperatorStreamTask``).

Everything that touches operators happens on the task thread: input processing is the
mailbox's default action (one network buffer, or one source batch, per call), and timers,
output flushes and control messages arrive as mails that run ahead of it. When no input is
available the default action suspends and the thread sleeps in the mailbox; an input gate that
gets data resumes it. A writer that finds no free output buffer blocks in the buffer pool (that
time is the task's back-pressured time) and wakes when the consumer recycles a buffer or the
task is cancelled.

Stop-with-savepoint (FLIP-34): a task that takes a synchronous savepoint (its trigger, or its
barrier once aligned) stops there: a source reads no more; no task ends before the
savepoint's ``notify_checkpoint_complete`` reached it (so two-phase-commit sinks commit it);
with ``StopMode.NO_DRAIN`` the end of the inputs that follows is not an end of input for the
operators (no ``MAX_WATERMARK`` from finished channels, no ``end_input``/``finish``). If the
savepoint is aborted the task runs on.

End of data and the final checkpoint (FLIP-147, Flink's ``StreamTask.endData`` and
``finalCheckpointMinId``): when a source's input ends, or every input channel of a network task
delivered ``EndOfDataEvent`` (or ended), the task calls ``end_input`` and ``finish`` of its
operators, quiesces its timers and sends ``EndOfDataEvent`` on every output, behind the records:
its consumers end their input on it, so the whole job finishes its operators before one
checkpoint. With ``final_checkpoint`` (checkpointing on, ``checkpoints-after-tasks-finish``)
the task then waits, still taking checkpoints (its snapshots say the task finished), until a
checkpoint it took after that completed: its ``notify_checkpoint_complete`` commits what the
two-phase-commit sinks hold; only then does it end its partitions (EndOfPartition) and finish.
A network task whose producers all finished is triggered directly by the coordinator; it takes
the checkpoint once every input gate ended, so the checkpoint covers all the producers' records.
"""

from __future__ import annotations

import threading
import time
from typing import List, Optional

from rill.network.events import CancelCheckpointMarker, CheckpointBarrier, EndOfDataEvent, EndOfPartitionEvent
from rill.network.events import StopMode as DataStopMode
from rill.operators.context import StreamOperatorContext
from rill.operators.source_operator import InputStatus
from rill.operators.state_initializer import StreamTaskStateInitializer
from rill.runtime.tasks.state_backend_loader import load_keyed_state_backend_factory
from rill.operators.watermark.timestamps_and_watermarks import GeneratesWatermarks
from rill.runtime.checkpoint.barrier_handler import CheckpointBarrierHandler, create_barrier_handler
from rill.runtime.checkpoint.channel_state_writer import recovered_input, recovered_output
from rill.runtime.checkpoint.checkpoint_failure_reason import CheckpointException, CheckpointFailureReason
from rill.runtime.checkpoint.checkpoint_options import AlignmentType, CheckpointMetaData, CheckpointOptions
from rill.runtime.checkpoint.stop_mode import StopMode
from rill.runtime.checkpoint.subtask_checkpoint_coordinator import SubtaskCheckpointCoordinator
from rill.runtime.io.status_watermark_valve import StatusWatermarkValve
from rill.runtime.mailbox import MailboxClosedError
from rill.runtime.mailbox.mail import MailPriority
from rill.runtime.mailbox.mailbox_processor import MailboxProcessor
from rill.runtime.metrics import TaskIOMetrics
from rill.common.streamrecord import MAX_WATERMARK, Watermark, WatermarkStatus
from rill.runtime.tasks.operator_chain import OperatorChain
from rill.operators.base import attribute_error
from rill.runtime.tasks.system_processing_time_service import SystemProcessingTimeService
from rill.runtime.watermark_alignment import SourceWatermarkAlignment
from rill.state.checkpoint.operator_subtask_state import ChannelStateSnapshot

__all__ = ["StreamTask", "OneInputStreamTask", "TwoInputStreamTask", "SourceOperatorStreamTask", "CancelTaskException"]


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
        #: builds every operator's state services (restored ones once checkpoints restore)
        self.state_initializer = StreamTaskStateInitializer(
            load_keyed_state_backend_factory(environment.state_backend_settings))
        self.operator_chain: Optional[OperatorChain] = None
        self.canceled = False
        self._cancel_requested = threading.Event()  # what operators see of `canceled`
        self._flusher = None
        self._cleaned_up = False
        #: this task's part of checkpoints (set once the operators are open)
        self.subtask_checkpoint_coordinator: Optional[SubtaskCheckpointCoordinator] = None
        # stop-with-savepoint: the synchronous savepoint taken, how to stop, whether it completed
        self._stop_savepoint_id: Optional[int] = None
        self._stop_mode: Optional[StopMode] = None
        self._stop_confirmed = False
        self._stop_suspension = None
        # end of data and the final checkpoint (FLIP-147): whether the operators finished, the
        # first checkpoint taken after that (Flink's finalCheckpointMinId), whether one at least
        # as new completed, and the suspended default action waiting for it
        self._end_of_data = False
        self._final_checkpoint_id: Optional[int] = None
        self._final_checkpoint_done = False
        self._final_suspension = None

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
            key_selector2=getattr(cfg, "state_key_selector2", None),
            key_type=cfg.state_key_type,
            mailbox_executor=self.mailbox_processor.get_mailbox_executor(MailPriority.DEFAULT),
            job_parameters=dict(env.job_parameters),
            operator_coordinator=env.operator_coordinators.get(cfg.node_id),
            records_per_batch=env.records_per_batch,
            auto_watermark_interval_ms=env.auto_watermark_interval_ms,
            task_cancelled=self._cancel_requested.is_set,  # no reference back to the task
            checkpointing_enabled=env.checkpointing_enabled,
            coordinator_event_executor=self.mailbox_processor.get_mailbox_executor(MailPriority.CHECKPOINT),
            final_checkpoint_expected=self._final_checkpoint_expected,
        )
        return self.state_initializer.initialize(ctx, self._restored_operator_state(cfg))

    def _restored_channel_state(self) -> ChannelStateSnapshot:
        """The in-flight data of the unaligned checkpoint the deployment restores from (stored
        with the head operator), read on the task thread; empty when there is none."""
        restore = self.env.task_restore
        if restore is None:
            return ChannelStateSnapshot()
        return restore.read_channel_state(str(self.operator_chain.head_config.operator_id))

    def _send_recovered_output(self, channel_state: ChannelStateSnapshot) -> None:
        """Send the restored output buffers first, each to its subpartition, before anything the
        task produces (Flink's ``RecoveredChannelStateHandler`` of the result subpartitions);
        under backpressure this waits for pool buffers as any output does."""
        partitions = self.env.result_partitions
        for partition_index, buffers in recovered_output(channel_state).items():
            if partition_index >= len(partitions):
                raise ValueError(
                    f"{self.env.task_name_with_subtasks}: the restored in-flight data names output partition "
                    f"{partition_index}, but the task has {len(partitions)} (the job's graph changed)")
            partition = partitions[partition_index]
            for subpartition, values, timestamps in buffers:
                buffer = partition.request_buffer_blocking()
                partition.emit_buffer(buffer.set_contents(values, timestamps), subpartition)

    def _process_recovered_input(self, channel_state: ChannelStateSnapshot) -> None:
        """Process the restored input buffers before any new input (a network task)."""
        if channel_state.input_channels:
            raise ValueError(f"{self.env.task_name_with_subtasks}: the restored in-flight data has input "
                             "buffers, but the task has no network input (the job's graph changed)")

    def _restored_operator_state(self, cfg):
        """The state the deployment restores operator ``cfg`` from, read here on the task thread
        from its handle (Flink's ``TaskStateManager.prioritizedOperatorState``), or ``None``."""
        restore = self.env.task_restore
        return None if restore is None else restore.read_operator_state(str(cfg.operator_id))

    # -- life cycle (task thread) ------------------------------------------------------------
    def restore(self) -> None:
        """Build the operator chain and restore it (Flink's ``StreamTask.restore``): every
        operator's state initialized from the deployment's snapshot (or empty) and opened, the
        in-flight data of an unaligned checkpoint recovered. The Task is INITIALIZING while this
        runs and RUNNING after it, as in Flink. Nothing for a task finished on restore.

        :raises CancelTaskException: if cancelled.
        :raises BaseException: whatever an operator raised, tagged with the operator name.
        """
        env = self.env
        if env.task_restore is not None and env.task_restore.finished_on_restore:
            return
        self.operator_chain = OperatorChain(env.vertex, env.record_writers, self._operator_context)
        self.init_input()
        self._setup_output_availability()
        self.operator_chain.initialize_state_and_open()
        channel_state = self._restored_channel_state()
        if not channel_state.is_empty():
            self._send_recovered_output(channel_state)
            self._process_recovered_input(channel_state)
        if env.checkpoint_responder is not None:
            self.subtask_checkpoint_coordinator = SubtaskCheckpointCoordinator(
                env.task_name_with_subtasks, env.subtask_index, env.attempt_id, self.operator_chain,
                env.record_writers, env.checkpoint_responder, self._cancel_requested.is_set,
                self._register_checkpoint_timer, self._run_on_task_thread)

    def invoke(self) -> None:
        """Run the restored task (:meth:`restore`) to its end.

        :raises CancelTaskException: if cancelled.
        :raises BaseException: whatever an operator raised, tagged with the operator name.
        """
        env = self.env
        if env.task_restore is not None and env.task_restore.finished_on_restore:
            self._run_finished_on_restore()
            return
        timeout = env.buffer_timeout_ms
        if env.record_writers and timeout is not None and timeout > 0:
            writers = env.record_writers
            self._flusher = self.processing_time_service.schedule_at_fixed_rate(
                lambda _ts: [w.flush_all() for w in writers], timeout, timeout)
        self.metrics.mark_start()
        self.mailbox_processor.run_mailbox_loop()
        if self.canceled:
            raise CancelTaskException()
        if not self._end_of_data:  # stopped with a savepoint: the loop ended before the data did
            self._end_data()
        if self._flusher is not None:
            self._flusher.cancel()
        for w in env.record_writers:
            w.flush_all()
        for p in env.result_partitions:
            p.finish()
        if self.subtask_checkpoint_coordinator is not None:  # acknowledged before FINISHED is reported
            self.subtask_checkpoint_coordinator.wait_for_pending_checkpoints()
        self.metrics.mark_end()

    def _run_finished_on_restore(self) -> None:
        """Every operator of the task was fully finished in the snapshot restored from
        (FLIP-147, Flink's ``FinishedOnRestoreOperator``): none is created or run; the inputs,
        whose producers finished before the snapshot too, are read to their EndOfPartition and
        the outputs end at once with EndOfData and EndOfPartition. Checkpoints triggered
        meanwhile are not taken (the task reports FINISHED)."""
        gates = list(self.env.input_gates)
        suspension = None

        def on_available() -> None:
            if suspension is not None:
                suspension.resume()

        def drain(controller) -> None:
            nonlocal suspension
            progressed = False
            for g in gates:
                boe = None if g.is_finished() else g.poll_next()
                if boe is not None:
                    progressed = True
                    if boe.buffer is not None:
                        boe.buffer.recycle_buffer()
            if all(g.is_finished() for g in gates):
                controller.all_actions_completed()
            elif not progressed:
                suspension = controller.suspend_default_action()
                if any(g.is_available() for g in gates if not g.is_finished()):  # arrived meanwhile
                    suspension.resume()

        for g in gates:
            g.set_availability_listener(on_available)
        self.mailbox_processor = MailboxProcessor(drain)
        self.metrics.mark_start()
        self.mailbox_processor.run_mailbox_loop()
        if self.canceled:
            raise CancelTaskException()
        self._end_of_data = True
        for w in self.env.record_writers:
            w.broadcast_event(EndOfDataEvent(DataStopMode.DRAIN))
        for p in self.env.result_partitions:
            p.finish()
        self.metrics.mark_end()

    def cleanup(self) -> List[BaseException]:
        """Close operators and stop services; always called, also after failure; idempotent."""
        errors: List[BaseException] = []
        if self._cleaned_up:
            return errors
        self._cleaned_up = True
        self.metrics.mark_end()
        if self.subtask_checkpoint_coordinator is not None:
            self.subtask_checkpoint_coordinator.close()
        try:
            self.processing_time_service.shutdown()
        except BaseException as e:  # pragma: no cover
            errors.append(e)
        if self.operator_chain is not None:
            errors.extend(self.operator_chain.close())
            for _, op in self.operator_chain.all_operators:
                context = getattr(op, "context", None)
                timers = getattr(context, "timer_service_manager", None)
                if timers is not None:
                    timers.close()
                # the RocksDB backend's directory goes with the task (Flink disposes the
                # keyed state backend in StreamOperatorStateHandler.dispose)
                backend = getattr(context, "keyed_state_backend", None)
                if backend is not None:
                    try:
                        backend.dispose()
                    except BaseException as e:  # pragma: no cover - keep cleaning up
                        errors.append(e)
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
        self._cancel_requested.set()
        self.mailbox_processor.cancel()
        for p in self.env.result_partitions:
            p.buffer_pool.destroy()
        for g in self.env.input_gates:
            g.close()

    # -- checkpoints (Flink's CheckpointableTask) ---------------------------------------------
    def trigger_checkpoint_async(self, metadata: CheckpointMetaData, options: CheckpointOptions) -> None:
        """Take checkpoint ``metadata.checkpoint_id`` as a source of it: a priority mail, run
        ahead of input (any thread; Flink's ``triggerCheckpointAsync``).

        :raises MailboxClosedError: if the task no longer runs mails.
        """
        self.mailbox_processor.get_mailbox_executor(MailPriority.CHECKPOINT).execute(
            lambda: self._trigger_checkpoint(metadata, options), f"checkpoint {metadata.checkpoint_id} trigger")

    def _trigger_checkpoint(self, metadata: CheckpointMetaData, options: CheckpointOptions) -> None:
        self._perform_checkpoint(metadata, options, 0.0)

    def trigger_checkpoint_on_barrier(self, metadata: CheckpointMetaData, options: CheckpointOptions,
                                      alignment_duration_ms: float, channel_state=None) -> None:
        """Every input delivered the barrier, or the first one of an unaligned checkpoint did
        (with its ``ChannelStateWriter``) (task thread; called by the barrier handler)."""
        self._perform_checkpoint(metadata, options, alignment_duration_ms, channel_state)

    def _perform_checkpoint(self, metadata: CheckpointMetaData, options: CheckpointOptions,
                            alignment_duration_ms: float, channel_state=None) -> None:
        coordinator = self.subtask_checkpoint_coordinator
        if coordinator is None:
            if channel_state is not None:
                channel_state.abort()
            return
        if options.stop_mode is not None:
            self._begin_stop(metadata.checkpoint_id, options.stop_mode)
        if self._end_of_data and self._final_checkpoint_id is None:
            self._final_checkpoint_id = metadata.checkpoint_id
        coordinator.checkpoint_state(metadata, options, alignment_duration_ms, channel_state,
                                     task_finished=self._end_of_data)

    def abort_checkpoint_on_barrier(self, checkpoint_id: int, cause: CheckpointException) -> None:
        """The inputs cannot align on ``checkpoint_id`` (task thread; the barrier handler)."""
        coordinator = self.subtask_checkpoint_coordinator
        if coordinator is not None:
            coordinator.abort_checkpoint_on_barrier(checkpoint_id, cause)

    def notify_checkpoint_complete_async(self, checkpoint_id: int) -> None:
        """Tell every operator that ``checkpoint_id`` completed: a priority mail (any thread).

        :raises MailboxClosedError: if the task no longer runs mails.
        """
        self.mailbox_processor.get_mailbox_executor(MailPriority.CHECKPOINT).execute(
            lambda: self._notify(True, checkpoint_id), f"checkpoint {checkpoint_id} complete")

    def notify_checkpoint_aborted_async(self, checkpoint_id: int) -> None:
        """Tell every operator that ``checkpoint_id`` was aborted: a priority mail (any thread).

        :raises MailboxClosedError: if the task no longer runs mails.
        """
        self.mailbox_processor.get_mailbox_executor(MailPriority.CHECKPOINT).execute(
            lambda: self._notify(False, checkpoint_id), f"checkpoint {checkpoint_id} aborted")

    def _notify(self, complete: bool, checkpoint_id: int) -> None:
        coordinator = self.subtask_checkpoint_coordinator
        if coordinator is None:
            return
        if complete:
            coordinator.notify_checkpoint_complete(checkpoint_id)
            if self._final_checkpoint_id is not None and checkpoint_id >= self._final_checkpoint_id:
                self._final_checkpoint_done = True
                suspension, self._final_suspension = self._final_suspension, None
                if suspension is not None:
                    suspension.resume()
        else:
            self._checkpoint_aborted(checkpoint_id)
            coordinator.notify_checkpoint_aborted(checkpoint_id)
        if checkpoint_id == self._stop_savepoint_id:
            if complete:
                self._stop_confirmed = True
            else:  # the stop failed: the job runs on
                self._stop_savepoint_id = self._stop_mode = None
            suspension, self._stop_suspension = self._stop_suspension, None
            if suspension is not None:
                suspension.resume()

    # -- stop-with-savepoint (task thread) ----------------------------------------------------
    def _begin_stop(self, checkpoint_id: int, stop_mode: StopMode) -> None:
        """This task takes synchronous savepoint ``checkpoint_id`` now (before its snapshot)."""
        self._stop_savepoint_id, self._stop_mode, self._stop_confirmed = checkpoint_id, stop_mode, False

    def _waits_for_stop(self, controller) -> bool:
        """Whether the task must not end yet: it took a synchronous savepoint that has not
        completed (the default action is suspended until its notification)."""
        if self._stop_savepoint_id is None or self._stop_confirmed:
            return False
        self._stop_suspension = controller.suspend_default_action()
        return True

    def _checkpoint_aborted(self, checkpoint_id: int) -> None:
        """Input side of an aborted checkpoint (a network task stops aligning on it)."""

    def _register_checkpoint_timer(self, deadline_ms: int, callback):
        """A processing-time timer for the aligned-checkpoint timeout (barrier handler, output
        barriers); ``callback()`` runs on the task thread."""
        return self.processing_time_service.register_timer(deadline_ms, lambda _ts: callback())

    def _run_on_task_thread(self, callback) -> None:
        """Run ``callback`` as a checkpoint mail (any thread); dropped once the task ends."""
        try:
            self.mailbox_processor.get_mailbox_executor(MailPriority.CHECKPOINT).execute(callback, "checkpoint event")
        except MailboxClosedError:
            pass

    # -- output availability (task thread) ----------------------------------------------------
    def _setup_output_availability(self) -> None:
        """With unaligned checkpoints, the default action does not start while an output pool
        has no free buffer (Flink's ``StreamTask.processInput`` waiting on
        ``getAvailableFuture`` of its record writers): the task waits in the mailbox, where a
        checkpoint trigger runs at once, instead of blocking in a writer where no mail runs
        (the trigger would wait for the backlog it is meant to overtake). The wait counts as
        back-pressured time, not idle time. Other jobs keep blocking in the writer."""
        self._output_pools = [p.buffer_pool for p in self.env.result_partitions
                              if p.buffer_pool is not None] if self.env.unaligned_checkpoints else []
        self._output_wait_ns = 0
        self._output_wait_since: Optional[int] = None
        if self._output_pools:
            idle, back_pressured = self.metrics.idle_ns, self.metrics.back_pressured_ns
            self.metrics.idle_ns = lambda: max(0, idle() - self._output_waited_ns())
            self.metrics.back_pressured_ns = lambda: back_pressured() + self._output_waited_ns()

    def _output_waited_ns(self) -> int:
        since = self._output_wait_since
        return self._output_wait_ns + (0 if since is None else time.monotonic_ns() - since)

    def _waits_for_output(self, controller) -> bool:
        """Whether an output pool is exhausted: the default action is then suspended until a
        buffer is recycled (one check per batch or buffer, not per record)."""
        since = self._output_wait_since
        if since is not None:
            self._output_wait_ns += time.monotonic_ns() - since
            self._output_wait_since = None
        for pool in self._output_pools:
            if pool.is_available():
                continue
            suspension = controller.suspend_default_action()
            if pool.add_availability_listener(suspension.resume):
                self._output_wait_since = time.monotonic_ns()
                return True
            suspension.resume()  # a buffer came back meanwhile
        return False

    # -- end of data and the final checkpoint (task thread; FLIP-147) -------------------------
    def _end_data(self) -> None:
        """The input ended (Flink's ``StreamTask.endData``): ``end_input``/``finish`` of every
        operator (not after a stop without drain: the input did not end; timers still fire
        while an operator waits in them, as async I/O's timeouts), then the timers are quiesced
        (none fires during the final checkpoint's wait) and ``EndOfDataEvent`` goes on every
        output behind the records."""
        self._end_of_data = True
        drained = self._stop_mode is not StopMode.NO_DRAIN
        if drained:
            self.operator_chain.end_input_and_finish()
        self.processing_time_service.quiesce()
        event = EndOfDataEvent(DataStopMode.DRAIN if drained else DataStopMode.NO_DRAIN)
        for w in self.env.record_writers:
            w.broadcast_event(event)

    def _final_checkpoint_expected(self) -> bool:
        """Whether a checkpoint taken after the end of data will complete before the task ends
        (what operators see as ``StreamOperatorContext.final_checkpoint_expected``)."""
        return (self.env.final_checkpoint and self.subtask_checkpoint_coordinator is not None
                and self._stop_savepoint_id is None)

    def _waits_for_final_checkpoint(self, controller) -> bool:
        """Whether the task must not end yet: its data ended and no checkpoint it took since
        has completed; the default action is suspended until one does."""
        if not self._end_of_data or self._final_checkpoint_done or not self._final_checkpoint_expected():
            return False
        self._final_suspension = controller.suspend_default_action()
        return True

    # -- input ------------------------------------------------------------------------------
    def init_input(self) -> None:
        pass

    def _process_input(self, controller) -> None:
        raise NotImplementedError


class _LogicalInput:
    """One logical input of a task (Flink's ``StreamTaskNetworkInput``): its gates, the valve
    that combines their channels' watermarks, and where records, watermarks and statuses go."""

    __slots__ = ("input_id", "gates", "offsets", "valve", "process_batch", "process_watermark",
                 "process_status", "num_channels", "ended_channels")

    def __init__(self, input_id, gates, process_batch, process_watermark, process_status):
        self.input_id = input_id
        self.gates = gates
        self.offsets = {}
        total = 0
        for g in gates:
            self.offsets[id(g)] = total
            total += g.get_number_of_input_channels()
        self.valve = StatusWatermarkValve(total)
        self.process_batch = process_batch
        self.process_watermark = process_watermark
        self.process_status = process_status
        self.num_channels = total
        #: channels (numbered over the input) that delivered EndOfData or EndOfPartition
        self.ended_channels = set()


class _NetworkInputStreamTask(StreamTask):
    """Reads the task's input gates and feeds the head operator one buffer per default action;
    watermarks and watermark statuses pass through one valve per logical input. An input ends
    when each of its channels delivered EndOfData (or EndOfPartition); when every input ended
    the data ends (:meth:`StreamTask._end_data`); when every gate has ended, and the final
    checkpoint completed, the default action completes."""

    def _logical_inputs(self, head, gates_by_input) -> List[_LogicalInput]:
        raise NotImplementedError

    def init_input(self) -> None:
        head = self.operator_chain.head_operator
        self._head_name = self.operator_chain.head_config.operator_name
        in_edges = list(getattr(self.env.vertex, "in_edges", []) or [])
        gates_by_input = {}
        for i, gate in enumerate(self.env.input_gates):
            type_number = in_edges[i].type_number if i < len(in_edges) else 0
            gates_by_input.setdefault(max(1, type_number), []).append(gate)
        self._inputs = self._logical_inputs(head, gates_by_input)
        inputs = self._inputs
        self.metrics.current_input_watermark = lambda: min((inp.valve.last_output for inp in inputs), default=None)
        self._gates = []  # (gate, logical input) in polling order
        for inp in self._inputs:
            for g in inp.gates:
                self._gates.append((g, inp))
        self._finished = [False] * len(self._gates)
        self._next_gate = 0
        self._suspension = None
        #: created by the first barrier, in the mode the barrier says (never without checkpoints)
        self._barrier_handler: Optional[CheckpointBarrierHandler] = None
        self._aborted_before_handler = 0  # the newest checkpoint given up before the first barrier
        self._inputs_ended = 0
        #: a direct trigger (every producer finished) waiting for the gates to end: (metadata, options)
        self._deferred_trigger = None
        for g, _ in self._gates:
            g.set_availability_listener(self._on_input_available)
            if self.env.unaligned_checkpoints:
                g.set_priority_listener(self._on_priority_event)

    def _on_priority_event(self) -> None:
        """A barrier of an unaligned checkpoint reached an input (any thread): it is taken in a
        mail, also while input processing waits for output buffers (FLIP-76: processed as soon
        as it arrives)."""
        self._run_on_task_thread(self._process_priority_events)

    def _process_priority_events(self) -> None:
        for idx, (gate, _inp) in enumerate(self._gates):
            while not self._finished[idx] and gate.has_priority_event():
                boe = gate.poll_next()
                if boe is None:
                    break
                try:
                    self._barriers(boe.event.options.alignment).process_barrier(boe.event, gate, boe.channel_index)
                except BaseException as e:
                    attribute_error(e, self._head_name)
                    raise

    def _on_input_available(self) -> None:
        s = self._suspension
        if s is not None:
            s.resume()

    def _poll(self):
        gates = self._gates
        n = len(gates)
        for i in range(n):
            idx = (self._next_gate + i) % n
            if self._finished[idx]:
                continue
            boe = gates[idx][0].poll_next()
            if boe is not None:
                self._next_gate = (idx + 1) % n
                return idx, boe
        return None

    def _process_input(self, controller) -> None:
        if self._output_pools and self._waits_for_output(controller):
            return
        polled = self._poll()
        if polled is None:
            if all(self._finished):
                if not self._waits_for_stop(controller) and not self._waits_for_final_checkpoint(controller):
                    controller.all_actions_completed()
                return
            self._suspension = controller.suspend_default_action()
            polled = self._poll()  # data that arrived before the listener could see the suspension
            if polled is None:
                return
            self._suspension.resume()
            self._suspension = None
        gate_idx, boe = polled
        gate, inp = self._gates[gate_idx]
        buffer = boe.buffer
        try:
            if buffer is not None:
                values = buffer.values
                self.metrics.num_records_in += len(values)
                self.metrics.num_buffers_in += 1
                handler = self._barrier_handler
                if handler is not None:  # an unaligned checkpoint stores what it processes
                    writer = handler.channel_state_writer
                    if writer is not None and writer.active:
                        writer.add_input_buffer(gate.gate_index, boe.channel_index, values, buffer.timestamps)
                try:
                    inp.process_batch(values, buffer.timestamps)
                finally:
                    buffer.recycle_buffer()
                return
            event = boe.event
            channel = inp.offsets[id(gate)] + boe.channel_index
            if isinstance(event, Watermark):
                self._emit(inp, *inp.valve.input_watermark(event.timestamp, channel))
            elif isinstance(event, WatermarkStatus):
                self._emit(inp, *inp.valve.input_watermark_status(event, channel))
            elif isinstance(event, EndOfDataEvent):
                self._channel_ended(inp, channel)
            elif isinstance(event, EndOfPartitionEvent):
                # an alignment it completes belongs before the end of the data
                if self._barrier_handler is not None:
                    self._barrier_handler.process_end_of_partition(gate, boe.channel_index)
                self._channel_ended(inp, channel)
                if gate.is_finished():
                    self._finished[gate_idx] = True
                    if all(self._finished):
                        self._all_gates_finished(controller)
            elif isinstance(event, CheckpointBarrier):
                self._barriers(event.options.alignment).process_barrier(event, gate, boe.channel_index)
            elif isinstance(event, CancelCheckpointMarker):
                self._process_cancellation_barrier(event, gate, boe.channel_index)
            # EndOfData needs no action yet
        except BaseException as e:
            attribute_error(e, self._head_name)
            raise

    def _process_recovered_input(self, channel_state: ChannelStateSnapshot) -> None:
        by_gate = {g.gate_index: inp for g, inp in self._gates}
        for gate_index, _channel, values, timestamps in recovered_input(channel_state):
            inp = by_gate.get(gate_index)
            if inp is None:
                raise ValueError(
                    f"{self.env.task_name_with_subtasks}: the restored in-flight data names input gate "
                    f"{gate_index}, which the task does not have (the job's graph changed)")
            self.metrics.num_records_in += len(values)
            try:
                inp.process_batch(values, timestamps)
            except BaseException as e:
                attribute_error(e, self._head_name)
                raise

    def _channel_ended(self, inp: _LogicalInput, channel: int) -> None:
        """Channel ``channel`` of ``inp`` delivered EndOfData or EndOfPartition: no more records
        on it. The data ends with the last channel of the last input, unless the task stops with
        a savepoint (then it ends after the loop, once the savepoint completed)."""
        if channel in inp.ended_channels:
            return
        inp.ended_channels.add(channel)
        drained = self._stop_mode is not StopMode.NO_DRAIN
        if drained:  # a channel that ended after a stop without drain holds its watermark
            self._emit(inp, *inp.valve.channel_finished(channel))
        if len(inp.ended_channels) < inp.num_channels:
            return
        if drained:
            self._end_input(inp)
        self._inputs_ended += 1
        if self._inputs_ended == len(self._inputs) and self._stop_savepoint_id is None:
            self._end_data()

    def _all_gates_finished(self, controller) -> None:
        """Every producer ended its partition: take a deferred direct trigger now, then end
        unless a stop-with-savepoint or the final checkpoint is still to complete."""
        if not self._end_of_data and self._stop_savepoint_id is None:
            self._end_data()  # an input without channels never ends by itself
        deferred, self._deferred_trigger = self._deferred_trigger, None
        if deferred is not None:
            self._perform_checkpoint(deferred[0], deferred[1], 0.0)
        if not self._waits_for_stop(controller) and not self._waits_for_final_checkpoint(controller):
            controller.all_actions_completed()

    def _trigger_checkpoint(self, metadata: CheckpointMetaData, options: CheckpointOptions) -> None:
        """Triggered directly: every producer of this task finished (FLIP-147; Flink's
        ``triggerUnfinishedChannelsCheckpoint``). Their last records may still be in the
        channels, ahead of their EndOfPartition, so the checkpoint waits for every gate to end."""
        if self.subtask_checkpoint_coordinator is None:
            return  # finished on restore: no input was set up
        if all(self._finished):
            self._perform_checkpoint(metadata, options, 0.0)
            return
        older, self._deferred_trigger = self._deferred_trigger, (metadata, options)
        if older is not None and self.subtask_checkpoint_coordinator is not None:
            self.subtask_checkpoint_coordinator.decline(older[0].checkpoint_id, CheckpointException(
                CheckpointFailureReason.CHECKPOINT_DECLINED_SUBSUMED))

    def _checkpoint_aborted(self, checkpoint_id: int) -> None:
        deferred = self._deferred_trigger
        if deferred is not None and deferred[0].checkpoint_id <= checkpoint_id:
            self._deferred_trigger = None
        if self._barrier_handler is not None:
            self._barrier_handler.on_checkpoint_aborted(checkpoint_id)
        else:
            self._aborted_before_handler = max(self._aborted_before_handler, checkpoint_id)

    def _process_cancellation_barrier(self, marker: CancelCheckpointMarker, gate, channel_index: int) -> None:
        if self._barrier_handler is not None:
            self._barrier_handler.process_cancellation_barrier(marker, gate, channel_index)
        elif marker.checkpoint_id > self._aborted_before_handler:  # no barrier of it came yet
            self._aborted_before_handler = marker.checkpoint_id
            self.abort_checkpoint_on_barrier(marker.checkpoint_id, CheckpointException(
                CheckpointFailureReason.CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER))

    def _barriers(self, alignment: AlignmentType) -> CheckpointBarrierHandler:
        handler = self._barrier_handler
        if handler is None:  # exactly-once or at-least-once: the same for all the job's checkpoints
            handler = self._barrier_handler = create_barrier_handler(
                alignment, self, [g for g, _ in self._gates], self._register_checkpoint_timer)
            if self._aborted_before_handler:
                handler.on_checkpoint_aborted(self._aborted_before_handler)
        return handler

    def _emit(self, inp: _LogicalInput, watermark: Optional[int], status) -> None:
        if watermark is not None:
            inp.process_watermark(Watermark(watermark))
        if status is not None:
            inp.process_status(status)

    def _end_input(self, inp: _LogicalInput) -> None:
        pass


class OneInputStreamTask(_NetworkInputStreamTask):
    """A task whose head operator has one input (Flink's ``OneInputStreamTask``); all its input
    gates (a union has several) form that one input."""

    def _logical_inputs(self, head, gates_by_input):
        gates = [g for k in sorted(gates_by_input) for g in gates_by_input[k]]
        return [_LogicalInput(1, gates, head.process_batch, head.process_watermark,
                              head.process_watermark_status)]


class TwoInputStreamTask(_NetworkInputStreamTask):
    """A task whose head operator has two inputs (Flink's ``TwoInputStreamTask``): gates of
    edges with type number 1 feed ``process_batch1``, type number 2 ``process_batch2``; each
    input has its own valve, and the operator combines the two watermarks. ``end_input(n)``
    is called when input *n* has ended."""

    def _logical_inputs(self, head, gates_by_input):
        return [
            _LogicalInput(1, gates_by_input.get(1, []), head.process_batch1, head.process_watermark1,
                          getattr(head, "process_watermark_status1", lambda s: None)),
            _LogicalInput(2, gates_by_input.get(2, []), head.process_batch2, head.process_watermark2,
                          getattr(head, "process_watermark_status2", lambda s: None)),
        ]

    def _end_input(self, inp: _LogicalInput) -> None:
        self.operator_chain.head_operator.end_input(inp.input_id)


class SourceOperatorStreamTask(StreamTask):
    """Drives a ``SourceOperator``: one batch per default action; when an unbounded reader has
    nothing, the default action sleeps ~1 ms on the mailbox (a timer mail resumes it).

    Watermark alignment (FLIP-182): when the source's strategy, or that of a
    ``TimestampsAndWatermarksOperator`` chained in this task, was built
    ``with_watermark_alignment``, a :class:`SourceWatermarkAlignment` reports the task's
    watermark every update interval and the default action stays suspended while the
    watermark is too far ahead of its group (see :mod:`rill.runtime.watermark_alignment`).
    """

    def init_input(self) -> None:
        self._source = self.operator_chain.head_operator
        self._source_name = self.operator_chain.head_config.operator_name
        self.metrics.source_progress = lambda: self._source.progress_units
        self._alignment: Optional[SourceWatermarkAlignment] = None
        self._alignment_checked = False
        self._aligned_suspension = None

    def _process_input(self, controller) -> None:
        if self._end_of_data:  # resumed by the final checkpoint's notification
            if not self._waits_for_final_checkpoint(controller):
                controller.all_actions_completed()
            return
        if self._stop_savepoint_id is not None:  # took a synchronous savepoint: reads no more
            if not self._waits_for_stop(controller):
                controller.all_actions_completed()
            return
        if self._output_pools and self._waits_for_output(controller):
            return
        if not self._alignment_checked:  # the operators are open from the first action on
            self._setup_alignment()
        alignment = self._alignment
        if alignment is not None:
            # an aligned source's periodic watermark is brought up to date before every batch:
            # alignment must see the watermark of what was read, and a source reads thousands
            # of records between two timer mails (or longer when its timer waits for the GIL)
            if self._watermark_per_batch:
                self._aligned_tw.emit_periodic_watermark()
            if alignment.should_pause():
                # ask before waiting a whole update interval: the group may have moved on (the
                # embedded coordinator answers at once; a cluster's answer resumes the action)
                alignment.mark_paused()
                self._aligned_suspension = controller.suspend_default_action()
                alignment.report_watermark()
                return
        try:
            status = self._source.emit_next()
        except BaseException as e:
            attribute_error(e, self._source_name)
            raise
        if status is InputStatus.MORE_AVAILABLE:
            return
        if status is InputStatus.END_OF_INPUT:
            if alignment is not None:  # finished: no longer holds the group back
                alignment.report_watermark(final=True)
            self._end_data()
            if not self._waits_for_final_checkpoint(controller):
                controller.all_actions_completed()
            return
        suspension = controller.suspend_default_action()
        now = self.processing_time_service.get_current_processing_time()
        self.processing_time_service.register_timer(now + 1, lambda _ts: suspension.resume())

    def _begin_stop(self, checkpoint_id: int, stop_mode: StopMode) -> None:
        """A source stopping with drain emits ``MAX_WATERMARK`` ahead of the savepoint's barrier,
        so that every event-time window and timer fires before the snapshot (``flink stop
        --drain``)."""
        super()._begin_stop(checkpoint_id, stop_mode)
        if stop_mode is StopMode.DRAIN:
            self._source.output.emit_watermark(MAX_WATERMARK)

    # -- watermark alignment (task thread) ---------------------------------------------------
    def _setup_alignment(self) -> None:
        self._alignment_checked = True
        for _cfg, op in reversed(self.operator_chain.all_operators):  # head first
            tw = op.timestamps_and_watermarks if isinstance(op, GeneratesWatermarks) else None
            params = None if tw is None else tw.watermark_strategy.get_alignment_parameters()
            if params is not None:
                break
        else:
            return
        coordinator = self._source.context.operator_coordinator
        subtask = self.env.subtask_index
        if getattr(coordinator, "asynchronous", False):  # cluster: the answer comes back as a mail
            executor = self.mailbox_processor.get_mailbox_executor(MailPriority.TIMER)

            def report(group: str, watermark_ms: int, on_minimum) -> None:
                coordinator.report_watermark_async(
                    subtask, group, watermark_ms,
                    lambda minimum: executor.execute(lambda: on_minimum(minimum), "WatermarkAlignmentEvent"))
        else:
            def report(group: str, watermark_ms: int, on_minimum) -> None:
                on_minimum(coordinator.report_watermark(subtask, group, watermark_ms))

        alignment = self._alignment = SourceWatermarkAlignment(params, tw.current_watermark, report,
                                                               self._resume_aligned)
        self._aligned_tw = tw
        # without periodic watermarks (interval 0) only the generator's own ones count
        self._watermark_per_batch = bool(self.env.auto_watermark_interval_ms)
        interval = params.update_interval_ms
        self.processing_time_service.schedule_with_fixed_delay(lambda _ts: alignment.report_watermark(),
                                                               interval, interval)
        alignment.report_watermark()
        # paused by alignment is back-pressured time, not idle time (as Flink shows it)
        idle, back_pressured, paused = self.metrics.idle_ns, self.metrics.back_pressured_ns, alignment.paused_ns
        self.metrics.idle_ns = lambda: max(0, idle() - paused())
        self.metrics.back_pressured_ns = lambda: back_pressured() + paused()

    def _resume_aligned(self) -> None:
        suspension, self._aligned_suspension = self._aligned_suspension, None
        if suspension is not None:
            suspension.resume()
