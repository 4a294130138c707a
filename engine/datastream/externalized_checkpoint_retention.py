"""PyFlink 2.x's module path of ``ExternalizedCheckpointRetention``
(``pyflink.datastream.externalized_checkpoint_retention``); the enum is defined with the other
checkpointing settings in :mod:`rill.common.checkpointing_options`."""

from rill.common.checkpointing_options import ExternalizedCheckpointRetention

__all__ = ["ExternalizedCheckpointRetention"]
