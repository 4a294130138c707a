"""Shipping a JobGraph to the cluster (what Flink does with the user jar and the serialized
JobGraph; PyFlink with ``add_python_file``).

Functions and classes from installed packages (Rill itself, site-packages, the standard library)
travel by reference: every cluster process imports them. Modules that are not installed -- the
program file run as ``__main__``, a test module, a script next to the program -- travel by value
with cloudpickle, so the cluster runs exactly the code the client has.

Relative paths: the program was written, and is run, in the client's working directory, so a
relative path in it (``read_text_file("in.txt")``, ``--output out/x``, an ``open()`` in a user
function) means a path there. The submission carries that directory; the JobMaster's process
and every task process (each runs one job's one task) make it their own working directory
before they load any user code (:func:`enter_working_directory`). Flink resolves relative
paths against each TaskManager's working directory instead, which silently wrote a job's output
into the cluster's directory; the built-in file connectors also make their paths absolute when
the job graph is built, so they do not depend on this at all.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import sysconfig
from typing import Iterable, List, Optional

import cloudpickle

from rill.common.pickling import dumps
from rill.operators.factory import OperatorSerializationError

__all__ = ["ship_job_graph", "local_modules", "local_modules_by_value", "enter_working_directory"]

log = logging.getLogger("rill.cluster.shipping")


def enter_working_directory(path: Optional[str], job_id: str) -> None:
    """Make ``path`` (the submitting client's working directory) this process's working
    directory, so the job's relative paths mean what they meant where the program was run.

    Only called in processes that serve one job (a JobMaster, a task process). When ``path`` is
    None (an older client) nothing changes; when it does not exist on this host (a TaskExecutor
    on another machine), the process keeps its directory and logs a warning naming both: the
    built-in connectors' paths are absolute already, a user function's relative ``open()``
    resolves there.
    """
    if path is None:
        return
    if os.path.isdir(path):
        os.chdir(path)
    else:
        log.warning("job %s: the client's working directory %s does not exist on this host; relative "
                    "paths of the job resolve against %s", job_id, path, os.getcwd())


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


@contextlib.contextmanager
def local_modules_by_value():
    """Within the block, cloudpickle pickles the :func:`local_modules` by value (what a process
    that cannot import them needs: a cluster task, a Spark executor).

    cloudpickle's by-value registry is process-wide: registering only for the block keeps a
    later embedded job in the same process pickling its functions by reference, as before.
    """
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
        yield
    finally:
        for module in registered:
            cloudpickle.unregister_pickle_by_value(module)


def ship_job_graph(job_graph) -> bytes:
    """The JobGraph as bytes a cluster process can load.

    :raises OperatorSerializationError: naming the operator whose function cannot be pickled
        (a lock, an open socket, a generator ...), before anything is sent.
    """
    with local_modules_by_value():
        try:
            return dumps(job_graph)  # code keeps its file name: remote tracebacks name the program's lines
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
