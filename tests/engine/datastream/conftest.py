"""Fixtures of the DataStream end-to-end tests (helpers live in ``_ds_helpers``)."""

from __future__ import annotations

import threading

import pytest

from _ds_helpers import wait_until

# ``env`` (both execution modes) comes from tests/conftest.py.


@pytest.fixture(autouse=True)
def no_leaked_threads():
    """Every thread a test started must be gone within ``THREAD_GRACE_S`` after it."""
    before = set(threading.enumerate())
    yield
    def leaked():
        return [t for t in threading.enumerate() if t not in before and t.is_alive()]
    if not wait_until(lambda: not leaked()):
        pytest.fail(f"threads leaked by the test: {[t.name for t in leaked()]}")
