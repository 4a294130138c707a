"""``NetworkEnvironment``: creates a task's result partitions, input gates and record writers
from its deployment descriptor (Flink's ``NettyShuffleEnvironment``). Embedded mode: every
channel is a LocalInputChannel into a partition registered in this process.

Buffer budget per produced partition (in buffers of up to ``records_per_buffer`` records):
``num_subpartitions * buffers_per_channel + floating_buffers_per_gate``, Flink's maximum for a
partition's LocalBufferPool. When all are in flight the writer blocks: that is backpressure.
"""

from __future__ import annotations

from typing import Any, List

from rill.network.api.writer.record_writer import RecordWriter
from rill.network.buffer.buffer_pool import LocalBufferPool
from rill.network.partition.consumer.local_input_channel import LocalInputChannel
from rill.network.partition.consumer.single_input_gate import SingleInputGate
from rill.network.partition.result_partition import ResultPartition
from rill.network.partition.result_partition_type import ResultPartitionType

__all__ = ["NetworkEnvironment"]


class NetworkEnvironment:
    """Per TaskExecutor: creates and registers partitions, gates and writers.

    :param partition_manager: the TaskExecutor's ``ResultPartitionManager``.
    """

    def __init__(self, partition_manager):
        self.partition_manager = partition_manager

    def create_result_partitions(self, tdd) -> List[ResultPartition]:
        """Create and register the task's partitions (in the order of its out edges)."""
        partitions = []
        for pdd in tdd.produced_partitions:
            n = pdd.num_subpartitions
            pool = LocalBufferPool(n * tdd.buffers_per_channel + tdd.floating_buffers_per_gate,
                                   name=f"{tdd.task_name_with_subtasks} -> {pdd.target_name}")
            partition = ResultPartition(pdd.partition_id, ResultPartitionType.PIPELINED_BOUNDED, n, pool,
                                        owning_task_name=tdd.task_name_with_subtasks)
            self.partition_manager.register_result_partition(partition)
            partitions.append(partition)
        return partitions

    def create_input_gates(self, tdd) -> List[SingleInputGate]:
        gates = []
        for gdd in tdd.input_gates:
            channels = [LocalInputChannel(self.partition_manager, pid, sub) for pid, sub in gdd.channels]
            gates.append(SingleInputGate(gdd.gate_index, channels, owning_task_name=tdd.task_name_with_subtasks))
        return gates

    def create_record_writers(self, tdd, partitions: List[ResultPartition]) -> List[Any]:
        flush_always = tdd.buffer_timeout_ms == 0
        return [
            RecordWriter(partition, pdd.partitioner, records_per_buffer=tdd.records_per_buffer,
                         flush_always=flush_always)
            for pdd, partition in zip(tdd.produced_partitions, partitions)
        ]
