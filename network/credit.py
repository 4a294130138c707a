"""Credit-based flow control: the accounting, in one place (Flink 1.5's FLINK-7282).

The protocol, for one remote channel (one subpartition read across a connection):

* The receiving :class:`~rill.network.partition.consumer.remote_input_channel.RemoteInputChannel`
  owns ``E`` *exclusive* buffers (default 2) and announces them as its initial credit in its
  PartitionRequest. One credit is one buffer the receiver holds free for the sender: one
  segment frame (at most ``segment_size_bytes``) of data.
* The sender (the server's per-subpartition reader) sends a data frame only while it has credit,
  one credit per frame, and puts its *backlog* -- the frames still queued behind it -- in every
  BufferResponse. Events need no credit (they are received into unpooled memory, as in Flink).
* The receiver, seeing ``backlog + E`` more than the buffers it has free, requests *floating*
  buffers from its gate's pool (shared by the gate's channels, default 8); each one it gets is
  new credit. If the pool is empty the channel waits, and the pool hands it the next floating
  buffer recycled by any channel of the gate.
* When the consuming task recycles a buffer, an exclusive buffer goes back to its channel (new
  credit; or, if the channel holds more free buffers than ``backlog + E``, one of its free
  floating buffers goes back to the pool instead and the credit is unchanged) and a floating
  buffer goes back to the gate's pool (or straight to a channel waiting for one).
* Credit the receiver has not told the sender about yet is *unannounced*; it is announced with
  one AddCredit message for all of it, when the network thread gets to it (so several recycles
  make one message) and at the latest when the sender has no announced credit left.

:class:`CreditLedger` keeps the receiving side's numbers; it is pure (no locks, no I/O; the
caller serializes access) so it can be tested exhaustively. Its invariants, checked by
:meth:`CreditLedger.check_invariants` (tests call it after every operation):

1. every counter is >= 0 (credit is never negative);
2. ``available_exclusive + in_use_exclusive == exclusive_owned`` and
   ``available_floating + in_use_floating == floating_owned`` (buffers in use + available ==
   owned);
3. with flow control on and the channel not released,
   ``announced_credit + unannounced_credit == available_exclusive + available_floating``: every
   free buffer is credit, told or not yet told, and no credit exists without a free buffer;
4. a data frame arrives only when ``announced_credit >= 1`` (no buffer sent without credit):
   :meth:`CreditLedger.on_buffer_received` raises :class:`CreditInvariantError` otherwise.

:class:`SenderCredit` is the sending side's counter (Flink's ``numCreditsAvailable`` in
``CreditBasedSequenceNumberingViewReader``): it refuses to let a data frame go without credit.
Across the wire, with ``D`` data frames and ``K`` credits in flight, ``announced_credit ==
sender.available + D + K`` at every moment (the credit property test simulates both ends and
checks it).

Flow control off (``flow_control=False``, Flink before 1.5): the sender ignores credit and the
receiver announces none; a channel with no free buffer -- exclusive, or floating taken greedily
from the pool -- makes the network thread stop reading the whole connection until it gets one,
so one slow consumer blocks every channel of the connection.
"""

from __future__ import annotations

import enum

__all__ = ["BufferKind", "CreditLedger", "SenderCredit", "CreditInvariantError"]


class CreditInvariantError(AssertionError):
    """A flow-control invariant was violated (a bug, or a peer breaking the protocol, e.g. a
    sender that sent a data frame without credit)."""


class BufferKind(enum.Enum):
    """Where a receiving buffer came from, hence where it goes back when recycled."""

    EXCLUSIVE = "exclusive"
    FLOATING = "floating"


EXCLUSIVE = BufferKind.EXCLUSIVE
FLOATING = BufferKind.FLOATING


