"""The embedded MiniCluster's REST endpoint, closed after each test module."""

from __future__ import annotations

import pytest

from rill.runtime.executor import embedded_cluster


@pytest.fixture(scope="module")
def embedded_rest():
    """The process's MiniCluster; its REST endpoint is closed after the module."""
    cluster = embedded_cluster()
    yield cluster
    cluster.close_rest_endpoint()
