"""collector_paused (rill.state.checkpoint.collector): the cyclic collector is off inside a
block, back on after the last of overlapping blocks (threads of the embedded mode), and one
the application disabled stays disabled."""

from __future__ import annotations

import gc
import threading

import pytest

from rill.state.checkpoint.collector import collector_paused


@pytest.fixture(autouse=True)
def collector_enabled():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_the_collector_is_off_inside_and_on_after():
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_it_is_on_again_after_an_error():
    with pytest.raises(RuntimeError):
        with collector_paused():
            raise RuntimeError("decode failed")
    assert gc.isenabled()


def test_overlapping_blocks_of_two_threads_keep_it_off_until_the_last_ends():
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def first():
        with collector_paused():
            first_in.set()
            second_in.wait(10)
        first_out.set()

    def second():
        first_in.wait(10)
        with collector_paused():
            second_in.set()
            first_out.wait(10)
            seen["after the first ended"] = gc.isenabled()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == {"after the first ended": False}
    assert gc.isenabled()


def test_a_collector_the_application_disabled_stays_disabled():
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()
