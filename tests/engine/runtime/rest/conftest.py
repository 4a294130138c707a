"""The embedded MiniCluster's REST endpoint, closed after each test module; a REST endpoint
process serving the session's real cluster."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rest_http import Http
from rill.runtime.executor import embedded_cluster


@pytest.fixture(scope="module")
def embedded_rest():
    """The process's MiniCluster; its REST endpoint is closed after the module."""
    cluster = embedded_cluster()
    yield cluster
    cluster.close_rest_endpoint()


@pytest.fixture
def cluster_rest(cluster):
    """(Http, process) of a REST endpoint process serving ``cluster``; stopped afterwards."""
    proc = subprocess.Popen([sys.executable, "-m", "rill.runtime.rest.cluster_endpoint", "--cluster", cluster.address,
                             "--rest-port", "0"], env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("REST endpoint: http://127.0.0.1:"), (line, proc.stderr.read() if proc.poll() else "")
        yield Http(line.split(": ", 1)[1].strip()), proc
    finally:
        proc.terminate()
        try:
            assert proc.wait(20) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
