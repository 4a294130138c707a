"""The deterministic Nexmark event generator (Beam's ``Generator`` with its
``PersonGenerator``, ``AuctionGenerator`` and ``BidGenerator``; nexmark-flink's channels).

Events are generated in *blocks* of :func:`block_events` consecutive event numbers; block ``b``
draws from its own ``random.Random`` seeded with ``(seed, b)``. So any block can be generated
on its own (the source splits by block, and a restored split regenerates from a block
boundary), and the events do not depend on how many subtasks generate them. Beam seeds one
``java.util.Random`` per event id instead; re-seeding a Python ``Random`` per event would cost
more than the event, so the values are Nexmark's distributions, not Beam's exact bytes.

Per event, as Beam: the kind from the (adjusted) id; a person's id is the newest person id;
an auction's seller is hot (the newest person id rounded down to a multiple of 100) with
probability ``1 - 1/hot_sellers_ratio``, else one of the ``num_active_people`` newest (up to
10 ids ahead); category ``10 + U[0,5)``; prices ``round(10 ** U[0,6) * 100)`` cents; reserve
is the initial bid plus a price; the auction lasts ``1 + U[0, 2 * horizon)`` ms where the
horizon is the event time ``num_in_flight_auctions * total / auction_proportion`` events
ahead. A bid goes to the hot auction with probability ``1 - 1/hot_auction_ratio`` (else to
one of the 100 newest auctions, up to 10 ahead), its bidder is hot (rounded down to 100,
plus 1) with probability ``1 - 1/hot_bidders_ratio``; its channel is one of 4 hot channels
half the time, else one of 10,000. ``extra`` pads each record to about its average size
(±20%, Beam's ``nextExtra``).
"""

from __future__ import annotations

import random
from typing import Iterator, List

from bench.nexmark.config import (AUCTION_ID_LEAD, FIRST_AUCTION_ID, FIRST_CATEGORY_ID, FIRST_PERSON_ID,
                                  HOT_AUCTION_RATIO, HOT_BIDDER_RATIO, HOT_SELLER_RATIO, NUM_CATEGORIES,
                                  PERSON_ID_LEAD, NexmarkConfiguration)

__all__ = ["block_events", "num_blocks", "generate_block", "generate_events"]

_FIRST_NAMES = ("Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter")
_LAST_NAMES = ("Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris")
_US_STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
_US_CITIES = ("Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle",
              "Kent", "Cheyenne")
_HOT_CHANNELS = ("Google", "Facebook", "Baidu", "Apple")
_HOT_URLS = tuple(f"https://www.nexmark.com/{c.lower()}/item.htm?query=1" for c in _HOT_CHANNELS)
_CHANNELS_NUMBER = 10_000
_CHANNELS = tuple(f"channel-{i}" for i in range(_CHANNELS_NUMBER))
_CHANNEL_URLS = tuple(f"https://www.nexmark.com/item.htm?query=1&channel_id={str(i)[::-1]}"
                      for i in range(_CHANNELS_NUMBER))
#: strings are slices of this fixed text (one slice per string instead of one draw per char)
_TEXT = "".join(random.Random(20150715).choices("abcdefghijklmnopqrstuvwxyz ", k=8192))
_BLOCK = 1024


