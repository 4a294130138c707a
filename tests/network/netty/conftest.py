"""Fixtures of the transport tests: real sockets on 127.0.0.1, free ports, every network
thread joined and every socket closed at teardown."""

from __future__ import annotations

import os
import sys
import threading

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from _remote_helpers import make_config  # noqa: E402

from rill.network import NettyConnectionManager  # noqa: E402


@pytest.fixture
def secret() -> bytes:
    return os.urandom(32)


@pytest.fixture
def network(secret):
    """``network(partition_manager=None, name=None, **config)`` -> a started
    NettyConnectionManager; all are shut down (threads joined) at teardown."""
    managers: list[NettyConnectionManager] = []

    def make(partition_manager=None, name=None, **overrides) -> NettyConnectionManager:
        config = make_config(overrides.pop("secret", secret), **overrides)
        manager = NettyConnectionManager(config, partition_manager, name=name or f"net-{len(managers)}")
        managers.append(manager)
        manager.start()
        return manager

    yield make
    for manager in managers:
        manager.shutdown()
    errors = [e for m in managers for e in m.network_thread_errors()]
    assert not [m for m in managers if m.is_running()], "a network thread is still running"
    assert errors == [], f"callbacks failed on a network thread: {errors!r}"
    leftover = [t.name for t in threading.enumerate() if t.name.endswith("-io")]
    assert leftover == [], f"network threads left running: {leftover}"
