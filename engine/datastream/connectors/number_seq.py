"""PyFlink's ``pyflink.datastream.connectors.number_seq``."""
from rill.datastream.connectors.collection import NumberSequenceSource  # noqa: F401

__all__ = ["NumberSequenceSource"]
