"""Checkpoints at runtime (Flink's ``org.apache.flink.runtime.checkpoint`` and
``streaming.runtime.io.checkpointing``): the JobMaster's
:class:`~rill.runtime.checkpoint.checkpoint_coordinator.CheckpointCoordinator`, the completed
checkpoint store, the statistics, the barrier handlers of a task's inputs and a subtask's
checkpoint work. What a snapshot is and where it is stored lives in ``rill.state.checkpoint``.
"""
