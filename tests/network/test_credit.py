"""Credit-based flow control's accounting: CreditLedger, SenderCredit, and BufferManager /
FloatingBufferPool driving them. Unit scenarios, then a hypothesis state machine that runs the
whole protocol (sender, frames and credit in flight, receiver, consumer) and checks the
invariants after every step and that everything is delivered and given back in the end."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from rill.network import BufferKind, CreditInvariantError, CreditLedger, FloatingBufferPool, SenderCredit
from rill.network.partition.consumer.buffer_manager import BufferManager

EXCLUSIVE, FLOATING = BufferKind.EXCLUSIVE, BufferKind.FLOATING


class Flags:
    """Records the BufferManager's callbacks."""

    def __init__(self) -> None:
        self.credit = 0
        self.resume = 0

    def on_credit(self) -> None:
        self.credit += 1

    def on_resume(self) -> None:
        self.resume += 1


def manager(pool, exclusive=2, flow_control=True, batch=1):
    flags = Flags()
    return BufferManager(exclusive, pool, flow_control, batch, flags.on_credit, flags.on_resume), flags


# ---------------------------------------------------------------------- ledger

def test_initial_credit_is_the_exclusive_buffers_and_nothing_arrives_without_credit():
    ledger = CreditLedger(2)
    assert ledger.announced_credit == 2 and ledger.available == 2
    assert ledger.on_buffer_received() is EXCLUSIVE
    assert ledger.on_buffer_received() is EXCLUSIVE
    ledger.check_invariants()
    with pytest.raises(CreditInvariantError, match="without credit"):
        ledger.on_buffer_received()
    assert ledger.on_buffer_recycled(EXCLUSIVE) == 0
    assert ledger.unannounced_credit == 1 and ledger.should_announce()
    assert ledger.take_unannounced_credit() == 1 and ledger.announced_credit == 1
    ledger.check_invariants()


def test_floating_buffers_are_used_first_and_go_back_to_the_pool():
    ledger = CreditLedger(1)
    ledger.on_sender_backlog(3)
    assert ledger.floating_wanted() == 3
    ledger.add_floating(3)
    assert ledger.unannounced_credit == 3
    ledger.take_unannounced_credit()
    assert ledger.on_buffer_received() is FLOATING
    assert ledger.on_buffer_recycled(FLOATING) == 1  # back to the pool, credit unchanged
    assert ledger.floating_owned == 2 and ledger.unannounced_credit == 0
    ledger.check_invariants()


def test_an_exclusive_buffer_coming_back_swaps_out_a_surplus_floating_one():
    ledger = CreditLedger(2)
    ledger.on_buffer_received()  # exclusive
    ledger.on_sender_backlog(2)  # wants 4 free: has 1
    ledger.add_floating(3)
    ledger.on_sender_backlog(0)  # wants 2 now
    credit_before = ledger.announced_credit + ledger.unannounced_credit
    assert ledger.on_buffer_recycled(EXCLUSIVE) == 1  # a free floating buffer leaves instead
    assert ledger.announced_credit + ledger.unannounced_credit == credit_before
    assert ledger.floating_owned == 2
    ledger.check_invariants()


def test_announcements_are_batched_but_never_leave_the_sender_without_credit():
    ledger = CreditLedger(4, announce_batch=3)
    ledger.on_buffer_received()
    ledger.on_buffer_recycled(EXCLUSIVE)
    assert ledger.unannounced_credit == 1 and not ledger.should_announce()  # the sender has 3 left
    ledger.on_buffer_received()
    ledger.on_buffer_received()
    ledger.on_buffer_recycled(EXCLUSIVE)
    ledger.on_buffer_recycled(EXCLUSIVE)
    assert ledger.should_announce()  # a batch of 3 accumulated
    assert ledger.take_unannounced_credit() == 3 and ledger.announced_credit == 4
    for _ in range(4):
        ledger.on_buffer_received()
    ledger.on_buffer_recycled(EXCLUSIVE)
    assert ledger.announced_credit == 0 and ledger.should_announce()  # the sender ran dry: now
    assert ledger.take_unannounced_credit() == 1
    ledger.check_invariants()


def test_release_gives_back_floating_buffers_and_later_exclusive_ones():
    ledger = CreditLedger(2)
    ledger.on_sender_backlog(2)
    ledger.add_floating(2)
    ledger.take_unannounced_credit()
    assert ledger.on_buffer_received() is FLOATING
    assert ledger.release() == 1  # the free floating buffer
    ledger.check_invariants()
    assert ledger.exclusive_owned == 0 and ledger.announced_credit == 0
    assert ledger.on_buffer_recycled(FLOATING) == 1
    assert ledger.floating_owned == 0
    ledger.check_invariants()


def test_recycling_more_than_was_received_is_a_bug():
    ledger = CreditLedger(2)
    with pytest.raises(CreditInvariantError, match="none is in use"):
        ledger.on_buffer_recycled(EXCLUSIVE)
    with pytest.raises(CreditInvariantError, match="none is in use"):
        ledger.on_buffer_recycled(FLOATING)
    ledger.available_exclusive = 5
    with pytest.raises(CreditInvariantError, match="in use \\+ available != owned"):
        ledger.check_invariants()


