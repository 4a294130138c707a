"""The benchmarks' tests run the two-mode ``env`` fixture on a cluster whose processes can
import ``bench`` (the repository root on their ``PYTHONPATH``): records of ``bench`` classes
(Nexmark's ``Bid`` ...) cross the network pickled by reference, and a task process must import
their module to read them, as a Flink TaskManager needs the job's jar on its classpath."""

import importlib.util
import os
from pathlib import Path

import pytest

_ROOT = str(Path(__file__).resolve().parents[2])
# the root conftest by its path: this file is a module named ``conftest`` too
_spec = importlib.util.spec_from_file_location("_rill_tests_conftest", Path(_ROOT, "tests", "conftest.py"))
_root_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_root_conftest)
LocalCluster = _root_conftest.LocalCluster
SHARED_SLOTS, SHARED_TASK_EXECUTORS = _root_conftest.SHARED_SLOTS, _root_conftest.SHARED_TASK_EXECUTORS


@pytest.fixture(scope="session")
def shared_cluster(tmp_path_factory):
    """Like the root ``shared_cluster`` (2 TaskExecutors x 4 slots, stopped and checked for
    leftovers at the end of the session), with ``bench`` importable in its processes."""
    path = os.pathsep.join(p for p in (_ROOT, os.environ.get("PYTHONPATH")) if p)
    c = LocalCluster(tmp_path_factory.mktemp("bench-shared-cluster"), SHARED_TASK_EXECUTORS, SHARED_SLOTS,
                     extra_env={"PYTHONPATH": path})
    c.start()
    c.shared_task_executor_pids = list(c.task_executor_pids().values())
    try:
        yield c
    finally:
        c.stop()
