"""PyFlink's ``pyflink.common.job_client``: ``JobClient``, the handle on a submitted job (embedded mode; ``ClusterJobClient`` in cluster mode has the same methods), defined in
:mod:`rill.runtime.job_client`. Resolved on first access (PEP 562): the common layer does not import the
layers above it."""

from importlib import import_module
from typing import Any

__all__ = ["JobClient"]


def __getattr__(name: str) -> Any:
    if name != "JobClient":
        raise AttributeError(f"module 'rill.common.job_client' has no attribute '{name}'")
    value = getattr(import_module("rill.runtime.job_client"), name)
    globals()[name] = value
    return value