def test_without_flow_control_there_is_no_credit_and_buffers_are_taken_greedily():
    ledger = CreditLedger(1, flow_control=False)
    assert ledger.announced_credit == 0
    assert ledger.on_buffer_received() is EXCLUSIVE
    assert ledger.on_buffer_received() is None  # nothing free: the caller blocks the connection
    assert ledger.floating_wanted() == 1
    ledger.add_floating(1)
    assert ledger.on_buffer_received() is FLOATING
    ledger.check_invariants()


def test_sender_credit():
    credit = SenderCredit()
    assert not credit.can_send()
    with pytest.raises(CreditInvariantError, match="without credit"):
        credit.consume()
    credit.add(2)
    credit.consume()
    assert credit.available == 1 and credit.total_received == 2
    with pytest.raises(CreditInvariantError):
        credit.add(-1)
    unlimited = SenderCredit(flow_control=False)
    assert unlimited.can_send()
    unlimited.consume()


def test_arguments_are_validated():
    with pytest.raises(ValueError, match="exclusive_buffers"):
        CreditLedger(-1)
    with pytest.raises(ValueError, match="announce_batch"):
        CreditLedger(1, announce_batch=0)
    with pytest.raises(ValueError, match="num_buffers >= 0"):
        FloatingBufferPool(-1)


# ---------------------------------------------------------------------- managers and the pool

def test_a_recycled_floating_buffer_goes_to_the_channel_waiting_for_one():
    pool = FloatingBufferPool(2)
    first, first_flags = manager(pool)
    second, second_flags = manager(pool)
    first.on_buffer_received(backlog=5)  # wants 7 free, has 1: takes both floating buffers
    assert first.ledger.floating_owned == 2 and pool.get_number_of_available_buffers() == 0
    assert first.ledger.waiting_for_floating
    second.on_buffer_received(backlog=3)
    assert second.ledger.waiting_for_floating and second.ledger.floating_owned == 0
    assert pool.statistics().channels_waiting == 2
    kind = first.on_buffer_received(backlog=4)  # floating first
    assert kind is FLOATING
    first.recycle(kind)  # back to the pool -> handed to the first waiter still wanting one
    assert first.ledger.floating_owned == 2 or second.ledger.floating_owned == 1
    for m in (first, second):
        m.check_invariants()
    assert pool.get_number_of_available_buffers() + first.ledger.floating_owned + second.ledger.floating_owned == 2


def test_several_recycles_make_one_announcement():
    pool = FloatingBufferPool(0)
    m, flags = manager(pool, exclusive=4)
    kinds = [m.on_buffer_received(backlog=0) for _ in range(3)]
    for kind in kinds:
        m.recycle(kind)
    assert flags.credit == 1  # one AddCredit scheduled...
    assert m.take_unannounced_credit() == 3  # ...carrying all three credits
    assert m.take_unannounced_credit() == 0


def test_a_channel_blocking_its_connection_is_resumed_by_any_freed_buffer():
    pool = FloatingBufferPool(1)
    a, a_flags = manager(pool, exclusive=1, flow_control=False)
    b, b_flags = manager(pool, exclusive=1, flow_control=False)
    held_a = [a.on_buffer_received(), a.on_buffer_received()]  # exclusive, then the floating one
    assert held_a == [EXCLUSIVE, FLOATING]
    assert a.on_buffer_received() is None and a.statistics().blocking_connection
    assert b.on_buffer_received() is EXCLUSIVE
    assert b.on_buffer_received() is None
    a.recycle(FLOATING)  # the pool hands it to a waiter: a or b resumes
    assert a_flags.resume + b_flags.resume == 1
    a.release()  # a is cancelled: whoever still blocks on it must not wait for it
    assert a_flags.resume + b_flags.resume >= 1
    for m in (a, b):
        m.check_invariants()


# ---------------------------------------------------------------------- the protocol, simulated

