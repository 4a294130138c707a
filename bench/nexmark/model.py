"""Nexmark's three event types (the Beam / nexmark-flink ``Person``, ``Auction`` and ``Bid``
classes), with their field names Python-cased (``dateTime`` -> ``date_time``).

The ``NamedTuple`` classes name the fields; the generator emits *plain tuples* in the same
field order, and queries read fields through the index constants below (``bid[BID_PRICE]``).
Why not the NamedTuple instances themselves: Rill ships a job's non-installed modules (bench/
among them) to the cluster by value, so a task process holds its own copy of the class, which
``pickle`` cannot write by reference, and the network codec pickles any non-msgpack record;
plain tuples travel as msgpack, which is also several times cheaper per record. The kind of
an event is its length (8 person, 10 auction, 7 bid fields); ``Bid._make(event)`` gives a
named view. Times are epoch ms (``int``), prices cents (``int``), ids ``int``.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Person", "Auction", "Bid", "PERSON_LEN", "AUCTION_LEN", "BID_LEN", "is_person", "is_auction",
           "is_bid", "P_ID", "P_NAME", "P_CITY", "P_STATE", "P_DATE_TIME", "A_ID", "A_DATE_TIME", "A_EXPIRES",
           "A_SELLER", "A_CATEGORY", "B_AUCTION", "B_BIDDER", "B_PRICE", "B_DATE_TIME", "B_EXTRA", "date_time"]


class Person(NamedTuple):
    """A new person registered (nexmark's ``Person``): ``id`` (>= 1000), ``name``,
    ``email_address``, ``credit_card``, ``city``, ``state`` (two letters), ``date_time`` (ms)
    and ``extra`` (padding to the average size)."""

    id: int
    name: str
    email_address: str
    credit_card: str
    city: str
    state: str
    date_time: int
    extra: str


class Auction(NamedTuple):
    """A new auction (nexmark's ``Auction``): ``id`` (>= 1000), ``item_name``,
    ``description``, ``initial_bid`` and ``reserve`` (cents), ``date_time`` and ``expires``
    (ms, ``expires > date_time``), ``seller`` (a person id), ``category`` (10..14) and
    ``extra``."""

    id: int
    item_name: str
    description: str
    initial_bid: int
    reserve: int
    date_time: int
    expires: int
    seller: int
    category: int
    extra: str


class Bid(NamedTuple):
    """A bid (nexmark's ``Bid``): ``auction`` and ``bidder`` ids, ``price`` (cents),
    ``channel``, ``url``, ``date_time`` (ms) and ``extra``."""

    auction: int
    bidder: int
    price: int
    channel: str
    url: str
    date_time: int
    extra: str


PERSON_LEN, AUCTION_LEN, BID_LEN = len(Person._fields), len(Auction._fields), len(Bid._fields)

P_ID, P_NAME, P_CITY, P_STATE, P_DATE_TIME = (Person._fields.index(f) for f in ("id", "name", "city", "state",
                                                                                 "date_time"))
A_ID, A_DATE_TIME, A_EXPIRES, A_SELLER, A_CATEGORY = (Auction._fields.index(f) for f in (
    "id", "date_time", "expires", "seller", "category"))
B_AUCTION, B_BIDDER, B_PRICE, B_DATE_TIME, B_EXTRA = (Bid._fields.index(f) for f in (
    "auction", "bidder", "price", "date_time", "extra"))
#: auctions and bids hold ``date_time`` at position 5, people at 6
assert A_DATE_TIME == B_DATE_TIME == 5 and P_DATE_TIME == 6


def date_time(event) -> int:
    """The event time (ms) of any of the three kinds."""
    return event[P_DATE_TIME] if len(event) == PERSON_LEN else event[B_DATE_TIME]


def is_person(event) -> bool:
    return len(event) == PERSON_LEN


def is_auction(event) -> bool:
    return len(event) == AUCTION_LEN


def is_bid(event) -> bool:
    return len(event) == BID_LEN
