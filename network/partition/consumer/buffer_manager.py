"""Receiving buffers of remote input channels: exclusive per channel, floating per gate
(Flink's ``BufferManager`` and the gate's floating ``LocalBufferPool``).

A :class:`FloatingBufferPool` belongs to one input gate and lends its buffers to the gate's
remote channels; a :class:`BufferManager` belongs to one
:class:`~rill.network.partition.consumer.remote_input_channel.RemoteInputChannel` and drives its
:class:`~rill.network.credit.CreditLedger` (all numbers and invariants live there). A receiving
"buffer" is a slot, not memory: it is taken when a data frame arrives and given back when the
consuming task recycles the :class:`~rill.network.buffer.buffer.Buffer` decoded from it, through
the recycler the buffer carries (:attr:`BufferManager.exclusive_recycler` or
:attr:`BufferManager.floating_recycler`).

Threading model: one lock per gate -- the pool's :attr:`FloatingBufferPool.lock` -- guards the
pool and the ledgers of all its channels, so a floating buffer moves between channels
atomically. It is taken once per received frame and once per recycled buffer, by the network
thread and the consuming task's thread, and never held while calling out: the callbacks that
schedule an AddCredit or resume a blocked connection run after it is released.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import Callable, Optional

from ...buffer.buffer import Buffer, BufferRecycler
from ...credit import EXCLUSIVE, FLOATING, BufferKind, CreditLedger

__all__ = ["FloatingBufferPool", "FloatingBufferPoolStatistics", "BufferManager", "BufferManagerStatistics"]


@dataclass(frozen=True, slots=True)
class FloatingBufferPoolStatistics:
    """A snapshot of a gate's floating buffers.

    :ivar name: the pool's name.
    :ivar total_buffers: the pool size.
    :ivar available_buffers: buffers in the pool now.
    :ivar assigned_buffers: buffers held by channels (free at the channel or holding data).
    :ivar peak_assigned_buffers: the highest ``assigned_buffers`` seen.
    :ivar channels_waiting: channels waiting for a floating buffer.
    """

    name: str
    total_buffers: int
    available_buffers: int
    assigned_buffers: int
    peak_assigned_buffers: int
    channels_waiting: int


class FloatingBufferPool:
    """The floating buffers of one input gate, shared by its remote channels.

    :param num_buffers: pool size (>= 0; Flink's ``floating-buffers-per-gate``, default 8).
    :param name: for statistics and messages.

    A channel asks for floating buffers when its sender's backlog exceeds its free buffers; if
    the pool is empty the channel is queued, and a buffer recycled into the pool goes to the
    first queued channel that still wants it (Flink's ``BufferListener``).
    """

    def __init__(self, num_buffers: int = 8, name: str = "floating buffers") -> None:
        if not isinstance(num_buffers, int) or isinstance(num_buffers, bool) or num_buffers < 0:
            raise ValueError(f"A floating buffer pool needs num_buffers >= 0, got {num_buffers!r}")
        #: The gate's lock: guards this pool and the ledgers of its channels.
        self.lock = threading.Lock()
        self.name = name
        self._total = num_buffers
        self._available = num_buffers
        self._peak_assigned = 0
        self._waiting: deque["BufferManager"] = deque()

    # Called with ``lock`` held ------------------------------------------------------------

    def _request_locked(self, count: int) -> int:
        granted = min(count, self._available)
        self._available -= granted
        assigned = self._total - self._available
        if assigned > self._peak_assigned:
            self._peak_assigned = assigned
        return granted

    def _recycle_locked(self, count: int) -> list["BufferManager"]:
        """Take ``count`` buffers back and hand them to waiting channels; returns the
        managers that accepted one (their callbacks must run once the lock is released)."""
        if self._available + count > self._total:
            raise RuntimeError(f"{self!r}: {count} buffers recycled into a full pool")
        self._available += count
        accepted: list[BufferManager] = []
        waiting = self._waiting
        while self._available and waiting:
            manager = waiting.popleft()
            ledger = manager._ledger
            ledger.waiting_for_floating = False
            if not ledger.accepts_floating_offer():
                continue
            self._request_locked(1)
            ledger.add_floating(1)
            accepted.append(manager)
            if ledger.accepts_floating_offer():
                ledger.waiting_for_floating = True
                waiting.append(manager)
        return accepted

    def _add_waiter_locked(self, manager: "BufferManager") -> None:
        manager._ledger.waiting_for_floating = True
        self._waiting.append(manager)

    def _remove_waiter_locked(self, manager: "BufferManager") -> None:
        try:
            self._waiting.remove(manager)
        except ValueError:
            pass
        manager._ledger.waiting_for_floating = False

    # Public --------------------------------------------------------------------------------

    def get_number_of_buffers(self) -> int:
        """The pool size."""
        return self._total

    def get_number_of_available_buffers(self) -> int:
        """Buffers in the pool now (not held by any channel)."""
        return self._available

    def statistics(self) -> FloatingBufferPoolStatistics:
        """A consistent snapshot."""
        with self.lock:
            return FloatingBufferPoolStatistics(
                name=self.name,
                total_buffers=self._total,
                available_buffers=self._available,
                assigned_buffers=self._total - self._available,
                peak_assigned_buffers=self._peak_assigned,
                channels_waiting=len(self._waiting),
            )

    def __repr__(self) -> str:
        return f"FloatingBufferPool(name={self.name!r}, available={self._available}/{self._total})"


@dataclass(frozen=True, slots=True)
class BufferManagerStatistics:
    """A snapshot of one channel's receiving buffers and credit.

    :ivar exclusive_buffers: exclusive buffers owned.
    :ivar exclusive_buffers_in_use: of those, holding data not yet recycled.
    :ivar floating_buffers: floating buffers held.
    :ivar floating_buffers_in_use: of those, holding data.
    :ivar announced_credit: credit the sender was told about and has not used (as known here).
    :ivar unannounced_credit: free buffers not yet announced.
    :ivar sender_backlog: the backlog the sender reported last.
    :ivar waiting_for_floating: queued in the pool for a floating buffer.
    :ivar blocking_connection: flow control off only: no free buffer, the connection's reads
        are paused for this channel.
    :ivar released: whether the channel was released.
    """

    exclusive_buffers: int
    exclusive_buffers_in_use: int
    floating_buffers: int
    floating_buffers_in_use: int
    announced_credit: int
    unannounced_credit: int
    sender_backlog: int
    waiting_for_floating: bool
    blocking_connection: bool
    released: bool


class _SlotRecycler(BufferRecycler):
    """Recycles a received buffer of one kind back to its channel's manager."""

    __slots__ = ("_manager", "_kind")

    def __init__(self, manager: "BufferManager", kind: BufferKind) -> None:
        self._manager = manager
        self._kind = kind

    def recycle(self, buffer: Buffer) -> None:
        """Give the buffer's slot back (called by :meth:`Buffer.recycle_buffer`)."""
        self._manager.recycle(self._kind)


class BufferManager:
    """The receiving buffers of one remote input channel.

    :param exclusive_buffers: buffers the channel owns (Flink's ``buffers-per-channel``).
    :param floating_pool: the gate's :class:`FloatingBufferPool`.
    :param flow_control: credit-based (``True``) or not (see :mod:`rill.network.credit`).
    :param announce_batch: see :class:`~rill.network.credit.CreditLedger`.
    :param on_credit_available: called (no argument, outside the lock, any thread) when
        unannounced credit should be sent: schedules an AddCredit on the network thread, which
        then calls :meth:`take_unannounced_credit`.
    :param on_buffer_available: flow control off: called when a channel that blocked its
        connection has a free buffer again.
    """

    def __init__(
        self,
        exclusive_buffers: int,
        floating_pool: FloatingBufferPool,
        flow_control: bool = True,
        announce_batch: int = 1,
        on_credit_available: Optional[Callable[[], None]] = None,
        on_buffer_available: Optional[Callable[[], None]] = None,
    ) -> None:
        self._pool = floating_pool
        self._lock = floating_pool.lock
        self._ledger = CreditLedger(exclusive_buffers, flow_control, announce_batch)
        self._flow_control = flow_control
        self._on_credit_available = on_credit_available
        self._on_buffer_available = on_buffer_available
        self._announce_pending = False
        self._blocking = False
        #: Recycler of buffers received into an exclusive buffer.
        self.exclusive_recycler = _SlotRecycler(self, EXCLUSIVE)
        #: Recycler of buffers received into a floating buffer.
        self.floating_recycler = _SlotRecycler(self, FLOATING)

    @property
    def ledger(self) -> CreditLedger:
        """The ledger (read it under :attr:`FloatingBufferPool.lock`, or in tests)."""
        return self._ledger

    def recycler_for(self, kind: BufferKind) -> BufferRecycler:
        """The recycler a buffer received into a ``kind`` buffer must carry."""
        return self.exclusive_recycler if kind is EXCLUSIVE else self.floating_recycler

    # ------------------------------------------------------------------ network thread

    def on_buffer_received(self, backlog: Optional[int] = None) -> Optional[BufferKind]:
        """Take a free buffer for an arriving data frame, and record the sender's ``backlog``
        it carries (see :meth:`on_sender_backlog`), under one lock acquisition.

        :returns: its kind; ``None`` (flow control off only) if no buffer is free and the
            pool has none: the caller must stop reading the connection until
            ``on_buffer_available`` is called; ``False`` if the channel was released (drop the
            frame).
        :raises CreditInvariantError: flow control on, if the sender had no credit.
        """
        with self._lock:
            ledger = self._ledger
            if ledger.released:
                return False  # type: ignore[return-value]
            kind = ledger.on_buffer_received()
            if kind is None:
                self._request_floating_locked()
                kind = ledger.on_buffer_received()
                if kind is None:
                    self._blocking = True
            elif backlog is not None and self._flow_control:
                ledger.on_sender_backlog(backlog)
                self._request_floating_locked()
            announce = self._poll_callbacks_locked()[0]
        if announce:
            self._on_credit_available()  # type: ignore[misc]
        return kind

    def on_segment_copied(self, backlog: Optional[int] = None) -> Optional[BufferKind]:
        """A data frame that is not the last segment of its payload arrived and is copied into
        the reassembly buffer at once: :meth:`on_buffer_received` and :meth:`recycle` of the
        buffer taken, under one lock acquisition (the same ledger steps in the same order, one
        look at the callbacks at the end).

        :returns: as :meth:`on_buffer_received` (the kind taken, already given back; ``None``:
            no buffer, block the connection; ``False``: released, drop the frame).
        :raises CreditInvariantError: flow control on, if the sender had no credit.
        """
        if self._flow_control and backlog is not None:
            return self._on_segment_copied_credit_based(backlog)
        return self._on_segment_copied_stepwise(backlog)

    def _on_segment_copied_stepwise(self, backlog: Optional[int]) -> Optional[BufferKind]:
        # The reference: the ledger's and the pool's methods, one by one.
        with self._lock:
            ledger = self._ledger
            if ledger.released:
                return False  # type: ignore[return-value]
            kind = ledger.on_buffer_received()
            if kind is None:
                self._request_floating_locked()
                kind = ledger.on_buffer_received()
                if kind is None:
                    self._blocking = True
            elif backlog is not None and self._flow_control:
                ledger.on_sender_backlog(backlog)
                self._request_floating_locked()
            accepted: list = []
            if kind is not None:
                returned = ledger.on_buffer_recycled(kind)
                if returned:
                    accepted = self._pool._recycle_locked(returned)
            callbacks = [(self, self._poll_callbacks_locked())]
            if accepted:
                callbacks.extend((manager, manager._poll_callbacks_locked()) for manager in accepted)
        self._run_callbacks(callbacks)
        return kind

    def _on_segment_copied_credit_based(self, backlog: int) -> BufferKind:
        # on_segment_copied with flow control on, once per 32 KiB data frame: the ledger's
        # steps written out -- on_buffer_received, on_sender_backlog, _request_floating_locked,
        # on_buffer_recycled, the pool's _recycle_locked, _poll_callbacks_locked -- in the
        # same order, on the same fields, without the dozen method calls (they were a third of
        # the consumer network thread). tests/network/netty/test_remote_data_path.py checks it
        # against _on_segment_copied_stepwise on random sequences of several channels.
        pool = self._pool
        with self._lock:
            ledger = self._ledger
            if ledger.released:
                return False  # type: ignore[return-value]
            kind = ledger.on_buffer_received()  # raises without credit
            ledger.sender_backlog = backlog
            required = ledger.required_buffers = backlog + ledger.exclusive_owned
            if not ledger.waiting_for_floating and required > ledger.available_exclusive + ledger.available_floating:
                self._request_floating_locked()
            if kind is EXCLUSIVE:
                ledger.in_use_exclusive -= 1
                ledger.available_exclusive += 1
                if ledger.available_floating and ledger.available_exclusive + ledger.available_floating > required:
                    # keep the exclusive buffer, give back a free floating one: credit unchanged
                    ledger.available_floating -= 1
                    ledger.floating_owned -= 1
                    accepted = pool._recycle_locked(1)
                else:
                    ledger.unannounced_credit += 1
                    accepted = None
            else:
                ledger.in_use_floating -= 1
                ledger.floating_owned -= 1
                waiting = pool._waiting
                if (waiting and waiting[0] is self and not pool._available
                        and ledger.available_exclusive + ledger.available_floating < required):
                    # The pool would hand the buffer straight back: this channel is first in
                    # its queue and still wants it (the usual case of a channel whose backlog
                    # exceeds what it holds). _recycle_locked's first round, written out (the
                    # pool is empty, so its peak is its size already).
                    waiting.popleft()
                    ledger.floating_owned += 1
                    ledger.available_floating += 1
                    ledger.unannounced_credit += 1
                    if ledger.available_exclusive + ledger.available_floating < required:
                        waiting.append(self)
                    else:
                        ledger.waiting_for_floating = False
                    accepted = None
                else:
                    accepted = pool._recycle_locked(1)
            announce = False
            if not self._announce_pending and ledger.unannounced_credit > 0 and (
                ledger.announced_credit == 0 or ledger.unannounced_credit >= ledger.announce_batch
            ):
                self._announce_pending = True
                announce = self._on_credit_available is not None
            # (flow control on: no connection is ever blocked, so no resume callback is due)
            others = [(manager, manager._poll_callbacks_locked()) for manager in accepted] if accepted else None
        if announce:
            self._on_credit_available()  # type: ignore[misc]
        if others:
            self._run_callbacks(others)
        return kind

    def on_sender_backlog(self, backlog: int) -> None:
        """The sender reported ``backlog``: request floating buffers to cover it."""
        with self._lock:
            self._ledger.on_sender_backlog(backlog)
            if self._flow_control:
                self._request_floating_locked()
            announce = self._poll_callbacks_locked()[0]
        if announce:
            self._on_credit_available()  # type: ignore[misc]

    def take_unannounced_credit(self) -> int:
        """Move unannounced credit to announced; returns the credit for one AddCredit."""
        with self._lock:
            self._announce_pending = False
            return self._ledger.take_unannounced_credit()

    # ------------------------------------------------------------------ consumer side

    def recycle(self, kind: BufferKind) -> None:
        """A buffer of ``kind`` is free again (the consumer recycled it, or its data was
        copied elsewhere). Any thread."""
        with self._lock:
            returned = self._ledger.on_buffer_recycled(kind)
            accepted = self._pool._recycle_locked(returned) if returned else []
            callbacks = [(self, self._poll_callbacks_locked())]
            callbacks.extend((manager, manager._poll_callbacks_locked()) for manager in accepted)
        self._run_callbacks(callbacks)

    def release(self) -> None:
        """The channel is released: free floating buffers go back to the pool (possibly to
        other channels), credit is void. Buffers in use still come back through
        :meth:`recycle`. Idempotent."""
        with self._lock:
            self._pool._remove_waiter_locked(self)
            returned = self._ledger.release()
            was_blocking, self._blocking = self._blocking, False
            accepted = self._pool._recycle_locked(returned) if returned else []
            callbacks = [(manager, manager._poll_callbacks_locked()) for manager in accepted]
        if was_blocking and self._on_buffer_available is not None:
            self._on_buffer_available()  # the blocked connection must not wait for us any more
        self._run_callbacks(callbacks)

    # ------------------------------------------------------------------ helpers

    def _request_floating_locked(self) -> None:
        ledger = self._ledger
        wanted = ledger.floating_wanted()
        if wanted:
            granted = self._pool._request_locked(wanted)
            if granted:
                ledger.add_floating(granted)
            if granted < wanted:
                self._pool._add_waiter_locked(self)

    def _poll_callbacks_locked(self) -> tuple[bool, bool]:
        """Which callbacks are due after a change: (announce credit, resume connection)."""
        ledger = self._ledger
        announce = False
        if self._flow_control and not self._announce_pending and ledger.should_announce():
            self._announce_pending = True
            announce = self._on_credit_available is not None
        resume = False
        if self._blocking and ledger.available:
            self._blocking = False
            resume = self._on_buffer_available is not None
        return announce, resume

    @staticmethod
    def _run_callbacks(callbacks) -> None:
        for manager, (announce, resume) in callbacks:
            if announce:
                manager._on_credit_available()
            if resume:
                manager._on_buffer_available()

    def statistics(self) -> BufferManagerStatistics:
        """A consistent snapshot of the ledger."""
        with self._lock:
            ledger = self._ledger
            return BufferManagerStatistics(
                exclusive_buffers=ledger.exclusive_owned,
                exclusive_buffers_in_use=ledger.in_use_exclusive,
                floating_buffers=ledger.floating_owned,
                floating_buffers_in_use=ledger.in_use_floating,
                announced_credit=ledger.announced_credit,
                unannounced_credit=ledger.unannounced_credit,
                sender_backlog=ledger.sender_backlog,
                waiting_for_floating=ledger.waiting_for_floating,
                blocking_connection=self._blocking,
                released=ledger.released,
            )

    def check_invariants(self) -> None:
        """Assert the ledger's invariants (see :mod:`rill.network.credit`)."""
        with self._lock:
            self._ledger.check_invariants()

    def __repr__(self) -> str:
        return f"BufferManager({self._ledger!r})"
