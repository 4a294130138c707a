"""PyFlink's ``pyflink.common.job_id``: ``JobID``, a job's id, defined in
:mod:`rill.graph.job_graph`. Resolved on first access (PEP 562): the common layer does not import the
layers above it."""

from importlib import import_module
from typing import Any

__all__ = ["JobID"]


def __getattr__(name: str) -> Any:
    if name != "JobID":
        raise AttributeError(f"module 'rill.common.job_id' has no attribute '{name}'")
    value = getattr(import_module("rill.graph.job_graph"), name)
    globals()[name] = value
    return value
