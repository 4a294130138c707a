"""The task actor's outbox at exit: Thespian keeps selecting on the watched descriptor while it
drains an exiting actor's last transmits, so the descriptor must stay open (a closed one whose
number a new transmit socket reused made Thespian's selector raise ``KeyError: ... is already
registered``, a traceback in the cluster's output)."""

from __future__ import annotations

import os
import select
import socket

from rill.runtime.cluster.stream_task_actor import _Outbox


def test_a_sealed_outbox_keeps_its_watched_descriptor_and_drops_later_posts():
    outbox = _Outbox()
    outbox.post("job master", "final state")
    assert list(outbox.drain()) == [("job master", "final state")]
    watched = outbox.fileno()
    outbox.seal()
    os.fstat(watched)  # still open: raises OSError once closed
    with socket.socket() as transmit:  # what Thespian opens to send the last messages
        assert transmit.fileno() != watched
    outbox.post("job master", "too late")
    assert select.select([watched], [], [], 0)[0] == []  # no wake-up for a dropped message
    assert list(outbox.drain()) == []
