"""Shipping a JobGraph to the cluster (what Flink does with the user jar and the serialized
JobGraph; PyFlink with ``add_python_file``).

Functions and classes from installed packages (Rill itself, site-packages, the standard library)
travel by reference: every cluster process imports them. Modules that are not installed -- the
program file run as ``__main__``, a test module, a script next to the program -- travel by value
with cloudpickle, so the cluster runs exactly the code the client has.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from typing import Iterable, List

import cloudpickle

from rill.operators.factory import OperatorSerializationError

__all__ = ["ship_job_graph", "local_modules"]


def _installed_roots() -> List[str]:
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            roots.add(path)
    return [os.path.realpath(r) + os.sep for r in roots if r]


def local_modules() -> Iterable:
    """Loaded modules whose source is not installed (and that are not part of Rill)."""
    roots = _installed_roots()
    for name, module in list(sys.modules.items()):
        if module is None or name == "rill" or name.startswith("rill.") or name == "__mp_main__":
            continue
        path = getattr(module, "__file__", None)
        if not path:
            continue
        real = os.path.realpath(path)
        if not any(real.startswith(r) for r in roots):
            yield module


def ship_job_graph(job_graph) -> bytes:
    """The JobGraph as bytes a cluster process can load.

    :raises OperatorSerializationError: naming the operator whose function cannot be pickled
        (a lock, an open socket, a generator ...), before anything is sent.
    """
    # cloudpickle's by-value registry is process-wide: registering only for this call keeps a
    # later embedded job in the same process pickling its functions by reference, as before.
    already = set(cloudpickle.list_registry_pickle_by_value())
    registered = []
    for module in local_modules():
        if module.__name__ in already:
            continue
        try:
            cloudpickle.register_pickle_by_value(module)
            registered.append(module)
        except (ValueError, TypeError):
            pass  # not a regular module (namespace package, builtin)
    try:
        try:
            return cloudpickle.dumps(job_graph)
        except Exception as e:  # noqa: BLE001 - cloudpickle raises many kinds
            error = e
        # only now operator by operator, to name the culprit: pickling every operator up
        # front would pickle a source's collection twice for every job
        for vertex in job_graph.get_vertices():
            for cfg in vertex.stream_configs.values():
                cfg.operator_factory.serialize(cfg.operator_name, for_shipping=True)
        raise OperatorSerializationError(
            f"Job '{job_graph.get_name()}' cannot be serialized for the cluster: "
            f"{type(error).__name__}: {error}") from error
    finally:
        for module in registered:
            cloudpickle.unregister_pickle_by_value(module)
