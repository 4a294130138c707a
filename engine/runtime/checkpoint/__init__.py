"""Checkpointing in the runtime (Flink's ``org.apache.flink.runtime.checkpoint``): the
coordinator, the barrier handlers, the subtask's checkpoint work, and the assignment of a
snapshot's state to a (possibly rescaled) job on restore
(:mod:`rill.runtime.checkpoint.state_assignment`)."""