def block_events(config: NexmarkConfiguration) -> int:
    """Events per block: 1,024 rounded up to a multiple of the out-of-order group size (a
    group never straddles two blocks)."""
    g = config.out_of_order_group_size
    return -(-_BLOCK // g) * g


def num_blocks(config: NexmarkConfiguration) -> int:
    """Blocks of ``config.num_events`` events (the last one may be short)."""
    return -(-config.num_events // block_events(config))


def _extra(rand, current_size: int, average: int) -> str:
    if current_size > average:
        return ""
    desired = average - current_size
    delta = round(desired * 0.2)
    size = desired - delta + int(rand() * 2 * delta)
    start = int(rand() * (len(_TEXT) - size))
    return _TEXT[start:start + size]


def _string(rand, length: int) -> str:
    start = int(rand() * (len(_TEXT) - length))
    return _TEXT[start:start + length]


def _price(rand) -> int:
    return round(10.0 ** (rand() * 6.0) * 100.0)


def _other_person(rand, last_person: int, config: NexmarkConfiguration) -> int:
    """Beam's ``nextBase0PersonId``: one of the active people, up to 10 ids ahead."""
    num_people = last_person + 1
    active = min(num_people, config.num_active_people)
    return num_people - active + int(rand() * (active + PERSON_ID_LEAD))


def _person(rand, event_id: int, ts: int, config: NexmarkConfiguration) -> tuple:
    pid = config.last_base0_person_id(event_id) + FIRST_PERSON_ID
    name = f"{_FIRST_NAMES[int(rand() * len(_FIRST_NAMES))]} {_LAST_NAMES[int(rand() * len(_LAST_NAMES))]}"
    email = f"{_string(rand, 7)}@{_string(rand, 5)}.com"
    card = " ".join(f"{int(rand() * 10000):04d}" for _ in range(4))
    city = _US_CITIES[int(rand() * len(_US_CITIES))]
    state = _US_STATES[int(rand() * len(_US_STATES))]
    size = 8 + len(name) + len(email) + len(card) + len(city) + len(state)
    return pid, name, email, card, city, state, ts, _extra(rand, size, config.avg_person_byte_size)


def _auction(rand, event_id: int, ts: int, config: NexmarkConfiguration) -> tuple:
    aid = config.last_base0_auction_id(event_id) + FIRST_AUCTION_ID
    last_person = config.last_base0_person_id(event_id)
    if int(rand() * config.hot_sellers_ratio) > 0:
        seller = (last_person // HOT_SELLER_RATIO) * HOT_SELLER_RATIO
    else:
        seller = _other_person(rand, last_person, config)
    category = FIRST_CATEGORY_ID + int(rand() * NUM_CATEGORIES)
    initial_bid = _price(rand)
    # Beam's nextAuctionLengthMs: up to twice the time until num_in_flight_auctions more
    # auctions have been generated, so about that many are open at once
    ahead = config.num_in_flight_auctions * config.total_proportion // config.auction_proportion
    horizon = config.timestamp_for_event(event_id + ahead) - ts
    expires = ts + 1 + int(rand() * max(horizon * 2, 1))
    item_name = _string(rand, 20)
    description = _string(rand, 100)
    reserve = initial_bid + _price(rand)
    size = 8 + len(item_name) + len(description) + 8 + 8 + 8 + 8 + 8
    return (aid, item_name, description, initial_bid, reserve, ts, expires, seller + FIRST_PERSON_ID,
            category, _extra(rand, size, config.avg_auction_byte_size))


def generate_block(config: NexmarkConfiguration, block: int) -> List[tuple]:
    """The events (plain tuples in the field order of :mod:`bench.nexmark.model`) of block ``block`` (event numbers ``block * B .. min((block + 1) * B,
    num_events) - 1`` with ``B = block_events(config)``), in generation order.

    :raises IndexError: for a block outside ``0 .. num_blocks(config) - 1``.
    """
    if not 0 <= block < num_blocks(config):
        raise IndexError(f"Nexmark generator: block {block} is outside 0..{num_blocks(config) - 1}")
    size = block_events(config)
    lo, hi = block * size, min((block + 1) * size, config.num_events)
    rand = random.Random(config.seed * 1_000_003 + block).random
    g = config.out_of_order_group_size
    total = config.total_proportion
    persons, first_bid = config.person_proportion, config.person_proportion + config.auction_proportion
    auctions = config.auction_proportion
    base_time, rate = config.base_time, config.first_event_rate
    hot_auction, hot_bidder = config.hot_auction_ratio, config.hot_bidders_ratio
    in_flight, active_people = config.num_in_flight_auctions, config.num_active_people
    avg_bid = config.avg_bid_byte_size
    text, text_room = _TEXT, len(_TEXT) - avg_bid * 2
    out = []
    append = out.append
    for n in range(lo, hi):
        adjusted = (n // g) * g + (n * 953) % g if g > 1 else n
        ts = base_time + adjusted * 1000 // rate
        epoch, offset = divmod(adjusted, total)
        if offset < persons:
            append(_person(rand, adjusted, ts, config))
            continue
        if offset < first_bid:
            append(_auction(rand, adjusted, ts, config))
            continue
        # a bid, inlined (46 of every 50 events): the id arithmetic of last_base0_* for an
        # offset among the bids
        last_auction = epoch * auctions + auctions - 1
        if int(rand() * hot_auction) > 0:
            auction = (last_auction // HOT_AUCTION_RATIO) * HOT_AUCTION_RATIO
        else:
            low = last_auction - in_flight if last_auction > in_flight else 0
            auction = low + int(rand() * (last_auction - low + 1 + AUCTION_ID_LEAD))
        last_person = epoch * persons + persons - 1
        if int(rand() * hot_bidder) > 0:
            bidder = (last_person // HOT_BIDDER_RATIO) * HOT_BIDDER_RATIO + 1
        else:
            num_people = last_person + 1
            active = num_people if num_people < active_people else active_people
            bidder = num_people - active + int(rand() * (active + PERSON_ID_LEAD))
        price = round(10.0 ** (rand() * 6.0) * 100.0)
        if rand() < 0.5:
            i = int(rand() * 4)
            channel, url = _HOT_CHANNELS[i], _HOT_URLS[i]
        else:
            i = int(rand() * _CHANNELS_NUMBER)
            channel, url = _CHANNELS[i], _CHANNEL_URLS[i]
        # nextExtra with the bid's fixed part (5 longs) and its strings
        desired = avg_bid - 40 - len(channel) - len(url)
        if desired > 0:
            delta = round(desired * 0.2)
            start = int(rand() * text_room)
            extra = text[start:start + desired - delta + int(rand() * 2 * delta)]
        else:
            extra = ""
        append((auction + FIRST_AUCTION_ID, bidder + FIRST_PERSON_ID, price, channel, url, ts, extra))
    return out


def generate_events(config: NexmarkConfiguration) -> Iterator[tuple]:
    """Every event of ``config`` in generation order (what one source subtask emits): the
    input of the plain-Python reference computations."""
    for block in range(num_blocks(config)):
        yield from generate_block(config, block)
