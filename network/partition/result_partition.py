"""The output of one producing subtask for one intermediate result (Flink's ``ResultPartition``
and ``BufferWritingResultPartition``).

A ResultPartition holds one :class:`~rill.network.partition.pipelined_subpartition.PipelinedSubpartition`
per consuming channel. A :class:`~rill.network.api.writer.record_writer.RecordWriter` fills
buffers from the partition's pool and emits each to one subpartition; events go to one or all
subpartitions; :meth:`ResultPartition.finish` ends every subpartition with EndOfPartition.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from ..buffer.buffer import Buffer
from ..buffer.buffer_pool import BufferPoolStatistics, LocalBufferPool
from .exceptions import PartitionReleasedError
from .pipelined_subpartition import PipelinedSubpartition
from .result_partition_id import ResultPartitionID
from .result_partition_type import ResultPartitionType
from .result_subpartition import BufferAvailabilityListener
from .result_subpartition_view import ResultSubpartitionView

if TYPE_CHECKING:
    from .result_partition_manager import ResultPartitionManager

__all__ = ["ResultPartition", "ResultPartitionStatistics"]


@dataclass(frozen=True, slots=True)
class ResultPartitionStatistics:
    """A snapshot of a partition's output, per subpartition (index ``i`` of each tuple is
    subpartition ``i``).

    :ivar partition_id: the partition.
    :ivar buffers_out: buffers emitted to each subpartition since creation.
    :ivar records_out: records in those buffers.
    :ivar backlog: buffers queued in each subpartition, not yet read by its consumer.
    :ivar finished: whether :meth:`ResultPartition.finish` was called.
    :ivar released: whether the partition was released.
    :ivar buffer_pool: the pool's statistics, ``None`` for an unbounded partition.
    :ivar bytes_out: payload bytes a network sender serialized from each subpartition (0 for a
        subpartition read by a local channel: local buffers are not serialized).
    """

    partition_id: ResultPartitionID
    buffers_out: tuple[int, ...]
    records_out: tuple[int, ...]
    backlog: tuple[int, ...]
    finished: bool
    released: bool
    buffer_pool: Optional[BufferPoolStatistics]
    bytes_out: tuple[int, ...] = ()


class ResultPartition:
    """One producer's output for one intermediate result.

    :param partition_id: the :class:`ResultPartitionID`.
    :param partition_type: ``PIPELINED_BOUNDED`` (streaming) or ``PIPELINED``.
    :param num_subpartitions: one per consuming channel (>= 1).
    :param buffer_pool: the pool bounding buffers in flight; required for ``PIPELINED_BOUNDED``;
        ``None`` for ``PIPELINED`` means unpooled, unbounded buffers. The partition owns the pool
        and destroys it when released.
    :param owning_task_name: for messages, e.g. ``"Map (1/2)"``.
    :raises ValueError: for ``num_subpartitions < 1`` or a bounded type without a pool.
    :raises NotImplementedError: for ``BLOCKING`` (batch exchanges are not implemented).

    Thread-safety: ``emit_buffer``/``add_event``/``broadcast_event``/``finish`` are called by the
    producing task's thread; ``release``, view creation and statistics may come from any thread.
    Each call takes the target subpartition's lock once.
    """

    def __init__(
        self,
        partition_id: ResultPartitionID,
        partition_type: ResultPartitionType,
        num_subpartitions: int,
        buffer_pool: Optional[LocalBufferPool] = None,
        owning_task_name: str = "",
    ) -> None:
        if not isinstance(partition_type, ResultPartitionType):
            raise TypeError(f"partition_type must be a ResultPartitionType, got {partition_type!r}")
        if partition_type.is_blocking():
            raise NotImplementedError(
                f"Partition {partition_id}: BLOCKING result partitions (batch exchanges) are not "
                "implemented; use PIPELINED_BOUNDED"
            )
        if not isinstance(num_subpartitions, int) or num_subpartitions < 1:
            raise ValueError(
                f"Partition {partition_id} needs at least one subpartition, got {num_subpartitions!r}"
            )
        if partition_type.is_bounded() and buffer_pool is None:
            raise ValueError(
                f"Partition {partition_id} of type {partition_type.name} needs a buffer_pool"
            )
        self.partition_id = partition_id
        self.partition_type = partition_type
        self.buffer_pool = buffer_pool
        self.owning_task_name = owning_task_name
        self._subpartitions = [PipelinedSubpartition(i, self) for i in range(num_subpartitions)]
        self._lock = threading.Lock()
        self._finished = False
        self._released = False
        self._release_cause: Optional[BaseException] = None
        self._unconsumed_subpartitions = num_subpartitions
        self._manager: Optional["ResultPartitionManager"] = None

    # ------------------------------------------------------------------ producing

    def get_number_of_subpartitions(self) -> int:
        """One per consuming channel."""
        return len(self._subpartitions)

    def get_subpartition(self, index: int) -> PipelinedSubpartition:
        """Subpartition ``index``. :raises ValueError: if out of range."""
        self._check_index(index)
        return self._subpartitions[index]

    def request_buffer_blocking(self) -> Buffer:
        """An empty buffer to fill: from the pool (blocking while it is exhausted, which is
        backpressure), or unpooled for an unbounded partition.

        :raises BufferPoolDestroyedError: if the pool is (or gets) destroyed, e.g. because the
            partition was released while the writer waited.
        """
        pool = self.buffer_pool
        if pool is None:
            return Buffer([], None, None)
        return pool.request_buffer_blocking()

    def emit_buffer(self, buffer: Buffer, subpartition_index: int) -> None:
        """Append a filled buffer to one subpartition (Flink's ``addToSubpartition``).

        A buffer for a subpartition whose consumer already released it is recycled and dropped.

        :raises ValueError: for an index outside ``[0, num_subpartitions)``.
        :raises RuntimeError: if the partition is finished.
        :raises PartitionReleasedError: if the partition was released.
        In every error case the buffer is recycled first (no leak).
        """
        subpartitions = self._subpartitions
        if not 0 <= subpartition_index < len(subpartitions) or self._finished or self._released:
            buffer.recycle_buffer()
            self._check_index(subpartition_index)
            self._check_in_produce_state()
        subpartitions[subpartition_index].add(buffer)

    def add_event(self, event: Any, subpartition_index: int) -> None:
        """Append an event to one subpartition, after everything emitted to it before.

        :raises TypeError: if ``event`` is ``None`` or a :class:`Buffer`.
        :raises ValueError, RuntimeError, PartitionReleasedError: as :meth:`emit_buffer`.
        """
        self._check_event(event)
        self._check_index(subpartition_index)
        self._check_in_produce_state()
        self._subpartitions[subpartition_index].add(event)

    def broadcast_event(self, event: Any) -> None:
        """Append ``event`` to every subpartition (Flink's ``broadcastEvent``).

        :raises TypeError, RuntimeError, PartitionReleasedError: as :meth:`add_event`.
        """
        self._check_event(event)
        self._check_in_produce_state()
        for subpartition in self._subpartitions:
            subpartition.add(event)

    def broadcast_priority_event(self, event: Any) -> list:
        """Put ``event`` ahead of the queued data of every subpartition (Flink's
        ``BufferWritingResultPartition.broadcastEvent`` of a priority event: the barrier of an
        unaligned checkpoint overtakes the in-flight buffers, FLIP-76).

        :returns: per subpartition, the buffers it overtook
            (:meth:`PipelinedSubpartition.add_priority_event`; ``[]`` for a released one).
        :raises TypeError, RuntimeError, PartitionReleasedError: as :meth:`add_event`.
        """
        self._check_event(event)
        self._check_in_produce_state()
        return [s.add_priority_event(event) or [] for s in self._subpartitions]

    def broadcast_timeoutable_event(self, event: Any, on_polled) -> None:
        """Append ``event`` to every subpartition, after everything emitted before it, and call
        ``on_polled(subpartition_index)`` as each consumer takes it (see
        :meth:`PipelinedSubpartition.add_timeoutable_event`): the barrier of an aligned
        checkpoint that may switch to unaligned.

        :raises TypeError, RuntimeError, PartitionReleasedError: as :meth:`add_event`.
        """
        self._check_event(event)
        self._check_in_produce_state()
        for s in self._subpartitions:
            s.add_timeoutable_event(event, lambda index=s.subpartition_index: on_polled(index))

    def convert_to_priority_event(self, event: Any, replacement: Any) -> list:
        """Per subpartition, :meth:`PipelinedSubpartition.convert_to_priority_event`: the
        buffers ``replacement`` overtook, or ``None`` where ``event`` had left already."""
        return [s.convert_to_priority_event(event, replacement) for s in self._subpartitions]

    def finish(self) -> None:
        """End every subpartition with EndOfPartitionEvent; later emits raise. Idempotent.

        :raises PartitionReleasedError: if the partition was released.
        """
        with self._lock:
            if self._released:
                raise PartitionReleasedError(self.partition_id, -1, self._release_cause)
            if self._finished:
                return
            self._finished = True
        for subpartition in self._subpartitions:
            subpartition.finish()

    # ------------------------------------------------------------------ consuming, life cycle

    def create_subpartition_view(
        self, subpartition_index: int, availability_listener: BufferAvailabilityListener
    ) -> ResultSubpartitionView:
        """The reader of one subpartition (see :meth:`PipelinedSubpartition.create_read_view`).

        :raises ValueError: for an index outside ``[0, num_subpartitions)``.
        :raises PartitionReleasedError: if the partition was released.
        :raises RuntimeError: if that subpartition already has a reader.
        """
        self._check_index(subpartition_index)
        if self._released:
            raise PartitionReleasedError(self.partition_id, subpartition_index, self._release_cause)
        return self._subpartitions[subpartition_index].create_read_view(availability_listener)

    def on_consumed_subpartition(self, subpartition_index: int) -> None:
        """Called once per subpartition when its reader is released. When every subpartition of
        a pipelined partition is consumed the partition is released (through its manager, which
        then forgets it)."""
        with self._lock:
            self._unconsumed_subpartitions -= 1
            all_consumed = self._unconsumed_subpartitions == 0
        if all_consumed and self.partition_type.is_released_on_consumption():
            manager = self._manager
            if manager is not None:
                manager.on_consumed_partition(self)
            else:
                self.release()

    def release(self, cause: Optional[BaseException] = None) -> None:
        """Release the partition: recycle every queued buffer, wake every reader (which then
        raises :class:`PartitionReleasedError` with ``cause``) and destroy the pool (a writer
        blocked on it raises :class:`BufferPoolDestroyedError`). Idempotent; any thread."""
        with self._lock:
            if self._released:
                return
            self._released = True
            self._release_cause = cause
        for subpartition in self._subpartitions:
            subpartition.release(cause)
        if self.buffer_pool is not None:
            self.buffer_pool.destroy()

    def is_finished(self) -> bool:
        """Whether :meth:`finish` was called."""
        return self._finished

    def is_released(self) -> bool:
        """Whether the partition was released (by its producer, manager or consumers)."""
        return self._released

    def get_failure_cause(self) -> Optional[BaseException]:
        """The cause given to :meth:`release`, if any."""
        return self._release_cause

    def statistics(self) -> ResultPartitionStatistics:
        """Per-subpartition counters (each read without stopping the producer)."""
        subs = self._subpartitions
        return ResultPartitionStatistics(
            partition_id=self.partition_id,
            buffers_out=tuple(s.get_total_number_of_buffers() for s in subs),
            records_out=tuple(s.get_total_number_of_records() for s in subs),
            backlog=tuple(s.get_buffers_in_backlog() for s in subs),
            finished=self._finished,
            released=self._released,
            buffer_pool=None if self.buffer_pool is None else self.buffer_pool.statistics(),
            bytes_out=tuple(s.get_total_number_of_bytes_sent() for s in subs),
        )

    def get_number_of_bytes_out(self) -> int:
        """Payload bytes sent to remote consumers since creation, over all subpartitions
        (Flink's ``numBytesOut`` of this partition). Counted by the network server as it
        serializes (:meth:`ResultSubpartitionView.add_bytes_sent`); a subpartition read by a
        local channel counts 0: its buffers are handed over unserialized."""
        return sum(s.get_total_number_of_bytes_sent() for s in self._subpartitions)

    # ------------------------------------------------------------------ helpers

    def _set_partition_manager(self, manager: "ResultPartitionManager") -> None:
        if self._manager is not None and self._manager is not manager:
            raise RuntimeError(f"Partition {self.partition_id} is registered with another manager")
        self._manager = manager

    def _check_index(self, index: int) -> None:
        n = len(self._subpartitions)
        if not isinstance(index, int) or not 0 <= index < n:
            raise ValueError(
                f"Subpartition index {index!r} out of range for partition {self.partition_id} "
                f"with {n} subpartitions"
            )

    def _check_in_produce_state(self) -> None:
        if self._released:
            raise PartitionReleasedError(self.partition_id, -1, self._release_cause)
        if self._finished:
            raise RuntimeError(f"Partition {self.partition_id} is finished: nothing can be emitted")

    @staticmethod
    def _check_event(event: Any) -> None:
        if event is None or isinstance(event, Buffer):
            raise TypeError(f"An event must be a non-None object that is not a Buffer, got {event!r}")

    def __repr__(self) -> str:
        return (
            f"ResultPartition({self.partition_id}, {self.partition_type.name}, "
            f"{len(self._subpartitions)} subpartitions, task={self.owning_task_name!r})"
        )