class CreditLedger:
    """The buffers and credit of one remote input channel, receiving side.

    :param exclusive_buffers: buffers owned by the channel for its whole life (>= 0; with flow
        control on, >= 1 unless the gate has floating buffers, or nothing could ever be sent).
    :param flow_control: credit-based (``True``) or Flink's pre-1.5 mode (``False``).
    :param announce_batch: announce credit once this many are unannounced, or as soon as the
        sender has no announced credit left (>= 1; 1 announces every credit as soon as the
        network thread runs, which already batches what accumulated meanwhile).

    Not thread-safe: the owner (:class:`~rill.network.partition.consumer.buffer_manager.BufferManager`)
    calls it under its gate's lock.
    """

    __slots__ = (
        "flow_control",
        "announce_batch",
        "exclusive_owned",
        "floating_owned",
        "available_exclusive",
        "available_floating",
        "in_use_exclusive",
        "in_use_floating",
        "announced_credit",
        "unannounced_credit",
        "sender_backlog",
        "required_buffers",
        "waiting_for_floating",
        "released",
    )

    def __init__(self, exclusive_buffers: int, flow_control: bool = True, announce_batch: int = 1) -> None:
        if not isinstance(exclusive_buffers, int) or exclusive_buffers < 0:
            raise ValueError(f"exclusive_buffers must be an int >= 0, got {exclusive_buffers!r}")
        if not isinstance(announce_batch, int) or announce_batch < 1:
            raise ValueError(f"announce_batch must be an int >= 1, got {announce_batch!r}")
        self.flow_control = flow_control
        self.announce_batch = announce_batch
        #: Exclusive buffers owned (falls only when the released channel gives them up).
        self.exclusive_owned = exclusive_buffers
        #: Floating buffers currently held (free or in use), borrowed from the gate's pool.
        self.floating_owned = 0
        self.available_exclusive = exclusive_buffers
        self.available_floating = 0
        self.in_use_exclusive = 0
        self.in_use_floating = 0
        #: Credit the sender was told about and has not used yet (as far as the receiver knows).
        #: The initial credit travels in the PartitionRequest.
        self.announced_credit = exclusive_buffers if flow_control else 0
        #: Free buffers the sender has not been told about yet.
        self.unannounced_credit = 0
        #: The backlog the sender reported last.
        self.sender_backlog = 0
        #: ``sender_backlog + exclusive buffers``: how many free buffers the channel wants.
        self.required_buffers = exclusive_buffers
        #: Whether the channel is queued in its pool, waiting for a floating buffer.
        self.waiting_for_floating = False
        self.released = False

    # ------------------------------------------------------------------ derived values

    @property
    def available(self) -> int:
        """Free buffers (exclusive and floating)."""
        return self.available_exclusive + self.available_floating

    @property
    def in_use(self) -> int:
        """Buffers holding received data not yet recycled by the consumer."""
        return self.in_use_exclusive + self.in_use_floating

    # ------------------------------------------------------------------ receiving

    def on_buffer_received(self):
        """A data frame arrived: take a free buffer for it, floating first (as Flink's
        ``BufferManager.requestBuffer``), and use one announced credit.

        :returns: the :class:`BufferKind` taken, or ``None`` with flow control off when no
            buffer is free (the caller then takes a floating buffer, or blocks the connection).
        :raises CreditInvariantError: with flow control on, if the sender had no credit.
        """
        if self.flow_control:
            if self.announced_credit < 1:
                raise CreditInvariantError(
                    "a data frame arrived without credit (announced credit is 0): the sender "
                    "broke credit-based flow control"
                )
            self.announced_credit -= 1
        elif not self.available:
            return None
        if self.available_floating:
            self.available_floating -= 1
            self.in_use_floating += 1
            return FLOATING
        self.available_exclusive -= 1
        self.in_use_exclusive += 1
        return EXCLUSIVE

    def on_sender_backlog(self, backlog: int) -> None:
        """Record the sender's backlog: the channel now wants ``backlog + exclusive`` free
        buffers (Flink's ``onSenderBacklog``); :meth:`floating_wanted` says how many more."""
        self.sender_backlog = backlog
        self.required_buffers = backlog + self.exclusive_owned

    def floating_wanted(self) -> int:
        """How many floating buffers to request from the pool now: with flow control, enough
        to cover ``required_buffers``; without, one when no buffer is free. 0 while released or
        already waiting for the pool."""
        if self.released or self.waiting_for_floating:
            return 0
        if self.flow_control:
            return max(0, self.required_buffers - self.available)
        return 0 if self.available else 1

    def accepts_floating_offer(self) -> bool:
        """Whether a floating buffer offered by the pool is still wanted (Flink's
        ``notifyBufferAvailable``)."""
        if self.released:
            return False
        if self.flow_control:
            return self.available < self.required_buffers
        return not self.available

    def add_floating(self, count: int) -> None:
        """``count`` floating buffers from the pool became this channel's (each is credit)."""
        if count < 0:
            raise CreditInvariantError(f"add_floating({count})")
        self.floating_owned += count
        self.available_floating += count
        if self.flow_control:
            self.unannounced_credit += count

    def on_buffer_recycled(self, kind: BufferKind) -> int:
        """The consumer recycled a buffer of ``kind``.

        :returns: how many floating buffers the channel gives back to the pool (0 or 1).
        """
        if kind is EXCLUSIVE:
            if self.in_use_exclusive < 1:
                raise CreditInvariantError("an exclusive buffer was recycled but none is in use")
            self.in_use_exclusive -= 1
            if self.released:
                self.exclusive_owned -= 1  # given up for good
                return 0
            self.available_exclusive += 1
            if self.flow_control and self.available > self.required_buffers and self.available_floating:
                # Keep the exclusive buffer, give back a free floating one: credit unchanged.
                self.available_floating -= 1
                self.floating_owned -= 1
                return 1
            if self.flow_control:
                self.unannounced_credit += 1
            return 0
        if self.in_use_floating < 1:
            raise CreditInvariantError("a floating buffer was recycled but none is in use")
        self.in_use_floating -= 1
        self.floating_owned -= 1
        return 1  # floating buffers in use go back to the pool (which may hand it back)

    # ------------------------------------------------------------------ announcing

    def should_announce(self) -> bool:
        """Whether unannounced credit should be sent now: some is pending and either the sender
        has none left or ``announce_batch`` has accumulated."""
        return self.unannounced_credit > 0 and not self.released and (
            self.announced_credit == 0 or self.unannounced_credit >= self.announce_batch
        )

    def take_unannounced_credit(self) -> int:
        """Move all unannounced credit to announced; returns the amount to put in one AddCredit
        (0: nothing to send)."""
        if self.released:
            return 0
        credit = self.unannounced_credit
        self.unannounced_credit = 0
        self.announced_credit += credit
        return credit

    # ------------------------------------------------------------------ life cycle

    def release(self) -> int:
        """The channel is released: free exclusive buffers are given up, credit is void.

        Buffers in use still come back through :meth:`on_buffer_recycled` (exclusive ones are
        then given up too). Idempotent.

        :returns: the free floating buffers to give back to the pool.
        """
        if self.released:
            return 0
        self.released = True
        floating = self.available_floating
        self.floating_owned -= floating
        self.available_floating = 0
        self.exclusive_owned -= self.available_exclusive
        self.available_exclusive = 0
        self.announced_credit = 0
        self.unannounced_credit = 0
        self.waiting_for_floating = False
        return floating

    def check_invariants(self) -> None:
        """Assert the invariants listed in the module docstring.

        :raises CreditInvariantError: naming the violated invariant and the numbers.
        """
        counters = {name: getattr(self, name) for name in (
            "exclusive_owned", "floating_owned", "available_exclusive", "available_floating",
            "in_use_exclusive", "in_use_floating", "announced_credit", "unannounced_credit",
            "sender_backlog",
        )}
        negative = {name: value for name, value in counters.items() if value < 0}
        if negative:
            raise CreditInvariantError(f"negative counters {negative} in {self!r}")
        if self.available_exclusive + self.in_use_exclusive != self.exclusive_owned:
            raise CreditInvariantError(f"exclusive buffers in use + available != owned in {self!r}")
        if self.available_floating + self.in_use_floating != self.floating_owned:
            raise CreditInvariantError(f"floating buffers in use + available != owned in {self!r}")
        if self.flow_control and not self.released:
            if self.announced_credit + self.unannounced_credit != self.available:
                raise CreditInvariantError(f"credit (announced + unannounced) != free buffers in {self!r}")
        elif self.announced_credit or self.unannounced_credit:
            raise CreditInvariantError(f"credit without flow control or after release in {self!r}")

    def __repr__(self) -> str:
        return (
            f"CreditLedger(exclusive={self.available_exclusive}+{self.in_use_exclusive}"
            f"/{self.exclusive_owned}, floating={self.available_floating}+{self.in_use_floating}"
            f"/{self.floating_owned}, credit={self.announced_credit}+{self.unannounced_credit}, "
            f"backlog={self.sender_backlog}, required={self.required_buffers}, "
            f"waiting={self.waiting_for_floating}, flow_control={self.flow_control}, "
            f"released={self.released})"
        )


