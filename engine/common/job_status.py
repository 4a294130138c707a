"""PyFlink's ``pyflink.common.job_status``: ``JobStatus``, Flink's job states, defined in
:mod:`rill.graph.states`. Resolved on first access (PEP 562): the common layer does not import the
layers above it."""

from importlib import import_module
from typing import Any

__all__ = ["JobStatus"]


def __getattr__(name: str) -> Any:
    if name != "JobStatus":
        raise AttributeError(f"module 'rill.common.job_status' has no attribute '{name}'")
    value = getattr(import_module("rill.graph.states"), name)
    globals()[name] = value
    return value
