"""Re-export of ``OutputTag`` (PyFlink keeps it in ``pyflink.datastream``)."""
from rill.operators.output_tag import OutputTag  # noqa: F401

__all__ = ["OutputTag"]
