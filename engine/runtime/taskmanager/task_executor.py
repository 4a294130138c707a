"""``TaskExecutor``: offers slots and runs the tasks deployed into them (Flink's
``TaskExecutor``). In the embedded mode it is a plain object in the client's process; the
cluster mode puts it in its own process behind an actor."""

from __future__ import annotations

import threading
from typing import Dict, List

from rill.network.partition.result_partition_manager import ResultPartitionManager
from rill.runtime.taskmanager.network_environment import NetworkEnvironment
from rill.runtime.taskmanager.task import Task

__all__ = ["TaskExecutor"]


class TaskExecutor:
    """
    :param num_slots: how many slots it offers.
    :param resource_id: its name, e.g. ``"embedded-0"``.
    :param configuration: sizes its network buffer budget (``taskmanager.memory.network.max``,
        ``taskmanager.memory.segment-size``); ``None``: the loaded defaults.
    """

    def __init__(self, num_slots: int, resource_id: str = "embedded-0", configuration=None):
        if num_slots < 1:
            raise ValueError(f"A TaskExecutor needs at least one slot, got {num_slots}")
        self.num_slots = num_slots
        self.resource_id = resource_id
        self.partition_manager = ResultPartitionManager()
        self.network = NetworkEnvironment(self.partition_manager, configuration=configuration)
        self._tasks: Dict[str, Task] = {}
        self._lock = threading.Lock()

    def submit_task(self, tdd, coordinators, listener, checkpoint_responder=None) -> Task:
        """Create the task (registering its partitions) without starting it; its checkpoint
        acknowledgements go to ``checkpoint_responder``."""
        task = Task(tdd, self.network, coordinators, listener, checkpoint_responder)
        with self._lock:
            self._tasks[tdd.attempt_id] = task
        return task

    def release_tasks(self, tasks: List[Task]) -> None:
        """The JobMaster is done with these terminal tasks (a restart replaces them): release
        the partitions they still hold (a finished producer's, which the cancelled consumers
        never consumed) and forget them (Flink's ``TaskExecutor.releasePartitions``)."""
        for task in tasks:
            for partition in task.result_partitions:
                self.partition_manager.release_partition(partition.partition_id)
            with self._lock:
                self._tasks.pop(task.tdd.attempt_id, None)

    def tasks(self) -> List[Task]:
        with self._lock:
            return list(self._tasks.values())

    def shutdown(self) -> None:
        for t in self.tasks():
            t.cancel_execution()
        for t in self.tasks():
            t.join(5.0)
        self.partition_manager.shutdown()
