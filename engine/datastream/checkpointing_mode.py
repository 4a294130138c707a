"""PyFlink's module path of ``CheckpointingMode`` (``pyflink.datastream.checkpointing_mode``);
the enum is defined with the other checkpointing settings in
:mod:`rill.common.checkpointing_options`."""

from rill.common.checkpointing_options import CheckpointingMode

__all__ = ["CheckpointingMode"]