class CreditProtocol(RuleBasedStateMachine):
    """Two remote channels of one gate (shared floating pool), their senders, and the frames
    and credit in flight between them."""

    flow_control = True

    @initialize(exclusive=st.integers(1, 3), floating=st.integers(0, 4), batch=st.integers(1, 3))
    def set_up(self, exclusive, floating, batch):
        self.total_floating = floating
        self.pool = FloatingBufferPool(floating)
        self.receivers = []
        self.flags = []
        for _ in range(2):
            m, flags = manager(self.pool, exclusive, self.flow_control, batch)
            self.receivers.append(m)
            self.flags.append(flags)
        self.senders = [SenderCredit(self.flow_control) for _ in range(2)]
        for sender in self.senders:
            sender.add(exclusive if self.flow_control else 0)  # the PartitionRequest
        self.backlog = [0, 0]
        self.data_in_flight = [[], []]  # backlog carried by each data frame
        self.credit_in_flight = [[], []]
        self.held = [[], []]
        self.produced = [0, 0]
        self.delivered = [0, 0]
        self.announced_calls = [0, 0]

    # -- producer and sender
    @rule(channel=st.integers(0, 1), count=st.integers(1, 6))
    def produce(self, channel, count):
        self.backlog[channel] += count
        self.produced[channel] += count

    @rule(channel=st.integers(0, 1))
    def send(self, channel):
        sender = self.senders[channel]
        if self.backlog[channel] and sender.can_send():
            sender.consume()
            self.backlog[channel] -= 1
            self.data_in_flight[channel].append(self.backlog[channel])

    # -- receiver
    @rule(channel=st.integers(0, 1))
    def receive(self, channel):
        if self.data_in_flight[channel]:
            kind = self.receivers[channel].on_buffer_received(self.data_in_flight[channel][0])
            if kind is None:  # flow control off, no buffer: the frame waits (connection paused)
                return
            self.data_in_flight[channel].pop(0)
            self.held[channel].append(kind)
            self.delivered[channel] += 1

    @rule(channel=st.integers(0, 1), index=st.integers(0, 100))
    def recycle(self, channel, index):
        held = self.held[channel]
        if held:
            self.receivers[channel].recycle(held.pop(index % len(held)))

    @rule(channel=st.integers(0, 1))
    def announce(self, channel):
        """The network thread runs the scheduled AddCredit."""
        flags = self.flags[channel]
        if flags.credit > self.announced_calls[channel]:
            self.announced_calls[channel] = flags.credit
            credit = self.receivers[channel].take_unannounced_credit()
            if credit:
                self.credit_in_flight[channel].append(credit)

    @rule(channel=st.integers(0, 1))
    def deliver_credit(self, channel):
        if self.credit_in_flight[channel]:
            self.senders[channel].add(self.credit_in_flight[channel].pop(0))

    @rule(channel=st.integers(0, 1))
    def cancel_and_restart(self, channel):
        """The consumer is cancelled: everything it held comes back."""
        receiver = self.receivers[channel]
        for kind in self.held[channel]:
            receiver.recycle(kind)
        self.held[channel] = []
        receiver.release()
        assert receiver.ledger.floating_owned == 0 and receiver.ledger.exclusive_owned == 0
        self._restart(channel, receiver.ledger.announce_batch)

    def _restart(self, channel, batch):
        m, flags = manager(self.pool, 2, self.flow_control, batch)
        self.receivers[channel] = m
        self.flags[channel] = flags
        self.senders[channel] = SenderCredit(self.flow_control)
        self.senders[channel].add(2 if self.flow_control else 0)
        self.data_in_flight[channel] = []
        self.credit_in_flight[channel] = []
        self.announced_calls[channel] = 0
        self.produced[channel] = self.delivered[channel] + self.backlog[channel]

    # -- invariants
    @invariant()
    def ledgers_hold(self):
        if not hasattr(self, "pool"):
            return
        for receiver in self.receivers:
            receiver.check_invariants()

    @invariant()
    def credit_is_conserved(self):
        if not hasattr(self, "pool") or not self.flow_control:
            return
        for channel in range(2):
            ledger = self.receivers[channel].ledger
            in_flight = len(self.data_in_flight[channel]) + sum(self.credit_in_flight[channel])
            assert ledger.announced_credit == self.senders[channel].available + in_flight

    @invariant()
    def floating_buffers_are_conserved(self):
        if not hasattr(self, "pool"):
            return
        owned = sum(r.ledger.floating_owned for r in self.receivers)
        assert self.pool.get_number_of_available_buffers() + owned == self.total_floating

    def teardown(self):
        if not hasattr(self, "pool"):
            return
        # Liveness: a consumer that keeps recycling gets everything, and every buffer returns.
        for _ in range(10_000):
            progress = False
            for channel in range(2):
                before = (self.delivered[channel], len(self.data_in_flight[channel]), self.backlog[channel],
                          len(self.credit_in_flight[channel]), self.senders[channel].available)
                self.receive(channel)
                self.recycle(channel, 0)
                self.announce(channel)
                self.deliver_credit(channel)
                self.send(channel)
                self.ledgers_hold()
                self.credit_is_conserved()
                after = (self.delivered[channel], len(self.data_in_flight[channel]), self.backlog[channel],
                         len(self.credit_in_flight[channel]), self.senders[channel].available)
                progress |= before != after or bool(self.held[channel])
            if not progress:
                break
        for channel in range(2):
            assert self.backlog[channel] == 0 and not self.data_in_flight[channel], "the sender stalled for good"
            assert self.delivered[channel] == self.produced[channel]
            assert not self.held[channel]
            receiver = self.receivers[channel]
            receiver.release()
            assert receiver.ledger.floating_owned == 0 and receiver.ledger.in_use == 0
        assert self.pool.get_number_of_available_buffers() == self.total_floating


class CreditProtocolWithoutFlowControl(CreditProtocol):
    flow_control = False


_settings = settings(max_examples=150, stateful_step_count=60, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow])
TestCreditProtocol = CreditProtocol.TestCase
TestCreditProtocol.settings = _settings
TestCreditProtocolWithoutFlowControl = CreditProtocolWithoutFlowControl.TestCase
TestCreditProtocolWithoutFlowControl.settings = _settings
