"""The registry of the partitions produced in this process (Flink's ``ResultPartitionManager``)."""

from __future__ import annotations

import threading
from typing import Optional

from .exceptions import PartitionNotFoundError
from .result_partition import ResultPartition
from .result_partition_id import ResultPartitionID
from .result_subpartition import BufferAvailabilityListener
from .result_subpartition_view import ResultSubpartitionView

__all__ = ["ResultPartitionManager"]


class ResultPartitionManager:
    """Maps :class:`ResultPartitionID` to the live :class:`ResultPartition` of this process, so
    local input channels (and later the network server) can find what they consume.

    One instance per TaskExecutor process (in embedded mode: per job's process). Thread-safe: a
    lock guards the map only; views are created outside it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._partitions: dict[ResultPartitionID, ResultPartition] = {}
        self._shut_down = False

    def register_result_partition(self, partition: ResultPartition) -> None:
        """Make ``partition`` findable by its id; called by the producing task before it runs.

        :raises ValueError: if a partition with the same id is registered.
        :raises RuntimeError: after :meth:`shutdown`.
        """
        with self._lock:
            if self._shut_down:
                raise RuntimeError("ResultPartitionManager is shut down")
            if partition.partition_id in self._partitions:
                raise ValueError(f"Result partition {partition.partition_id} is already registered")
            partition._set_partition_manager(self)
            self._partitions[partition.partition_id] = partition

    def get_partition(self, partition_id: ResultPartitionID) -> ResultPartition:
        """:raises PartitionNotFoundError: if no such partition is registered."""
        with self._lock:
            partition = self._partitions.get(partition_id)
        if partition is None:
            raise PartitionNotFoundError(partition_id)
        return partition

    def create_subpartition_view(
        self,
        partition_id: ResultPartitionID,
        subpartition_index: int,
        availability_listener: BufferAvailabilityListener,
    ) -> ResultSubpartitionView:
        """The reader of subpartition ``subpartition_index`` of ``partition_id``.

        :param availability_listener: see
            :data:`~rill.network.partition.result_subpartition.BufferAvailabilityListener`.
        :raises PartitionNotFoundError: if the partition is not registered (Flink's consumer
            retries with back-off here; Rill's scheduler registers producers first).
        :raises ValueError: for a bad index. :raises RuntimeError: if already consumed.
        """
        partition = self.get_partition(partition_id)
        return partition.create_subpartition_view(subpartition_index, availability_listener)

    def release_partition(self, partition_id: ResultPartitionID, cause: Optional[BaseException] = None) -> bool:
        """Forget and release a partition (its readers see ``cause``).

        :returns: whether the partition was registered.
        """
        with self._lock:
            partition = self._partitions.pop(partition_id, None)
        if partition is None:
            return False
        partition.release(cause)
        return True

    def on_consumed_partition(self, partition: ResultPartition) -> None:
        """Called by a pipelined partition once all its subpartitions were consumed: release and
        forget it."""
        with self._lock:
            if self._partitions.get(partition.partition_id) is partition:
                del self._partitions[partition.partition_id]
        partition.release()

    def get_registered_partition_ids(self) -> list[ResultPartitionID]:
        """The ids registered now, in registration order."""
        with self._lock:
            return list(self._partitions)

    def get_number_of_registered_partitions(self) -> int:
        """How many partitions are registered now."""
        with self._lock:
            return len(self._partitions)

    def shutdown(self) -> None:
        """Release every registered partition and refuse new ones. Idempotent."""
        with self._lock:
            self._shut_down = True
            partitions = list(self._partitions.values())
            self._partitions.clear()
        for partition in partitions:
            partition.release()
