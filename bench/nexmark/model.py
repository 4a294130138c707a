"""Nexmark's three event types (the Beam / nexmark-flink ``Person``, ``Auction`` and ``Bid``
classes), with their field names Python-cased (``dateTime`` -> ``date_time``).

They are ``NamedTuple`` s: a tuple is the cheapest Python record to build, pickle and ship,
and a query can read fields by name (``bid.price``) or position. Times are epoch ms (``int``),
prices cents (``int``), ids ``int``.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Person", "Auction", "Bid"]


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
