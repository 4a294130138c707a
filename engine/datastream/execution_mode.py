"""PyFlink's ``pyflink.datastream.execution_mode``: ``RuntimeExecutionMode``, defined in
:mod:`rill.datastream.stream_execution_environment`."""

from rill.datastream.stream_execution_environment import RuntimeExecutionMode

__all__ = ["RuntimeExecutionMode"]