class SenderCredit:
    """The sender's credit for one subpartition reader.

    :param flow_control: with ``False`` credit is ignored: :meth:`can_send` is always true.

    Not thread-safe: used by the network thread only.
    """

    __slots__ = ("flow_control", "available", "total_received", "total_consumed")

    def __init__(self, flow_control: bool = True) -> None:
        self.flow_control = flow_control
        #: Buffers (segments) the sender may still send.
        self.available = 0
        #: Credit received since creation (initial credit included).
        self.total_received = 0
        #: Buffers (segments) sent since creation.
        self.total_consumed = 0

    def add(self, credit: int) -> None:
        """Credit announced by the receiver (the initial credit, then each AddCredit).

        :raises CreditInvariantError: if ``credit`` is negative.
        """
        if credit < 0:
            raise CreditInvariantError(f"negative credit {credit} announced")
        self.available += credit
        self.total_received += credit

    def can_send(self) -> bool:
        """Whether a data frame may be sent now."""
        return self.available > 0 or not self.flow_control

    def consume(self, buffers: int = 1) -> None:
        """Account for ``buffers`` network buffers (segments) sent, one credit each (a frame
        may carry several, see :mod:`rill.network.netty.messages`).

        :raises CreditInvariantError: with flow control on, if less credit is available.
        """
        if self.flow_control:
            if self.available < buffers:
                raise CreditInvariantError(
                    f"{buffers} buffer(s) were about to be sent without credit for them "
                    f"(credit {self.available})")
            self.available -= buffers
        self.total_consumed += buffers

    def __repr__(self) -> str:
        return f"SenderCredit(available={self.available}, flow_control={self.flow_control})"
