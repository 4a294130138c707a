"""PyFlink's ``pyflink.datastream.execution_mode``: ``RuntimeExecutionMode``, defined in
:mod:`rill.common.execution_options` (with the ``execution.runtime-mode`` option)."""

from rill.common.execution_options import RuntimeExecutionMode

__all__ = ["RuntimeExecutionMode"]
