"""Checkpoints at runtime (Flink's ``org.apache.flink.runtime.checkpoint`` and
``streaming.runtime.io.checkpointing``): the JobMaster's
:class:`~rill.runtime.checkpoint.checkpoint_coordinator.CheckpointCoordinator`, the completed
checkpoint store, the statistics, the barrier handlers of a task's inputs, a subtask's
checkpoint work, and the assignment of a snapshot's state to a (possibly rescaled) job on
restore (:mod:`rill.runtime.checkpoint.state_assignment`). What a snapshot is and where it is
stored lives in ``rill.state.checkpoint``.
"""
